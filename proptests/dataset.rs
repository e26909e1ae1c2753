//! Writer -> reader round trips across tile sizes, chunk counts, empty cells
//! and a last tile of one cell; reads through a local and an in-memory store.

use std::sync::Arc;

use deltacells::dataset::{Dataset, DatasetWriter, MemoryStore, OpenOptions, WriterConfig};
use deltacells::{Csr, CsrRef};
use proptest::prelude::*;

fn blocks() -> impl Strategy<Value = (Csr<i32>, usize, usize, Vec<usize>)> {
    let cell = prop::collection::btree_map(
        0..400i32,
        prop_oneof![8 => 1..20i32, 1 => 60_000..70_000i32],
        0..12,
    );
    (
        prop::collection::vec(cell, 1..60),
        1..20usize,
        1..6usize,
        prop::collection::vec(1..25usize, 1..6),
    )
        .prop_map(|(cells, tile_size, chunks, block_sizes)| {
            let mut csr = Csr::empty(400);
            for c in cells {
                for (g, v) in c {
                    csr.indices.push(g);
                    csr.values.push(v);
                }
                csr.indptr.push(csr.indices.len() as i64);
            }
            (csr, tile_size, chunks, block_sizes)
        })
}

proptest! {
    #![proptest_config(crate::config(24))]

    #[test]
    fn writer_reader_round_trip((csr, tile_size, chunks, block_sizes) in blocks(), sort in any::<bool>()) {
        let dir = std::env::temp_dir().join(format!("deltacells-prop-{}-{}", std::process::id(), rand_suffix(&csr)));
        let _ = std::fs::remove_dir_all(&dir);
        let totals = sort.then(|| (0..400).map(|g| ((g * 7919) % 400) as f64).collect());
        let config = WriterConfig { tile_size, n_chunks: chunks, level: 1, gene_totals: totals, ..WriterConfig::default() };
        let mut w = DatasetWriter::create(&dir, 400, config).unwrap();
        let n = csr.n_rows();
        let (mut start, mut i) = (0, 0);
        while start < n {
            let end = (start + block_sizes[i % block_sizes.len()]).min(n);
            let (lo, hi) = (csr.indptr[start] as usize, csr.indptr[end] as usize);
            let indptr: Vec<i64> = csr.indptr[start..=end].iter().map(|&p| p - lo as i64).collect();
            w.push(CsrRef { n_cols: 400, indptr: &indptr, indices: &csr.indices[lo..hi], values: &csr.values[lo..hi] }).unwrap();
            start = end;
            i += 1;
        }
        let m = w.finish().unwrap();
        prop_assert_eq!(m.n_tiles(), n.div_ceil(tile_size));
        prop_assert_eq!(*m.tile_cells.last().unwrap() as usize, n - (m.n_tiles() - 1) * tile_size);
        let local = Dataset::open(&dir).unwrap();
        let memory = Dataset::open_store(Arc::new(MemoryStore::from_dir(&dir).unwrap()), OpenOptions::default()).unwrap();
        for ds in [&local, &memory] {
            ds.verify().unwrap();
            let got = ds.read_range::<i32>(0..n as u64, None).unwrap().csr;
            // Map output columns back to source genes through gene_order.
            let order: Vec<i32> = ds.gene_order().map_or((0..400).collect(), <[i32]>::to_vec);
            for c in 0..n {
                let mut back: Vec<(i32, i32)> = (got.indptr[c] as usize..got.indptr[c + 1] as usize)
                    .map(|j| (order[got.indices[j] as usize], got.values[j]))
                    .collect();
                back.sort_unstable();
                let want: Vec<(i32, i32)> =
                    (csr.indptr[c] as usize..csr.indptr[c + 1] as usize).map(|j| (csr.indices[j], csr.values[j])).collect();
                prop_assert_eq!(back, want);
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// A name component that differs between cases run in one process.
fn rand_suffix(csr: &Csr<i32>) -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed) * 1_000_003 + csr.nnz() as u64
}
