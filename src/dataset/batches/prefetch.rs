//! The prefetch thread: produces a rank's batches ahead of the caller, at
//! most `depth` of them waiting, and is joined when its iterator is dropped.

use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::threads::Owner;

/// Batches produced on a thread of their own.
pub(crate) struct Prefetch<T> {
    rx: Option<Receiver<Result<T>>>,
    thread: Option<JoinHandle<()>>,
    /// The process the thread runs in.
    owner: Owner,
}

/// What the thread says when it stops without a batch or a panic.
const WHAT: &str = "the batch prefetch thread";

impl<T: Send + 'static> Prefetch<T> {
    /// Starts a thread that calls `produce(0)`, `produce(1)`, ... up to
    /// `count` times, keeping at most `depth` results waiting; it stops after
    /// the first error, or when the receiving side is dropped.
    pub(crate) fn start(
        count: usize,
        depth: usize,
        mut produce: impl FnMut(usize) -> Result<T> + Send + 'static,
    ) -> Result<Prefetch<T>> {
        // Never more slots than results: the channel allocates them all.
        let (tx, rx) = sync_channel(depth.min(count));
        let thread = std::thread::Builder::new()
            .name("deltacells-prefetch".into())
            .spawn(move || {
                for i in 0..count {
                    let item = produce(i);
                    let failed = item.is_err();
                    // A closed channel means the iterator was dropped: stop.
                    if tx.send(item).is_err() || failed {
                        break;
                    }
                }
            })
            .map_err(|e| Error::io("starting the prefetch thread", e))?;
        Ok(Prefetch {
            rx: Some(rx),
            thread: Some(thread),
            owner: Owner::here(),
        })
    }

    /// The next item; when the thread is gone, the reason (its panic message).
    pub(crate) fn recv(&mut self) -> Result<T> {
        let rx = self.rx.as_ref().expect("open until dropped");
        if let Ok(item) = rx.recv() {
            return item;
        }
        Err(match self.thread.take().map(JoinHandle::join) {
            Some(Err(panic)) => Error::panicked(WHAT, panic.as_ref()),
            _ => Error::Panicked {
                what: WHAT.into(),
                message: "it stopped without a batch or a panic".into(),
            },
        })
    }
}

impl<T> Drop for Prefetch<T> {
    fn drop(&mut self) {
        if self.owner.forked() {
            // The thread is not in this process (see `crate::threads`):
            // joining it would wait forever.
            std::mem::forget(self.rx.take());
            std::mem::forget(self.thread.take());
            return;
        }
        // Closing the channel makes the thread's next send fail, so it stops
        // after the item in hand; its panic, if any, was already reported or
        // is of no one's interest now.
        drop(self.rx.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
