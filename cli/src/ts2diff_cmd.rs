//! `deltacells ts2diff ...`: TsFile FLOAT/DOUBLE TS_2DIFF pages on the command line.

use std::fs;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use clap::{Subcommand, ValueEnum};
use deltacells::format::ts2diff::{inspect, Decoder, Encoder, FloatType};
use deltacells::{Backend, Error, Result};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Decode one page (raw bytes) into one value per line: the shortest
    /// decimal that reads back to the same float, or the IEEE bits with --bits.
    Decode {
        /// Value type of the page.
        #[arg(long = "type", value_enum)]
        ty: TypeArg,
        /// Print IEEE-754 bit patterns as 0x-prefixed hex (keeps NaN payloads).
        #[arg(long)]
        bits: bool,
        /// Page file, or - for standard input.
        #[arg(default_value = "-")]
        input: PathBuf,
    },
    /// Encode values, one per line (decimal, or 0x-prefixed IEEE bits), into
    /// one page written to standard output.
    Encode {
        /// Value type of the page.
        #[arg(long = "type", value_enum)]
        ty: TypeArg,
        /// maxPointNumber: decimal digits kept (<= 0: none).
        #[arg(long, default_value_t = Encoder::DEFAULT_MAX_POINT_NUMBER, allow_negative_numbers = true)]
        mpn: i32,
        /// Deltas per block (a block holds one more value).
        #[arg(long, default_value_t = Encoder::DEFAULT_BLOCK_SIZE)]
        block_size: u32,
        /// Text file of values, or - for standard input.
        #[arg(default_value = "-")]
        input: PathBuf,
    },
    /// Print a page's form, maxPointNumber, value count and block count.
    Info {
        /// Value type of the page.
        #[arg(long = "type", value_enum)]
        ty: TypeArg,
        /// Page file, or - for standard input.
        #[arg(default_value = "-")]
        input: PathBuf,
    },
}

/// `--type`: the page's value type.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum TypeArg {
    /// TsFile FLOAT (f32).
    Float,
    /// TsFile DOUBLE (f64).
    Double,
}

impl From<TypeArg> for FloatType {
    fn from(t: TypeArg) -> FloatType {
        match t {
            TypeArg::Float => FloatType::Float,
            TypeArg::Double => FloatType::Double,
        }
    }
}

/// Runs a `ts2diff` command; `backend` is the global `--kernel` choice.
pub fn run(cmd: Command, backend: Backend) -> Result<()> {
    match cmd {
        Command::Decode { ty, bits, input } => {
            let page = read_input(&input)?;
            let decoder = Decoder::new().backend(backend);
            let mut out = BufWriter::new(io::stdout().lock());
            match ty {
                TypeArg::Float => {
                    for v in decoder.decode::<f32>(&page)? {
                        if bits {
                            writeln!(out, "0x{:08x}", v.to_bits())
                        } else {
                            writeln!(out, "{v}")
                        }
                        .map_err(stdout_error)?;
                    }
                }
                TypeArg::Double => {
                    for v in decoder.decode::<f64>(&page)? {
                        if bits {
                            writeln!(out, "0x{:016x}", v.to_bits())
                        } else {
                            writeln!(out, "{v}")
                        }
                        .map_err(stdout_error)?;
                    }
                }
            }
            out.flush().map_err(stdout_error)
        }
        Command::Encode {
            ty,
            mpn,
            block_size,
            input,
        } => {
            let text = String::from_utf8(read_input(&input)?)
                .map_err(|_| Error::Input(format!("{}: not UTF-8 text", input.display())))?;
            let encoder = Encoder::new().max_point_number(mpn).block_size(block_size);
            let page = match ty {
                TypeArg::Float => encoder.encode(&parse_values(
                    &text,
                    |s| s.parse::<f32>().ok(),
                    f32::from_bits,
                )?),
                TypeArg::Double => encoder.encode(&parse_values(
                    &text,
                    |s| s.parse::<f64>().ok(),
                    f64::from_bits,
                )?),
            }?;
            let mut out = io::stdout().lock();
            out.write_all(&page)
                .and_then(|()| out.flush())
                .map_err(stdout_error)
        }
        Command::Info { ty, input } => {
            let page = read_input(&input)?;
            let info = inspect(&page, ty.into())?;
            let or_none = |x: Option<String>| x.unwrap_or_else(|| "none".to_string());
            println!("type {}", FloatType::from(ty));
            println!("bytes {}", page.len());
            println!(
                "form {}",
                or_none(info.form.map(|f| f.number().to_string()))
            );
            println!(
                "max_point_number {}",
                or_none(info.max_point_number.map(|m| m.to_string()))
            );
            println!("values {}", info.values);
            println!("blocks {}", info.blocks);
            Ok(())
        }
    }
}

fn read_input(path: &Path) -> Result<Vec<u8>> {
    if path == Path::new("-") {
        let mut buf = Vec::new();
        io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| Error::io("reading standard input", e))?;
        Ok(buf)
    } else {
        fs::read(path).map_err(|e| Error::io(path.display().to_string(), e))
    }
}

fn stdout_error(e: io::Error) -> Error {
    Error::io("writing standard output", e)
}

/// One value per non-blank line: a decimal (`NaN`, `inf` included) or
/// `0x` followed by the IEEE bits in hex.
fn parse_values<T, B>(
    text: &str,
    decimal: impl Fn(&str) -> Option<T>,
    from_bits: impl Fn(B) -> T,
) -> Result<Vec<T>>
where
    B: num_bits::Bits,
{
    let mut values = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let s = line.trim();
        if s.is_empty() {
            continue;
        }
        let hex = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"));
        let value = match hex {
            Some(h) => B::from_hex(h).map(&from_bits),
            None => decimal(s),
        };
        values.push(value.ok_or_else(|| {
            Error::Input(format!(
                "line {}: `{s}` is neither a decimal number nor 0x followed by at most {} hex digits",
                i + 1,
                B::HEX_DIGITS
            ))
        })?);
    }
    Ok(values)
}

mod num_bits {
    /// The bit-pattern integer of a float type.
    pub trait Bits: Sized {
        const HEX_DIGITS: usize;
        fn from_hex(s: &str) -> Option<Self>;
    }

    impl Bits for u32 {
        const HEX_DIGITS: usize = 8;
        fn from_hex(s: &str) -> Option<u32> {
            u32::from_str_radix(s, 16)
                .ok()
                .filter(|_| !s.starts_with(['+', '-']))
        }
    }

    impl Bits for u64 {
        const HEX_DIGITS: usize = 16;
        fn from_hex(s: &str) -> Option<u64> {
            u64::from_str_radix(s, 16)
                .ok()
                .filter(|_| !s.starts_with(['+', '-']))
        }
    }
}
