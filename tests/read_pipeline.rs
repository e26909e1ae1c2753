//! The read pipeline from the outside: every selection, every output and
//! every batch strategy against an independent reading of the written
//! matrix, and an output of the test's own through the public sink trait.

use std::collections::BTreeSet;

use deltacells::dataset::{BatchRows, Pick, RankShare};
use deltacells::engine::{AddedRows, Sink, SinkPart};
use deltacells::{
    BatchConfig, CellSelection, Csr, Dataset, DatasetWriter, GeneSelection, Shuffle, WriterConfig,
};

const GENES: u32 = 500;

/// A reproducible sparse matrix of `n` cells (a plain LCG, so the test
/// needs nothing of the library to make it): rows of 0 to ~60 genes, counts
/// up to 70,000 so some are exceptions.
fn matrix(n: usize) -> Csr<i32> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |bound: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        (state >> 33) % bound
    };
    let mut m = Csr::empty(u64::from(GENES));
    for _ in 0..n {
        let genes: BTreeSet<i32> = (0..next(60))
            .map(|_| next(u64::from(GENES)) as i32)
            .collect();
        for g in genes {
            m.indices.push(g);
            m.values.push(if next(97) == 0 {
                70_000
            } else {
                1 + next(40) as i32
            });
        }
        m.indptr.push(m.indices.len() as i64);
    }
    m
}

/// `m` written as a dataset of small tiles and chunks, opened.
fn dataset(name: &str, m: &Csr<i32>) -> (tempdir::Dir, Dataset) {
    let dir = tempdir::Dir::new(name);
    let config = WriterConfig::default()
        .with_tile_size(64)
        .with_n_chunks(4)
        .with_level(1);
    let mut w = DatasetWriter::create(dir.path(), GENES, config).unwrap();
    w.push(m.as_ref()).unwrap();
    w.finish().unwrap();
    let ds = deltacells::open(dir.path()).unwrap();
    (dir, ds)
}

