//! The bounded I/O stage: whole objects fetched on threads of their own,
//! ahead of the code that will decode them.
//!
//! Decode workers are pinned to cores and should never wait on a network;
//! a [`Fetcher`] keeps `in_flight` threads (unpinned, named
//! `deltacells-fetch-N`) that do nothing but wait on the store, so up to that
//! many requests are outstanding at once. A caller that knows what comes next
//! (a scan, an epoch of batches) calls [`Fetcher::prefetch`]; a later
//! [`Fetcher::get_many`] takes those results (waiting if they are still in
//! flight) and fetches the rest concurrently. At most `4 * in_flight` fetched
//! objects wait unclaimed, which bounds the memory prefetching can hold.

use std::collections::HashMap;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};

use super::{AlignedBytes, Store};
use crate::error::{Error, Result};

type Fetched = Result<Option<AlignedBytes>>;

/// Fetches objects of one store on a bounded set of I/O threads.
pub struct Fetcher {
    store: Arc<dyn Store>,
    pool: rayon::ThreadPool,
    in_flight: usize,
    pending: Mutex<HashMap<String, Receiver<Fetched>>>,
}

impl Fetcher {
    /// A fetcher keeping up to `in_flight` requests to `store` outstanding.
    pub fn new(store: Arc<dyn Store>, in_flight: usize) -> Result<Fetcher> {
        let in_flight = in_flight.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(in_flight)
            .thread_name(|i| format!("deltacells-fetch-{i}"))
            .build()
            .map_err(|e| Error::Config(format!("cannot start {in_flight} fetch threads: {e}")))?;
        Ok(Fetcher {
            store,
            pool,
            in_flight,
            pending: Mutex::new(HashMap::new()),
        })
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
        self.pool.spawn(move || {
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

    /// Runs `f` on the I/O threads (rayon calls inside it fan out over them):
    /// for fetches that are more than a whole-object GET.
    pub fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.pool.install(f)
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
}
