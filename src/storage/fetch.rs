//! The bounded I/O stage: whole objects fetched on threads of their own,
//! ahead of the code that will decode them.
//!
//! Decode workers are pinned to cores and should never wait on a network;
//! a [`Fetcher`] fetches on [`FetchThreads`], `in_flight` threads (unpinned,
//! named `deltacells-fetch-N`) that do nothing but wait on the store, so up
//! to that many requests are outstanding at once; the members of a corpus
//! share one set. A caller that knows what comes next
//! (a scan, an epoch of batches) calls [`Fetcher::prefetch`]; a later
//! [`Fetcher::get_many`] takes those results (waiting if they are still in
//! flight) and fetches the rest concurrently. At most `4 * in_flight` fetched
//! objects wait unclaimed, which bounds the memory prefetching can hold.
//!
//! The threads are plain threads blocked on a queue, not a work-stealing
//! pool: an idle rayon worker spins through `sched_yield` before it sleeps,
//! and with sixteen of them woken a tile at a time, the fetch threads took
//! 13.8% of the CPU samples of `deltacells bench` on two cores, mostly that
//! spinning: time the pinned decode workers lost. Blocked, they took 7.5%.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::{AlignedBytes, Store};
use crate::error::{Error, Result};
use crate::threads::{join_within, Owner, JOIN_WAIT};

type Fetched = Result<Option<AlignedBytes>>;

/// A fetch waiting for an I/O thread.
type Job = Box<dyn FnOnce() + Send>;

/// I/O threads one or more fetchers share: plain threads blocked on one
/// queue (the members of a corpus share one set, so that a corpus of many
/// files does not start threads for each). They end when the last fetcher
/// using them is dropped: the drop closes the queue, the fetches still
/// queued are dropped unstarted (nobody is left to take them), and the
/// threads are joined once the fetches they are running return, so none
/// outlives its dataset (unless a fetch outlasts the drop's wait of two
/// seconds, after which its thread ends by itself when the fetch returns).
#[derive(Debug)]
pub struct FetchThreads {
    /// Their queue; `None` once the drop has closed it.
    jobs: Option<Sender<Job>>,
    /// Set by the drop: a queued fetch is then dropped, not run.
    closing: Arc<AtomicBool>,
    /// The threads, joined by the drop.
    handles: Vec<JoinHandle<()>>,
    /// The process they run in.
    owner: Owner,
}

impl FetchThreads {
    /// `threads` I/O threads (at least one).
    pub fn new(threads: usize) -> Result<Arc<FetchThreads>> {
        let threads = threads.max(1);
        let (jobs, queue) = channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        // Built first, so that a thread that cannot start drops it, which
        // stops and joins those already started.
        let mut started = FetchThreads {
            jobs: Some(jobs),
            closing: Arc::new(AtomicBool::new(false)),
            handles: Vec::with_capacity(threads),
            owner: Owner::here(),
        };
        for i in 0..threads {
            let (queue, closing) = (queue.clone(), started.closing.clone());
            let handle = std::thread::Builder::new()
                .name(format!("deltacells-fetch-{i}"))
                .spawn(move || loop {
                    // One thread waits on the queue while the others wait
                    // for the lock; a job runs after the lock is released.
                    let job = queue.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    match job {
                        Ok(job) if !closing.load(Ordering::Acquire) => job(),
                        Ok(_) => {}
                        Err(_) => return,
                    }
                })
                .map_err(|e| Error::Config(format!("cannot start {threads} fetch threads: {e}")))?;
            started.handles.push(handle);
        }
        Ok(Arc::new(started))
    }

    /// How many threads there are.
    pub fn threads(&self) -> usize {
        self.handles.len()
    }

    /// Queues `job` for a thread.
    fn send(&self, job: Job) {
        if let Some(jobs) = &self.jobs {
            // The threads live as long as the queue's sender, which we hold.
            let _ = jobs.send(job);
        }
    }
}

impl Drop for FetchThreads {
    fn drop(&mut self) {
        if self.owner.forked() {
            // The threads are not in this process (see `crate::threads`).
            std::mem::forget(self.jobs.take());
            std::mem::forget(std::mem::take(&mut self.handles));
            return;
        }
        self.closing.store(true, Ordering::Release);
        drop(self.jobs.take());
        join_within(&mut self.handles, JOIN_WAIT);
    }
}