mod tempdir {
    /// A directory removed when dropped.
    pub struct Dir(std::path::PathBuf);
    impl Dir {
        pub fn new(name: &str) -> Dir {
            let d = std::env::temp_dir()
                .join(format!("deltacells-pipeline-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            Dir(d)
        }
        pub fn path(&self) -> &std::path::Path {
            &self.0
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Row `cell` of `m`: its genes and counts.
fn row(m: &Csr<i32>, cell: u64) -> (&[i32], &[i32]) {
    let (a, b) = (
        m.indptr[cell as usize] as usize,
        m.indptr[cell as usize + 1] as usize,
    );
    (&m.indices[a..b], &m.values[a..b])
}

/// The rows `cells` of `m` over `genes` (all when `None`), dense.
fn dense_reference(m: &Csr<i32>, cells: &[u64], genes: Option<&[u32]>) -> Vec<i32> {
    let cols: Vec<u32> = genes.map_or_else(|| (0..GENES).collect(), <[u32]>::to_vec);
    let mut out = Vec::new();
    for &c in cells {
        let (g, v) = row(m, c);
        for &col in &cols {
            out.push(g.iter().position(|&x| x as u32 == col).map_or(0, |i| v[i]));
        }
    }
    out
}

/// Each cell's total count: an output written only through the public traits.
#[derive(Default)]
struct Totals(Vec<i64>);

struct TotalsPart<'a>(&'a mut [i64]);

impl Sink for Totals {
    type Part<'p> = TotalsPart<'p>;
    fn stores_rows(&self) -> bool {
        false
    }
    fn start(&mut self, _n_cols: u32) {
        self.0.clear();
    }
    fn extend(&mut self, rows: &AddedRows<'_>) -> deltacells::Result<()> {
        self.0.resize(self.0.len() + rows.len(), -1);
        Ok(())
    }
    fn split(&mut self, cuts: &[usize]) -> Vec<TotalsPart<'_>> {
        let start = self.0.len() - cuts.last().copied().unwrap_or(0);
        let mut rest = &mut self.0[start..];
        cuts.windows(2)
            .map(|w| {
                let (part, tail) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
                rest = tail;
                TotalsPart(part)
            })
            .collect()
    }
}

impl SinkPart for TotalsPart<'_> {
    type Value = i32;
    fn stored(&mut self) -> Option<(&mut [i32], &mut [i32])> {
        None
    }
    fn write_row(&mut self, row: usize, _genes: &[i32], counts: &[i32]) {
        self.0[row] = counts.iter().map(|&c| i64::from(c)).sum();
    }
}

#[test]
fn every_selection_and_output_matches_the_matrix() {
    let m = matrix(300);
    let (_dir, ds) = dataset("outputs", &m);
    let list: Vec<u64> = vec![299, 0, 64, 63, 63, 128, 5, 6, 7, 8, 250];
    let mask: Vec<bool> = (0..300)
        .map(|i| i % 7 == 3 || (100..140).contains(&i))
        .collect();
    let masked: Vec<u64> = (0..300u64).filter(|&i| mask[i as usize]).collect();
    let selections: Vec<(CellSelection, Vec<u64>)> = vec![
        (CellSelection::ids(&list), list.clone()),
        (CellSelection::range(30..230), (30..230).collect()),
        (CellSelection::mask(&mask), masked),
        (CellSelection::default(), Vec::new()),
    ];
    let genes = [499u32, 3, 250, 4];
    let sel = GeneSelection::new(GENES, &genes).unwrap();
    for (cells, ids) in &selections {
        // CSR of every gene, both count types.
        let csr = ds.read(cells).csr::<i32>().unwrap();
        assert_eq!(csr.cells, *ids);
        for (r, &c) in ids.iter().enumerate() {
            let (a, b) = (csr.csr.indptr[r] as usize, csr.csr.indptr[r + 1] as usize);
            assert_eq!((&csr.csr.indices[a..b], &csr.csr.values[a..b]), row(&m, c));
        }
        let f = ds.read(cells).csr::<f32>().unwrap();
        assert_eq!(f.csr.indptr, csr.csr.indptr);
        assert!(f
            .csr
            .values
            .iter()
            .zip(&csr.csr.values)
            .all(|(&x, &y)| x == y as f32));
        // Dense rows, of every gene and of a selection, both count types.
        let dense = ds.read(cells).dense::<i32>().unwrap();
        assert_eq!(dense.rows.data(), dense_reference(&m, ids, None));
        let picked = ds.read(cells).genes(&sel).dense::<i32>().unwrap();
        assert_eq!(picked.rows.n_cols(), genes.len());
        assert_eq!(picked.rows.data(), dense_reference(&m, ids, Some(&genes)));
        let picked_f = ds.read(cells).genes(&sel).dense::<f32>().unwrap();
        assert!(picked_f
            .rows
            .data()
            .iter()
            .zip(picked.rows.data())
            .all(|(&x, &y)| x == y as f32));
        // A selection's CSR rows: columns renumbered and sorted.
        let sparse = ds.read(cells).genes(&sel).csr::<i32>().unwrap();
        let want = dense_reference(&m, ids, Some(&genes));
        for (r, dense_row) in want.chunks(genes.len()).enumerate() {
            let (a, b) = (
                sparse.csr.indptr[r] as usize,
                sparse.csr.indptr[r + 1] as usize,
            );
            let expected: Vec<(i32, i32)> = dense_row
                .iter()
                .enumerate()
                .filter(|(_, &v)| v != 0)
                .map(|(k, &v)| (k as i32, v))
                .collect();
            let got: Vec<(i32, i32)> = sparse.csr.indices[a..b]
                .iter()
                .copied()
                .zip(sparse.csr.values[a..b].iter().copied())
                .collect();
            assert_eq!(got, expected);
        }
        // An output of the caller's own, with and without a selection.
        let mut totals = Totals::default();
        ds.read(cells).into_sink(&mut totals).unwrap();
        let want: Vec<i64> = ids
            .iter()
            .map(|&c| row(&m, c).1.iter().map(|&v| i64::from(v)).sum())
            .collect();
        assert_eq!(totals.0, want);
        ds.read(cells).genes(&sel).into_sink(&mut totals).unwrap();
        let want: Vec<i64> = dense_reference(&m, ids, Some(&genes))
            .chunks(genes.len().max(1))
            .map(|r| r.iter().map(|&v| i64::from(v)).sum())
            .collect();
        assert_eq!(totals.0, want);
    }
    // Reading into a buffer again reuses it and gives the same rows; an
    // uncached read gives them too.
    let mut out = Csr::empty(0);
    for _ in 0..2 {
        ds.read(10..200).csr_into::<i32>(&mut out).unwrap();
        assert_eq!(out, ds.read(10..200).uncached().csr::<i32>().unwrap().csr);
    }
    assert!(ds.read([300]).csr::<i32>().is_err());
    // A selection built for other genes is refused before anything is
    // read, by every output, transformed or not.
    let other = GeneSelection::new(GENES + 1, &[0]).unwrap();
    let refusals = [
        ds.read(0..3).genes(&other).dense::<f32>().unwrap_err(),
        ds.read(0..3).genes(&other).csr::<i32>().unwrap_err(),
        ds.read(0..3)
            .genes(&other)
            .into_sink(&mut Totals::default())
            .unwrap_err(),
        ds.read(0..3)
            .genes(&other)
            .normalize(1e4)
            .csr::<f32>()
            .unwrap_err(),
        ds.read(0..3)
            .genes(&other)
            .log1p()
            .dense::<f32>()
            .unwrap_err(),
    ];
    for e in refusals {
        let want = format!(
            "gene selection built for {} genes, the dataset has {GENES}",
            GENES + 1
        );
        assert!(e.to_string().contains(&want), "{e}");
    }
}

#[test]
fn every_batch_strategy_gives_the_rows_a_read_gives() {
    let m = matrix(700);
    let (_dir, ds) = dataset("batches", &m);
    let sel = GeneSelection::new(GENES, &[7, 2, 480]).unwrap();
    // Bounds that hold a decoded window (the scatter and window strategies)
    // and one that cannot (gather), for every order.
    for shuffle in [
        Shuffle::None,
        Shuffle::Block { window_tiles: 3 },
        Shuffle::Random,
    ] {
        for cache_bytes in [0usize, 64 << 20] {
            for (dense, genes) in [
                (false, None),
                (true, None),
                (false, Some(&sel)),
                (true, Some(&sel)),
            ] {
                let world = 3;
                let mut seen = Vec::new();
                let mut counts = Vec::new();
                for rank in 0..world {
                    let config = BatchConfig::default()
                        .with_batch_size(50)
                        .with_seed(9)
                        .with_epoch(2)
                        .with_shuffle(shuffle)
                        .with_rank(rank, world)
                        .with_cache_bytes(cache_bytes)
                        .with_dense(dense)
                        .with_genes(genes.cloned())
                        .with_prefetch(rank);
                    let batches: Vec<_> = ds
                        .batches_of::<i32>(config)
                        .unwrap()
                        .map(Result::unwrap)
                        .collect();
                    counts.push(batches.len());
                    for b in batches {
                        let read = ds.read(&b.cells).genes(genes);
                        let want = if dense {
                            BatchRows::Dense(read.dense::<i32>().unwrap().rows)
                        } else {
                            BatchRows::Csr(read.csr::<i32>().unwrap().csr)
                        };
                        assert_eq!(b.rows, want, "{shuffle} {cache_bytes} {dense}");
                        seen.extend(b.cells);
                    }
                }
                assert!(counts.windows(2).all(|w| w[0] == w[1]), "{counts:?}");
                seen.sort_unstable();
                assert_eq!(
                    seen,
                    (0..700).collect::<Vec<u64>>(),
                    "{shuffle} {cache_bytes}"
                );
            }
        }
    }
}

#[test]
fn loader_worker_spans_are_the_rank_batches_in_pieces() {
    let m = matrix(500);
    let (_dir, ds) = dataset("workers", &m);
    let config = || {
        BatchConfig::default()
            .with_batch_size(16)
            .with_shuffle("block:2".parse().unwrap())
            .with_rank(1, 2)
    };
    let whole: Vec<Vec<u64>> = ds
        .batches(config())
        .unwrap()
        .map(|b| b.unwrap().cells)
        .collect();
    let share = RankShare::new(ds.n_cells(), 16, 1, 2, false);
    assert_eq!(share.len(), whole.len());
    for workers in 1..4 {
        let mut joined = Vec::new();
        for w in 0..workers {
            let span = share.worker_span(w, workers);
            let part = ds.batches(config().with_pick(Pick::Range(span))).unwrap();
            joined.extend(part.map(|b| b.unwrap().cells));
        }
        assert_eq!(joined, whole, "{workers} workers");
    }
}

/// An output that keeps rows as stored but sizes them five entries short,
/// all in its first part.
#[derive(Default)]
struct Short(Vec<i32>, Vec<i32>);

struct ShortPart<'a>(&'a mut [i32], &'a mut [i32]);

impl Sink for Short {
    type Part<'p> = ShortPart<'p>;
    fn stores_rows(&self) -> bool {
        true
    }
    fn start(&mut self, _n_cols: u32) {}
    fn extend(&mut self, rows: &AddedRows<'_>) -> deltacells::Result<()> {
        let nnz = rows.stored_offsets().last().map_or(0, |&n| n as usize);
        self.0 = vec![0; nnz.saturating_sub(5)];
        self.1 = vec![0; nnz.saturating_sub(5)];
        Ok(())
    }
    fn split(&mut self, cuts: &[usize]) -> Vec<ShortPart<'_>> {
        let mut all = Some((&mut self.0[..], &mut self.1[..]));
        (1..cuts.len())
            .map(|_| match all.take() {
                Some((g, v)) => ShortPart(g, v),
                None => ShortPart(&mut [], &mut []),
            })
            .collect()
    }
}

impl SinkPart for ShortPart<'_> {
    type Value = i32;
    fn stored(&mut self) -> Option<(&mut [i32], &mut [i32])> {
        Some((&mut *self.0, &mut *self.1))
    }
    fn write_row(&mut self, _row: usize, _genes: &[i32], _counts: &[i32]) {}
}

#[test]
fn an_output_of_the_wrong_size_is_an_error_whether_rows_are_decoded_or_copied() {
    let m = matrix(300);
    let (_dir, ds) = dataset("short-output", &m);
    // Whole chunks decode into the output; one cell of a chunk is copied
    // out of it (which had panicked in copy_from_slice).
    for cells in [0..300, 0..1] {
        let mut short = Short::default();
        let err = ds.read(cells.clone()).into_sink(&mut short).unwrap_err();
        assert!(
            err.to_string()
                .contains("output buffer `indices` has length"),
            "{cells:?}: {err}"
        );
    }
}
