//! Cell Ranger feature-barcode matrices (`filtered_feature_bc_matrix.h5`,
//! format version 3 and later): group `matrix` with `data`, `indices`,
//! `indptr`, `shape`, `barcodes` and `features/{id,name,feature_type,genome}`.
//!
//! The matrix is features x barcodes in CSC form, so each compressed column
//! is a cell: it is read by cell in blocks, with no transpose.

use std::path::Path;

use serde_json::json;

use super::H5;
use crate::dataset::ingest::compressed::{Compressed, Major};
use crate::dataset::ingest::counts::{check_claim, check_gene_claim, Rows};
use crate::dataset::ingest::{Cells, ConvertOptions, Opened, Side};
use crate::error::Result;
use crate::obs::VarTable;

/// Opens a Cell Ranger `.h5` for conversion.
pub(crate) fn open<'a>(path: &'a Path, options: &'a ConvertOptions) -> Result<Opened<'a>> {
    let h5 = H5::open(path)?;
    if !h5.is_group("matrix") {
        let hint = if h5.encoding("")?.as_deref() == Some("anndata") {
            "this is an AnnData file: name it .h5ad"
        } else {
            "not a Cell Ranger v3 feature-barcode matrix (older files keep one group per genome)"
        };
        return Err(h5.err("matrix", format!("missing: {hint}")));
    }
    let shape_at = "matrix/shape";
    let shape = h5
        .whole(shape_at)?
        .read_raw::<i64>()
        .map_err(|e| h5.err(shape_at, e))?;
    let [n_features, n_barcodes] = shape[..] else {
        return Err(h5.err(shape_at, format!("{} entries, expected 2", shape.len())));
    };
    if n_features < 0 || n_barcodes < 0 {
        return Err(h5.err(shape_at, format!("negative shape {shape:?}")));
    }
    let (n_features, n_cells) = (n_features as u64, n_barcodes as u64);
    check_claim(&h5.source("matrix"), "cells", n_cells, h5.bytes())?;
    check_gene_claim(&h5.source("matrix"), "features", n_features, h5.bytes())?;

    let barcodes = h5.strings("matrix/barcodes")?;
    if barcodes.len() as u64 != n_cells {
        return Err(h5.err(
            "matrix/barcodes",
            format!("{} barcodes for {n_cells} cells", barcodes.len()),
        ));
    }
    let feature = |name: &str, required: bool| -> Result<Option<Vec<String>>> {
        let at = format!("matrix/features/{name}");
        if !required && !h5.exists(&at) {
            return Ok(None);
        }
        let v = h5.strings(&at)?;
        if v.len() as u64 != n_features {
            return Err(h5.err(
                &at,
                format!("{} entries for {n_features} features", v.len()),
            ));
        }
        Ok(Some(v))
    };
    let ids = feature("id", true)?.expect("required");
    let names = feature("name", true)?.expect("required");
    let types = feature("feature_type", true)?.expect("required");
    let genome = feature("genome", false)?;

    // The features kept, and each source feature's new index (-1: dropped).
    let (keep, remap) = match &options.feature_type {
        None => (vec![true; types.len()], (0..types.len() as i32).collect()),
        Some(want) => crate::dataset::ingest::feature_filter(&types, want)
            .map_err(|e| h5.err("matrix/features/feature_type", e))?,
    };
    let kept = keep.iter().filter(|&&k| k).count();
    let pick = |v: &[String]| -> Vec<String> {
        v.iter()
            .zip(&keep)
            .filter(|(_, &k)| k)
            .map(|(s, _)| s.clone())
            .collect()
    };
    let mut table = VarTable::from_features(pick(&ids), pick(&names), pick(&types))?;
    if let Some(g) = &genome {
        table = table.with_category_column("genome", pick(g))?;
    }
    let mut side = Side {
        var_names: Some(pick(&names)),
        var_table: Some(table),
        ..Side::default()
    };
    side.index_column("barcode", barcodes.iter().map(String::as_str));
    side.metadata.insert(
        "source".into(),
        json!({
            "format": "cellranger-h5",
            "file": path.file_name().map(|f| f.to_string_lossy().into_owned()),
            "feature_type": options.feature_type,
        }),
    );
    let n_genes = kept as u32;
    let block = options.block_nonzeros;
    let cells = Cells::Rows(Box::new(move || {
        let indptr = h5.seq("matrix/indptr", true)?;
        let indices = h5.seq("matrix/indices", true)?;
        let data = h5.seq("matrix/data", false)?;
        if indptr.len() as u64 != n_cells + 1 {
            return Err(h5.err(
                "matrix/indptr",
                format!("{} entries for {n_cells} barcodes", indptr.len()),
            ));
        }
        if indices.len() != data.len() {
            return Err(h5.err("matrix", "indices and data differ in length"));
        }
        let nnz = data.len() as u64;
        Ok(Box::new(
            Compressed::new(
                h5.source("matrix"),
                (indptr, indices, data),
                Major::Cells,
                n_cells,
                n_features,
                nnz,
                block,
            )
            .with_remap(remap.clone()),
        ) as Box<dyn Rows>)
    }));
    Ok(Opened {
        n_cells,
        n_genes,
        side,
        cells,
    })
}
