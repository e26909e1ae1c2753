//! The decode pool: rayon workers pinned to cores, each keeping its own
//! [`ChunkDecoder`] (zstd context and scratch) for its whole life.
//!
//! Pinning keeps a worker's scratch in the cache of the core that uses it; it is
//! on by default and can be switched off for shared hosts where other work
//! should be free to migrate.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use crate::engine::ChunkDecoder;
use crate::error::{Error, Result};
use crate::kernels::rows::RowKernels;
use crate::kernels::{Backend, KernelTable};
use crate::threads::{join_within, Owner, JOIN_WAIT};

/// The most worker threads an engine starts. Far past any machine's cores
/// (a pool larger than its cores only takes turns on them), it turns a
/// mistyped count into an error where starting a million threads would
/// stall the process.
pub const MAX_THREADS: usize = 4096;

/// How to build an [`Engine`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EngineConfig {
    /// Worker threads (default: the available parallelism; 1 to
    /// [`MAX_THREADS`]). A read called from a worker of another rayon pool
    /// decodes on that pool's threads instead (see `Engine::install`).
    pub threads: usize,
    /// Pin worker `i` to core `i mod cores` (default: on).
    pub pin: bool,
    /// Kernel backend (default: [`Backend::active`]).
    pub backend: Option<Backend>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            pin: true,
            backend: None,
        }
    }
}

/// A pool of pinned decode workers.
pub struct Engine {
    /// `None` only in the drop, which ends the workers before it joins
    /// them.
    pool: Option<rayon::ThreadPool>,
    /// The workers (as many as the config asked for), joined by the drop
    /// (see [`crate::threads`]).
    workers: Vec<JoinHandle<()>>,
    /// The process the workers run in.
    owner: Owner,
    backend: Backend,
    /// The backend's row kernels (gene mappings that reorder rows).
    rows: &'static RowKernels,
    pinned: bool,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("threads", &self.threads())
            .field("pinned", &self.pinned)
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

impl Drop for Engine {
    /// Ends the workers (rayon's pool only tells them to stop) and joins
    /// them: a dropped dataset leaves no thread behind.
    ///
    /// In a process forked since, where the workers are not, the pool and
    /// their handles are leaked instead (see `crate::threads`).
    fn drop(&mut self) {
        if self.owner.forked() {
            std::mem::forget(self.pool.take());
            std::mem::forget(std::mem::take(&mut self.workers));
            return;
        }
        drop(self.pool.take());
        join_within(&mut self.workers, JOIN_WAIT);
    }
}

/// The workers' handles, as the pool's spawn handler leaves them.
fn lock(handles: &Mutex<Vec<JoinHandle<()>>>) -> MutexGuard<'_, Vec<JoinHandle<()>>> {
    handles.lock().unwrap_or_else(PoisonError::into_inner)
}

thread_local! {
    /// This worker's decoder, created on first use and kept for the thread's life.
    static DECODER: RefCell<Option<ChunkDecoder>> = const { RefCell::new(None) };
}

