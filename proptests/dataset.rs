//! Writer -> reader round trips across tile sizes, chunk counts, empty cells
//! and a last tile of one cell, narrow and wide datasets (gene gaps beyond a
//! u16, so gap exceptions occur); full, random-cell, sub-range, gene-selected
//! and dense reads through a local and an in-memory store.

use std::sync::Arc;

use deltacells::dataset::{
    Dataset, DatasetWriter, GeneSelection, MemoryStore, OpenOptions, WriterConfig,
};
use deltacells::{Csr, CsrRef};
use proptest::prelude::*;

/// A dataset to write: the cells (source gene columns), its gene count, tile
/// size, chunks per tile and the sizes of the blocks pushed.
type Case = (Csr<i32>, u32, usize, usize, Vec<usize>);

fn blocks() -> impl Strategy<Value = Case> {
    // Narrow datasets, and wide ones (70k..200k genes) whose gene gaps exceed
    // what a u16 holds, so gap exceptions occur.
    prop_oneof![Just(400u32), 70_000..200_000u32].prop_flat_map(|n_genes| {
        let cell = prop::collection::btree_map(
            0..n_genes as i32,
            prop_oneof![8 => 1..20i32, 1 => 60_000..70_000i32],
            0..12,
        );
        (
            prop::collection::vec(cell, 1..60),
            Just(n_genes),
            1..20usize,
            1..6usize,
            prop::collection::vec(1..25usize, 1..6),
        )
            .prop_map(|(cells, n_genes, tile_size, chunks, block_sizes)| {
                let mut csr = Csr::empty(u64::from(n_genes));
                for c in cells {
                    for (g, v) in c {
                        csr.indices.push(g);
                        csr.values.push(v);
                    }
                    csr.indptr.push(csr.indices.len() as i64);
                }
                (csr, n_genes, tile_size, chunks, block_sizes)
            })
    })
}

/// Reads to check: cells in any order with repeats (as fractions of `n`),
/// and a gene selection (fractions of `n_genes`, plus picks among the genes
/// present so the selection keeps nonzeros).
fn reads() -> impl Strategy<Value = (Vec<f64>, Vec<f64>, Vec<prop::sample::Index>)> {
    (
        prop::collection::vec(0.0..1.0f64, 0..40),
        prop::collection::vec(0.0..1.0f64, 0..30),
        prop::collection::vec(any::<prop::sample::Index>(), 0..30),
    )
}

/// Row `c` of `csr` in output columns (`to_output[source gene]`), sorted.
fn expected_row(csr: &Csr<i32>, to_output: &[i32], c: usize) -> Vec<(i32, i32)> {
    let mut row: Vec<(i32, i32)> = (csr.indptr[c] as usize..csr.indptr[c + 1] as usize)
        .map(|j| (to_output[csr.indices[j] as usize], csr.values[j]))
        .collect();
    row.sort_unstable();
    row
}

fn row_of(got: &Csr<i32>, r: usize) -> Vec<(i32, i32)> {
    (got.indptr[r] as usize..got.indptr[r + 1] as usize)
        .map(|j| (got.indices[j], got.values[j]))
        .collect()
}

