//! 10x Matrix Market folders: `matrix.mtx[.gz]` (genes x cells, entries in no
//! promised order), `features.tsv[.gz]` (or `genes.tsv`) and `barcodes.tsv[.gz]`.
//!
//! The side files are read first, so that the size line is checked against
//! them before any entry is; the entries stream into the out-of-core
//! transpose.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::error::{Error, Result};
use crate::obs::VarTable;

use super::counts::{check_claim, check_gene_claim, count, file_bytes};
use super::transpose::Transposer;
use super::{feature_filter, Phase, Progress, Side};

fn open_text(path: &Path) -> Result<Box<dyn BufRead>> {
    let f = File::open(path).map_err(|e| Error::io(path.display().to_string(), e))?;
    let reader: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(f)))
    } else {
        Box::new(f)
    };
    Ok(Box::new(BufReader::with_capacity(1 << 20, reader)))
}

/// Lines of a (possibly gzipped) TSV file, split on tabs; blank lines skipped.
pub fn read_tsv(path: &Path) -> Result<Vec<Vec<String>>> {
    let mut rows = Vec::new();
    for line in open_text(path)?.lines() {
        let line = line.map_err(|e| Error::io(path.display().to_string(), e))?;
        if !line.is_empty() {
            rows.push(line.split('\t').map(str::to_string).collect());
        }
    }
    Ok(rows)
}

/// The size line of a Matrix Market coordinate file.
pub(crate) struct MtxHeader {
    pub n_genes: u64,
    pub n_cells: u64,
    pub entries: u64,
}

/// Reads a Matrix Market coordinate file's header and size line; returns
/// them with the line reader positioned at the first entry.
fn read_header(
    path: &Path,
) -> Result<(
    MtxHeader,
    impl Iterator<Item = Result<(usize, String)>> + use<'_>,
)> {
    let bad =
        |line: usize, msg: String| Error::Input(format!("{} line {line}: {msg}", path.display()));
    let mut lines = open_text(path)?.lines().enumerate().map(move |(i, l)| {
        l.map(|l| (i + 1, l))
            .map_err(|e| Error::io(path.display().to_string(), e))
    });
    let (_, header) = lines
        .next()
        .transpose()?
        .ok_or_else(|| bad(1, "empty file".into()))?;
    let h: Vec<String> = header
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    if h.len() < 5 || h[0] != "%%matrixmarket" || h[1] != "matrix" || h[2] != "coordinate" {
        return Err(bad(
            1,
            format!("expected a Matrix Market coordinate header, got {header:?}"),
        ));
    }
    if !matches!(h[3].as_str(), "integer" | "real") || h[4] != "general" {
        return Err(bad(
            1,
            format!(
                "field {} / symmetry {} not supported (need integer or real, general)",
                h[3], h[4]
            ),
        ));
    }
    let (size_no, size) = loop {
        match lines.next().transpose()? {
            Some((_, l)) if l.starts_with('%') || l.trim().is_empty() => continue,
            Some(x) => break x,
            None => return Err(bad(2, "no size line".into())),
        }
    };
    let dims: Vec<u64> = size
        .split_whitespace()
        .map(|t| {
            t.parse()
                .map_err(|_| bad(size_no, format!("bad size line {size:?}")))
        })
        .collect::<Result<_>>()?;
    let [n_genes, n_cells, entries] = dims[..] else {
        return Err(bad(size_no, format!("bad size line {size:?}")));
    };
    if n_genes == 0 || n_genes > 1 << 31 {
        return Err(bad(
            size_no,
            format!("{n_genes} genes is outside what a dataset holds (1..=2^31)"),
        ));
    }
    Ok((
        MtxHeader {
            n_genes,
            n_cells,
            entries,
        },
        lines,
    ))
}

