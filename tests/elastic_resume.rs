//! Elastic resume through real batch iterators: jobs of different shapes
//! (ranks, loader workers, `drop_last`) take turns at one epoch, each
//! resumed from what the ones before delivered, with every batch strategy;
//! every batch holds the rows a read of its cells gives, and over the epoch
//! every cell comes exactly once.

use std::collections::BTreeMap;
use std::sync::Arc;

use deltacells::dataset::{BatchRows, JobShape, Pick, RankShare, Remaining};
use deltacells::synth::{Synth, SynthConfig};
use deltacells::{BatchConfig, Dataset, DatasetWriter, GeneSelection, Shuffle, WriterConfig};

const CELLS: u64 = 600;
const GENES: u32 = 300;

/// A dataset of synthetic cells in tiles of 48 (13 tiles), in a directory
/// removed when the guard drops.
fn dataset(name: &str) -> (Dir, Dataset) {
    let dir =
        Dir(std::env::temp_dir().join(format!("deltacells-resume-{}-{name}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    let synth = Synth::new(SynthConfig {
        n_genes: GENES,
        median_umis: 150.0,
        n_types: 3,
        seed: 5,
    });
    let config = WriterConfig::default()
        .with_tile_size(48)
        .with_n_chunks(3)
        .with_level(1);
    let mut w = DatasetWriter::create(&dir.0, GENES, config).unwrap();
    w.push(synth.block(0, CELLS as usize).as_ref()).unwrap();
    w.finish().unwrap();
    let ds = deltacells::open(&dir.0).unwrap();
    (dir, ds)
}

struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One rank's first `take` batches of an epoch of `epoch` positions, as a loader over `shape.workers`
/// workers delivers them (one from each worker's span in turn), each
/// worker an iterator of its own over its span; every batch checked
/// against a read of its cells.
fn loader_take(
    ds: &Dataset,
    config: &BatchConfig,
    shape: JobShape,
    epoch: u64,
    take: usize,
) -> Vec<Vec<u64>> {
    let n = Remaining::new(epoch, &config.delivered).unwrap().len();
    let share = RankShare::new(
        n,
        config.batch_size,
        config.rank,
        config.world_size,
        shape.drop_last,
    );
    let mut workers: Vec<_> = (0..shape.workers)
        .map(|w| {
            let span = share.worker_span(w, shape.workers);
            ds.batches_of::<i32>(config.clone().with_pick(Pick::Range(span)))
                .unwrap()
        })
        .collect();
    let mut out = Vec::new();
    while out.len() < take {
        let before = out.len();
        for worker in workers.iter_mut() {
            if out.len() == take {
                break;
            }
            if let Some(b) = worker.next() {
                let b = b.unwrap();
                let read = ds.read(&b.cells).genes(config.genes.as_ref());
                let want = if config.dense {
                    BatchRows::Dense(read.dense::<i32>().unwrap().rows)
                } else {
                    BatchRows::Csr(read.csr::<i32>().unwrap().csr)
                };
                assert_eq!(b.rows, want);
                out.push(b.cells);
            }
        }
        assert!(
            out.len() > before,
            "the loader ran dry before {take} batches"
        );
    }
    out
}

#[test]
fn jobs_of_three_shapes_share_one_epoch_and_every_cell_comes_once() {
    let (_dir, ds) = dataset("jobs");
    let sel = GeneSelection::new(GENES, &[4, 1, 250]).unwrap();
    // 2 ranks x 2 workers, then 3 ranks x 1 worker, then 1 rank x 3
    // workers that finishes the epoch (dropping its last cells or not).
    let jobs = [
        (JobShape::new(2, 2, 25, false), Some(5)),
        (JobShape::new(3, 1, 25, true), Some(3)),
        (JobShape::new(1, 3, 40, false), None),
        (JobShape::new(1, 3, 40, true), None),
    ];
    for shuffle in [
        Shuffle::None,
        Shuffle::Block { window_tiles: 2 },
        Shuffle::Random,
    ] {
        for cache_bytes in [0usize, 64 << 20] {
            for (dense, genes) in [(false, None), (true, None), (false, Some(&sel))] {
                // The last job either keeps or drops its last cells.
                for last in [2, 3] {
                    let mut remaining = Remaining::all(CELLS);
                    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
                    for (job, &(shape, stop)) in
                        jobs[..2].iter().chain(&jobs[last..=last]).enumerate()
                    {
                        let mut counts = Vec::new();
                        for rank in 0..shape.world_size {
                            let config = BatchConfig::default()
                                .with_batch_size(shape.batch_size)
                                .with_seed(3)
                                .with_epoch(1)
                                .with_shuffle(shuffle)
                                .with_rank(rank, shape.world_size)
                                .with_drop_last(shape.drop_last)
                                .with_cache_bytes(cache_bytes)
                                .with_dense(dense)
                                .with_genes(genes.cloned())
                                .with_prefetch(rank % 2)
                                .with_delivered(remaining.delivered());
                            let all = ds.batches_of::<i32>(config.clone()).unwrap().len();
                            counts.push(all);
                            let batches =
                                loader_take(&ds, &config, shape, CELLS, stop.unwrap_or(all));
                            for c in batches.into_iter().flatten() {
                                *seen.entry(c).or_default() += 1;
                            }
                        }
                        assert!(counts.windows(2).all(|w| w[0] == w[1]), "{counts:?}");
                        remaining = shape.after(&remaining, stop.unwrap_or(counts[0])).unwrap();
                        let case = format!("{shuffle} {cache_bytes} {dense} job {job}");
                        assert_eq!(seen.len() as u64, CELLS - remaining.len(), "{case}");
                    }
                    let case = format!("{shuffle} {cache_bytes} {dense} last {last}");
                    assert!(seen.values().all(|&n| n == 1), "{case}: a cell came twice");
                    if last == 2 {
                        assert_eq!(seen.len() as u64, CELLS, "{case}");
                    } else {
                        // Dropped: fewer than one batch per rank of the last job.
                        assert!(seen.len() as u64 > CELLS - 40, "{case}");
                        assert!(seen.keys().all(|&c| c < CELLS));
                    }
                }
            }
        }
    }
}

#[test]
fn subsets_and_draws_resume_by_epoch_position() {
    let (_dir, ds) = dataset("populations");
    let subset: Arc<[u64]> = (0..CELLS).filter(|c| c % 3 != 1).collect();
    // A subset (each of its cells once), and uniform draws with replacement:
    // a resumed epoch serves the same positions, so the same draws.
    for (cells, samples) in [(Some(subset), None), (None, Some(450))] {
        for shuffle in [Shuffle::Block { window_tiles: 2 }, Shuffle::Random] {
            let base = BatchConfig::default()
                .with_batch_size(20)
                .with_seed(8)
                .with_shuffle(shuffle)
                .with_cells(cells.clone())
                .with_samples_per_epoch(samples);
            let mut whole: Vec<u64> = ds
                .batches(base.clone())
                .unwrap()
                .flat_map(|b| b.unwrap().cells)
                .collect();
            whole.sort_unstable();
            let epoch = whole.len() as u64;
            let mut remaining = Remaining::all(epoch);
            let mut got = Vec::new();
            let jobs = [
                (JobShape::new(2, 2, 20, false), Some(4)),
                (JobShape::new(3, 1, 20, false), None),
            ];
            for (shape, stop) in jobs {
                let mut counts = Vec::new();
                for rank in 0..shape.world_size {
                    let config = base
                        .clone()
                        .with_rank(rank, shape.world_size)
                        .with_delivered(remaining.delivered());
                    let all = ds.batches(config.clone()).unwrap().len();
                    counts.push(all);
                    let batches = loader_take(&ds, &config, shape, epoch, stop.unwrap_or(all));
                    got.extend(batches.into_iter().flatten());
                }
                remaining = shape.after(&remaining, stop.unwrap_or(counts[0])).unwrap();
            }
            got.sort_unstable();
            assert_eq!(got, whole, "{shuffle} {samples:?}");
        }
    }
}

#[test]
fn a_state_of_another_epoch_size_is_refused() {
    let (_dir, ds) = dataset("refused");
    let config = BatchConfig::default().with_delivered(vec![0..10, 590..601]);
    let e = ds.batches(config).expect_err("a range past the epoch");
    assert!(
        e.to_string().contains("outside the epoch's 600 cells"),
        "{e}"
    );
    let config = BatchConfig::default().with_delivered(vec![10..20, 0..5]);
    let e = ds.batches(config).expect_err("unsorted ranges");
    assert!(e.to_string().contains("sorted and disjoint"), "{e}");
}