proptest! {
    #![proptest_config(crate::config(24))]

    #[test]
    fn writer_reader_round_trip(
        (csr, n_genes, tile_size, chunks, block_sizes) in blocks(),
        sort in any::<bool>(),
        (cell_picks, gene_picks, present_picks) in reads(),
    ) {
        let dir = std::env::temp_dir().join(format!("deltacells-prop-{}-{}", std::process::id(), rand_suffix(&csr)));
        let _ = std::fs::remove_dir_all(&dir);
        let g = n_genes as usize;
        let totals = sort.then(|| (0..g).map(|i| ((i * 7919) % g) as f64).collect());
        let config = WriterConfig::default().with_tile_size(tile_size).with_n_chunks(chunks).with_level(1).with_gene_totals(totals);
        let mut w = DatasetWriter::create(&dir, n_genes, config).unwrap();
        let n = csr.n_rows();
        let (mut start, mut i) = (0, 0);
        while start < n {
            let end = (start + block_sizes[i % block_sizes.len()]).min(n);
            let (lo, hi) = (csr.indptr[start] as usize, csr.indptr[end] as usize);
            let indptr: Vec<i64> = csr.indptr[start..=end].iter().map(|&p| p - lo as i64).collect();
            w.push(CsrRef { n_cols: u64::from(n_genes), indptr: &indptr, indices: &csr.indices[lo..hi], values: &csr.values[lo..hi] }).unwrap();
            start = end;
            i += 1;
        }
        let m = w.finish().unwrap();
        prop_assert_eq!(m.n_tiles(), n.div_ceil(tile_size));
        prop_assert_eq!(*m.tile_cells.last().unwrap() as usize, n - (m.n_tiles() - 1) * tile_size);
        let local = Dataset::open(&dir).unwrap();
        let memory = Dataset::open_store(Arc::new(MemoryStore::from_dir(&dir).unwrap()), OpenOptions::default()).unwrap();
        // Output column of each source gene, through gene_order.
        let order: Vec<i32> = local.gene_order().map_or((0..n_genes as i32).collect(), <[i32]>::to_vec);
        let mut to_output = vec![0i32; g];
        for (out, &src) in order.iter().enumerate() {
            to_output[src as usize] = out as i32;
        }
        let cells: Vec<u64> = cell_picks.iter().map(|f| ((f * n as f64) as u64).min(n as u64 - 1)).collect();
        // Selected output columns: any columns, and columns holding nonzeros.
        let mut selected: Vec<u32> = gene_picks.iter().map(|f| ((f * g as f64) as u32).min(n_genes - 1)).collect();
        if !csr.indices.is_empty() {
            selected.extend(present_picks.iter().map(|p| to_output[csr.indices[p.index(csr.indices.len())] as usize] as u32));
        }
        let mut seen = std::collections::HashSet::new();
        selected.retain(|c| seen.insert(*c));
        let selection = GeneSelection::new(n_genes, &selected).unwrap();
        for ds in [&local, &memory] {
            ds.verify().unwrap();
            let all = ds.read(0..n as u64).csr::<i32>().unwrap().csr;
            for c in 0..n {
                prop_assert_eq!(row_of(&all, c), expected_row(&csr, &to_output, c));
            }
            // Random cells, any order, repeats.
            let got = ds.read(&cells).csr::<i32>().unwrap().csr;
            for (r, &c) in cells.iter().enumerate() {
                prop_assert_eq!(row_of(&got, r), expected_row(&csr, &to_output, c as usize));
            }
            // The same cells through the selection: kept columns renumbered
            // in selection order, rows sorted by their new column.
            let got = ds.read(&cells).genes(&selection).csr::<i32>().unwrap().csr;
            prop_assert_eq!(got.n_cols, selected.len() as u64);
            for (r, &c) in cells.iter().enumerate() {
                let mut want: Vec<(i32, i32)> = expected_row(&csr, &to_output, c as usize)
                    .into_iter()
                    .filter_map(|(col, v)| selection.column(col).map(|k| (k, v)))
                    .collect();
                want.sort_unstable();
                prop_assert_eq!(row_of(&got, r), want);
            }
            // A sub-range through the selection, and dense rows.
            let (a, b) = (cells.first().copied().unwrap_or(0), cells.last().copied().unwrap_or(0));
            let range = a.min(b)..a.max(b) + 1;
            let got = ds.read(range.clone()).genes(&selection).csr::<i32>().unwrap().csr;
            for (r, c) in range.clone().enumerate() {
                let row: Vec<(i32, i32)> = expected_row(&csr, &to_output, c as usize)
                    .into_iter()
                    .filter_map(|(col, v)| selection.column(col).map(|k| (k, v)))
                    .collect();
                let mut row = row;
                row.sort_unstable();
                prop_assert_eq!(row_of(&got, r), row);
            }
            let dense = ds.read(&cells).genes(&selection).dense::<f32>().unwrap();
            for (r, &c) in cells.iter().enumerate() {
                let mut want = vec![0f32; selected.len()];
                for (col, v) in expected_row(&csr, &to_output, c as usize) {
                    if let Some(k) = selection.column(col) {
                        want[k as usize] = v as f32;
                    }
                }
                prop_assert_eq!(&dense.rows.data()[r * selected.len()..(r + 1) * selected.len()], &want[..]);
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
