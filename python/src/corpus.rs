//! `_deltacells.Corpus`: several datasets read as one matrix over one gene
//! vocabulary (the library's `Corpus`), with the reads and batches of a
//! dataset (a [`Handle`], see `matrix`).

use deltacells::corpus::{CorpusSpec, GeneSpace, Member};
use deltacells::{Corpus, Error};
use pyo3::prelude::*;

use crate::dataset::open_options;
use crate::errors::OrRaise;
use crate::matrix::{matrix_methods, Handle};

/// An open corpus.
#[pyclass(module = "deltacells._deltacells", name = "Corpus", frozen)]
pub struct PyCorpus(pub Handle<Corpus>);

/// Which genes a corpus has, as Python names them: `"union"`,
/// `"intersection"`, or a list of keys.
#[derive(FromPyObject)]
enum Genes {
    Named(String),
    Listed(Vec<String>),
}

impl Genes {
    fn space(self) -> deltacells::Result<GeneSpace> {
        match self {
            Genes::Named(name) => match name.as_str() {
                "union" => Ok(GeneSpace::Union),
                "intersection" => Ok(GeneSpace::Intersection),
                other => Err(Error::Input(format!(
                    "genes must be \"union\", \"intersection\" or a list of gene keys, not {other:?}"
                ))),
            },
            Genes::Listed(keys) => GeneSpace::listed(keys),
        }
    }
}

impl PyCorpus {
    /// `f` of each member, in cell order.
    fn each_member<T>(&self, py: Python<'_>, f: impl Fn(&Member) -> T) -> PyResult<Vec<T>> {
        Ok(self.0.get(py)?.members().iter().map(f).collect())
    }
}

/// A corpus's genes as `genes=` takes them: a name or the list of keys.
type GenesInfo = (Option<String>, Option<Vec<String>>);

/// `(locations, genes, gene_key, source_column)` of a corpus.
type SpecInfo = (Vec<String>, GenesInfo, Option<String>, String);

/// `(name, location, n_obs, n_vars)` of a member.
type MemberInfo = (String, String, u64, u32);

/// `(metadata JSON, [(obs column, kind)])` of a member.
type MemberObs = (String, Vec<(String, String)>);

matrix_methods!(PyCorpus {
    /// Opens the datasets at `locations` as one corpus: genes matched by
    /// `gene_key` (a `var.parquet` column; `None`: the var names) into the
    /// vocabulary `genes` names, obs unified with the source column
    /// `source_column`. `threads`, `pin` and `cache_bytes` as for a dataset
    /// (the cache shared by the members).
    #[new]
    #[pyo3(signature = (locations, genes=None, gene_key=None, source_column=None,
                        threads=None, pin=false, cache_bytes=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        locations: Vec<String>,
        genes: Option<Genes>,
        gene_key: Option<String>,
        source_column: Option<String>,
        threads: Option<usize>,
        pin: bool,
        cache_bytes: Option<usize>,
    ) -> PyResult<PyCorpus> {
        let mut spec = CorpusSpec::new(locations).with_gene_key(gene_key);
        if let Some(genes) = genes {
            spec = spec.with_genes(genes.space().or_raise(py)?);
        }
        if let Some(column) = source_column {
            spec = spec.with_source_column(column);
        }
        let options = open_options(threads, pin, cache_bytes);
        let corpus = py
            .detach(|| Corpus::open_spec_with(spec, options))
            .or_raise(py)?;
        Ok(PyCorpus(Handle::new(corpus)))
    }

    /// Opens the corpus the corpus file `path` describes.
    #[staticmethod]
    #[pyo3(signature = (path, threads=None, pin=false, cache_bytes=None))]
    fn open(
        py: Python<'_>,
        path: std::path::PathBuf,
        threads: Option<usize>,
        pin: bool,
        cache_bytes: Option<usize>,
    ) -> PyResult<PyCorpus> {
        let options = open_options(threads, pin, cache_bytes);
        let corpus = py
            .detach(|| Corpus::open_with(&path, options))
            .or_raise(py)?;
        Ok(PyCorpus(Handle::new(corpus)))
    }

    /// Writes the corpus file `path` (see `docs/corpus-format.md`).
    fn save(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        let corpus = self.0.get(py)?.clone();
        py.detach(move || corpus.save(&path)).or_raise(py)
    }

    /// `(locations, genes, gene_key, source_column)`: what the corpus was
    /// opened from, the members' locations resolved; `genes` as
    /// `(name, None)` or `(None, keys)`.
    #[getter]
    fn spec(&self, py: Python<'_>) -> PyResult<SpecInfo> {
        let spec = self.0.get(py)?.spec();
        let genes = match &spec.genes {
            GeneSpace::Union => (Some("union".into()), None),
            GeneSpace::Intersection => (Some("intersection".into()), None),
            GeneSpace::Listed(keys) => (None, Some(keys.clone())),
        };
        Ok((
            spec.locations.clone(),
            genes,
            spec.gene_key.clone(),
            spec.source_column.clone(),
        ))
    }

    /// `(name, location, n_obs, n_vars)` of each member, in cell order.
    #[getter]
    fn members(&self, py: Python<'_>) -> PyResult<Vec<MemberInfo>> {
        self.each_member(py, |m| {
            let ds = m.dataset();
            (
                m.name().to_string(),
                m.location().to_string(),
                ds.n_cells(),
                ds.n_genes(),
            )
        })
    }

    /// `(metadata, obs columns)` of each member, in cell order: its manifest
    /// metadata as JSON text and `(name, kind)` of each of its own obs
    /// columns, for what only a member knows (the column of its cell ids).
    #[getter]
    fn member_obs(&self, py: Python<'_>) -> PyResult<Vec<MemberObs>> {
        self.each_member(py, |m| {
            let ds = m.dataset();
            let columns = ds.obs().map_or_else(Vec::new, |obs| {
                obs.schema()
                    .columns
                    .iter()
                    .map(|c| (c.name.clone(), c.kind.name().to_string()))
                    .collect()
            });
            (
                serde_json::Value::Object(ds.manifest().metadata.clone()).to_string(),
                columns,
            )
        })
    }

    /// The vocabulary's gene keys, in column order.
    #[getter]
    fn var_names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self.0.get(py)?.var_names().to_vec())
    }

    /// The manifest metadata every member has alike (each entry that every
    /// member's manifest holds with the same value), as JSON text.
    #[getter]
    fn metadata(&self, py: Python<'_>) -> PyResult<String> {
        let corpus = self.0.get(py)?;
        let mut members = corpus.members().iter().map(|m| &m.dataset().manifest().metadata);
        let mut shared = members.next().cloned().unwrap_or_default();
        for metadata in members {
            shared.retain(|key, value| metadata.get(key) == Some(value));
        }
        Ok(serde_json::Value::Object(shared).to_string())
    }

    /// Checks every member as `Dataset.verify` does; the sums of
    /// `(tiles, cells, nonzeros, bytes)`. Errors name the member.
    fn verify(&self, py: Python<'_>) -> PyResult<(usize, u64, u64, u64)> {
        let corpus = self.0.get(py)?.clone();
        py.detach(move || {
            let mut sums = (0, 0, 0, 0);
            for m in corpus.members() {
                let r = m
                    .dataset()
                    .verify()
                    .map_err(Error::in_member(m.location()))?;
                sums = (
                    sums.0 + r.tiles,
                    sums.1 + r.cells,
                    sums.2 + r.nonzeros,
                    sums.3 + r.bytes,
                );
            }
            Ok(sums)
        })
        .or_raise(py)
    }
});
