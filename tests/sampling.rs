//! Which cells an epoch serves: subsets (each cell once, tiles without any
//! never read), draws with replacement by weight (frequencies match the
//! weights), balanced classes (within 4 standard deviations of equal), each
//! under every shuffle, deterministic in `(seed, epoch)`, equal batches per
//! rank; and the bad weights and balance columns refused before any batch.

#[path = "obs_common/mod.rs"]
mod obs_common;

use std::collections::HashMap;
use std::sync::Arc;

use deltacells::dataset::{BatchConfig, BatchRows, Shuffle, Weights};
use deltacells::obs::ObsColumn;
use deltacells::{Dataset, Error};
use obs_common::{write_dataset, Scratch};

const N: usize = 3000;
const SHUFFLES: [Shuffle; 3] = [
    Shuffle::None,
    Shuffle::Block { window_tiles: 2 },
    Shuffle::Random,
];

/// Cell `c`'s class: 80% "common", 15% "rare", 5% "scarce" (missing for
/// every 97th cell, a class of its own).
fn class_of(c: usize) -> i32 {
    if c.is_multiple_of(97) {
        -1
    } else if c.is_multiple_of(20) {
        2
    } else if c % 20 < 4 {
        1
    } else {
        0
    }
}

/// A dataset of `N` cells in tiles of 250, with the categorical `kind`,
/// the numeric `depth` and a second categorical `batch` (cells by thirds).
fn dataset(dir: &Scratch) -> Dataset {
    let kinds = ["common", "rare", "scarce"].map(String::from).to_vec();
    let codes: Vec<i32> = (0..N).map(class_of).collect();
    let thirds: Vec<Option<&str>> = (0..N).map(|c| Some(["a", "b", "c"][c * 3 / N])).collect();
    let depth: Vec<f64> = (0..N).map(|c| c as f64).collect();
    let columns = vec![
        ObsColumn::category("kind", kinds, codes).unwrap(),
        ObsColumn::categorical("batch", thirds.iter().copied()),
        ObsColumn::from_arrow("depth", Arc::new(arrow_array::Float64Array::from(depth))).unwrap(),
    ];
    write_dataset(&dir.0, N, 250, 4, columns)
}

/// The cells of every batch of every rank, and each rank's batch count.
fn epoch(ds: &Dataset, config: &BatchConfig, world: usize) -> (Vec<u64>, Vec<usize>) {
    let (mut cells, mut counts) = (Vec::new(), Vec::new());
    for rank in 0..world {
        let it = ds
            .batches_of::<i32>(config.clone().with_rank(rank, world))
            .unwrap();
        counts.push(it.len());
        for batch in it {
            let batch = batch.unwrap();
            // Every row is the cell's own row.
            let want = ds.read(batch.cells.as_slice()).csr::<i32>().unwrap().csr;
            assert_eq!(batch.rows, BatchRows::Csr(want));
            cells.extend(batch.cells);
        }
    }
    (cells, counts)
}

#[test]
fn a_subset_serves_each_of_its_cells_once_and_reads_no_other_tile() {
    let dir = Scratch::new("sampling-subset");
    let ds = dataset(&dir);
    // Cells of tiles 1, 2 and 9 only (tiles of 250), given out of order,
    // one of them twice.
    let mut subset: Vec<u64> = (300..700).step_by(3).chain(2300..2350).collect();
    subset.reverse();
    subset.push(301);
    let mut want: Vec<u64> = subset.clone();
    want.sort_unstable();
    want.dedup();
    for shuffle in SHUFFLES {
        let config = BatchConfig::default()
            .with_batch_size(32)
            .with_shuffle(shuffle)
            .with_seed(5)
            .with_cells(Some(subset.clone().into()));
        let (mut got, counts) = epoch(&ds, &config, 3);
        assert!(
            counts.iter().all(|&n| n == counts[0]),
            "{shuffle}: {counts:?}"
        );
        if shuffle != Shuffle::None {
            assert_ne!(got, want, "{shuffle}: shuffled");
        }
        got.sort_unstable();
        assert_eq!(got, want, "{shuffle}");
        if shuffle != Shuffle::Random {
            let tiles: usize = ds
                .batches(config.clone())
                .unwrap()
                .map(|b| b.unwrap().stats.tiles_fetched)
                .sum();
            assert!(tiles <= 3, "{shuffle}: {tiles} tiles fetched");
        }
    }
}

