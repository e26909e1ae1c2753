//! The statistics' columns and `gene_stats.parquet`.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, RecordBatch, StringArray, UInt64Array};
use arrow_schema::{Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use serde_json::json;

use crate::dataset::vocab::dataset_keys;
use crate::dataset::Dataset;
use crate::error::{Error, Result};

/// Per-gene statistics, one entry per gene in the dataset's column order
/// (the formulas are in the module docs of [`crate::dataset::gene_stats`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GeneTable {
    /// Cells with a count above zero.
    pub n_cells: Vec<u64>,
    /// Sum of counts.
    pub sum: Vec<u64>,
    /// Mean count over all cells.
    pub mean: Vec<f64>,
    /// Variance of the counts over all cells (ddof 0).
    pub var: Vec<f64>,
    /// Mean normalized count over all cells.
    pub norm_mean: Vec<f64>,
    /// Variance of the normalized counts over all cells (ddof 0).
    pub norm_var: Vec<f64>,
    /// Median of the nonzero normalized counts (sketched; NaN when none).
    pub norm_median: Vec<f64>,
}

/// The float columns, by name, in file order.
type FloatColumns<'t> = [(&'static str, &'t [f64]); 5];

impl GeneTable {
    pub(crate) fn with_capacity(n: usize) -> GeneTable {
        GeneTable {
            n_cells: Vec::with_capacity(n),
            sum: Vec::with_capacity(n),
            mean: Vec::with_capacity(n),
            var: Vec::with_capacity(n),
            norm_mean: Vec::with_capacity(n),
            norm_var: Vec::with_capacity(n),
            norm_median: Vec::with_capacity(n),
        }
    }

    /// Number of genes.
    pub fn len(&self) -> usize {
        self.n_cells.len()
    }

    /// Whether there is no gene.
    pub fn is_empty(&self) -> bool {
        self.n_cells.is_empty()
    }

    fn floats(&self) -> FloatColumns<'_> {
        [
            ("mean", &self.mean),
            ("var", &self.var),
            ("norm_mean", &self.norm_mean),
            ("norm_var", &self.norm_var),
            ("norm_median", &self.norm_median),
        ]
    }

    /// `gene_stats.parquet`: the gene key column `key_name` (the pandas index
    /// when pandas reads the file), then `n_cells`, `sum` (`uint64`), `mean`,
    /// `var`, `norm_mean`, `norm_var`, `norm_median` (`float64`).
    pub fn to_parquet(&self, key_name: &str, keys: &[String]) -> Result<Vec<u8>> {
        if keys.len() != self.len() {
            return Err(Error::Input(format!(
                "{} gene keys for statistics of {} genes",
                keys.len(),
                self.len()
            )));
        }
        let names = ["n_cells", "sum"]
            .into_iter()
            .chain(self.floats().map(|(n, _)| n));
        let mut columns: Vec<(&str, ArrayRef)> = vec![
            (key_name, Arc::new(StringArray::from_iter_values(keys))),
            ("n_cells", Arc::new(UInt64Array::from(self.n_cells.clone()))),
            ("sum", Arc::new(UInt64Array::from(self.sum.clone()))),
        ];
        for (name, values) in self.floats() {
            columns.push((name, Arc::new(Float64Array::from(values.to_vec()))));
        }
        let pandas = json!({
            "index_columns": [key_name],
            "column_indexes": [],
            "columns": std::iter::once(pandas_column(key_name, "unicode", "object"))
                .chain(names.map(|n| {
                    let t = if n == "n_cells" || n == "sum" { "uint64" } else { "float64" };
                    pandas_column(n, t, t)
                }))
                .collect::<Vec<_>>(),
            "creator": {"library": "deltacells", "version": crate::build_info::VERSION},
        })
        .to_string();
        let fields: Vec<Field> = columns
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), false))
            .collect();
        let schema = Arc::new(Schema::new_with_metadata(
            fields,
            HashMap::from([("pandas".to_string(), pandas.clone())]),
        ));
        let err = |e: String| Error::Input(format!("writing gene_stats.parquet: {e}"));
        let level = ZstdLevel::try_new(3).map_err(|e| err(e.to_string()))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(level))
            .set_key_value_metadata(Some(vec![KeyValue::new("pandas".into(), pandas)]))
            .build();
        let arrays = columns.into_iter().map(|(_, a)| a).collect();
        let batch = RecordBatch::try_new(schema.clone(), arrays).map_err(|e| err(e.to_string()))?;
        let mut writer = ArrowWriter::try_new(Vec::new(), schema, Some(props))
            .map_err(|e| err(e.to_string()))?;
        writer.write(&batch).map_err(|e| err(e.to_string()))?;
        writer.into_inner().map_err(|e| err(e.to_string()))
    }
}

/// A column's entry in the pandas metadata of a Parquet file.
fn pandas_column(name: &str, pandas_type: &str, numpy_type: &str) -> serde_json::Value {
    json!({"name": name, "field_name": name, "pandas_type": pandas_type,
           "numpy_type": numpy_type, "metadata": null})
}

/// The name of the gene key column of statistics keyed by var names.
pub const VAR_NAMES_KEY: &str = "gene";

/// The gene key column of a dataset's statistics, in column order: its name
/// and values. With `key`, that `var.parquet` column; else the var names
/// (`var_names.txt`, or "0", "1", ... when the dataset has none) in a column
/// named [`VAR_NAMES_KEY`].
pub fn gene_keys(ds: &Dataset, key: Option<&str>) -> Result<(String, Vec<String>)> {
    match key {
        Some(k) => Ok((k.to_string(), dataset_keys(ds, Some(k), "dataset")?)),
        None => Ok((
            VAR_NAMES_KEY.to_string(),
            match ds.var_names() {
                Some(names) => names.to_vec(),
                None => (0..ds.n_genes()).map(|g| g.to_string()).collect(),
            },
        )),
    }
}
