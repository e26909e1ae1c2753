//! `_deltacells.BatchIter`: one rank's (or one loader worker's) training
//! batches, decoded ahead by the engine while Python works;
//! `_deltacells.RankShare`, how a rank's batches split among loader workers;
//! and `_deltacells.delivered_after`, what an epoch has delivered once a job
//! has taken some batches (elastic resume).

use std::sync::Mutex;

use std::ops::Range;

use deltacells::dataset::{
    Batch, BatchConfig, BatchIter, BatchRows, JobShape, Pick, RankShare, Recycler, Remaining,
    Shuffle, Weights,
};
use deltacells::engine::Transform;
use deltacells::kernels::DecodedCount;
use numpy::{Element, IntoPyArray, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::arrays;
use crate::columns;
use crate::errors::{input_error, OrRaise};
use crate::matrix::{Dtype, Handle, Matrix};
use crate::pool;
use crate::tokenize::PyTokenizer;
use crate::transform::vocabulary;

/// A batch iterator of either count type.
enum Counts {
    F32(BatchIter<f32>),
    I32(BatchIter<i32>),
}

/// A batch of either count type.
enum Counted {
    F32(Batch<f32>),
    I32(Batch<i32>),
}

impl Counts {
    fn next(&mut self) -> Option<deltacells::Result<Counted>> {
        match self {
            Counts::F32(it) => it.next().map(|b| b.map(Counted::F32)),
            Counts::I32(it) => it.next().map(|b| b.map(Counted::I32)),
        }
    }
}

/// Iterator of batches as `(index, cells, rows, labels)`: `rows` is
/// `("csr", indptr, indices, data, n_cols)` or `("dense", matrix)`, `labels` a
/// list of `(name, column)` (see `columns`).
#[pyclass(module = "deltacells._deltacells", name = "BatchIter")]
pub struct PyBatchIter {
    // A Mutex makes the iterator (which owns a channel receiver) shareable;
    // Python calls `__next__` from one thread at a time anyway.
    inner: Mutex<Counts>,
    len: usize,
    /// Where a batch's buffers go when Python lets go of its arrays: back to
    /// the iterator, which builds later batches in them.
    recycler: Recycler,
}

impl From<BatchIter<f32>> for PyBatchIter {
    fn from(iter: BatchIter<f32>) -> PyBatchIter {
        PyBatchIter::new(iter.len(), iter.recycler(), Counts::F32(iter))
    }
}

impl From<BatchIter<i32>> for PyBatchIter {
    fn from(iter: BatchIter<i32>) -> PyBatchIter {
        PyBatchIter::new(iter.len(), iter.recycler(), Counts::I32(iter))
    }
}

impl PyBatchIter {
    fn new(len: usize, recycler: Recycler, counts: Counts) -> PyBatchIter {
        PyBatchIter {
            len,
            recycler,
            inner: Mutex::new(counts),
        }
    }

    /// The recycler the batches' buffers go back to.
    pub fn recycler(&self) -> Recycler {
        self.recycler.clone()
    }
}

fn to_python<'py, V>(
    py: Python<'py>,
    batch: Batch<V>,
    recycler: &Recycler,
) -> PyResult<Bound<'py, PyTuple>>
where
    V: DecodedCount + bytemuck::Pod + Element + Send + Sync + 'static,
{
    let n = batch.cells.len();
    let rows = match batch.rows {
        BatchRows::Csr(csr) => {
            let (r1, r2, r3) = (recycler.clone(), recycler.clone(), recycler.clone());
            let indptr = pool::lend(py, csr.indptr, move |b| r1.give_indptr(b))?;
            let indices = pool::lend(py, csr.indices, move |b| r2.give_indices(b))?;
            let data = pool::lend(py, csr.values, move |b| r3.give_values(b))?;
            ("csr", indptr, indices, data, csr.n_cols)
                .into_pyobject(py)?
                .into_any()
        }
        BatchRows::Dense(dense) => {
            let (n_cols, data) = dense.into_parts();
            let matrix = data.into_pyarray(py).reshape([n, n_cols])?;
            ("dense", matrix).into_pyobject(py)?.into_any()
        }
        BatchRows::Tokens(tokens) => {
            let dict = crate::tokenize::token_rows_dict(py, tokens, n)?;
            ("tokens", dict).into_pyobject(py)?.into_any()
        }
    };
    let labels = batch
        .labels
        .columns()
        .iter()
        .map(|l| {
            Ok((
                l.name.clone(),
                columns::column(py, Some(l.kind), l.categories.as_ref(), &l.values)?,
            ))
        })
        .collect::<PyResult<Vec<_>>>()?;
    (batch.index, arrays::cells(py, batch.cells), rows, labels).into_pyobject(py)
}