#[test]
fn weighted_draws_follow_the_weights() {
    let dir = Scratch::new("sampling-weights");
    let ds = dataset(&dir);
    // Weight 0 for most cells; cells 10, 20, 1500, 2999 weigh 1, 2, 3, 4.
    let mut weights = vec![0.0; N];
    for (c, w) in [(10, 1.0), (20, 2.0), (1500, 3.0), (2999, 4.0)] {
        weights[c] = w;
    }
    let samples = 20_000u64;
    for shuffle in SHUFFLES {
        let config = BatchConfig::default()
            .with_batch_size(100)
            .with_shuffle(shuffle)
            .with_weights(Weights::PerCell(weights.clone().into()))
            .with_samples_per_epoch(Some(samples));
        let (got, counts) = epoch(&ds, &config, 2);
        assert_eq!(got.len() as u64, samples, "{shuffle}");
        assert!(counts.iter().all(|&n| n == counts[0]));
        let mut freq: HashMap<u64, u64> = HashMap::new();
        for c in got {
            *freq.entry(c).or_default() += 1;
        }
        assert_eq!(freq.len(), 4, "{shuffle}: only weighted cells drawn");
        for (c, w) in [(10u64, 1.0), (20, 2.0), (1500, 3.0), (2999, 4.0)] {
            let p = w / 10.0;
            let (mean, sd) = (samples as f64 * p, (samples as f64 * p * (1.0 - p)).sqrt());
            let n = freq[&c] as f64;
            assert!(
                (n - mean).abs() < 4.0 * sd,
                "{shuffle}: cell {c} drawn {n} times, expected {mean}"
            );
        }
        // The same seed and epoch give the same batches; another epoch does not.
        assert_eq!(epoch(&ds, &config, 2).0, epoch(&ds, &config, 2).0);
        assert_ne!(
            epoch(&ds, &config, 2).0,
            epoch(&ds, &config.clone().with_epoch(1), 2).0
        );
    }
}

#[test]
fn balanced_classes_come_equally_often() {
    let dir = Scratch::new("sampling-balance");
    let ds = dataset(&dir);
    let class_count = |cells: &[u64], classes: &dyn Fn(usize) -> i32| {
        let mut freq: HashMap<i32, u64> = HashMap::new();
        for &c in cells {
            *freq.entry(classes(c as usize)).or_default() += 1;
        }
        freq
    };
    let samples = 8_000u64;
    for shuffle in SHUFFLES {
        let config = BatchConfig::default()
            .with_batch_size(64)
            .with_shuffle(shuffle)
            .with_weights(Weights::Balance(vec!["kind".into()]))
            .with_samples_per_epoch(Some(samples));
        let (got, counts) = epoch(&ds, &config, 3);
        assert!(
            counts.iter().all(|&n| n == counts[0]),
            "{shuffle}: {counts:?}"
        );
        assert_eq!(got.len() as u64, samples);
        // Four classes: the three kinds and the missing one.
        let freq = class_count(&got, &class_of);
        assert_eq!(freq.len(), 4, "{shuffle}: {freq:?}");
        let (mean, sd) = (samples as f64 / 4.0, (samples as f64 * 0.25 * 0.75).sqrt());
        for (k, &n) in &freq {
            assert!(
                (n as f64 - mean).abs() < 4.0 * sd,
                "{shuffle}: class {k} {n} times"
            );
        }
    }
    // Two columns: the classes are the combinations present (4 kinds x 3
    // thirds), here within a subset of the first two thirds (8 classes).
    let subset: Vec<u64> = (0..2000).collect();
    let config = BatchConfig::default()
        .with_batch_size(64)
        .with_weights(Weights::Balance(vec!["kind".into(), "batch".into()]))
        .with_cells(Some(subset.into()))
        .with_samples_per_epoch(Some(samples));
    let (got, _) = epoch(&ds, &config, 1);
    assert!(got.iter().all(|&c| c < 2000));
    let both = |c: usize| class_of(c) * 3 + (c * 3 / N) as i32;
    let freq = class_count(&got, &both);
    assert_eq!(freq.len(), 8, "{freq:?}");
    let (mean, sd) = (
        samples as f64 / 8.0,
        (samples as f64 / 8.0 * 7.0 / 8.0).sqrt(),
    );
    for (k, &n) in &freq {
        assert!((n as f64 - mean).abs() < 4.0 * sd, "class {k} {n} times");
    }
}

