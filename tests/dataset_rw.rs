//! Writer -> reader: random access against a naive full decode, gene
//! selection, batches across ranks, interrupted writers, and conversion.

use std::path::Path;
use std::sync::Arc;

use deltacells::dataset::ingest::{convert, ConvertOptions, Input, OBS_INDEX_KEY};
use deltacells::dataset::{
    BatchConfig, BatchRows, Dataset, DatasetWriter, GeneSelection, OpenOptions, Pick, Recycler,
    Shuffle, WriterConfig,
};
use deltacells::engine::{EngineConfig, Transform};
use deltacells::synth::{Synth, SynthConfig};
use deltacells::{Csr, Error};

fn tmpdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("deltacells-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A small synthetic dataset of `n` cells: the data and where it was written.
fn small(name: &str, n: usize, tile_size: usize, chunks: usize) -> (std::path::PathBuf, Csr<i32>) {
    let synth = Synth::new(SynthConfig {
        n_genes: 3000,
        median_umis: 400.0,
        ..SynthConfig::default()
    });
    let data = synth.block(0, n);
    let dir = tmpdir(name);
    let config = WriterConfig::default()
        .with_tile_size(tile_size)
        .with_n_chunks(chunks)
        .with_level(1);
    let mut w = DatasetWriter::create(&dir, 3000, config).unwrap();
    // Blocks of awkward sizes: the writer cuts tiles itself.
    let mut start = 0;
    for size in [1usize, 7, 100, 33].iter().cycle() {
        if start >= n {
            break;
        }
        let end = (start + size).min(n);
        let (lo, hi) = (data.indptr[start] as usize, data.indptr[end] as usize);
        let indptr: Vec<i64> = data.indptr[start..=end]
            .iter()
            .map(|&p| p - lo as i64)
            .collect();
        w.push(deltacells::CsrRef {
            n_cols: 3000,
            indptr: &indptr,
            indices: &data.indices[lo..hi],
            values: &data.values[lo..hi],
        })
        .unwrap();
        start = end;
    }
    w.finish().unwrap();
    (dir, data)
}

fn rows_of(csr: &Csr<i32>, cells: &[u64]) -> Csr<i32> {
    let mut out = Csr::empty(csr.n_cols);
    for &c in cells {
        let (lo, hi) = (
            csr.indptr[c as usize] as usize,
            csr.indptr[c as usize + 1] as usize,
        );
        out.indices.extend_from_slice(&csr.indices[lo..hi]);
        out.values.extend_from_slice(&csr.values[lo..hi]);
        out.indptr.push(out.indices.len() as i64);
    }
    out
}

#[test]
fn read_cells_matches_a_naive_full_decode() {
    let (dir, data) = small("read", 700, 128, 5);
    let ds = Dataset::open(&dir).unwrap();
    assert_eq!(ds.n_tiles(), 6);
    assert_eq!(ds.read(0..700).csr::<i32>().unwrap().csr, data);
    let mut state = 12345u64;
    for round in 0..20 {
        let k = [1usize, 2, 17, 256, 900][round % 5];
        let cells: Vec<u64> = (0..k)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 33) % 700
            })
            .collect();
        let got = ds.read(&cells).csr::<i32>().unwrap();
        assert_eq!(got.csr, rows_of(&data, &cells));
        assert_eq!(got.cells, cells);
        let f = ds.read(&cells).csr::<f32>().unwrap();
        assert!(f
            .csr
            .values
            .iter()
            .zip(&got.csr.values)
            .all(|(&a, &b)| a == b as f32));
    }
    // A few cells decode only the chunks that hold them.
    let fresh = Dataset::open_with(&dir, OpenOptions::default().with_cache_bytes(0)).unwrap();
    let one = fresh.read([300]).csr::<i32>().unwrap();
    assert_eq!(
        (
            one.stats.tiles_fetched,
            one.stats.chunks_touched,
            one.stats.chunks_decoded
        ),
        (1, 1, 1)
    );
    // The tiles do not fit a cache of 0 bytes: a few cells fetch only the
    // tile's head and their chunk's frames, not the whole tile.
    let (t, _) = fresh.locate(300).unwrap();
    assert!(
        one.stats.bytes_fetched < fresh.manifest().tile_bytes[t] / 2,
        "{} of {} bytes",
        one.stats.bytes_fetched,
        fresh.manifest().tile_bytes[t]
    );
    assert!(matches!(ds.read([700]).csr::<i32>(), Err(Error::Input(_))));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn concurrent_readers_of_one_dataset_get_what_one_reader_gets() {
    fn shared<T: Send + Sync>(_: &T) {}
    let (dir, data) = small("concurrent", 900, 100, 4);
    // A cache smaller than the dataset's decoded chunks: readers insert and
    // evict concurrently.
    let ds = Dataset::open_with(&dir, OpenOptions::default().with_cache_bytes(200 << 10)).unwrap();
    shared(&ds);
    let requests: Vec<Vec<u64>> = (0..8u64)
        .map(|r| (0..60).map(|i| (i * 131 + r * 977) % 900).collect())
        .collect();
    std::thread::scope(|scope| {
        let readers: Vec<_> = requests
            .iter()
            .map(|cells| {
                let ds = &ds;
                scope.spawn(move || {
                    (0..5)
                        .map(|_| ds.read(cells).csr::<i32>().unwrap().csr)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for (cells, reader) in requests.iter().zip(readers) {
            let want = rows_of(&data, cells);
            for got in reader.join().unwrap() {
                assert_eq!(got, want);
            }
        }
    });
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn gene_selection_matches_slicing_the_full_result() {
    let (dir, data) = small("genes", 300, 64, 3);
    let ds = Dataset::open(&dir).unwrap();
    for genes in [
        vec![0u32, 1, 2, 2999],
        vec![2999, 5, 0],
        vec![],
        (0..3000).rev().collect(),
    ] {
        let sel = GeneSelection::new(3000, &genes).unwrap();
        let cells: Vec<u64> = (0..300).step_by(7).chain([5, 5, 0]).collect();
        let got = ds.read(&cells).genes(&sel).csr::<i32>().unwrap().csr;
        let full = rows_of(&data, &cells);
        let mut want = Csr::empty(genes.len() as u64);
        for w in full.indptr.windows(2) {
            let mut row: Vec<(i32, i32)> = (w[0] as usize..w[1] as usize)
                .filter_map(|j| {
                    genes
                        .iter()
                        .position(|&g| g as i32 == full.indices[j])
                        .map(|k| (k as i32, full.values[j]))
                })
                .collect();
            row.sort_unstable();
            want.indices.extend(row.iter().map(|r| r.0));
            want.values.extend(row.iter().map(|r| r.1));
            want.indptr.push(want.indices.len() as i64);
        }
        assert_eq!(got, want, "genes {genes:?}");
        let dense = ds.read(&cells).genes(&sel).dense::<f32>().unwrap();
        assert_eq!(dense.rows.n_cols(), genes.len());
        for (r, w) in want.indptr.windows(2).enumerate() {
            let mut row = vec![0f32; genes.len()];
            for j in w[0] as usize..w[1] as usize {
                row[want.indices[j] as usize] = want.values[j] as f32;
            }
            assert_eq!(
                dense.rows.data()[r * genes.len()..(r + 1) * genes.len()],
                row[..]
            );
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// An epoch's batches: each one's cells and rows.
type Epoch = Vec<(Vec<u64>, BatchRows<f32>)>;

fn epoch(ds: &Arc<Dataset>, config: BatchConfig) -> Epoch {
    ds.batches(config)
        .unwrap()
        .map(|b| b.map(|b| (b.cells, b.rows)))
        .collect::<Result<_, _>>()
        .unwrap()
}

/// An epoch whose batches go back to the iterator as soon as they are copied,
/// and the iterator's recycler, holding the buffers of the last ones.
fn recycling_epoch(ds: &Arc<Dataset>, config: BatchConfig) -> (Epoch, Recycler) {
    let mut iter = ds.batches(config).unwrap();
    let mut batches = Vec::new();
    while let Some(b) = iter.next() {
        let b = b.unwrap();
        batches.push((b.cells.clone(), b.rows.clone()));
        iter.recycle(b);
    }
    (batches, iter.recycler())
}

#[test]
fn batches_cut_from_decoded_windows_match_batches_gathered_from_chunks() {
    // A bound of 0 cannot hold a decoded window, so those batches take the
    // chunk-by-chunk path; 64 MiB holds one, so they are cut from windows.
    let (dir, _) = small("window-paths", 700, 100, 3);
    let ds = Arc::new(Dataset::open(&dir).unwrap());
    let sel = GeneSelection::new(3000, &[2999, 7, 0, 1500, 3]).unwrap();
    let normalized = Transform::NONE.normalize(1e4).log1p();
    for (dense, genes, transform) in [
        (false, None, Transform::NONE),
        (true, None, Transform::NONE),
        (false, Some(sel.clone()), Transform::NONE),
        (true, Some(sel.clone()), Transform::NONE),
        // Normalized by each cell's total over all its genes, where the
        // selection's CSR rows are cut from chunks mapped as decoded.
        (false, Some(sel.clone()), normalized),
        (true, Some(sel), normalized),
    ] {
        let config = |cache_bytes| {
            BatchConfig::default()
                .with_batch_size(45)
                .with_seed(3)
                .with_shuffle(Shuffle::Block { window_tiles: 2 })
                .with_dense(dense)
                .with_genes(genes.clone())
                .with_transform(transform)
                .with_cache_bytes(cache_bytes)
                .with_rank(1, 2)
        };
        let windowed = epoch(&ds, config(64 << 20));
        assert_eq!(
            windowed,
            epoch(&ds, config(0)),
            "dense {dense}, genes {genes:?}, {transform:?}"
        );
        // Batches built in the buffers of batches handed back are the same,
        // and so are those of an iterator starting in the last one's buffers.
        let (recycled, spares) = recycling_epoch(&ds, config(64 << 20));
        assert_eq!(
            recycled, windowed,
            "recycled: dense {dense}, genes {genes:?}"
        );
        let next_epoch = config(64 << 20).with_recycler(Some(spares));
        assert_eq!(
            recycling_epoch(&ds, next_epoch).0,
            windowed,
            "in the last epoch's buffers: dense {dense}, genes {genes:?}"
        );
        for (cells, rows) in windowed {
            let mut read = ds.read(&cells);
            if let Some(g) = &genes {
                read = read.genes(g);
            }
            if !transform.is_identity() {
                read = read.normalize(1e4).log1p();
            }
            let want = if dense {
                BatchRows::Dense(read.dense::<f32>().unwrap().rows)
            } else {
                BatchRows::Csr(read.csr::<f32>().unwrap().csr)
            };
            assert_eq!(rows, want, "dense {dense}, genes {genes:?}, {transform:?}");
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn batches_built_a_share_of_a_window_at_a_time_match_batches_built_whole() {
    // Bounds that hold the two largest tiles twice over (a window's tiles
    // and the next one's) but only a share of a window's decoded rows: the
    // window's batches are then built in that many reads, each decoding the
    // chunks again.
    let (dir, _) = small("window-shares", 700, 100, 3);
    let ds = Arc::new(Dataset::open(&dir).unwrap());
    for dense in [false, true] {
        let config = |cache_bytes| {
            paired_windows(0)
                .with_dense(dense)
                .with_cache_bytes(cache_bytes)
                .with_rank(1, 2)
        };
        let decoded_chunks = |config: BatchConfig| -> usize {
            let mut iter = ds.batches(config).unwrap();
            let mut n = 0;
            while let Some(b) = iter.next() {
                let b = b.unwrap();
                n += b.stats.chunks_decoded;
                iter.recycle(b);
            }
            n
        };
        let whole = epoch(&ds, config(64 << 20));
        let whole_chunks = decoded_chunks(config(64 << 20));
        for shares in [2, 3, 7, 1000] {
            let bound = share_bound(&ds, dense, shares);
            let case = format!("dense {dense}, {shares} shares");
            assert_eq!(epoch(&ds, config(bound)), whole, "{case}");
            let (recycled, spares) = recycling_epoch(&ds, config(bound));
            assert_eq!(recycled, whole, "recycled: {case}");
            let next_epoch = config(bound).with_recycler(Some(spares));
            assert_eq!(
                recycling_epoch(&ds, next_epoch).0,
                whole,
                "in the last epoch's buffers: {case}"
            );
            assert!(
                decoded_chunks(config(bound)) > whole_chunks,
                "{case}: a window's chunks are decoded once a share"
            );
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// A memory bound for batches of `ds` over windows of two tiles (of 3,000
/// genes) that holds the two largest tiles twice over (a window's and the
/// next one's) and `1 / shares` of their rows (CSR, or `dense`): a window's
/// batches are built in about `shares` reads.
fn share_bound(ds: &Dataset, dense: bool, shares: u64) -> usize {
    let m = ds.manifest();
    let two_largest = |f: &dyn Fn(usize) -> u64| {
        let mut v: Vec<u64> = (0..m.tile_cells.len()).map(f).collect();
        v.sort_unstable();
        v.iter().rev().take(2).sum::<u64>()
    };
    let compressed = two_largest(&|t| m.tile_bytes[t]);
    let decoded = two_largest(&|t| match dense {
        true => m.tile_cells[t] * 3000 * 4,
        false => (m.tile_nnz[t] + m.tile_cells[t] + 1) * 8,
    });
    (2 * compressed + decoded / shares) as usize
}

/// Batches of 45 cells (seed 3) of `epoch`, block-shuffled over windows of
/// two tiles: the epochs made ahead are compared in.
fn paired_windows(epoch: u64) -> BatchConfig {
    BatchConfig::default()
        .with_batch_size(45)
        .with_seed(3)
        .with_epoch(epoch)
        .with_shuffle(Shuffle::Block { window_tiles: 2 })
}

#[test]
fn an_epoch_made_ahead_is_the_epoch_a_fresh_iterator_makes() {
    let (dir, _) = small("next-epoch", 700, 100, 3);
    let ds = Arc::new(Dataset::open(&dir).unwrap());
    let sel = GeneSelection::new(3000, &[2999, 7, 0, 1500, 3]).unwrap();
    for (dense, genes, prefetch, cache_bytes) in [
        (false, None, 2, 64 << 20),
        (true, None, 0, 64 << 20),
        (false, Some(sel.clone()), 2, 64 << 20),
        (true, Some(sel), 1, 64 << 20),
        // Too small for a window: batches gathered through the cache.
        (false, None, 2, 0),
        // A window's batches built in three reads.
        (false, None, 2, share_bound(&ds, false, 3)),
        (true, None, 1, share_bound(&ds, true, 3)),
    ] {
        let config = |epoch| {
            paired_windows(epoch)
                .with_dense(dense)
                .with_genes(genes.clone())
                .with_cache_bytes(cache_bytes)
                .with_prefetch(prefetch)
                .with_rank(1, 2)
        };
        let case =
            format!("dense {dense}, genes {genes:?}, prefetch {prefetch}, cache {cache_bytes}");
        let (first, recycler) = recycling_epoch(&ds, config(0).with_next_epoch_ahead(true));
        assert_eq!(first, epoch(&ds, config(0)), "{case}");
        assert!(recycler.holds_next_epoch(), "{case}");
        // The next iterator takes it, makes the one after it, and its
        // batches are those of a fresh iterator of epoch 1, and so on.
        let chained = |e: u64, recycler: &Recycler| {
            config(e)
                .with_next_epoch_ahead(true)
                .with_recycler(Some(recycler.clone()))
        };
        let (second, recycler) = recycling_epoch(&ds, chained(1, &recycler));
        assert_eq!(second, epoch(&ds, config(1)), "{case}");
        assert!(recycler.holds_next_epoch(), "{case}");
        let (third, recycler) = recycling_epoch(&ds, chained(2, &recycler));
        assert_eq!(third, epoch(&ds, config(2)), "{case}");
        // Forgotten, once made: the next iterator makes its own.
        recycler.forget_next_epoch();
        assert!(!recycler.holds_next_epoch(), "{case}");
        let (fourth, recycler) = recycling_epoch(&ds, chained(3, &recycler));
        assert_eq!(fourth, epoch(&ds, config(3)), "{case}");
        // An iterator of another configuration drops it and makes its own.
        let other = config(3).with_seed(4).with_recycler(Some(recycler.clone()));
        assert_eq!(
            recycling_epoch(&ds, other).0,
            epoch(&ds, config(3).with_seed(4)),
            "{case}"
        );
        assert!(!recycler.holds_next_epoch(), "{case}");
        // A resumed epoch is not the one made ahead either.
        let (_, recycler) = recycling_epoch(&ds, chained(5, &recycler));
        let delivered = vec![0..45, 90..135];
        let resumed = config(6)
            .with_delivered(delivered.clone())
            .with_recycler(Some(recycler.clone()));
        assert_eq!(
            recycling_epoch(&ds, resumed).0,
            epoch(&ds, config(6).with_delivered(delivered)),
            "{case}"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_epoch_made_ahead_hands_out_its_first_batch_before_building_its_window() {
    let (dir, _) = small("first-ahead", 700, 100, 20);
    let ds = Arc::new(Dataset::open(&dir).unwrap());
    let config = |epoch| paired_windows(epoch).with_prefetch(0);
    let decoded = |config: BatchConfig| -> Vec<usize> {
        ds.batches(config)
            .unwrap()
            .map(|b| b.unwrap().stats.chunks_decoded)
            .collect()
    };
    let first = ds.batches(config(0).with_next_epoch_ahead(true)).unwrap();
    let recycler = first.recycler();
    first.for_each(|b| drop(b.unwrap()));
    assert!(recycler.holds_next_epoch());
    // The first batch made ahead decoded only its own chunks, as a fresh
    // iterator's first batch does, and the window's build is counted in
    // the batch after it, as there: batch by batch the same decodes.
    let ahead = decoded(config(1).with_recycler(Some(recycler.clone())));
    assert!(!recycler.holds_next_epoch(), "taken");
    let fresh = decoded(config(1));
    assert_eq!(ahead, fresh);
    assert!(ahead[0] < ahead[1], "{ahead:?}: the first batch read alone");
    // An epoch of one batch, made ahead, makes the one after it ahead too.
    let whole = |epoch| {
        paired_windows(epoch)
            .with_batch_size(1000)
            .with_next_epoch_ahead(true)
            .with_recycler(Some(recycler.clone()))
    };
    for e in 2..5 {
        let (got, _) = recycling_epoch(&ds, whole(e));
        assert_eq!(got.len(), 1);
        assert_eq!(got, epoch(&ds, paired_windows(e).with_batch_size(1000)));
        assert!(recycler.holds_next_epoch(), "epoch {} made ahead", e + 1);
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn batches_cover_every_cell_once_across_ranks_and_are_deterministic() {
    let (dir, data) = small("batches", 1000, 100, 4);
    let open = |threads| {
        Arc::new(
            Dataset::open_with(
                &dir,
                OpenOptions::default().with_engine(
                    EngineConfig::default()
                        .with_threads(threads)
                        .with_pin(false),
                ),
            )
            .unwrap(),
        )
    };
    let (ds1, ds2) = (open(1), open(2));
    for (shuffle, world) in [
        (Shuffle::None, 1),
        (Shuffle::Block { window_tiles: 3 }, 3),
        (Shuffle::Block { window_tiles: 1 }, 4),
    ] {
        let config = |rank, prefetch, cache_bytes| {
            BatchConfig::default()
                .with_batch_size(64)
                .with_seed(9)
                .with_epoch(2)
                .with_shuffle(shuffle)
                .with_prefetch(prefetch)
                .with_cache_bytes(cache_bytes)
                .with_rank(rank, world)
        };
        let mut seen = Vec::new();
        let mut counts = Vec::new();
        for rank in 0..world {
            let a = epoch(&ds1, config(rank, 0, 0));
            let b = epoch(&ds2, config(rank, 3, 64 << 20));
            assert_eq!(
                a, b,
                "same batches with 1 or 2 threads, with or without prefetch and cache"
            );
            counts.push(a.len());
            for (cells, rows) in a {
                let BatchRows::Csr(csr) = rows else {
                    panic!("csr expected")
                };
                let want = rows_of(&data, &cells);
                assert_eq!(csr.indices, want.indices);
                assert!(csr
                    .values
                    .iter()
                    .zip(&want.values)
                    .all(|(&x, &y)| x == y as f32));
                assert!(cells.len() <= 64);
                seen.extend(cells);
            }
        }
        assert!(
            counts.windows(2).all(|w| w[0] == w[1]),
            "equal batch counts per rank: {counts:?}"
        );
        seen.sort_unstable();
        assert_eq!(
            seen,
            (0..1000).collect::<Vec<_>>(),
            "every cell exactly once ({shuffle:?}, {world} ranks)"
        );
    }
    let e0 = epoch(
        &ds1,
        BatchConfig::default().with_batch_size(50).with_epoch(0),
    );
    let e1 = epoch(
        &ds1,
        BatchConfig::default().with_batch_size(50).with_epoch(1),
    );
    assert_ne!(e0[0].0, e1[0].0, "different epochs, different orders");
    let dropped = epoch(
        &ds1,
        BatchConfig::default()
            .with_batch_size(300)
            .with_drop_last(true)
            .with_rank(1, 2),
    );
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].0.len(), 300);
    let dense = epoch(
        &ds1,
        BatchConfig::default()
            .with_batch_size(10)
            .with_dense(true)
            .with_shuffle(Shuffle::None),
    );
    let BatchRows::Dense(d) = &dense[0].1 else {
        panic!("dense expected")
    };
    assert_eq!((d.n_cols(), d.data().len()), (3000, 30_000));

    // Strided iterators (data-loader workers, resuming) interleave back into
    // the rank's sequence, keeping each batch's position.
    let config = || {
        BatchConfig::default()
            .with_batch_size(37)
            .with_seed(4)
            .with_rank(1, 2)
    };
    let whole: Vec<_> = ds1.batches(config()).unwrap().map(|b| b.unwrap()).collect();
    for (first, step) in [(0, 3), (1, 3), (2, 3), (5, 1), (4, 2)] {
        let part: Vec<_> = ds1
            .batches(config().with_pick(Pick::Strided { first, step }))
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
        let want: Vec<_> = whole.iter().skip(first).step_by(step).collect();
        assert_eq!(part.len(), want.len());
        for (got, want) in part.iter().zip(want) {
            assert_eq!((got.index, &got.cells), (want.index, &want.cells));
        }
    }
    assert!(ds1
        .batches(config().with_pick(Pick::Strided { first: 0, step: 0 }))
        .is_err());
    // Contiguous spans (how loader workers split a rank) are the same batches.
    for span in [0..3, 3..7, 7..whole.len() + 5, whole.len()..whole.len() + 1] {
        let part: Vec<_> = ds1
            .batches(config().with_pick(Pick::Range(span.clone())))
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
        let want = &whole[span.start.min(whole.len())..span.end.min(whole.len())];
        assert_eq!(part.len(), want.len(), "{span:?}");
        for (got, want) in part.iter().zip(want) {
            // What each batch cost differs with where the iterator starts.
            assert_eq!(
                (got.index, &got.cells, &got.rows),
                (want.index, &want.cells, &want.rows)
            );
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

fn write_10x(dir: &Path, gz: bool) -> Csr<i32> {
    // 4 genes x 3 cells, entries in no particular order, one explicit zero.
    std::fs::create_dir_all(dir).unwrap();
    let mtx = "%%MatrixMarket matrix coordinate integer general\n% written by a test\n4 3 6\n2 1 5\n1 3 2\n4 1 70000\n3 2 1\n1 1 3\n2 3 0\n";
    let features = "ENSG1\tA\tGene Expression\nENSG2\tB\tGene Expression\nENSG3\tC\tGene Expression\nENSG4\tD\tGene Expression\n";
    let barcodes = "AAA-1\nCCC-1\nGGG-1\n";
    let put = |name: &str, text: &str| {
        if gz {
            use std::io::Write;
            let f = std::fs::File::create(dir.join(format!("{name}.gz"))).unwrap();
            let mut e = flate2::write::GzEncoder::new(f, flate2::Compression::default());
            e.write_all(text.as_bytes()).unwrap();
            e.finish().unwrap();
        } else {
            std::fs::write(dir.join(name), text).unwrap();
        }
    };
    put("matrix.mtx", mtx);
    put("features.tsv", features);
    put("barcodes.tsv", barcodes);
    // Cells x source genes, as the reader must see them.
    Csr {
        n_cols: 4,
        indptr: vec![0, 3, 4, 5],
        indices: vec![0, 1, 3, 2, 0],
        values: vec![3, 5, 70_000, 1, 2],
    }
}

#[test]
fn converts_10x_folders_sorting_genes_by_total() {
    for gz in [false, true] {
        let input = tmpdir(&format!("tenx-in-{gz}"));
        let out = tmpdir(&format!("tenx-out-{gz}"));
        let source = write_10x(&input, gz);
        let m = convert(
            &Input::detect(&input).unwrap(),
            &out,
            ConvertOptions::default(),
            &|_| {},
        )
        .unwrap();
        assert_eq!((m.n_cells, m.n_genes), (3, 4));
        let ds = Dataset::open(&out).unwrap();
        // Totals: A 5, B 5, C 1, D 70000 -> D, A, B, C.
        assert_eq!(ds.gene_order().unwrap(), &[3, 0, 1, 2]);
        assert_eq!(ds.var_names().unwrap(), &["D", "A", "B", "C"]);
        let got = ds.read(0..3).csr::<i32>().unwrap().csr;
        let order = ds.gene_order().unwrap();
        for c in 0..3 {
            let want: Vec<(i32, i32)> = (source.indptr[c] as usize..source.indptr[c + 1] as usize)
                .map(|j| (source.indices[j], source.values[j]))
                .collect();
            let mut back: Vec<(i32, i32)> = (got.indptr[c] as usize..got.indptr[c + 1] as usize)
                .map(|j| (order[got.indices[j] as usize], got.values[j]))
                .collect();
            back.sort_unstable();
            assert_eq!(back, want, "cell {c}");
        }
        ds.verify().unwrap();
        // Barcodes became the `barcode` obs column, features the var table, in output order.
        let barcodes = ds.obs().unwrap().read_column("barcode", 0..1).unwrap();
        let barcodes = barcodes[0]
            .as_any()
            .downcast_ref::<arrow_array::StringArray>()
            .unwrap();
        assert_eq!(
            barcodes.iter().collect::<Vec<_>>(),
            [Some("AAA-1"), Some("CCC-1"), Some("GGG-1")]
        );
        // ...recorded as the obs index, the cells' names.
        assert_eq!(ds.manifest().metadata[OBS_INDEX_KEY], "barcode");
        let var = ds.var_table().unwrap().unwrap();
        assert_eq!(var.index_columns, ["gene_ids"]);
        let ids = var.table.column_by_name("gene_ids").unwrap();
        let ids = ids
            .as_any()
            .downcast_ref::<arrow_array::StringArray>()
            .unwrap();
        assert_eq!(
            ids.iter().collect::<Vec<_>>(),
            [Some("ENSG4"), Some("ENSG1"), Some("ENSG2"), Some("ENSG3")]
        );
        std::fs::remove_dir_all(input).unwrap();
        std::fs::remove_dir_all(out).unwrap();
    }
}

#[test]
fn converts_scipy_npz_and_refuses_bad_input() {
    let dir = tmpdir("npz");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.npz");
    {
        use deltacells::format::npy::{Array, Dtype};
        use std::io::Write;
        let mut z = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        let opts = zip::write::SimpleFileOptions::default();
        let arr = |dtype, data: Vec<u8>, n| Array {
            dtype,
            shape: vec![n],
            data,
        };
        for (name, a) in [
            (
                "indptr",
                arr(
                    Dtype::I32,
                    bytemuck::cast_slice(&[0i32, 2, 2, 3]).to_vec(),
                    4,
                ),
            ),
            (
                "indices",
                arr(Dtype::I32, bytemuck::cast_slice(&[4i32, 1, 0]).to_vec(), 3),
            ),
            (
                "data",
                arr(
                    Dtype::F32,
                    bytemuck::cast_slice(&[2f32, 1.0, 7.0]).to_vec(),
                    3,
                ),
            ),
            (
                "shape",
                arr(Dtype::I64, bytemuck::cast_slice(&[3i64, 5]).to_vec(), 2),
            ),
        ] {
            z.start_file(format!("{name}.npy"), opts).unwrap();
            z.write_all(&a.to_npy()).unwrap();
        }
        z.finish().unwrap();
    }
    let out = dir.join("ds");
    let options = ConvertOptions::default().with_sort_genes(false);
    convert(&Input::detect(&path).unwrap(), &out, options, &|_| {}).unwrap();
    let got = Dataset::open(&out)
        .unwrap()
        .read(0..3)
        .csr::<i32>()
        .unwrap()
        .csr;
    assert_eq!(
        got,
        Csr {
            n_cols: 5,
            indptr: vec![0, 2, 2, 3],
            indices: vec![1, 4, 0],
            values: vec![1, 2, 7]
        }
    );
    assert!(
        convert(
            &Input::detect(&path).unwrap(),
            &out,
            ConvertOptions::default(),
            &|_| {}
        )
        .is_err(),
        "never overwrites"
    );
    let bad = tmpdir("bad-mtx");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(
        bad.join("matrix.mtx"),
        "%%MatrixMarket matrix coordinate integer general\n2 2 1\n3 1 1\n",
    )
    .unwrap();
    let err = convert(
        &Input::detect(&bad).unwrap(),
        &bad.join("o"),
        ConvertOptions::default(),
        &|_| {},
    )
    .unwrap_err();
    assert!(err.to_string().contains("line 3"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
    std::fs::remove_dir_all(bad).unwrap();
}

#[test]
fn a_writer_refuses_to_go_on_after_a_failed_push() {
    // Tiles of 2 cells: a refused block of three cells had filled a tile
    // with its first two before its third was checked, and a writer used
    // on finished with an earlier cell replaced by one of those.
    let dir = tmpdir("failed-push");
    let config = WriterConfig::default().with_tile_size(2).with_level(1);
    let mut w = DatasetWriter::create(&dir, 4, config).unwrap();
    let block = |values: &[f32]| {
        let indptr: Vec<i64> = (0..=values.len() as i64).collect();
        (indptr, vec![1i32; values.len()], values.to_vec())
    };
    let push = |w: &mut DatasetWriter, values: &[f32]| {
        let (indptr, indices, values) = block(values);
        w.push(deltacells::CsrRef {
            n_cols: 4,
            indptr: &indptr,
            indices: &indices,
            values: &values,
        })
    };
    push(&mut w, &[1.0]).unwrap();
    push(&mut w, &[2.0, 3.0, 2.5]).unwrap_err();
    let err = push(&mut w, &[4.0, 5.0]).unwrap_err();
    assert!(
        matches!(err, Error::Input(_)) && err.to_string().contains("earlier push"),
        "{err}"
    );
    assert!(w.finish().unwrap_err().to_string().contains("earlier push"));
    assert!(!dir.join("manifest.json").exists());
    // No chunks a tile: refused (the manifest had said 0 of tiles that had some).
    let config = WriterConfig::default().with_n_chunks(0);
    let err = DatasetWriter::create(tmpdir("no-chunks"), 4, config).unwrap_err();
    assert!(err.to_string().contains("n_chunks"), "{err}");
}
