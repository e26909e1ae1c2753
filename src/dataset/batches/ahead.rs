//! The next epoch's first batches, made while this epoch drains.
//!
//! A block-shuffled epoch cannot hand out its first batch before its first
//! window is decoded: every batch of a window draws cells from all of its
//! tiles. A training loop would wait that long at the start of every epoch.
//! With [`BatchConfig::next_epoch_ahead`], an iterator that has nothing left
//! to decode (its last window is built; with batches gathered through the
//! cache, once its last batch is made) starts, on a thread of its own, the
//! next epoch's producer (the same configuration with the epoch one higher
//! and nothing delivered, over the same tiles with a cache of its own),
//! that producer's first batch, and then its first window, while the
//! caller uses this epoch's last window. It leaves them in the iterator's
//! [`Recycler`]. The next iterator made with that
//! recycler and exactly that configuration takes them, waiting for them if
//! they are still being made; an iterator of any other configuration drops
//! them. The batches are the same either way: a producer is a pure function
//! of its configuration.
//!
//! The first batch is made alone, as an iterator's first batch is (see
//! [`Producer::produce`]): it decodes only its own chunks, about a tile's
//! worth, and is handed over at once, while the thread goes on to build the
//! rest of the first window. A caller that drains its epochs as fast as they
//! decode, and so leaves the thread no head start, then waits for the first
//! batch about as long as for a first epoch's, not for a whole window.
//!
//! Before that, when windows are built at once, the producer asks the I/O
//! stage for the next epoch's first window as soon as it asks for its own
//! last window (see [`Producer::fetch_next_epoch`]): the next epoch's
//! producer then finds those tiles read, even when the caller drains this
//! epoch as fast as it decodes.
//!
//! What this costs: while the last batches of an epoch are used, the next
//! epoch's first window is held as well (up to twice the memory bound of
//! [`BatchConfig::cache_bytes`] for a moment), and a window is read and
//! decoded in vain if no next epoch comes.

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::mpsc::{sync_channel, Receiver};

use crate::dataset::batches::producer::Producer;
use crate::dataset::batches::sampling::Population;
use crate::dataset::batches::{Batch, BatchConfig, BatchTiles, Produce, Recycler};
use crate::dataset::read::ReadStats;
use crate::error::{Error, Result};
use crate::kernels::DecodedCount;

/// The next epoch, being made on its own thread: what a recycler holds.
pub(crate) struct Ahead {
    /// The configuration an iterator must have to take it.
    config: BatchConfig,
    /// The tiles it reads (see [`BatchTiles::identity`]).
    tiles: usize,
    /// The producer's type, `Producer<V, T>`.
    kind: TypeId,
    /// Batches the producer makes, and its lookahead, once it is made.
    len: Receiver<Result<(usize, usize)>>,
    /// Its first batch, a `Result<Batch<V>>`, once made.
    first: Receiver<Box<dyn Any + Send>>,
    /// The producer, with its first window built, once it is.
    ready: Receiver<Box<dyn Any + Send>>,
}

impl fmt::Debug for Ahead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ahead")
            .field("epoch", &self.config.epoch)
            .finish_non_exhaustive()
    }
}

impl Ahead {
    /// Waits until its thread is done, and drops what it made.
    pub(crate) fn finish(self) {
        // A thread that stopped without sending is done too.
        let _ = self.ready.recv();
    }
}

/// A producer with its first window built, and what building it cost
/// (counted in the figures of the batch after the first).
type Made<V, T> = (Producer<V, T>, ReadStats);

/// Whether an iterator of `b` makes the batches `a` was made for: equal in
/// everything the batches depend on (not in how far ahead they are made, or
/// where buffers come from).
fn same_batches(a: &BatchConfig, b: &BatchConfig) -> bool {
    a.batch_size == b.batch_size
        && a.seed == b.seed
        && a.epoch == b.epoch
        && a.shuffle == b.shuffle
        && a.rank == b.rank
        && a.world_size == b.world_size
        && a.drop_last == b.drop_last
        && a.cache_bytes == b.cache_bytes
        && a.genes == b.genes
        && a.dense == b.dense
        && a.transform == b.transform
        && a.tokenizer == b.tokenizer
        && a.obs_columns == b.obs_columns
        && a.cells == b.cells
        && a.weights == b.weights
        && a.samples_per_epoch == b.samples_per_epoch
        && a.pick == b.pick
        && a.delivered == b.delivered
}