#[test]
fn uniform_draws_with_replacement_and_bad_weights() {
    let dir = Scratch::new("sampling-bad");
    let ds = dataset(&dir);
    // Draws without weights: uniform with replacement, as many as asked.
    let config = BatchConfig::default()
        .with_batch_size(50)
        .with_samples_per_epoch(Some(5000));
    let (got, _) = epoch(&ds, &config, 1);
    assert_eq!(got.len(), 5000);
    let distinct: std::collections::HashSet<u64> = got.iter().copied().collect();
    assert!(distinct.len() < N, "drawn with replacement");

    let refused = |config: BatchConfig, what: &str| {
        let err = ds.batches(config).expect_err(what);
        assert!(matches!(err, Error::Input(_)), "{what}: {err}");
        err.to_string()
    };
    let with = |w: Vec<f64>| BatchConfig::default().with_weights(Weights::PerCell(w.into()));
    let mut w = vec![1.0; N];
    w[7] = -1.0;
    assert!(refused(with(w.clone()), "negative").contains("cell 7"));
    w[7] = f64::NAN;
    assert!(refused(with(w), "NaN").contains("NaN"));
    assert!(refused(with(vec![0.0; N]), "all zero").contains("every weight is 0"));
    assert!(refused(with(vec![1.0; 5]), "short").contains("one per cell"));
    let balance = |c: &str| BatchConfig::default().with_weights(Weights::Balance(vec![c.into()]));
    refused(balance("no such"), "missing column");
    assert!(refused(balance("depth"), "numeric").contains("not categorical"));
    let outside = BatchConfig::default().with_cells(Some(vec![1, N as u64].into()));
    assert!(refused(outside, "outside").contains("outside"));

    // Weights whose sum passes f64::MAX, each finite: as equal weights (every
    // draw had landed on one cell).
    let mut huge = vec![1e308; N];
    huge[3] = 0.0;
    let draws = (N as u64) * 20;
    let config = with(huge).with_samples_per_epoch(Some(draws));
    let (got, _) = epoch(&ds, &config, 1);
    let distinct: std::collections::HashSet<u64> = got.iter().copied().collect();
    assert!(!distinct.contains(&3));
    assert!(
        distinct.len() > N * 9 / 10,
        "{} cells drawn",
        distinct.len()
    );
}

/// Settings at the ends of their types are refused or served, never a
/// panic: `usize::MAX` batches made ahead (all of them), the epoch after
/// `u64::MAX` (not made ahead), `u64::MAX` draws (a window that cannot be
/// held), and an empty subset asked for draws.
#[test]
fn settings_at_the_ends_of_their_types_are_errors_not_panics() {
    let dir = Scratch::new("sampling-ends");
    let ds = dataset(&dir);
    let base = BatchConfig::default().with_batch_size(64);
    let all: Vec<Vec<u64>> = ds
        .batches_of::<i32>(base.clone().with_prefetch(usize::MAX))
        .unwrap()
        .map(|b| b.unwrap().cells)
        .collect();
    let want: Vec<Vec<u64>> = ds
        .batches_of::<i32>(base.clone())
        .unwrap()
        .map(|b| b.unwrap().cells)
        .collect();
    assert_eq!(all, want);
    let last = base
        .clone()
        .with_epoch(u64::MAX)
        .with_next_epoch_ahead(true);
    let it = ds.batches_of::<i32>(last).unwrap();
    let mut cells: Vec<u64> = it.flat_map(|b| b.unwrap().cells).collect();
    cells.sort_unstable();
    assert_eq!(cells, (0..N as u64).collect::<Vec<_>>());
    for shuffle in [Shuffle::Block { window_tiles: 4 }, Shuffle::Random] {
        let huge = base
            .clone()
            .with_shuffle(shuffle)
            .with_samples_per_epoch(Some(u64::MAX));
        match ds
            .batches_of::<i32>(huge)
            .and_then(|mut it| it.next().transpose())
        {
            Ok(batch) => assert_eq!(batch.unwrap().cells.len(), 64, "{shuffle:?}"),
            Err(e) => assert!(matches!(e, Error::Input(_)), "{shuffle:?}: {e}"),
        }
    }
    let empty = base
        .with_cells(Some(Vec::<u64>::new().into()))
        .with_samples_per_epoch(Some(10));
    let err = ds.batches(empty).err().unwrap().to_string();
    assert!(err.contains("subset") && err.contains("no cell"), "{err}");
}

/// A window of a few cells drawn many times holds as many rows as draws:
/// the memory bound counts those rows, so the window's batches are built a
/// share at a time (its chunks decoded once a share) rather than all at once
/// (8.8 GiB for 2e7 draws of 200 cells under a 64 MiB bound).
#[test]
fn a_window_drawn_many_times_is_built_in_shares_under_the_bound() {
    let dir = Scratch::new("sampling-shares");
    let ds = dataset(&dir);
    let draws = 40_000u64;
    let config = |cache_bytes: usize| {
        BatchConfig::default()
            .with_batch_size(100)
            .with_cells(Some(vec![3, 4, 5, 6].into()))
            .with_samples_per_epoch(Some(draws))
            .with_cache_bytes(cache_bytes)
            .with_prefetch(0)
    };
    let decoded = |cache_bytes: usize| {
        let (mut n, mut chunks) = (0u64, 0usize);
        for batch in ds.batches_of::<i32>(config(cache_bytes)).unwrap() {
            let batch = batch.unwrap();
            assert!(batch.cells.iter().all(|c| (3..7).contains(c)));
            n += batch.cells.len() as u64;
            chunks += batch.stats.chunks_decoded;
        }
        assert_eq!(n, draws);
        chunks
    };
    // The rows (40,000 of them) fit 1 GiB: the window's one chunk decoded
    // once, and once for the first batch, read alone.
    let whole = decoded(1 << 30);
    assert_eq!(whole, 2);
    // Under 1 MiB they do not: several shares, the chunk decoded for each.
    assert!(decoded(1 << 20) > whole);
}