/// Fetches objects of one store on a bounded set of I/O threads.
pub struct Fetcher {
    store: Arc<dyn Store>,
    threads: Arc<FetchThreads>,
    in_flight: usize,
    pending: Mutex<HashMap<String, Receiver<Fetched>>>,
}

impl Fetcher {
    /// A fetcher keeping up to `in_flight` requests to `store` outstanding,
    /// on threads of its own.
    pub fn new(store: Arc<dyn Store>, in_flight: usize) -> Result<Fetcher> {
        Ok(Fetcher::sharing(
            store,
            in_flight,
            FetchThreads::new(in_flight)?,
        ))
    }

    /// A fetcher of `store` on `threads`, which other fetchers may use as
    /// well: `in_flight` bounds what it prefetches and its concurrent maps.
    pub fn sharing(store: Arc<dyn Store>, in_flight: usize, threads: Arc<FetchThreads>) -> Fetcher {
        Fetcher {
            store,
            threads,
            in_flight: in_flight.max(1),
            pending: Mutex::new(HashMap::new()),
        }
    }

    /// The threads it fetches on.
    pub fn threads(&self) -> &Arc<FetchThreads> {
        &self.threads
    }

    /// Requests kept outstanding at most.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The store fetched from.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    fn spawn(&self, key: &str) -> Receiver<Fetched> {
        let (tx, rx) = sync_channel(1);
        let (store, key) = (self.store.clone(), key.to_string());
        let job = Box::new(move || {
            // A store that panics must not abort the process (a panic in a
            // spawned job would): it becomes this fetch's error, message kept.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| store.get(&key)))
                .unwrap_or_else(|panic| {
                    Err(Error::panicked(
                        format!("fetching {key} from {}", store.describe()),
                        panic.as_ref(),
                    ))
                });
            // The receiver may be gone (a dropped reader): nothing to do then.
            let _ = tx.send(result);
        });
        self.threads.send(job);
        rx
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, Receiver<Fetched>>> {
        // The map is only ever inserted into or removed from whole.
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts fetching `key` in the background, unless it is already pending
    /// or enough fetched objects already wait to be claimed.
    pub fn prefetch(&self, key: &str) {
        let mut pending = self.pending();
        if pending.len() < 4 * self.in_flight && !pending.contains_key(key) {
            let rx = self.spawn(key);
            pending.insert(key.to_string(), rx);
        }
    }

    /// `f` of every item of `items`, in order, run on up to `in_flight`
    /// scoped threads at once: for fetches that are more than a whole-object
    /// GET (byte ranges of a few tiles of a remote store, where starting a
    /// thread costs nothing beside a request's latency).
    pub fn map_concurrent<I: Sync, T: Send>(
        &self,
        items: &[I],
        f: impl Fn(&I) -> T + Sync,
    ) -> Vec<T> {
        let next = AtomicUsize::new(0);
        let threads = self.in_flight.min(items.len());
        let mut done: Vec<(usize, T)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut out = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(item) = items.get(i) else {
                                return out;
                            };
                            out.push((i, f(item)));
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        done.sort_unstable_by_key(|&(i, _)| i);
        done.into_iter().map(|(_, t)| t).collect()
    }

    /// Whether `key` is being (or has been) fetched ahead and not yet claimed.
    pub fn is_pending(&self, key: &str) -> bool {
        self.pending().contains_key(key)
    }

    /// Every object of `keys` (`None` where it does not exist), in order:
    /// prefetched ones taken as they arrive, the others fetched concurrently.
    pub fn get_many(&self, keys: &[String]) -> Vec<Fetched> {
        let receivers: Vec<Receiver<Fetched>> = {
            let mut pending = self.pending();
            keys.iter()
                .map(|k| pending.remove(k.as_str()).unwrap_or_else(|| self.spawn(k)))
                .collect()
        };
        receivers
            .into_iter()
            .zip(keys)
            .map(|(rx, key)| {
                rx.recv().unwrap_or_else(|_| {
                    Err(Error::Config(format!(
                        "the fetch of {key} from {} stopped without a result",
                        self.store.describe()
                    )))
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemoryStore;
    use std::time::Instant;

    #[test]
    fn prefetched_and_direct_fetches_agree() {
        let store = Arc::new(MemoryStore::new());
        for i in 0..20 {
            store.insert(format!("k{i}"), format!("value {i}").as_bytes());
        }
        let fetcher = Fetcher::new(store, 3).unwrap();
        for i in 0..5 {
            fetcher.prefetch(&format!("k{i}"));
        }
        assert!(fetcher.is_pending("k0"));
        let keys: Vec<String> = (0..22).map(|i| format!("k{i}")).collect();
        let got = fetcher.get_many(&keys);
        for (i, g) in got.into_iter().enumerate() {
            let g = g.unwrap();
            if i < 20 {
                assert_eq!(g.unwrap().as_bytes(), format!("value {i}").as_bytes());
            } else {
                assert!(g.is_none());
            }
        }
        assert!(
            !fetcher.is_pending("k0"),
            "claimed results leave the pending set"
        );
        for i in 0..100 {
            fetcher.prefetch(&format!("k{}", i % 20));
        }
        assert!(
            fetcher.pending().len() <= 12,
            "unclaimed prefetches are bounded"
        );
    }

    #[test]
    fn fetchers_sharing_threads_fetch_each_from_its_own_store() {
        let threads = FetchThreads::new(2).unwrap();
        let fetchers: Vec<Fetcher> = (0..5)
            .map(|f| {
                let store = Arc::new(MemoryStore::new());
                for i in 0..10 {
                    store.insert(format!("k{i}"), format!("store {f} value {i}").as_bytes());
                }
                Fetcher::sharing(store, 3, threads.clone())
            })
            .collect();
        for fetcher in &fetchers {
            fetcher.prefetch("k3");
            assert!(Arc::ptr_eq(fetcher.threads(), &threads));
        }
        assert_eq!(threads.threads(), 2);
        let keys: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
        for (f, fetcher) in fetchers.iter().enumerate() {
            for (i, got) in fetcher.get_many(&keys).into_iter().enumerate() {
                let got = got.unwrap().unwrap();
                assert_eq!(got.as_bytes(), format!("store {f} value {i}").as_bytes());
            }
        }
    }

    #[test]
    fn dropping_the_threads_finishes_the_running_fetch_drops_the_queued_and_joins() {
        let threads = FetchThreads::new(1).unwrap();
        let (started, running) = std::sync::mpsc::channel();
        let finished = Arc::new(AtomicBool::new(false));
        let queued_ran = Arc::new(AtomicBool::new(false));
        let flag = finished.clone();
        threads.send(Box::new(move || {
            started.send(()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(100));
            flag.store(true, Ordering::SeqCst);
        }));
        running.recv().unwrap();
        let flag = queued_ran.clone();
        threads.send(Box::new(move || flag.store(true, Ordering::SeqCst)));
        drop(threads);
        // The drop returned after the running fetch did, so its thread was
        // joined; the queued one never ran; both closures (each holding the
        // other reference to its flag) are gone.
        assert!(finished.load(Ordering::SeqCst));
        assert!(!queued_ran.load(Ordering::SeqCst));
        assert_eq!(Arc::strong_count(&finished), 1);
        assert_eq!(Arc::strong_count(&queued_ran), 1);
    }

    #[test]
    fn a_fetch_that_hangs_does_not_hold_up_the_drop_past_the_wait() {
        let threads = FetchThreads::new(2).unwrap();
        let (started, running) = std::sync::mpsc::channel();
        let (release, hung) = std::sync::mpsc::channel::<()>();
        threads.send(Box::new(move || {
            started.send(()).unwrap();
            let _ = hung.recv();
        }));
        running.recv().unwrap();
        let t = Instant::now();
        drop(threads);
        let waited = t.elapsed();
        assert!(waited >= JOIN_WAIT, "{waited:?}");
        // Released, the hung fetch ends, and its thread with it.
        release.send(()).unwrap();
    }

    #[test]
    fn concurrent_maps_keep_order_and_the_bound() {
        let fetcher = Fetcher::new(Arc::new(MemoryStore::new()), 3).unwrap();
        let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let items: Vec<u64> = (0..40).collect();
        let out = fetcher.map_concurrent(&items, |&i| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(2));
            running.fetch_sub(1, Ordering::SeqCst);
            i * 2
        });
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        let most = most.load(Ordering::SeqCst);
        assert!((1..=3).contains(&most), "{most} ran at once");
        assert!(fetcher.map_concurrent(&[] as &[u64], |&i| i).is_empty());
    }
}
