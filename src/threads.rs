//! Ending the threads a handle started (the decode pool's workers, the I/O
//! threads) when the handle is dropped, so that none outlives what it
//! served; waiting for them boundedly, so that a drop is never held up by
//! a thread stuck in a request.
//!
//! A process forked from the one that started them (a PyTorch `DataLoader`
//! worker, a `multiprocessing` child) inherits the handle but none of its
//! threads. Dropping it there must not touch them: joining a thread that is
//! not there waits forever, and detaching one hands glibc a copy of a
//! thread descriptor whose memory the parent may have reused (a worker
//! whose garbage collector freed a dataset opened before the fork crashed
//! in `pthread_detach`). So every owner of threads notes its [`Owner`], and
//! its drop in any other process leaks the threads' handles, and whatever
//! talks to them (the pool, the queues), instead of ending them.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a drop waits for its threads to end: told to stop, idle ones
/// end within microseconds, and a running fetch from a healthy store well
/// within it; one stuck in a request (a server gone mid-GET) does not hold
/// up the drop for the request's whole timeout (a minute by default).
pub(crate) const JOIN_WAIT: Duration = Duration::from_secs(2);

/// The process that started a handle's threads (see the module docs).
#[derive(Debug)]
pub(crate) struct Owner(u32);

impl Owner {
    /// This process.
    pub(crate) fn here() -> Owner {
        Owner(std::process::id())
    }

    /// Whether this process is another (forked since), where the threads do
    /// not run.
    pub(crate) fn forked(&self) -> bool {
        std::process::id() != self.0
    }
}

/// Joins the threads of `handles` once they have ended, waiting at most
/// `wait` for them; one still running then is left to end by itself. The
/// calling thread, if it is one of them (the last handle dropped by one of
/// its own threads), is not waited for.
pub(crate) fn join_within(handles: &mut Vec<JoinHandle<()>>, wait: Duration) {
    let current = std::thread::current().id();
    let others = |h: &JoinHandle<()>| h.thread().id() != current;
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline && handles.iter().any(|h| others(h) && !h.is_finished()) {
        std::thread::sleep(Duration::from_micros(200));
    }
    for handle in handles.drain(..) {
        if others(&handle) && handle.is_finished() {
            // The threads catch what their work panics with, so a join
            // has nothing to report.
            let _ = handle.join();
        }
    }
}