/// The features and barcodes of a 10x folder as var table, names and obs,
/// and, with a `feature_type` filter, each feature's gene (`-1`: dropped).
fn side_files(
    header: &MtxHeader,
    features: Option<&Path>,
    barcodes: Option<&Path>,
    feature_type: Option<&str>,
) -> Result<(Side, Option<Vec<i32>>)> {
    let mut side = Side::default();
    let mut remap = None;
    if let (None, Some(_)) = (features, feature_type) {
        return Err(Error::Input(
            "--feature-type needs the folder's features.tsv, which names each feature's type"
                .into(),
        ));
    }
    if let Some(f) = features {
        let rows = read_tsv(f)?;
        if rows.len() as u64 != header.n_genes {
            return Err(Error::Input(format!(
                "{}: {} features for the {} genes the matrix declares",
                f.display(),
                rows.len(),
                header.n_genes
            )));
        }
        // id, name, type (10x v3); older genes.tsv files have id and name only.
        let col = |i: usize| -> Vec<String> {
            rows.iter()
                .map(|r| r.get(i).or_else(|| r.get(1)).unwrap_or(&r[0]).clone())
                .collect()
        };
        let types: Vec<String> = rows
            .iter()
            .map(|r| {
                r.get(2)
                    .cloned()
                    .unwrap_or_else(|| "Gene Expression".into())
            })
            .collect();
        let (mut ids, mut names, mut types) = (col(0), col(1), types);
        if let Some(want) = feature_type {
            let (keep, map) = feature_filter(&types, want)
                .map_err(|e| Error::Input(format!("{}: {e}", f.display())))?;
            for v in [&mut ids, &mut names, &mut types] {
                let mut k = keep.iter();
                v.retain(|_| k.next() == Some(&true));
            }
            remap = Some(map);
        }
        side.var_names = Some(names.clone());
        side.var_table = Some(VarTable::from_features(ids, names, types)?);
    }
    if let Some(b) = barcodes {
        let rows = read_tsv(b)?;
        if rows.len() as u64 != header.n_cells {
            return Err(Error::Input(format!(
                "{}: {} barcodes for the {} cells the matrix declares",
                b.display(),
                rows.len(),
                header.n_cells
            )));
        }
        side.index_column("barcode", rows.iter().map(|r| r[0].as_str()));
    }
    Ok((side, remap))
}

/// Reads a 10x folder: the side files, then every entry into a transpose
/// (made by `transposer` for the cells and the genes kept: those of
/// `feature_type`, or all). Returns the genes kept with the side files.
pub(crate) fn read(
    matrix: &Path,
    features: Option<&Path>,
    barcodes: Option<&Path>,
    feature_type: Option<&str>,
    transposer: impl FnOnce(u64, u32, u64) -> Result<Transposer>,
    progress: &mut dyn FnMut(Progress),
) -> Result<(u64, u32, Side, Transposer)> {
    let (header, lines) = read_header(matrix)?;
    let source = matrix.display().to_string();
    // Every declared cell and gene must be backed by input bytes: a barcode
    // or feature line, or the matrix file itself.
    let bytes = |p: Option<&Path>| p.map_or(Ok(0), file_bytes);
    let matrix_bytes = file_bytes(matrix)?;
    check_claim(
        &source,
        "cells",
        header.n_cells,
        matrix_bytes + bytes(barcodes)?,
    )?;
    check_gene_claim(
        &source,
        "genes",
        header.n_genes,
        matrix_bytes + bytes(features)?,
    )?;
    let (side, remap) = side_files(&header, features, barcodes, feature_type)?;
    let kept = remap.as_ref().map_or(header.n_genes, |m| {
        m.iter().filter(|&&g| g >= 0).count() as u64
    });
    let mut t = transposer(header.n_cells, kept as u32, header.entries)?;
    let bad = |line: usize, msg: String| Error::Input(format!("{source} line {line}: {msg}"));
    let (n_genes, n_cells, entries) = (header.n_genes, header.n_cells, header.entries);
    let mut read = 0u64;
    for line in lines {
        let (no, line) = line?;
        if line.starts_with('%') || line.trim().is_empty() {
            continue;
        }
        let mut it = line.split_whitespace();
        let (Some(g), Some(c), Some(v), None) = (it.next(), it.next(), it.next(), it.next()) else {
            return Err(bad(no, format!("expected `gene cell value`, got {line:?}")));
        };
        let g: u64 = g
            .parse()
            .map_err(|_| bad(no, format!("bad gene index {g:?}")))?;
        let c: u64 = c
            .parse()
            .map_err(|_| bad(no, format!("bad cell index {c:?}")))?;
        if g == 0 || g > n_genes || c == 0 || c > n_cells {
            return Err(bad(
                no,
                format!("entry ({g}, {c}) outside {n_genes} x {n_cells} (indices are 1-based)"),
            ));
        }
        let v: f64 = v.parse().map_err(|_| bad(no, format!("bad value {v:?}")))?;
        let count = count(v).ok_or_else(|| {
            bad(
                no,
                format!(
                    "cell {}, gene {}: value {v} is not a count (a non-negative integer up to 2^31-1)",
                    c - 1,
                    g - 1
                ),
            )
        })?;
        read += 1;
        if read > entries {
            return Err(bad(
                no,
                format!("more entries than the {entries} the size line declares"),
            ));
        }
        let gene = remap
            .as_ref()
            .map_or((g - 1) as i32, |m| m[(g - 1) as usize]);
        if count > 0 && gene >= 0 {
            t.push(c - 1, gene as u32, count)?;
        }
        if read.is_multiple_of(1 << 20) {
            progress(Progress {
                phase: Phase::Transposing,
                done: read,
                total: entries,
            });
        }
    }
    if read != entries {
        return Err(Error::Input(format!(
            "{source}: {read} entries, the size line declares {entries}"
        )));
    }
    progress(Progress {
        phase: Phase::Transposing,
        done: read,
        total: entries,
    });
    Ok((header.n_cells, kept as u32, side, t))
}
