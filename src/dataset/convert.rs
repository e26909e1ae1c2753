//! Ingest: 10x Matrix Market folders and scipy `.npz` CSR files to datasets.
//!
//! A 10x folder's barcodes become the string obs column `barcode`, and its
//! features `var.parquet` (gene id as the index, name and feature type as
//! columns) and `var_names.txt` (the names), all in output column order.
//!
//! Both inputs are read into memory as CSR by cell (about 12 bytes per nonzero
//! while converting), then streamed to a [`DatasetWriter`]. Reading everything
//! first is what allows the two passes the format wants: gene totals (to sort
//! genes by decreasing expression) before any tile is written, and a 10x
//! matrix, which is stored genes x cells in no promised order, transposed.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::csr::{Csr, CsrRef};
use crate::dataset::writer::{DatasetWriter, WriterConfig};
use crate::error::{Error, Result};
use crate::format::manifest::Manifest;
use crate::format::npy::{read_csr_npz, Dtype, NpzCsr};
use crate::obs::{ObsColumn, ObsConfig, VarTable};

/// What [`convert`] reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A 10x folder: `matrix.mtx[.gz]`, `features.tsv[.gz]` (or `genes.tsv`), `barcodes.tsv[.gz]`.
    TenX {
        matrix: PathBuf,
        features: Option<PathBuf>,
        barcodes: Option<PathBuf>,
    },
    /// A scipy sparse CSR matrix saved with `save_npz` (rows are cells).
    Npz(PathBuf),
}

/// Progress of a conversion, for a progress bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Nonzeros read so far of the total.
    Reading { done: u64, total: u64 },
    /// Cells handed to the writer so far of the total.
    Writing { done: u64, total: u64 },
}

/// How to convert.
#[derive(Clone, Debug)]
pub struct ConvertOptions {
    /// Tile size, chunks, level, metadata (gene totals and names are filled in).
    pub writer: WriterConfig,
    /// Sort genes by decreasing total counts (recorded in gene_order.npy).
    pub sort_genes: bool,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions {
            writer: WriterConfig::default(),
            sort_genes: true,
        }
    }
}

fn first_existing(dir: &Path, names: &[&str]) -> Option<PathBuf> {
    names.iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

impl Input {
    /// Recognises a 10x folder or an `.npz` file.
    pub fn detect(path: &Path) -> Result<Input> {
        if path.is_dir() {
            let matrix =
                first_existing(path, &["matrix.mtx.gz", "matrix.mtx"]).ok_or_else(|| {
                    Error::Input(format!(
                        "{}: no matrix.mtx[.gz] (not a 10x folder)",
                        path.display()
                    ))
                })?;
            return Ok(Input::TenX {
                matrix,
                features: first_existing(
                    path,
                    &[
                        "features.tsv.gz",
                        "features.tsv",
                        "genes.tsv.gz",
                        "genes.tsv",
                    ],
                ),
                barcodes: first_existing(path, &["barcodes.tsv.gz", "barcodes.tsv"]),
            });
        }
        match path.extension().and_then(|e| e.to_str()) {
            Some("npz") => Ok(Input::Npz(path.to_path_buf())),
            _ => Err(Error::Input(format!(
                "{}: expected a 10x folder or a .npz file",
                path.display()
            ))),
        }
    }
}

fn open_text(path: &Path) -> Result<Box<dyn BufRead>> {
    let f = File::open(path).map_err(|e| Error::io(path.display().to_string(), e))?;
    let reader: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(f)))
    } else {
        Box::new(f)
    };
    Ok(Box::new(BufReader::with_capacity(1 << 20, reader)))
}

/// Lines of a (possibly gzipped) TSV file, split on tabs.
pub fn read_tsv(path: &Path) -> Result<Vec<Vec<String>>> {
    open_text(path)?
        .lines()
        .map(|l| {
            l.map(|l| l.split('\t').map(str::to_string).collect())
                .map_err(|e| Error::io(path.display().to_string(), e))
        })
        .filter(|r| {
            r.as_ref().map_or(true, |cols: &Vec<String>| {
                !(cols.len() == 1 && cols[0].is_empty())
            })
        })
        .collect()
}

