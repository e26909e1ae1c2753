//! AnnData `.h5ad`, per the AnnData on-disk specification: the matrix (`X`,
//! `raw/X` or `layers/NAME`) is a `csr_matrix` or `csc_matrix` group
//! (`data`, `indices`, `indptr`, attribute `shape`) or a dense `array`
//! dataset; `obs` and `var` are dataframes ([`super::frame`]).

use std::path::Path;

use serde_json::json;

use super::frame::{self, Column, Frame};
use super::{H5Seq, H5};
use crate::csr::Csr;
use crate::dataset::ingest::compressed::{Compressed, Major};
use crate::dataset::ingest::counts::{check_claim, check_gene_claim, count, not_a_count, Rows};
use crate::dataset::ingest::{
    transpose_columns, Cells, ConvertOptions, Layer, Opened, Progress, Side,
};
use crate::error::Result;
use crate::obs::{ObsColumn, VarTable};

/// The obs column the obs index becomes.
const CELL_ID: &str = "cell_id";
/// The obs index's column where the file has a `cell_id` of its own.
const UNNAMED_INDEX: &str = "obs_names";

/// A dense matrix read in blocks of rows.
struct DenseRows {
    h5: H5,
    at: String,
    n_cells: u64,
    /// Genes kept: all the matrix's columns, or those `remap` keeps.
    n_genes: u32,
    /// Each column's gene (`-1`: dropped), when not every column is kept as it is.
    remap: Option<Vec<i32>>,
    next: u64,
    rows_per_block: u64,
}

impl Rows for DenseRows {
    fn next_block(&mut self) -> Result<Option<Csr<u32>>> {
        if self.next == self.n_cells {
            return Ok(None);
        }
        let (r0, r1) = (
            self.next,
            (self.next + self.rows_per_block).min(self.n_cells),
        );
        let ds = self.h5.dataset(&self.at)?;
        let block = ds
            .read_slice_2d::<f64, _>((r0 as usize..r1 as usize, ..))
            .map_err(|e| {
                self.h5
                    .err(&self.at, format!("reading rows {r0}..{r1}: {e}"))
            })?;
        let mut csr = Csr::empty(u64::from(self.n_genes));
        for (r, row) in block.rows().into_iter().enumerate() {
            for (g, &v) in row.iter().enumerate() {
                let c = count(v).ok_or_else(|| {
                    not_a_count(&self.h5.source(&self.at), r0 + r as u64, g as u64, v)
                })?;
                let gene = self.remap.as_ref().map_or(g as i32, |m| m[g]);
                if c > 0 && gene >= 0 {
                    csr.indices.push(gene);
                    csr.values.push(c);
                }
            }
            csr.indptr.push(csr.indices.len() as i64);
        }
        self.next = r1;
        Ok(Some(csr))
    }

    fn seek(&mut self, cell: u64) -> Result<u64> {
        self.next = cell.min(self.n_cells);
        Ok(self.next)
    }
}

/// Where the chosen matrix and its gene table are.
fn locate(h5: &H5, layer: &Layer) -> Result<(String, &'static str)> {
    let (x, var) = match layer {
        Layer::X => ("X".to_string(), "var"),
        Layer::Raw => ("raw/X".to_string(), "raw/var"),
        Layer::Named(name) => (format!("layers/{name}"), "var"),
    };
    if !h5.exists(&x) {
        let layers = if h5.is_group("layers") {
            h5.group("layers")?.member_names().unwrap_or_default()
        } else {
            Vec::new()
        };
        return Err(h5.err(
            &x,
            format!(
                "missing (--layer takes X, raw{})",
                layers.iter().map(|l| format!(", {l}")).collect::<String>()
            ),
        ));
    }
    Ok((x, var))
}

