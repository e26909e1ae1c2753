//! Tile round trips: any CSR block the writer accepts decodes back to exactly
//! itself, as `i32` and as `f32`, on every backend, whatever the chunk count.

use std::collections::BTreeSet;

use deltacells::engine::{ChunkDecoder, RowOut};
use deltacells::format::tile::TileView;
use deltacells::format::tile_writer::TileEncoder;
use deltacells::kernels::Stores;
use deltacells::{Backend, Csr};
use proptest::prelude::*;

/// Counts weighted towards the edges of the `u16` stream and the exception range.
fn count() -> impl Strategy<Value = i32> {
    prop_oneof![
        6 => 1..10i32,
        1 => 10..70_000i32,
        1 => Just(65_535),
        1 => Just(65_536),
        1 => Just(i32::MAX),
        1 => 65_536..=i32::MAX,
    ]
}

/// One cell: sorted distinct genes below `n_genes` (empty cells included).
fn cell(n_genes: u32, max_nnz: usize) -> impl Strategy<Value = Vec<(i32, i32)>> {
    let genes = prop_oneof![
        // Mostly small genes: dense, small gaps.
        prop::collection::btree_set(
            0..n_genes.min(300),
            0..max_nnz.min(n_genes.min(300) as usize) + 1
        ),
        // Anywhere: large gaps, several above 65535 when n_genes allows.
        prop::collection::btree_set(0..n_genes, 0..max_nnz.min(n_genes as usize) + 1),
        // Ends at the last gene, the largest index a tile may hold.
        prop::collection::btree_set(0..n_genes, 0..4).prop_map(move |mut s: BTreeSet<u32>| {
            s.insert(n_genes - 1);
            s
        }),
    ];
    genes.prop_flat_map(|set| {
        let n = set.len();
        prop::collection::vec(count(), n).prop_map(move |counts| {
            set.iter()
                .map(|&g| g as i32)
                .zip(counts)
                .collect::<Vec<_>>()
        })
    })
}

fn block() -> impl Strategy<Value = Csr<i32>> {
    prop_oneof![
        Just(1u32),
        Just(2),
        Just(100),
        Just(36_601),
        Just(70_000),
        Just(300_000),
        Just(1 << 31)
    ]
    .prop_flat_map(|n_genes| {
        (
            Just(n_genes),
            prop::collection::vec(cell(n_genes, 60), 0..24),
        )
    })
    .prop_map(|(n_genes, cells)| {
        let mut csr = Csr {
            n_cols: u64::from(n_genes),
            indptr: vec![0],
            indices: vec![],
            values: vec![],
        };
        for c in cells {
            for (g, v) in c {
                csr.indices.push(g);
                csr.values.push(v);
            }
            csr.indptr.push(csr.indices.len() as i64);
        }
        csr
    })
}

