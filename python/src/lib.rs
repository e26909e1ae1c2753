//! The `deltacells._deltacells` extension module: the Rust engine as Python
//! sees it. The friendly API (`deltacells.open`, `Dataset.read`,
//! `deltacells.write`, `deltacells.torch`) is Python code in the package that
//! calls these classes; they keep to plain types and numpy arrays.
//!
//! Decoded buffers cross without copies: each `Vec` is handed to numpy, which
//! owns it from then on (see the `arrays` module); range and tile reads fill
//! recycled buffers that numpy borrows and gives back (see the `pool`
//! module). Every call that fetches, decodes or encodes releases the GIL, so
//! other Python threads run meanwhile.

mod arrays;
mod batches;
mod build;
mod columns;
mod corpus;
mod dataset;
mod errors;
mod matrix;
mod pool;
mod stats;
mod tokenize;
mod transform;
mod writer;

use pyo3::prelude::*;

#[pymodule]
fn _deltacells(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<dataset::PyDataset>()?;
    m.add_class::<corpus::PyCorpus>()?;
    m.add_class::<batches::PyBatchIter>()?;
    m.add_class::<batches::PyRankShare>()?;
    m.add_class::<tokenize::PyTokenizer>()?;
    m.add_class::<writer::PyWriter>()?;
    m.add_class::<build::PyBuildDriver>()?;
    m.add_function(wrap_pyfunction!(batches::delivered_after, m)?)?;
    m.add_function(wrap_pyfunction!(build::build_stats, m)?)?;
    m.add_function(wrap_pyfunction!(build::build_task, m)?)?;
    m.add_function(wrap_pyfunction!(stats::gene_stats, m)?)?;
    m.add_function(wrap_pyfunction!(stats::gene_stats_part, m)?)?;
    m.add_function(wrap_pyfunction!(stats::corpus_gene_stats, m)?)?;
    m.add_function(wrap_pyfunction!(transform::read_transformed, m)?)?;
    m.add("__version__", deltacells::build_info::VERSION)?;
    m.add("DEFAULT_TILE_SIZE", deltacells::dataset::DEFAULT_TILE_SIZE)?;
    m.add(
        "DEFAULT_CHUNKS",
        deltacells::format::tile_writer::DEFAULT_CHUNKS,
    )?;
    m.add(
        "DEFAULT_LEVEL",
        deltacells::format::tile_writer::DEFAULT_LEVEL,
    )?;
    m.add(
        "DEFAULT_TILES_PER_TASK",
        deltacells::dataset::ingest::DEFAULT_TILES_PER_TASK,
    )?;
    m.add(
        "kernel_backend",
        deltacells::Backend::active()
            .map(|b| b.to_string())
            .unwrap_or_default(),
    )?;
    Ok(())
}