/// The genes `--feature-type want` keeps, from var's `feature_types` column
/// (what scanpy's `read_10x_h5` writes; `feature_type` also taken).
fn feature_types(h5: &H5, var_at: &str, var: &Frame, want: &str) -> Result<(Vec<bool>, Vec<i32>)> {
    let column = var
        .columns
        .iter()
        .find(|(name, _)| name == "feature_types" || name == "feature_type");
    let Some((name, column)) = column else {
        return Err(h5.err(
            var_at,
            format!(
                "--feature-type needs a column feature_types (var has {})",
                if var.columns.is_empty() {
                    "none".to_string()
                } else {
                    var.columns
                        .iter()
                        .map(|(n, _)| format!("{n:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
        ));
    };
    let at = format!("{var_at}/{name}");
    let types = column
        .strings()
        .ok_or_else(|| h5.err(&at, "--feature-type needs text, not numbers"))?;
    crate::dataset::ingest::feature_filter(&types, want).map_err(|e| h5.err(&at, e))
}

/// Where a conversion stores an h5ad's obs index.
enum IndexPlace {
    /// A string column of its own, named so.
    Column(&'static str),
    /// The file's own column `cell_id`, which holds the same names.
    IsColumn,
}

/// Where `obs`'s index goes: the column `cell_id`, unless the file has a
/// column of that name; then that column where it holds the index's names
/// (an index that was also a column), else `obs_names` (the name
/// `deltacells.write` gives an unnamed index), so that neither is lost.
fn index_place(obs: &Frame) -> Result<IndexPlace> {
    let column = |name: &str| obs.columns.iter().find(|(n, _)| n == name).map(|(_, c)| c);
    let Some(own) = column(CELL_ID) else {
        return Ok(IndexPlace::Column(CELL_ID));
    };
    if own.strings().as_deref() == Some(&obs.index[..]) {
        return Ok(IndexPlace::IsColumn);
    }
    match column(UNNAMED_INDEX) {
        None => Ok(IndexPlace::Column(UNNAMED_INDEX)),
        Some(_) => Err(crate::error::Error::Input(format!(
            "obs has columns {CELL_ID:?} and {UNNAMED_INDEX:?}, neither holding the obs index, \
             which convert stores under one of those names: rename one of them"
        ))),
    }
}

/// obs columns for the writer, after the index (`cell_id`, see [`Side::index_column`]).
fn obs_columns(frame: Frame) -> Result<(Vec<ObsColumn>, Vec<String>)> {
    let mut ordered = Vec::new();
    let mut obs = Vec::new();
    for (name, col) in frame.columns {
        obs.push(match col {
            Column::Strings(v) => ObsColumn::string(name, v),
            Column::Categorical {
                categories,
                codes,
                ordered: o,
            } => {
                if o {
                    ordered.push(name.clone());
                }
                ObsColumn::category(name, categories, codes)?
            }
            Column::Arrow(a) => ObsColumn::from_arrow(name, a)?,
        });
    }
    Ok((obs, ordered))
}

/// The gene table: the index and every column, typed as the obs columns
/// are (strings, categories, ordered or not, booleans and numbers with
/// their missing values), so per-gene statistics and flags such as
/// `highly_variable` come back as anndata wrote them.
fn var_table(frame: Frame) -> Result<VarTable> {
    let index = frame.index.clone();
    // The index named as anndata names it (`_index` when unnamed, and when
    // a column has its name, as pandas would then not tell them apart).
    let index_name = if frame.columns.iter().any(|(n, _)| *n == frame.index_name) {
        "_index".to_string()
    } else {
        frame.index_name.clone()
    };
    let (columns, ordered) = obs_columns(frame)?;
    columns
        .into_iter()
        .try_fold(VarTable::new(index_name, index), |table, column| {
            let o = ordered.iter().any(|n| n == column.name());
            table.with_typed_column(column, o)
        })
}

/// Opens an `.h5ad` for conversion.
pub(crate) fn open<'a>(
    path: &'a Path,
    options: &'a ConvertOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Opened<'a>> {
    let h5 = H5::open(path)?;
    let (x, var_at) = locate(&h5, &options.layer)?;
    // The obs index is the cell count; the columns wanted ("cell_id" is the
    // index, unless the file has a column of its own by that name).
    let own_cell_id = h5.is_group("obs")
        && frame::column_order(&h5, "obs")?
            .iter()
            .any(|c| c == CELL_ID);
    let keep: Option<Vec<String>> = options.obs_columns.as_ref().map(|k| {
        k.iter()
            .filter(|c| own_cell_id || *c != CELL_ID)
            .cloned()
            .collect()
    });
    let mut obs = frame::read(&h5, "obs", keep.as_deref())?;
    let var = frame::read(&h5, var_at, None)?;
    let (n_cells, n_genes) = (obs.index.len() as u64, var.index.len() as u64);
    let shape = match h5.encoding(&x)?.as_deref() {
        Some("csr_matrix") | Some("csc_matrix") => h5
            .group(&x)?
            .attr("shape")
            .and_then(|a| a.read_raw::<i64>())
            .map_err(|e| h5.err(&x, format!("attribute shape: {e}")))?,
        Some("array") | None if !h5.is_group(&x) => {
            let ds = h5.dataset(&x)?;
            ds.shape().iter().map(|&d| d as i64).collect()
        }
        other => {
            return Err(h5.err(
                &x,
                format!(
                    "encoding-type {other:?} is not a matrix (csr_matrix, csc_matrix or array)"
                ),
            ))
        }
    };
    if shape[..] != [n_cells as i64, n_genes as i64] {
        return Err(h5.err(
            &x,
            format!("shape {shape:?}, but obs has {n_cells} cells and {var_at} {n_genes} genes"),
        ));
    }
    check_claim(&h5.source(&x), "cells", n_cells, h5.bytes())?;
    check_gene_claim(&h5.source(&x), "genes", n_genes, h5.bytes())?;
    let n_genes = u32::try_from(n_genes)
        .ok()
        .filter(|&g| (1..=1 << 31).contains(&g))
        .ok_or_else(|| h5.err(var_at, format!("{n_genes} genes is outside 1..=2^31")))?;
    // `n_stored` genes in the matrix, `n_genes` of them kept.
    let (n_stored, remap, var) = match &options.feature_type {
        None => (n_genes, None, var),
        Some(want) => {
            let (keep, remap) = feature_types(&h5, var_at, &var, want)?;
            (n_genes, Some(remap), var.rows(&keep)?)
        }
    };
    let n_genes = var.index.len() as u32;

    let ids = obs.index.clone();
    let index = index_place(&obs)?;
    let unread = std::mem::take(&mut obs.unread);
    let (columns, ordered) = obs_columns(obs)?;
    let var_names = var.index.clone();
    let mut side = Side {
        var_names: Some(var_names),
        var_table: Some(var_table(var)?),
        obs_unread: unread,
        ..Side::default()
    };
    match index {
        IndexPlace::Column(name) => side.index_column(name, ids.iter().map(String::as_str)),
        IndexPlace::IsColumn => side.index_is_column(CELL_ID),
    }
    side.obs.extend(columns);
    let mut source = json!({
        "format": "h5ad",
        "file": path.file_name().map(|f| f.to_string_lossy().into_owned()),
        "matrix": x,
    });
    if !ordered.is_empty() {
        source["ordered_categories"] = json!(ordered);
    }
    if let Some(kept) = &options.feature_type {
        source["feature_type"] = json!(kept);
    }
    side.metadata.insert("source".into(), source);

    let block = options.block_nonzeros;
    let cells = match h5.encoding(&x)?.as_deref() {
        Some(kind @ ("csr_matrix" | "csc_matrix")) => {
            let major = if kind == "csr_matrix" {
                Major::Cells
            } else {
                Major::Genes
            };
            let (n_major, n_minor) = match major {
                Major::Cells => (n_cells, u64::from(n_stored)),
                Major::Genes => (u64::from(n_stored), n_cells),
            };
            let source = h5.source(&x);
            let arrays = move |h5: &H5| -> Result<(Compressed<H5Seq, H5Seq, H5Seq>, u64)> {
                let indptr = h5.seq(&format!("{x}/indptr"), true)?;
                let indices = h5.seq(&format!("{x}/indices"), true)?;
                let data = h5.seq(&format!("{x}/data"), false)?;
                if indptr.len() as u64 != n_major + 1 {
                    return Err(h5.err(
                        &format!("{x}/indptr"),
                        format!("{} entries, the shape needs {}", indptr.len(), n_major + 1),
                    ));
                }
                if indices.len() != data.len() {
                    return Err(h5.err(&x, "indices and data differ in length"));
                }
                let nnz = data.len() as u64;
                Ok((
                    Compressed::new(
                        h5.source(&x),
                        (indptr, indices, data),
                        major,
                        n_major,
                        n_minor,
                        nnz,
                        block,
                    ),
                    nnz,
                ))
            };
            match major {
                Major::Cells => Cells::Rows(Box::new(move || {
                    let rows = arrays(&h5)?.0;
                    Ok(match remap.clone() {
                        Some(remap) => Box::new(rows.with_remap(remap)),
                        None => Box::new(rows) as Box<dyn Rows>,
                    })
                })),
                Major::Genes => {
                    let (columns, nnz) = arrays(&h5)?;
                    let t = options.transposer(source, n_cells, n_genes, nnz)?;
                    let (totals, rows) =
                        transpose_columns(columns, t, nnz, remap.as_deref(), progress)?;
                    Cells::Transposed(totals, rows)
                }
            }
        }
        _ => {
            let rows_per_block = (block as u64 / u64::from(n_stored)).max(1);
            Cells::Rows(Box::new(move || {
                Ok(Box::new(DenseRows {
                    h5: H5::open(path)?,
                    at: x.clone(),
                    n_cells,
                    n_genes,
                    remap: remap.clone(),
                    next: 0,
                    rows_per_block,
                }) as Box<dyn Rows>)
            }))
        }
    };
    Ok(Opened {
        n_cells,
        n_genes,
        side,
        cells,
    })
}
