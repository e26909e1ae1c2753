//! Batches with prefetch on, over a store that fails or panics on one tile:
//! the failure reaches the caller as the error, with its original message,
//! at the same point of the epoch as without prefetch; dropping the
//! iterator early stops the prefetch thread; and an epoch reads each tile
//! once.

mod common;

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use deltacells::dataset::{
    AlignedBytes, Batch, BatchConfig, Dataset, DatasetWriter, MemoryStore, OpenOptions, Shuffle,
    Store, WriterConfig,
};
use deltacells::synth::{Synth, SynthConfig};
use deltacells::{Error, Result};

const BROKEN: &str = "tiles/tile_000001.dct";

#[derive(Clone, Copy)]
enum Fault {
    None,
    Error,
    Panic,
}

/// The golden `exceptions_70k` dataset (tiles of 128, 128 and 44 cells) in
/// memory, with a fault on its second tile and a count of every read.
struct Faulty {
    inner: MemoryStore,
    fault: Fault,
    reads: AtomicUsize,
}

impl Store for Faulty {
    fn size(&self, key: &str) -> Result<Option<u64>> {
        self.inner.size(key)
    }

    fn get(&self, key: &str) -> Result<Option<AlignedBytes>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        match self.fault {
            Fault::Error if key == BROKEN => Err(Error::Input(format!("injected error at {key}"))),
            Fault::Panic if key == BROKEN => panic!("injected panic at {key}"),
            _ => self.inner.get(key),
        }
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> Result<AlignedBytes> {
        self.inner.get_range(key, range)
    }

    fn describe(&self) -> String {
        "a faulty memory store".into()
    }
}

fn dataset(fault: Fault) -> (Arc<Dataset>, Arc<Faulty>) {
    let dir = common::testdata().join("deltacells/datasets/exceptions_70k");
    let store = Arc::new(Faulty {
        inner: MemoryStore::from_dir(&dir).unwrap(),
        fault,
        reads: AtomicUsize::new(0),
    });
    let ds = Dataset::open_store(store.clone(), OpenOptions::default()).unwrap();
    (Arc::new(ds), store)
}

fn config(prefetch: usize) -> BatchConfig {
    BatchConfig::default()
        .with_batch_size(50)
        .with_shuffle(Shuffle::None)
        .with_prefetch(prefetch)
}

/// Every item of one epoch.
fn epoch(ds: &Arc<Dataset>, prefetch: usize) -> Vec<Result<Batch>> {
    ds.batches(config(prefetch)).unwrap().collect()
}