#[pymethods]
impl PyBatchIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let next = py.detach(|| {
            self.inner
                .lock()
                .map(|mut it| it.next())
                .map_err(|_| "batch iterator poisoned")
        });
        match next.map_err(PyRuntimeError::new_err)? {
            None => Ok(None),
            Some(batch) => match batch.or_raise(py)? {
                Counted::F32(b) => to_python(py, b, &self.recycler).map(Some),
                Counted::I32(b) => to_python(py, b, &self.recycler).map(Some),
            },
        }
    }

    fn __len__(&self) -> usize {
        self.len
    }
}

/// One rank's batches of an epoch (the core's `RankShare`): how many there
/// are, and which of them each data-loader worker yields.
#[pyclass(module = "deltacells._deltacells", name = "RankShare", frozen)]
pub struct PyRankShare(RankShare);

#[pymethods]
impl PyRankShare {
    /// The batches of rank `rank` of `world_size` over an epoch of `n_obs`
    /// cells, less the epoch positions `delivered` (`(start, stop)` pairs,
    /// sorted and disjoint: what remains is shared, see `Remaining`).
    #[new]
    #[pyo3(signature = (n_obs, batch_size, rank, world_size, drop_last, delivered=Vec::new()))]
    fn new(
        py: Python<'_>,
        n_obs: u64,
        batch_size: usize,
        rank: usize,
        world_size: usize,
        drop_last: bool,
        delivered: Vec<(u64, u64)>,
    ) -> PyResult<PyRankShare> {
        if batch_size == 0 {
            return Err(input_error("batch_size must be at least 1"));
        }
        if rank >= world_size {
            return Err(input_error(format!(
                "rank {rank} is outside 0..{world_size}"
            )));
        }
        let remaining = Remaining::new(n_obs, &ranges(&delivered)).or_raise(py)?;
        Ok(PyRankShare(RankShare::new(
            remaining.len(),
            batch_size,
            rank,
            world_size,
            drop_last,
        )))
    }

    fn __len__(&self) -> usize {
        self.0.len()
    }

    /// `(first, stop)`: the batches worker `worker` of `workers` still yields
    /// once a loader taking one batch from each worker in turn has delivered
    /// `delivered` batches (see `RankShare::worker_resume`).
    fn worker_resume(&self, worker: usize, workers: usize, delivered: usize) -> (usize, usize) {
        let span = self.0.worker_resume(worker, workers, delivered);
        (span.start, span.end)
    }
}

/// `(start, stop)` pairs as ranges.
fn ranges(pairs: &[(u64, u64)]) -> Vec<Range<u64>> {
    pairs.iter().map(|&(start, stop)| start..stop).collect()
}

/// The epoch positions an epoch of `n_obs` cells has delivered, as sorted
/// `(start, stop)` pairs, once a job of `world_size` ranks with `workers`
/// loader workers each, serving what `delivered` left (see `RankShare`), has
/// delivered `consumed` batches on every rank (the core's `JobShape::after`).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn delivered_after(
    py: Python<'_>,
    n_obs: u64,
    delivered: Vec<(u64, u64)>,
    world_size: usize,
    workers: usize,
    batch_size: usize,
    drop_last: bool,
    consumed: usize,
) -> PyResult<Vec<(u64, u64)>> {
    let remaining = Remaining::new(n_obs, &ranges(&delivered)).or_raise(py)?;
    let shape = JobShape::new(world_size, workers, batch_size, drop_last);
    let after = shape.after(&remaining, consumed).or_raise(py)?;
    Ok(after
        .delivered()
        .into_iter()
        .map(|r| (r.start, r.end))
        .collect())
}

/// The settings of `batches`, as the package's `batches` passes them (every
/// one by name).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct BatchArgs<'py> {
    batch_size: usize,
    seed: u64,
    epoch: u64,
    shuffle: String,
    window_tiles: usize,
    rank: usize,
    world_size: usize,
    drop_last: bool,
    prefetch: usize,
    cache_bytes: usize,
    genes: Option<Vec<i64>>,
    /// "zero": a gene of `genes` that is -1 (a name the source lacks) reads
    /// as a column of zeros; "error": `genes` are all genes of the source.
    missing: String,
    dense: bool,
    obs_columns: Vec<String>,
    obs_cache_dir: Option<std::path::PathBuf>,
    dtype: String,
    delivered: Vec<(u64, u64)>,
    cells: Option<PyReadonlyArray1<'py, u64>>,
    weights: Option<PyReadonlyArray1<'py, f64>>,
    balance: Vec<String>,
    samples_per_epoch: Option<u64>,
    normalize: Option<f64>,
    log1p: bool,
    tokenizer: Option<Bound<'py, PyTokenizer>>,
    next_epoch_ahead: bool,
}

