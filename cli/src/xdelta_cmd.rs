//! `deltacells xdelta ...`: decode and encode XDelta strings.

use std::io::{self, BufWriter, Read, Write};

use clap::Subcommand;
use deltacells::format::xdelta::{Decoder, Encoder};
use deltacells::{Backend, Error, Result};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Decode an XDelta string: one value per line, `null` for a null.
    Decode {
        /// The string, or `-` (the default) to read it from standard input
        /// (one trailing newline is ignored). Strings may start with `-`
        /// (a negative first value): they are taken as the string, not a flag.
        #[arg(allow_hyphen_values = true)]
        input: Option<String>,
        /// Refuse strings that expand beyond this many values (default:
        /// max(2^20, 1024 per input byte)).
        #[arg(long)]
        max_values: Option<usize>,
    },
    /// Encode numbers read from standard input (separated by whitespace or
    /// commas, `null` for a null; an empty field between commas is refused)
    /// as the shortest XDelta string found.
    Encode {
        /// The values are decimals with at most this many fractional digits:
        /// try a /10^P scalar with exact integer deltas.
        #[arg(long)]
        precision: Option<u32>,
    },
}

fn read_stdin() -> Result<String> {
    let mut text = String::new();
    io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| Error::io("reading standard input", e))?;
    Ok(text)
}

fn stdout_error(e: io::Error) -> Error {
    Error::io("writing standard output", e)
}

/// Runs an `xdelta` command; `backend` is the global `--kernel` choice.
pub fn run(cmd: Command, backend: Backend) -> Result<()> {
    match cmd {
        Command::Decode { input, max_values } => {
            let text = match input.as_deref() {
                None | Some("-") => {
                    let mut text = read_stdin()?;
                    if text.ends_with('\n') {
                        text.pop();
                        if text.ends_with('\r') {
                            text.pop();
                        }
                    }
                    text
                }
                Some(s) => s.to_string(),
            };
            let mut decoder = Decoder::new().backend(backend);
            if let Some(limit) = max_values {
                decoder = decoder.max_values(limit);
            }
            let decoded = decoder.decode(&text)?;
            let mut out = BufWriter::new(io::stdout().lock());
            for value in decoded.iter() {
                match value {
                    Some(x) => writeln!(out, "{x}"),
                    None => writeln!(out, "null"),
                }
                .map_err(stdout_error)?;
            }
            out.flush().map_err(stdout_error)
        }
        Command::Encode { precision } => {
            let text = read_stdin()?;
            // Fields between commas, each holding values between
            // whitespace: a field with none (`1,,2`) would be a value dropped
            // without a word. A comma at the very end closes no field.
            let mut fields: Vec<&str> = text.split(',').collect();
            if fields.len() > 1 && fields.last().is_some_and(|f| f.trim().is_empty()) {
                fields.pop();
            }
            if fields.len() > 1 && fields.iter().any(|f| f.trim().is_empty()) {
                return Err(Error::Input(
                    "an empty field between commas: write `null` for a missing value".into(),
                ));
            }
            let values = fields
                .iter()
                .flat_map(|field| field.split_whitespace())
                .map(|t| match t {
                    "null" => Ok(None),
                    _ => t
                        .parse::<f64>()
                        .map(Some)
                        .map_err(|_| Error::Input(format!("not a number or null: `{t}`"))),
                })
                .collect::<Result<Vec<_>>>()?;
            let mut encoder = Encoder::new();
            if let Some(p) = precision {
                encoder = encoder.precision(p);
            }
            let encoded = encoder.encode(&values)?;
            let mut out = io::stdout().lock();
            writeln!(out, "{encoded}").map_err(stdout_error)
        }
    }
}
