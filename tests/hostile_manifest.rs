//! A manifest that claims far more cells than its files hold (the audit's
//! `n_cells = tile_size = tile_cells[0] = 2^36` over a real tile) gives an
//! error, never an abort, and nothing is allocated per claimed cell. A
//! counting allocator measures the peak of live heap bytes during each call;
//! the tests of this file run one at a time so the figure is theirs.
//! (cli/tests/cli_hostile.rs runs the command-line tool on the same manifest.)

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use deltacells::dataset::{
    BatchConfig, Dataset, GeneSelection, MemoryStore, OpenOptions, Shuffle, Store,
};
use deltacells::format::manifest::DatasetRule;
use deltacells::Error;

/// Live heap bytes and their peak since the last [`measure`] began. A single
/// allocation above [`REFUSED`] fails (the test then aborts, as the CLI did)
/// rather than touching the machine's memory.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
const REFUSED: usize = 1 << 30;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > REFUSED {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Bytes a call may add to the heap: a tile, the pool and caches, never a
/// word per claimed cell (2^36 cells would be 512 GiB of ids).
const BUDGET: usize = 64 << 20;

/// Runs `f`, asserting it allocated at most [`BUDGET`] beyond what was live before.
fn measure<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    let grew = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    assert!(grew <= BUDGET, "{what}: {grew} bytes allocated");
    out
}

fn open(store: MemoryStore) -> deltacells::Result<Dataset> {
    Dataset::open_store(Arc::new(store) as Arc<dyn Store>, OpenOptions::default())
}

#[test]
fn a_count_beyond_the_tile_bytes_is_refused_at_open() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let err = measure("open", || open(common::hostile(None).0)).expect_err("refused");
    assert!(
        matches!(err, Error::Dataset(DatasetRule::Inconsistent(ref m)) if m.contains("tile 0 claims 68719476736 cells")),
        "{err}"
    );
}

#[test]
fn reads_and_batches_fetch_the_tile_before_sizing_anything_by_the_claim() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // tile_bytes lies too, so the manifest alone looks consistent: every read
    // must meet the real tile (wrong size) before allocating per cell.
    let ds =
        Arc::new(open(common::hostile(Some(1 << 40)).0).expect("the manifest alone is consistent"));
    let tile_error = |what: &str, r: deltacells::Result<()>| match r {
        Err(Error::Dataset(DatasetRule::TileBytes { tile: 0, .. })) => {}
        other => panic!("{what}: {other:?}"),
    };
    tile_error(
        "read_range",
        measure("read_range", || {
            ds.read(0..common::CLAIMED).csr::<f32>().map(drop)
        }),
    );
    tile_error(
        "read_tile",
        measure("read_tile", || {
            ds.read(ds.tile_cells(0)?).csr::<i32>().map(drop)
        }),
    );
    let mut out = deltacells::Csr::empty(0);
    tile_error(
        "read_range_into",
        measure("read_range_into", || {
            ds.read(0..common::CLAIMED)
                .csr_into::<f32>(&mut out)
                .map(drop)
        }),
    );
    tile_error(
        "read_cells",
        measure("read_cells", || {
            ds.read([common::CLAIMED - 1]).csr::<f32>().map(drop)
        }),
    );
    let genes = GeneSelection::new(ds.n_genes(), &[0, 1]).unwrap();
    for (shuffle, prefetch) in [
        (Shuffle::None, 0),
        (Shuffle::Block { window_tiles: 4 }, 0),
        (Shuffle::Block { window_tiles: 4 }, 2),
    ] {
        let what = format!("batches {shuffle:?} prefetch {prefetch}");
        let first = measure(&what, || {
            let mut batches = ds
                .batches(
                    BatchConfig::default()
                        .with_batch_size(1)
                        .with_shuffle(shuffle)
                        .with_prefetch(prefetch)
                        .with_genes(Some(genes.clone())),
                )
                .expect("batches are planned without reading");
            assert_eq!(batches.len() as u64, common::CLAIMED);
            batches.next().expect("a first batch").map(drop)
        });
        tile_error(&what, first);
    }
}

#[test]
fn gene_selections_are_sized_by_the_selection() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // The widest dataset the format allows: 2^31 genes.
    let s = measure("GeneSelection::new", || {
        GeneSelection::new(1 << 31, &[(1 << 31) - 1, 0, 1 << 30]).unwrap()
    });
    assert_eq!(s.column(i32::MAX), Some(0));
    assert_eq!(s.column(1 << 30), Some(2));
    assert_eq!(s.column(5), None);
}