/// Reads a Matrix Market coordinate file of genes x cells (10x layout) into
/// CSR by cell. Entries of 0 are dropped (zeros are never stored).
pub fn read_mtx(path: &Path, progress: &mut dyn FnMut(Progress)) -> Result<Csr<u32>> {
    let bad =
        |line: usize, msg: String| Error::Input(format!("{} line {line}: {msg}", path.display()));
    let mut lines = open_text(path)?.lines().enumerate();
    let mut next_line = || -> Result<Option<(usize, String)>> {
        lines
            .next()
            .map(|(i, l)| {
                l.map(|l| (i + 1, l))
                    .map_err(|e| Error::io(path.display().to_string(), e))
            })
            .transpose()
    };
    let (_, header) = next_line()?.ok_or_else(|| bad(1, "empty file".into()))?;
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
        match next_line()? {
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
    if n_genes == 0 || n_genes > 1 << 31 || n_cells > u32::MAX as u64 {
        return Err(bad(
            size_no,
            format!("{n_genes} genes x {n_cells} cells is outside what a dataset holds"),
        ));
    }
    // The entry count bounds the triples; cap the up-front reservation anyway.
    let mut triples: Vec<(u32, u32, u32)> = Vec::with_capacity(entries.min(1 << 24) as usize);
    let mut read = 0u64;
    while let Some((no, line)) = next_line()? {
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
        if v.fract() != 0.0 || !(0.0..=i32::MAX as f64).contains(&v) {
            return Err(bad(no, format!("value {v} is not a count in 0..=2^31-1")));
        }
        read += 1;
        if read > entries {
            return Err(bad(
                no,
                format!("more entries than the {entries} the size line declares"),
            ));
        }
        if v > 0.0 {
            triples.push(((c - 1) as u32, (g - 1) as u32, v as u32));
        }
        if read.is_multiple_of(1 << 20) {
            progress(Progress::Reading {
                done: read,
                total: entries,
            });
        }
    }
    if read != entries {
        return Err(Error::Input(format!(
            "{}: {read} entries, the size line declares {entries}",
            path.display()
        )));
    }
    progress(Progress::Reading {
        done: read,
        total: entries,
    });
    // Counting sort by cell, then sort each cell's genes.
    let mut indptr = vec![0i64; n_cells as usize + 1];
    for &(c, _, _) in &triples {
        indptr[c as usize + 1] += 1;
    }
    for i in 0..n_cells as usize {
        indptr[i + 1] += indptr[i];
    }
    let mut fill: Vec<usize> = indptr[..n_cells as usize]
        .iter()
        .map(|&p| p as usize)
        .collect();
    let mut entries_by_cell = vec![(0u32, 0u32); triples.len()];
    for (c, g, v) in triples {
        entries_by_cell[fill[c as usize]] = (g, v);
        fill[c as usize] += 1;
    }
    for w in indptr.windows(2) {
        entries_by_cell[w[0] as usize..w[1] as usize].sort_unstable_by_key(|e| e.0);
    }
    Ok(Csr {
        n_cols: n_genes,
        indptr,
        indices: entries_by_cell.iter().map(|e| e.0 as i32).collect(),
        values: entries_by_cell.iter().map(|e| e.1).collect(),
    })
}

/// Reads a scipy CSR `.npz` (rows are cells) as counts.
pub fn read_npz(path: &Path) -> Result<Csr<u32>> {
    let NpzCsr {
        indptr,
        indices,
        data,
        shape: [_, n_cols],
    } = read_csr_npz(path)?;
    if indices.len() != data.len() || indptr.last().copied() != Some(indices.len() as i64) {
        return Err(Error::Input(format!(
            "{}: indptr, indices and data disagree",
            path.display()
        )));
    }
    let values = match data.dtype {
        Dtype::F32 | Dtype::F64 => data
            .to_f64()?
            .into_iter()
            .map(|v| (v.fract() == 0.0 && v >= 0.0 && v <= i32::MAX as f64).then_some(v as u32))
            .collect::<Option<Vec<_>>>(),
        _ => data
            .to_i64()?
            .into_iter()
            .map(|v| u32::try_from(v).ok().filter(|&v| v <= i32::MAX as u32))
            .collect(),
    }
    .ok_or_else(|| {
        Error::Input(format!(
            "{}: data holds a value that is not a count in 0..=2^31-1",
            path.display()
        ))
    })?;
    // Explicitly stored zeros are dropped (the format never stores zeros).
    let mut csr = Csr::empty(n_cols);
    for w in indptr.windows(2) {
        if w[1] < w[0] || w[1] as usize > indices.len() {
            return Err(Error::Input(format!(
                "{}: indptr is not non-decreasing",
                path.display()
            )));
        }
        for j in w[0] as usize..w[1] as usize {
            if values[j] > 0 {
                csr.indices.push(indices[j]);
                csr.values.push(values[j]);
            }
        }
        csr.indptr.push(csr.indices.len() as i64);
    }
    Ok(csr)
}

/// Total count of each gene (column).
pub fn gene_totals(csr: &Csr<u32>) -> Vec<f64> {
    let mut totals = vec![0f64; csr.n_cols as usize];
    for (&g, &v) in csr.indices.iter().zip(&csr.values) {
        if let Some(t) = totals.get_mut(g as usize) {
            *t += f64::from(v);
        }
    }
    totals
}

/// Converts `input` into a new dataset at `out`.
pub fn convert(
    input: &Input,
    out: &Path,
    options: ConvertOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Manifest> {
    let mut config = options.writer;
    let csr = match input {
        Input::TenX {
            matrix,
            features,
            barcodes,
        } => {
            let csr = read_mtx(matrix, progress)?;
            if let Some(f) = features {
                let rows = read_tsv(f)?;
                if rows.len() as u64 != csr.n_cols {
                    return Err(Error::Input(format!(
                        "{}: {} features for {} genes",
                        f.display(),
                        rows.len(),
                        csr.n_cols
                    )));
                }
                // id, name, type (10x v3); older genes.tsv files have id and name only.
                let col = |i: usize| -> Vec<String> {
                    rows.iter()
                        .map(|r| r.get(i).or_else(|| r.get(1)).unwrap_or(&r[0]).clone())
                        .collect()
                };
                let types = rows
                    .iter()
                    .map(|r| {
                        r.get(2)
                            .cloned()
                            .unwrap_or_else(|| "Gene Expression".into())
                    })
                    .collect();
                config.var_names = Some(col(1));
                config.var_table = Some(VarTable::from_features(col(0), col(1), types)?);
            }
            if let Some(b) = barcodes {
                let rows = read_tsv(b)?;
                if rows.len() != csr.n_rows() {
                    return Err(Error::Input(format!(
                        "{}: {} barcodes for {} cells",
                        b.display(),
                        rows.len(),
                        csr.n_rows()
                    )));
                }
                let column = ObsColumn::string("barcode", rows.iter().map(|r| Some(r[0].as_str())));
                config.obs = Some(ObsConfig::new(vec![column]));
            }
            csr
        }
        Input::Npz(path) => read_npz(path)?,
    };
    if options.sort_genes {
        config.gene_totals = Some(gene_totals(&csr));
    }
    let tile_size = config.tile_size.max(1);
    let n_genes = u32::try_from(csr.n_cols).map_err(|_| Error::Input("too many genes".into()))?;
    let mut writer = DatasetWriter::create(out, n_genes, config)?;
    let total = csr.n_rows() as u64;
    for start in (0..csr.n_rows()).step_by(tile_size) {
        let end = (start + tile_size).min(csr.n_rows());
        let (lo, hi) = (csr.indptr[start] as usize, csr.indptr[end] as usize);
        let indptr: Vec<i64> = csr.indptr[start..=end]
            .iter()
            .map(|&p| p - lo as i64)
            .collect();
        writer.push(CsrRef {
            n_cols: csr.n_cols,
            indptr: &indptr,
            indices: &csr.indices[lo..hi],
            values: &csr.values[lo..hi],
        })?;
        progress(Progress::Writing {
            done: end as u64,
            total,
        });
    }
    writer.finish()
}