/// The configuration of the epoch after `config`'s: one epoch later,
/// nothing delivered, its buffers (and the epoch made ahead) in `recycler`.
/// None after the last epoch a `u64` numbers: nothing is made ahead then.
fn following(config: &BatchConfig, recycler: Recycler) -> Option<BatchConfig> {
    let mut next = config.clone();
    next.epoch = config.epoch.checked_add(1)?;
    next.delivered.clear();
    next.recycler = Some(recycler);
    Some(next)
}

/// What an iterator makes its batches with: the producer, or the one made
/// ahead for it; and, when it makes the next epoch ahead, what that needs.
pub(crate) struct Epoch<V, T> {
    producer: Option<Producer<V, T>>,
    /// The first batch made ahead, until received.
    first: Option<Receiver<Box<dyn Any + Send>>>,
    /// The producer made ahead, until received.
    ready: Option<Receiver<Box<dyn Any + Send>>>,
    /// Batches this iterator yields.
    total: usize,
    /// The producer's [`Producer::lookahead`].
    lookahead: usize,
    /// The next epoch's configuration and population, with
    /// [`BatchConfig::next_epoch_ahead`].
    next: Option<(BatchConfig, Population)>,
}

impl<V: DecodedCount + bytemuck::Pod, T: BatchTiles> Epoch<V, T> {
    /// The batches of `producer`, `total` of them, made for `config`;
    /// `population`, its cells, given when the next epoch is made ahead.
    pub(crate) fn new(
        mut producer: Producer<V, T>,
        total: usize,
        config: &BatchConfig,
        population: Option<Population>,
    ) -> Epoch<V, T> {
        let next = population.and_then(|p| Some((following(config, producer.recycler())?, p)));
        fetch_next_epoch(&mut producer, &next);
        Epoch {
            lookahead: producer.lookahead(),
            producer: Some(producer),
            first: None,
            ready: None,
            total,
            next,
        }
    }

    /// The epoch made ahead for `config` over `tiles` in `config`'s
    /// recycler, if there is one (waiting until its producer is made):
    /// `count` is the most batches the iterator wants. Anything else the
    /// recycler held is dropped.
    pub(crate) fn taken(
        config: &BatchConfig,
        tiles: &T,
        count: usize,
        population: &Population,
    ) -> Result<Option<Epoch<V, T>>> {
        let Some(recycler) = &config.recycler else {
            return Ok(None);
        };
        let Some(ahead) = recycler.take_ahead() else {
            return Ok(None);
        };
        let fits = ahead.kind == TypeId::of::<Producer<V, T>>()
            && ahead.tiles == tiles.identity()
            && same_batches(&ahead.config, config);
        if !fits {
            return Ok(None);
        }
        let (len, lookahead) = ahead.len.recv().unwrap_or_else(|_| Err(stopped()))?;
        let next = config
            .next_epoch_ahead
            .then(|| Some((following(config, recycler.clone())?, population.clone())))
            .flatten();
        Ok(Some(Epoch {
            producer: None,
            first: Some(ahead.first),
            ready: Some(ahead.ready),
            total: len.min(count),
            lookahead,
            next,
        }))
    }

    /// Batches this iterator yields.
    pub(crate) fn len(&self) -> usize {
        self.total
    }

    /// Its producer's [`Producer::lookahead`].
    pub(crate) fn lookahead(&self) -> usize {
        self.lookahead
    }

    /// The first batch made ahead.
    fn receive_first(first: Receiver<Box<dyn Any + Send>>) -> Result<Batch<V>> {
        let made = first.recv().map_err(|_| stopped())?;
        *made
            .downcast::<Result<Batch<V>>>()
            .expect("an epoch is taken only by a producer of its type")
    }

