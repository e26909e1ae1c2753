//! `deltacells obs`: the obs schema, obs values as JSON lines, localizing columns.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use deltacells::dataset::Dataset;
use deltacells::obs::{json_value, ObsReader};
use deltacells::{Error, Result};
use serde_json::{Map, Value};

use crate::dataset_cmd::parse_cells;
use crate::output::{out_err, Out};

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ObsArgs {
    #[command(subcommand)]
    command: Option<ObsCommand>,
    /// The dataset location (a directory or a URL). Alone: the schema summary.
    dir: Option<PathBuf>,
    /// Print these columns (comma-separated), one JSON object per cell:
    /// categories as strings, numbers as numbers, missing and NaN as null.
    #[arg(long, value_delimiter = ',')]
    columns: Vec<String>,
    /// Cells to print, as `cat` takes them: `A:B` (either end may be left out), `A` or a
    /// comma-separated list of those (default: all).
    #[arg(long, requires = "columns")]
    cells: Option<String>,
    /// Output format of the values.
    #[arg(long, value_enum, default_value_t = Format::Jsonl, requires = "columns")]
    format: Format,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Format {
    /// One JSON object per line.
    Jsonl,
}

#[derive(Subcommand, Debug)]
enum ObsCommand {
    /// Fetch columns into the local cache (shards checked against their SHA-256);
    /// prints `fetched`, `reused` or `replaced` and the file of each column.
    Localize {
        /// The dataset location (a directory or a URL).
        dir: PathBuf,
        /// Columns to localize (comma-separated).
        #[arg(long, value_delimiter = ',', required = true)]
        columns: Vec<String>,
        /// Cache directory (default: $DELTACELLS_CACHE, $XDG_CACHE_HOME/deltacells, ~/.cache/deltacells).
        #[arg(long)]
        cache_dir: Option<PathBuf>,
    },
}

pub fn run(args: ObsArgs) -> Result<()> {
    match (args.command, args.dir) {
        (
            Some(ObsCommand::Localize {
                dir,
                columns,
                cache_dir,
            }),
            _,
        ) => localize(&dir, &columns, cache_dir.as_deref()),
        (None, Some(dir)) if args.columns.is_empty() => summary(&dir),
        (None, Some(dir)) => match args.format {
            Format::Jsonl => print_jsonl(&dir, &args.columns, args.cells.as_deref()),
        },
        (None, None) => Err(Error::Input(
            "give a dataset directory (deltacells obs DIR)".into(),
        )),
    }
}

fn open(dir: &Path) -> Result<Dataset> {
    let dataset = Dataset::open(dir)?;
    if dataset.obs().is_none() {
        return Err(Error::Input(format!(
            "{} has no obs (has_obs is false)",
            dir.display()
        )));
    }
    Ok(dataset)
}

fn reader(dataset: &Dataset) -> Result<&ObsReader> {
    dataset
        .obs()
        .ok_or_else(|| Error::Input("the dataset has no obs".into()))
}

fn summary(dir: &Path) -> Result<()> {
    let dataset = open(dir)?;
    let obs = reader(&dataset)?;
    let mut out = Out::stdout();
    writeln!(
        out,
        "cells        {} in {} tiles",
        dataset.n_cells(),
        dataset.n_tiles()
    )
    .map_err(out_err)?;
    writeln!(
        out,
        "obs          {} columns in {} shards, {} bytes, fingerprint {}",
        obs.schema().columns.len(),
        obs.n_shards(),
        obs.shard_bytes(),
        obs.fingerprint()
    )
    .map_err(out_err)?;
    writeln!(
        out,
        "{:<24} {:<9} {:<7} categories",
        "column", "kind", "type"
    )
    .map_err(out_err)?;
    for c in &obs.schema().columns {
        let categories = c
            .categories
            .as_ref()
            .map_or_else(|| "-".to_string(), |v| v.len().to_string());
        writeln!(
            out,
            "{:<24} {:<9} {:<7} {categories}",
            c.name,
            c.kind.name(),
            c.arrow_type.name()
        )
        .map_err(out_err)?;
    }
    out.finish()
}

fn print_jsonl(dir: &Path, columns: &[String], cells: Option<&str>) -> Result<()> {
    let dataset = open(dir)?;
    let obs = reader(&dataset)?;
    let spans = match cells {
        Some(spec) => parse_cells(spec, dataset.n_cells())?,
        None => std::iter::once(0..dataset.n_cells()).collect(),
    };
    let schemas = columns
        .iter()
        .map(|name| {
            let schema = obs.schema().column(name).map(|(_, c)| c.clone());
            schema.ok_or_else(|| Error::Input(format!("no obs column {name:?}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut out = Out::stdout();
    let mut line = String::new();
    for cells in spans.into_iter().filter(|s| !s.is_empty()) {
        let first_tile = dataset.locate(cells.start)?.0;
        let tiles = first_tile..dataset.locate(cells.end - 1)?.0 + 1;
        let read = schemas
            .iter()
            .map(|schema| obs.read_column(&schema.name, tiles.clone()))
            .collect::<Result<Vec<_>>>()?;
        for cell in cells {
            let (tile, row) = dataset.locate(cell)?;
            let mut object = Map::new();
            for (schema, arrays) in schemas.iter().zip(&read) {
                let value = json_value(
                    arrays[tile - first_tile].as_ref(),
                    schema.categories.as_deref(),
                    row,
                );
                object.insert(schema.name.clone(), value);
            }
            line.clear();
            line.push_str(&Value::Object(object).to_string());
            line.push('\n');
            out.write_all(line.as_bytes()).map_err(out_err)?;
        }
    }
    out.finish()
}

fn localize(dir: &Path, columns: &[String], cache_dir: Option<&Path>) -> Result<()> {
    let dataset = open(dir)?;
    let local = reader(&dataset)?.localize(columns, cache_dir)?;
    let report = local.report();
    let mut out = Out::stdout();
    for name in columns {
        let status = if report.replaced.contains(name) {
            "replaced"
        } else if report.fetched.contains(name) {
            "fetched"
        } else {
            "reused"
        };
        let path = local
            .path(name)
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        writeln!(out, "{status}\t{name}\t{path}").map_err(out_err)?;
    }
    out.finish()
}