/// How many settings [`BatchArgs`] has: a call passing any other is refused,
/// so a misspelt one is never silently ignored.
const BATCH_ARGS: usize = 25;

impl<'py> BatchArgs<'py> {
    /// The settings in `options`, every one present and no other.
    pub fn from_dict(options: Option<&Bound<'py, PyDict>>) -> PyResult<BatchArgs<'py>> {
        let options = options.ok_or_else(|| input_error("batches needs its settings"))?;
        if options.len() != BATCH_ARGS {
            let names: Vec<String> = options.keys().iter().map(|k| k.to_string()).collect();
            return Err(input_error(format!(
                "batches takes {BATCH_ARGS} settings, not {names:?}"
            )));
        }
        options.extract()
    }
}

impl<M: Matrix> Handle<M> {
    /// One rank's batches of one epoch with `args`' settings: all of them
    /// from position `first`, or the `count` batches from there (how a
    /// data-loader worker takes its span). `shuffle` is what [`Shuffle`]
    /// parses (`"none"`, `"block"`, `"random"`); a block shuffle's windows
    /// hold `window_tiles` tiles.
    pub fn batches(
        &self,
        py: Python<'_>,
        args: BatchArgs<'_>,
        first: usize,
        count: Option<usize>,
    ) -> PyResult<PyBatchIter> {
        if args.weights.is_some() && !args.balance.is_empty() {
            return Err(input_error("give weights or balance, not both"));
        }
        let weights = match (&args.weights, args.balance.is_empty()) {
            (Some(w), _) => Weights::PerCell(w.as_slice()?.into()),
            (None, false) => Weights::Balance(args.balance.clone()),
            (None, true) => Weights::None,
        };
        let cells = match &args.cells {
            Some(c) => Some(c.as_slice()?.into()),
            None => None,
        };
        let mut transform = Transform::NONE;
        if let Some(target) = args.normalize {
            transform = transform.normalize(target);
        }
        if args.log1p {
            transform = transform.log1p();
        }
        let tokenizer = args.tokenizer.as_ref().map(|t| t.get().tokenizer().clone());
        let dtype = Dtype::parse(&args.dtype)?;
        let shuffle = match args.shuffle.parse::<Shuffle>() {
            Ok(Shuffle::Block { .. }) => Shuffle::Block {
                window_tiles: args.window_tiles,
            },
            Ok(other) => other,
            Err(e) => return Err(input_error(e.to_string())),
        };
        let genes = match (args.genes.as_deref(), args.missing.as_str()) {
            (Some(g), "zero") => Some(vocabulary(self.get(py)?.n_genes(), g).or_raise(py)?),
            (g, _) => self.selection(py, g)?,
        };
        let m = self.get(py)?.clone();
        let config = BatchConfig::default()
            .with_batch_size(args.batch_size)
            .with_seed(args.seed)
            .with_epoch(args.epoch)
            .with_shuffle(shuffle)
            .with_rank(args.rank, args.world_size)
            .with_drop_last(args.drop_last)
            .with_prefetch(args.prefetch)
            .with_cache_bytes(args.cache_bytes)
            .with_genes(genes)
            .with_dense(args.dense)
            .with_obs_columns(args.obs_columns)
            .with_obs_cache_dir(args.obs_cache_dir)
            .with_delivered(ranges(&args.delivered))
            .with_cells(cells)
            .with_weights(weights)
            .with_samples_per_epoch(args.samples_per_epoch)
            .with_transform(transform)
            .with_tokenizer(tokenizer)
            .with_recycler(self.last_batch_buffers().clone())
            .with_next_epoch_ahead(args.next_epoch_ahead)
            .with_pick(match count {
                Some(count) => Pick::Range(first..first.saturating_add(count)),
                None => Pick::Strided { first, step: 1 },
            });
        let iter = py
            .detach(move || match dtype {
                Dtype::F32 => m.batches_of::<f32>(config).map(PyBatchIter::from),
                Dtype::I32 => m.batches_of::<i32>(config).map(PyBatchIter::from),
            })
            .or_raise(py)?;
        *self.last_batch_buffers() = Some(iter.recycler());
        Ok(iter)
    }
}