    /// The producer made ahead, once its first window is built, if it is
    /// not received yet; what building the window cost.
    fn receive_producer(&mut self) -> Result<ReadStats> {
        let Some(ready) = self.ready.take() else {
            return Ok(ReadStats::default());
        };
        let made = ready.recv().map_err(|_| stopped())?;
        let (mut producer, built) = *made
            .downcast::<Made<V, T>>()
            .expect("an epoch is taken only by a producer of its type");
        fetch_next_epoch(&mut producer, &self.next);
        self.producer = Some(producer);
        Ok(built)
    }

    /// Starts making the epoch after this one, on a thread of its own,
    /// which makes the producer, says how many batches it makes, makes the
    /// first (alone, see the module docs), then builds the rest of its
    /// window. `producer` goes on making this epoch's last batches
    /// meanwhile.
    fn make_next(
        producer: &Producer<V, T>,
        config: BatchConfig,
        population: Population,
    ) -> Result<()> {
        let recycler = producer.recycler();
        let tiles = producer.tiles_identity();
        let parts = producer.parts();
        let (len_tx, len) = sync_channel(1);
        let (first_tx, first) = sync_channel(1);
        let (tx, ready) = sync_channel(1);
        let made_for = config.clone();
        std::thread::Builder::new()
            .name("deltacells-next-epoch".into())
            .spawn(move || {
                let mut next = match parts.into_producer::<V>(&made_for, population) {
                    Ok(next) => next,
                    Err(e) => {
                        let _ = len_tx.send(Err(e));
                        return;
                    }
                };
                // Nobody may want them any more (the recycler let them go):
                // then the sends fail, which is fine.
                let _ = len_tx.send(Ok((next.len(), next.lookahead())));
                let batch = next.produce(0);
                let made = batch.is_ok();
                let _ = first_tx.send(Box::new(batch) as Box<dyn Any + Send>);
                // The rest of the window the first batch draws from, which
                // the batches after it need; after an error, nothing more.
                if made {
                    let built = next.prepare(1);
                    let _ = tx.send(Box::new((next, built)) as Box<dyn Any + Send>);
                }
            })
            .map_err(|e| Error::io("starting the next epoch's thread", e))?;
        recycler.leave_ahead(Ahead {
            config,
            tiles,
            kind: TypeId::of::<Producer<V, T>>(),
            len,
            first,
            ready,
        });
        Ok(())
    }
}

/// Has `producer` fetch the first window of `next`, the epoch made ahead
/// after its own, if there is one (see [`Producer::fetch_next_epoch`]).
fn fetch_next_epoch<V: DecodedCount + bytemuck::Pod, T: BatchTiles>(
    producer: &mut Producer<V, T>,
    next: &Option<(BatchConfig, Population)>,
) {
    if let Some((config, population)) = next {
        producer.fetch_next_epoch(config.clone(), population.clone());
    }
}

/// The error of a next epoch whose thread stopped without it (it panicked).
fn stopped() -> Error {
    Error::Panicked {
        what: "the thread making the next epoch ahead".into(),
        message: "it stopped without the epoch".into(),
    }
}

impl<V: DecodedCount + bytemuck::Pod, T: BatchTiles> Produce<V> for Epoch<V, T> {
    fn produce(&mut self, pick: usize) -> Result<Batch<V>> {
        let batch = match self.first.take() {
            Some(first) => {
                let batch = Self::receive_first(first)?;
                // An epoch of one batch is done: its producer makes the
                // epoch after it (below).
                if pick + 1 >= self.total {
                    self.receive_producer()?;
                }
                batch
            }
            None => {
                let built = self.receive_producer()?;
                let producer = self
                    .producer
                    .as_mut()
                    .expect("an epoch holds its producer or the one made ahead");
                let mut batch = producer.produce(pick)?;
                batch.stats.add(built);
                batch
            }
        };
        // The next epoch starts once this one has nothing left to decode.
        if let Some(producer) = &self.producer {
            let total = self.total;
            let done = |_: &mut _| pick + 1 >= total || producer.rest_built(total);
            if let Some((config, population)) = self.next.take_if(done) {
                Self::make_next(producer, config, population)?;
            }
        }
        Ok(batch)
    }
}