proptest! {
    #![proptest_config(crate::config(96))]

    #[test]
    fn encode_decode_is_identity(csr in block(), chunks in prop_oneof![Just(1usize), Just(8), Just(64), 1..12usize]) {
        let tile = TileEncoder::new().with_chunks(chunks).with_level(1).encode(csr.as_ref()).unwrap();
        let view = TileView::parse(&tile).unwrap();
        prop_assert_eq!(view.n_chunks(), chunks.min(csr.n_rows()));
        for backend in Backend::available() {
            let mut dec = ChunkDecoder::for_backend(backend).unwrap();
            let got: Csr<i32> = dec.decode_tile_to_csr(&view).unwrap();
            prop_assert_eq!(&got, &csr);
            let f: Csr<f32> = dec.decode_tile_to_csr(&view).unwrap();
            prop_assert!(f.values.iter().zip(&csr.values).all(|(&a, &b)| a == b as f32));
            prop_assert_eq!(&f.indices, &csr.indices);
        }
    }

    #[test]
    fn any_rows_decode_to_their_rows(
        csr in block(),
        chunks in 1..12usize,
        mask in proptest::collection::vec(any::<bool>(), 1..40),
    ) {
        // Rows decoded straight into their own slices, any subset in any
        // order (exceptions and empty cells included), are the block's rows.
        let tile = TileEncoder::new().with_chunks(chunks).with_level(1).encode(csr.as_ref()).unwrap();
        let view = TileView::parse(&tile).unwrap();
        let wanted = |cell: usize| mask[cell % mask.len()];
        let span = |cell: usize| csr.indptr[cell] as usize..csr.indptr[cell + 1] as usize;
        for (backend, stores) in Backend::available().into_iter().flat_map(|b| Stores::ALL.map(|s| (b, s))) {
            let mut dec = ChunkDecoder::for_backend(backend).unwrap();
            for (i, c) in view.chunks().enumerate() {
                let cells: Vec<usize> = (c.cell_lo as usize..c.cell_hi as usize).filter(|&x| wanted(x)).rev().collect();
                let mut bufs: Vec<(Vec<i32>, Vec<f32>)> = cells.iter().map(|&x| (vec![0; span(x).len()], vec![0.0; span(x).len()])).collect();
                let mut rows: Vec<RowOut<'_, f32>> = cells.iter().zip(bufs.iter_mut()).map(|(&x, (a, b))| (x, (&mut a[..], &mut b[..]))).collect();
                dec.decode_rows(&view, i, &mut rows, stores).unwrap();
                for (&x, (idx, val)) in cells.iter().zip(&bufs) {
                    prop_assert_eq!(&idx[..], &csr.indices[span(x)]);
                    prop_assert!(val.iter().zip(&csr.values[span(x)]).all(|(&a, &b)| a == b as f32));
                }
            }
        }
    }

    #[test]
    fn chunks_hold_whole_cells_and_balanced_nonzeros(csr in block(), chunks in 1..10usize) {
        let tile = TileEncoder::new().with_chunks(chunks).with_level(1).encode(csr.as_ref()).unwrap();
        let view = TileView::parse(&tile).unwrap();
        let nnz = csr.nnz() as u64;
        let k = view.n_chunks() as u64;
        let max_cell = csr.indptr.windows(2).map(|w| (w[1] - w[0]) as u64).max().unwrap_or(0);
        for c in view.chunks() {
            prop_assert!(c.n_cells() >= 1);
            // A chunk overshoots its share by at most one cell's nonzeros
            // (boundaries fall on cell edges), plus the rounding of the share.
            prop_assert!(c.nnz() <= nnz / k + 2 * max_cell + 1, "chunk of {} for share {}", c.nnz(), nnz / k);
        }
    }
}

/// A tile past the size from which `decode_tile` streams its stores (8 MiB
/// of output): 640 cells of 1,500 to 2,500 genes, counts mostly small with
/// exceptions, decodes to itself on every backend, whole and chunk by chunk
/// (plain stores).
#[test]
fn a_tile_decoded_with_streaming_stores_is_itself() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut csr = Csr {
        n_cols: 36_601,
        indptr: vec![0],
        indices: vec![],
        values: vec![],
    };
    for _ in 0..640 {
        let n = 1_500 + (next() % 1_000) as usize;
        let mut gene = (next() % 7) as i32;
        for _ in 0..n {
            csr.indices.push(gene);
            csr.values.push(match next() % 1_000 {
                0 => 70_000 + (next() % 1_000) as i32,
                1..=99 => 10 + (next() % 500) as i32,
                _ => 1 + (next() % 5) as i32,
            });
            gene += 1 + (next() % 23) as i32;
        }
        csr.indptr.push(csr.indices.len() as i64);
    }
    assert!(csr.indices.len() * 8 >= 8 << 20, "the tile streams");
    let tile = TileEncoder::new()
        .with_chunks(16)
        .with_level(1)
        .encode(csr.as_ref())
        .unwrap();
    let view = TileView::parse(&tile).unwrap();
    for backend in Backend::available() {
        let mut dec = ChunkDecoder::for_backend(backend).unwrap();
        let got: Csr<i32> = dec.decode_tile_to_csr(&view).unwrap();
        assert!(got == csr, "{backend}: streamed tile");
        let f: Csr<f32> = dec.decode_tile_to_csr(&view).unwrap();
        assert!(
            f.values
                .iter()
                .zip(&csr.values)
                .all(|(&a, &b)| a == b as f32),
            "{backend}: f32"
        );
        for (i, c) in view.chunks().enumerate() {
            let r = c.nnz_lo as usize..c.nnz_hi as usize;
            let (mut idx, mut val) = (vec![0; r.len()], vec![0i32; r.len()]);
            dec.decode_chunk(&view, i, &mut idx, &mut val).unwrap();
            assert!(
                idx == csr.indices[r.clone()] && val == csr.values[r],
                "{backend}: chunk {i}"
            );
        }
    }
}