impl Engine {
    /// Builds the pool. Fails if the backend is not available on this CPU.
    pub fn new(config: EngineConfig) -> Result<Engine> {
        let backend = match config.backend {
            Some(b) => b.require()?,
            None => Backend::active()?,
        };
        let threads = config.threads;
        if !(1..=MAX_THREADS).contains(&threads) {
            return Err(Error::Config(format!(
                "an engine starts at least 1 and at most {MAX_THREADS} decode threads, not {threads}"
            )));
        }
        // Before the pool: a failure past it would leave its workers unjoined.
        let rows = RowKernels::for_backend(backend)?;
        let cores = if config.pin {
            core_affinity::get_core_ids().unwrap_or_default()
        } else {
            Vec::new()
        };
        let pinned = !cores.is_empty();
        // The workers are started here, not by rayon, to keep their handles:
        // the drop joins them.
        let spawned = Arc::new(Mutex::new(Vec::with_capacity(threads)));
        let handles = Arc::clone(&spawned);
        let built = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("deltacells-{i}"))
            .start_handler(move |i| {
                if let Some(core) = cores.get(i % cores.len().max(1)) {
                    core_affinity::set_for_current(*core);
                }
            })
            .spawn_handler(move |worker| {
                let mut builder = std::thread::Builder::new();
                if let Some(name) = worker.name() {
                    builder = builder.name(name.to_owned());
                }
                if let Some(size) = worker.stack_size() {
                    builder = builder.stack_size(size);
                }
                let handle = builder.spawn(|| worker.run())?;
                lock(&handles).push(handle);
                Ok(())
            })
            .build();
        let mut workers = std::mem::take(&mut *lock(&spawned));
        let pool = match built {
            Ok(pool) => pool,
            Err(e) => {
                // Rayon ends the workers it started before one failed.
                join_within(&mut workers, JOIN_WAIT);
                return Err(Error::Config(format!(
                    "cannot start {threads} decode threads: {e}"
                )));
            }
        };
        Ok(Engine {
            pool: Some(pool),
            workers,
            owner: Owner::here(),
            rows,
            backend,
            pinned,
        })
    }

    /// The kernel backend the workers use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The row kernels of the workers' backend.
    pub(crate) fn row_kernels(&self) -> &'static RowKernels {
        self.rows
    }

    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.workers.len()
    }

    /// Whether workers are pinned to cores.
    pub fn pinned(&self) -> bool {
        self.pinned
    }

    /// Runs `f` inside the pool (so rayon parallel iterators in it use these
    /// workers), or right here when this thread is already a worker of a
    /// rayon pool (this one's, or another's: a build's write tasks, an
    /// embedder's parallel iterator), whose workers then do the work. A
    /// worker of another pool waiting for this one would run more of its own
    /// pool's jobs meanwhile, each on top of the last on its stack: a build of
    /// 1,000 write tasks reading a dataset input overflowed it.
    pub(crate) fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        if rayon::current_thread_index().is_some() {
            f()
        } else {
            self.pool
                .as_ref()
                .expect("the pool lives until the drop")
                .install(f)
        }
    }

    /// Runs `f` with the calling thread's decoder (created on first use).
    pub(crate) fn with_decoder<R>(
        &self,
        f: impl FnOnce(&mut ChunkDecoder) -> Result<R>,
    ) -> Result<R> {
        DECODER.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.as_ref().is_none_or(|d| d.backend() != self.backend) {
                *slot = Some(ChunkDecoder::for_backend(self.backend)?);
            }
            f(slot.as_mut().expect("decoder just created"))
        })
    }
}

crate::setters!(EngineConfig {
    /// Sets [`EngineConfig::threads`].
    with_threads: threads: usize,
    /// Sets [`EngineConfig::pin`].
    with_pin: pin: bool,
    /// Sets [`EngineConfig::backend`].
    with_backend: backend: Option<Backend>,
});

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// What a worker holds until its thread ends.
        static HELD: RefCell<Option<Arc<()>>> = const { RefCell::new(None) };
    }

    #[test]
    fn dropping_an_engine_ends_and_joins_its_workers() {
        let engine = Engine::new(EngineConfig::default().with_pin(false).with_threads(3)).unwrap();
        let token = Arc::new(());
        let pool = engine.pool.as_ref().unwrap();
        pool.broadcast(|_| HELD.with(|h| *h.borrow_mut() = Some(Arc::clone(&token))));
        assert_eq!(Arc::strong_count(&token), 4, "each worker holds one");
        drop(engine);
        // Joined, every worker's thread has ended, its thread-locals dropped.
        assert_eq!(Arc::strong_count(&token), 1);
    }

    #[test]
    fn a_thread_count_outside_the_bounds_is_refused_before_any_starts() {
        let config = EngineConfig::default().with_pin(false);
        for threads in [0, MAX_THREADS + 1] {
            let err = Engine::new(config.clone().with_threads(threads)).expect_err("refused");
            assert!(matches!(err, Error::Config(_)), "{err}");
        }
        assert_eq!(Engine::new(config.with_threads(3)).unwrap().threads(), 3);
    }
}