#[test]
fn a_mid_epoch_error_arrives_where_it_would_without_prefetch() {
    let (ds, _) = dataset(Fault::Error);
    let (on_demand, prefetched) = (epoch(&ds, 0), epoch(&ds, 2));
    // Cells 0..100 lie in tile 0; the batch of cells 100..150 needs tile 1.
    assert_eq!(
        prefetched.len(),
        3,
        "two batches, then the error, then nothing"
    );
    for (a, b) in on_demand.iter().zip(&prefetched).take(2) {
        assert_eq!(a.as_ref().unwrap(), b.as_ref().unwrap());
    }
    for items in [&on_demand, &prefetched] {
        match &items[2] {
            Err(Error::Input(m)) => assert_eq!(m, "injected error at tiles/tile_000001.dct"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_panic_in_the_prefetch_thread_is_the_error_with_its_message() {
    let (ds, _) = dataset(Fault::Panic);
    let items = epoch(&ds, 2);
    assert_eq!(items.len(), 3, "two batches, then the panic, then nothing");
    assert!(items[..2].iter().all(Result::is_ok));
    match &items[2] {
        Err(Error::Panicked { message, .. }) => {
            assert_eq!(message, "injected panic at tiles/tile_000001.dct")
        }
        other => panic!("{other:?}"),
    }
    // The dataset is still usable after the thread died.
    let (ok, _) = dataset(Fault::None);
    assert!(epoch(&ok, 2).iter().all(Result::is_ok));
}

/// Twenty tiles of ten cells (two chunks each), in memory, every read
/// counted; the reads the open made are counted already.
fn twenty_tiles() -> (Arc<Dataset>, Arc<Faulty>) {
    // Tests run in parallel threads of one process, so each call writes into
    // its own directory.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dataset");
    let data = Synth::new(SynthConfig {
        n_genes: 500,
        median_umis: 50.0,
        ..SynthConfig::default()
    })
    .block(0, 200);
    let config = WriterConfig::default()
        .with_tile_size(10)
        .with_n_chunks(2)
        .with_level(1);
    let mut writer = DatasetWriter::create(&dir, 500, config).unwrap();
    writer.push(data.as_ref()).unwrap();
    writer.finish().unwrap();
    let store = Arc::new(Faulty {
        inner: MemoryStore::from_dir(&dir).unwrap(),
        fault: Fault::None,
        reads: AtomicUsize::new(0),
    });
    tmp.close().unwrap();
    let ds = Arc::new(Dataset::open_store(store.clone(), OpenOptions::default()).unwrap());
    (ds, store)
}

/// The store's reads once they stop changing: tiles asked of the I/O stage
/// ahead may still be landing after the iterator that asked is gone.
fn settled_reads(store: &Faulty) -> usize {
    let mut after = store.reads.load(Ordering::SeqCst);
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let now = store.reads.load(Ordering::SeqCst);
        if now == after {
            break;
        }
        after = now;
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    let settled = store.reads.load(Ordering::SeqCst);
    assert_eq!(settled, after, "reads still going on");
    settled
}

#[test]
fn dropping_the_iterator_early_stops_the_prefetch_thread() {
    // A producer left running would read every tile, where a stopped one
    // has read its window and the ones fetched ahead.
    let (ds, store) = twenty_tiles();
    let opened = store.reads.load(Ordering::SeqCst);
    let mut batches = ds
        .batches(
            BatchConfig::default()
                .with_batch_size(10)
                .with_shuffle(Shuffle::None)
                .with_prefetch(1),
        )
        .unwrap();
    assert_eq!(batches.len(), 20);
    batches.next().unwrap().unwrap();
    drop(batches);
    // Drop joined the thread; once the count settles, nothing more is read.
    let tiles = settled_reads(&store) - opened;
    // A stopped producer has made at most the batch delivered, the 3 its
    // queue holds (prefetch 1 and the windows it builds ahead) and one it
    // was sending, a tile each, and fetched the two windows after those:
    // 7 tiles, where a busy machine lets it get that far (alone it stops
    // at 4).
    assert!(tiles <= 7, "{tiles} tiles read after one batch of 20");
}

#[test]
fn a_block_shuffled_epoch_reads_each_tile_once() {
    // Windows of four tiles, built a window at a time, whose tiles leave the
    // iterator's cache once built: fetching ahead must not ask for them
    // again (it once did, and read every tile twice an epoch).
    let (ds, store) = twenty_tiles();
    for prefetch in [0, 2] {
        let before = settled_reads(&store);
        let config = BatchConfig::default()
            .with_batch_size(8)
            .with_shuffle(Shuffle::Block { window_tiles: 4 })
            .with_prefetch(prefetch);
        let batches: Vec<Batch> = ds.batches(config).unwrap().collect::<Result<_>>().unwrap();
        let cells: usize = batches.iter().map(|b| b.cells.len()).sum();
        assert_eq!(cells, 200);
        assert_eq!(
            settled_reads(&store) - before,
            20,
            "tiles read by an epoch with prefetch {prefetch}"
        );
    }
}

#[test]
fn epochs_made_ahead_read_each_tile_once_an_epoch() {
    // Each epoch hands the next one's first window to the I/O stage while
    // its own last windows are used, and the next epoch's producer takes
    // those fetches rather than reading the tiles again.
    let (ds, store) = twenty_tiles();
    let before = settled_reads(&store);
    let config = |epoch, recycler| {
        BatchConfig::default()
            .with_batch_size(8)
            .with_shuffle(Shuffle::Block { window_tiles: 4 })
            .with_prefetch(2)
            .with_epoch(epoch)
            .with_recycler(recycler)
            .with_next_epoch_ahead(true)
    };
    let mut recycler = None;
    for epoch in 0..2 {
        let mut batches = ds.batches(config(epoch, recycler.take())).unwrap();
        recycler = Some(batches.recycler());
        let mut cells = 0;
        while let Some(batch) = batches.next() {
            let batch = batch.unwrap();
            cells += batch.cells.len();
            batches.recycle(batch);
        }
        assert_eq!(cells, 200, "epoch {epoch}");
    }
    // The third epoch, made ahead, has read its first window and asked for
    // its second, as an iterator's first batch does; then it is dropped.
    recycler.unwrap().forget_next_epoch();
    assert_eq!(settled_reads(&store) - before, 20 + 20 + 4 + 4);
}
