//! Every tile kernel table this CPU runs equals the scalar reference: the same
//! `Result` for every input, and the same output whenever it is `Ok` (after a
//! fault the output is unspecified, for the reference too).
//!
//! Inputs aim at the vector code's edges: lengths around every vector width,
//! slices starting at odd offsets (outputs at every offset within a vector,
//! where streaming stores begin), empty and giant cells, gaps and counts of 0
//! and 65535, cells whose indices reach exactly `n_genes - 1` or `n_genes`, and
//! exceptions at the first and last nonzero of a cell and of the chunk.

use deltacells::kernels::reference::tile as scalar;
use deltacells::kernels::{
    Backend, CellBounds, Exceptions, Fault, KernelTable, Planes, Stores, TileKernels,
};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, Index};

/// Lengths at and around every vector width (8, 16 and 64 lanes or bytes).
const EDGE_LENGTHS: [usize; 14] = [0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129];

/// The largest `n_genes` for which the vector prefix sum runs (above it the
/// kernels defer to the reference; see `generic::WRAP_SAFE_GENES`).
const WRAP_SAFE_GENES: u32 = u32::MAX - 65534;

/// Every vector table this CPU runs (the list every suite iterates; see
/// `every_table_the_cpu_reports_is_exercised`).
fn vector_tables() -> Vec<&'static TileKernels> {
    crate::tables::<TileKernels>("tile_kernels")
        .into_iter()
        .filter(|t| t.backend() != Backend::Scalar)
        .collect()
}

/// `data` copied to a fresh buffer `offset` elements past its start, so the
/// kernels see a slice that is not vector-aligned.
fn shifted<T: Copy + Default>(data: &[T], offset: usize) -> Vec<T> {
    let mut buf = vec![T::default(); offset + data.len()];
    buf[offset..].copy_from_slice(data);
    buf
}

/// `values` as byte planes (the reference split).
fn planes_of(values: &[u16]) -> Vec<u8> {
    let mut planes = vec![0u8; 2 * values.len()];
    scalar::split_planes(values, &mut planes);
    planes
}

/// A length: mostly the edges, sometimes anything up to a few cells' worth.
fn length() -> impl Strategy<Value = usize> {
    prop_oneof![3 => select(EDGE_LENGTHS.to_vec()), 1 => 0..3000usize]
}

/// A cell's nonzero count: empty, tiny, at an edge, or realistic.
fn cell_len() -> impl Strategy<Value = usize> {
    prop_oneof![
        2 => Just(0usize),
        3 => select(EDGE_LENGTHS.to_vec()),
        3 => 1..40usize,
        2 => 100..2500usize,
    ]
}

/// A stored value that is never 0: small as in real data, any, or the marker.
fn nonzero_u16() -> impl Strategy<Value = u16> {
    prop_oneof![6 => 1..=16u16, 2 => 17..=2000u16, 1 => 1..=u16::MAX, 1 => Just(u16::MAX)]
}

/// The step between consecutive gene indices of a cell: mostly small, rarely
/// at or above the 65535 that makes a gap exception.
fn index_step() -> impl Strategy<Value = u32> {
    prop_oneof![
        40 => 1..=20u32,
        4 => 21..=5000u32,
        1 => Just(65_535u32),
        1 => Just(65_536u32),
        1 => 65_537..=400_000u32,
    ]
}

/// Positions to break: usually none.
fn breaks() -> impl Strategy<Value = Vec<Index>> {
    prop_oneof![3 => Just(Vec::new()), 1 => vec(any::<Index>(), 1..3)]
}

/// A chunk: `indptr`-style bounds (starting at an arbitrary base, as a chunk
/// inside a tile does) and one stored gap per nonzero.
#[derive(Clone, Debug)]
struct Chunk {
    bounds: Vec<i64>,
    gaps: Vec<u16>,
}

impl Chunk {
    fn n(&self) -> usize {
        self.gaps.len()
    }

    fn cells(&self) -> CellBounds<'_> {
        CellBounds::new(&self.bounds, self.n()).expect("valid bounds")
    }

    /// `(start, end)` of every cell, relative to the chunk.
    fn spans(&self) -> Vec<(usize, usize)> {
        self.cells().iter().collect()
    }

    /// The largest true (`u64`) last index over the cells.
    fn max_total(&self) -> u64 {
        self.spans()
            .iter()
            .map(|&(s, e)| self.gaps[s..e].iter().map(|&g| u64::from(g)).sum())
            .max()
            .unwrap_or(0)
    }
}

/// Chunks whose gaps are valid except for the zero gaps `breaks` injects; a
/// cell's first gap is 0 (gene 0) half the time, which is legal.
fn chunk_with(lens: impl Strategy<Value = Vec<usize>>) -> impl Strategy<Value = Chunk> {
    (lens, 0..5000i64).prop_flat_map(|(lens, base)| {
        let n: usize = lens.iter().sum();
        let firsts = vec(any::<bool>(), lens.len());
        (
            Just(lens),
            Just(base),
            vec(nonzero_u16(), n),
            firsts,
            breaks(),
        )
            .prop_map(|(lens, base, mut gaps, zero_first, zero_at)| {
                let mut bounds = vec![base];
                for &len in &lens {
                    if zero_first[bounds.len() - 1] && len > 0 {
                        let start = (bounds[bounds.len() - 1] - base) as usize;
                        gaps[start] = 0;
                    }
                    bounds.push(bounds[bounds.len() - 1] + len as i64);
                }
                if !gaps.is_empty() {
                    for i in zero_at {
                        let at = i.index(gaps.len());
                        gaps[at] = 0;
                    }
                }
                Chunk { bounds, gaps }
            })
    })
}

fn chunk() -> impl Strategy<Value = Chunk> {
    chunk_with(vec(cell_len(), 0..10))
}

/// An `n_genes` for `chunk`: one that its largest index just fits (`== n_genes
/// - 1`) or just reaches, one a little lower, or one of the boundaries.
fn pick_n_genes(chunk: &Chunk, choice: u8, random: u32) -> u32 {
    let top = chunk.max_total();
    let clamp = |x: u64| x.min(u64::from(u32::MAX)) as u32;
    match choice {
        0 | 1 => clamp(top + 1),
        2 => clamp(top),
        3 => clamp(top.saturating_sub(u64::from(random % 64))),
        4 => random,
        5 => 1 << 31,
        6 => WRAP_SAFE_GENES,
        _ => u32::MAX,
    }
}

/// Runs `gaps_to_indices` with every table on slices offset by `offsets` and
/// compares with the reference.
fn check_gaps_to_indices(
    chunk: &Chunk,
    n_genes: u32,
    offsets: (usize, usize),
) -> Result<(), TestCaseError> {
    let n = chunk.n();
    let planes = planes_of(&chunk.gaps);
    let mut expected = vec![0i32; n];
    let want = TileKernels::scalar().gaps_to_indices(
        Planes::split(&planes),
        chunk.cells(),
        n_genes,
        &mut expected,
        Stores::Cached,
    );
    let input = shifted(&planes, offsets.0);
    for (t, stores) in vector_tables()
        .into_iter()
        .flat_map(|t| Stores::ALL.map(|s| (t, s)))
    {
        let mut out = vec![-1i32; offsets.1 + n];
        let got = t.gaps_to_indices(
            Planes::split(&input[offsets.0..]),
            chunk.cells(),
            n_genes,
            &mut out[offsets.1..],
            stores,
        );
        prop_assert_eq!(got, want, "{} {:?} n_genes={}", t.isa(), stores, n_genes);
        if want.is_ok() {
            prop_assert_eq!(&out[offsets.1..], &expected[..], "{} {:?}", t.isa(), stores);
        }
    }
    Ok(())
}

/// Counts planes of `n` values with zeros injected at `zero_at`.
fn counts_planes(values: &[u16], zero_at: &[Index]) -> Vec<u8> {
    let mut values = values.to_vec();
    if !values.is_empty() {
        for i in zero_at {
            let at = i.index(values.len());
            values[at] = 0;
        }
    }
    planes_of(&values)
}

proptest! {
    #![proptest_config(crate::config(256))]

    #[test]
    fn recombine_u16_matches(values in length().prop_flat_map(|n| vec(any::<u16>(), n)), off in (0..8usize, 0..17usize)) {
        let planes = planes_of(&values);
        let mut expected = vec![0u16; values.len()];
        TileKernels::scalar().recombine_u16(&planes, &mut expected);
        prop_assert_eq!(&expected, &values);
        let input = shifted(&planes, off.0);
        for t in vector_tables() {
            let mut out = vec![0xDEADu16; off.1 + values.len()];
            t.recombine_u16(&input[off.0..], &mut out[off.1..]);
            prop_assert_eq!(&out[off.1..], &expected[..], "{}", t.isa());
        }
    }

    #[test]
    fn split_planes_matches(values in length().prop_flat_map(|n| vec(any::<u16>(), n)), off in (0..8usize, 0..17usize)) {
        let expected = planes_of(&values);
        let input = shifted(&values, off.0);
        for t in vector_tables() {
            let mut out = vec![0xA5u8; off.1 + expected.len()];
            t.split_planes(&input[off.0..], &mut out[off.1..]);
            prop_assert_eq!(&out[off.1..], &expected[..], "{}", t.isa());
        }
    }

    #[test]
    fn counts_match(
        values in length().prop_flat_map(|n| vec(nonzero_u16(), n)),
        zero_at in breaks(),
        off in (0..8usize, 0..17usize),
    ) {
        let planes = counts_planes(&values, &zero_at);
        let n = values.len();
        let mut want_i = vec![0i32; n];
        let want = TileKernels::scalar().counts_i32(Planes::split(&planes), &mut want_i, Stores::Cached);
        let mut want_f = vec![0f32; n];
        prop_assert_eq!(TileKernels::scalar().counts_f32(Planes::split(&planes), &mut want_f, Stores::Cached), want);
        let input = shifted(&planes, off.0);
        for (t, stores) in vector_tables().into_iter().flat_map(|t| Stores::ALL.map(|s| (t, s))) {
            let mut out_i = vec![-1i32; off.1 + n];
            prop_assert_eq!(t.counts_i32(Planes::split(&input[off.0..]), &mut out_i[off.1..], stores), want, "{} {:?} i32", t.isa(), stores);
            let mut out_f = vec![-1f32; off.1 + n];
            prop_assert_eq!(t.counts_f32(Planes::split(&input[off.0..]), &mut out_f[off.1..], stores), want, "{} {:?} f32", t.isa(), stores);
            if want.is_ok() {
                prop_assert_eq!(&out_i[off.1..], &want_i[..], "{} {:?} i32", t.isa(), stores);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                prop_assert_eq!(bits(&out_f[off.1..]), bits(&want_f), "{} {:?} f32", t.isa(), stores);
            }
        }
    }

    #[test]
    fn gaps_to_indices_matches(
        chunk in chunk(),
        choice in 0..8u8,
        random in any::<u32>(),
        off in (0..8usize, 0..17usize),
    ) {
        check_gaps_to_indices(&chunk, pick_n_genes(&chunk, choice, random), off)?;
    }

    #[test]
    fn gap_exceptions_match(
        chunk in chunk_with(vec(cell_len(), 1..8)),
        picks in vec(any::<Index>(), 0..8),
        edges in any::<[bool; 4]>(),
        payloads in vec(1..=200_000u32, 16),
        unmarked in prop_oneof![4 => Just(None), 1 => any::<Index>().prop_map(Some)],
        choice in 0..4u8,
        random in any::<u32>(),
        off in (0..8usize, 0..17usize),
    ) {
        let n = chunk.n();
        prop_assume!(n > 0);
        // Positions: random ones, plus (when picked) the chunk's first and last
        // nonzero and the first and last of one cell, so several can share a cell.
        let mut positions: Vec<u32> = picks.iter().map(|i| i.index(n) as u32).collect();
        let spans: Vec<_> = chunk.spans().into_iter().filter(|(s, e)| e > s).collect();
        let (cs, ce) = spans[picks.first().map_or(0, |i| i.index(spans.len()))];
        for (take, p) in edges.into_iter().zip([0, n - 1, cs, ce - 1]) {
            if take {
                positions.push(p as u32);
            }
        }
        positions.sort_unstable();
        positions.dedup();
        let payloads: Vec<u32> = payloads.iter().cycle().take(positions.len()).copied().collect();
        let mut gaps = chunk.gaps.clone();
        for &p in &positions {
            gaps[p as usize] = u16::MAX;
        }
        if let (Some(i), false) = (unmarked, positions.is_empty()) {
            let p = positions[i.index(positions.len())] as usize;
            gaps[p] = 7;
        }
        let planes = planes_of(&gaps);
        let mut base = vec![0i32; n];
        TileKernels::scalar().gaps_to_indices(Planes::split(&planes), chunk.cells(), u32::MAX, &mut base, Stores::Cached).ok();
        // The reference's `+=` wants indices below 2^31 throughout, as in a tile.
        let top = spans.iter().map(|&(_, e)| base[e - 1] as u64).max().unwrap_or(0)
            + payloads.iter().map(|&p| u64::from(p)).sum::<u64>();
        let n_genes = match choice {
            0 => top + 1,
            1 => top,
            2 => top.saturating_sub(u64::from(random % 200_000)),
            _ => u64::from(random % (1 << 31)),
        }.min(1 << 31) as u32;
        let mut expected = base.clone();
        let exceptions = Exceptions::new(Planes::split(&planes), &positions, &payloads);
        let want = TileKernels::scalar().gap_exceptions(exceptions, chunk.cells(), n_genes, &mut expected);
        let input = shifted(&planes, off.0);
        for t in vector_tables() {
            let mut out = shifted(&base, off.1);
            let exceptions = Exceptions::new(Planes::split(&input[off.0..]), &positions, &payloads);
            let got = t.gap_exceptions(exceptions, chunk.cells(), n_genes, &mut out[off.1..]);
            prop_assert_eq!(got, want, "{}", t.isa());
            if want.is_ok() {
                prop_assert_eq!(&out[off.1..], &expected[..], "{}", t.isa());
            }
        }
    }

    /// `vexc` application has one implementation for every backend (each
    /// entry touches one value; see `TileKernels`), so it is checked against
    /// the rule itself rather than against a copy of itself.
    #[test]
    fn value_exceptions_replace_marked_counts(
        values in (1..300usize).prop_flat_map(|n| vec(nonzero_u16(), n)),
        picks in vec(any::<Index>(), 0..6),
        unmarked in prop_oneof![3 => Just(None), 1 => any::<Index>().prop_map(Some)],
        payload in 65_536..=i32::MAX as u32,
    ) {
        let n = values.len();
        let mut positions: Vec<u32> = picks.iter().map(|i| i.index(n) as u32).chain([0, n as u32 - 1]).collect();
        positions.sort_unstable();
        positions.dedup();
        let mut values = values;
        for &p in &positions {
            values[p as usize] = u16::MAX;
        }
        if let Some(i) = unmarked {
            values[positions[i.index(positions.len())] as usize] = 1;
        }
        let planes = planes_of(&values);
        let payloads: Vec<u32> = (0..positions.len() as u32).map(|k| payload - k).collect();
        let mut base_i = vec![0i32; n];
        let mut base_f = vec![0f32; n];
        TileKernels::scalar().counts_i32(Planes::split(&planes), &mut base_i, Stores::Cached).unwrap();
        TileKernels::scalar().counts_f32(Planes::split(&planes), &mut base_f, Stores::Cached).unwrap();
        // What the rule says, independently of the function: the first
        // position whose stored value is not the marker is the fault, and
        // otherwise every payload lands at its position.
        let first_unmarked = positions.iter().find(|&&p| values[p as usize] != u16::MAX);
        let want = match first_unmarked {
            Some(&p) => Err(Fault::Unmarked { position: u64::from(p), stored: values[p as usize] }),
            None => Ok(()),
        };
        let (mut got_i, mut got_f) = (base_i.clone(), base_f.clone());
        let exceptions = Exceptions::new(Planes::split(&planes), &positions, &payloads);
        prop_assert_eq!(scalar::apply_value_exceptions(exceptions, &mut got_i), want);
        prop_assert_eq!(scalar::apply_value_exceptions(exceptions, &mut got_f), want);
        if want.is_ok() {
            for (&p, &v) in positions.iter().zip(&payloads) {
                base_i[p as usize] = v as i32;
                base_f[p as usize] = v as f32;
            }
            prop_assert_eq!(got_i, base_i);
            prop_assert_eq!(got_f.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                base_f.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
        }
    }

    #[test]
    fn indices_to_gaps_matches(
        (lens, steps, firsts) in vec(cell_len(), 0..10).prop_flat_map(|lens| {
            let n: usize = lens.iter().sum();
            let cells = lens.len();
            (Just(lens), vec(index_step(), n), vec(prop_oneof![Just(0u32), 1..100u32, 65_530..=70_000u32], cells))
        }),
        off in (0..8usize, 0..17usize),
    ) {
        // Strictly increasing indices per cell; the steps stay far below 2^31.
        let mut bounds = vec![0i64];
        let mut indices = Vec::new();
        let mut step = steps.iter();
        for (&len, &first) in lens.iter().zip(&firsts) {
            let mut g = first;
            for k in 0..len {
                if k > 0 {
                    g += *step.next().expect("enough steps");
                }
                indices.push(g as i32);
            }
            bounds.push(indices.len() as i64);
        }
        let n = indices.len();
        let cells = CellBounds::new(&bounds, n).expect("valid bounds");
        let mut want = vec![0u16; n];
        // A list that already holds an entry: the kernels append to it.
        let mut want_exc = vec![(u32::MAX, 1)];
        TileKernels::scalar().indices_to_gaps(&indices, cells, &mut want, &mut want_exc);
        let input = shifted(&indices, off.0);
        for t in vector_tables() {
            let mut out = vec![0xBEEFu16; off.1 + n];
            let mut exc = vec![(u32::MAX, 1)];
            t.indices_to_gaps(&input[off.0..], cells, &mut out[off.1..], &mut exc);
            prop_assert_eq!(&out[off.1..], &want[..], "{}", t.isa());
            prop_assert_eq!(&exc, &want_exc, "{}", t.isa());
        }
    }
}

proptest! {
    #![proptest_config(crate::config(12))]

    /// One cell over 65,537 nonzeros (where a `u32` sum can wrap) among small
    /// ones, with gaps from tiny to all-large.
    #[test]
    fn giant_cell_matches(
        chunk in chunk_with((vec(cell_len(), 0..3), 65_538..70_000usize, vec(cell_len(), 0..3))
            .prop_map(|(mut a, giant, b)| { a.push(giant); a.extend(b); a })),
        large in prop_oneof![Just(0u16), 1..=65_535u16],
        choice in 0..8u8,
        random in any::<u32>(),
        off in (0..8usize, 0..17usize),
    ) {
        // Raising every gap to `large` makes the giant cell's sum pass 2^32
        // for `large` above ~61,000.
        let mut chunk = chunk;
        for g in &mut chunk.gaps {
            *g = (*g).max(large);
        }
        let n_genes = pick_n_genes(&chunk, choice, random);
        check_gaps_to_indices(&chunk, n_genes, off)?;
    }
}

/// A one-cell chunk holding `gaps`, between an empty cell and a small one.
fn giant(gaps: Vec<u16>) -> Chunk {
    let len = gaps.len() as i64;
    let mut gaps = gaps;
    gaps.extend([3, 1, 2]);
    Chunk {
        bounds: vec![10, 10, 10 + len, 13 + len],
        gaps,
    }
}

#[test]
fn wrapping_sums_fault_like_the_reference() {
    let cases = [
        // Sums to exactly u32::MAX: no wrap.
        giant(vec![u16::MAX; 65_537]),
        // One more: wraps past 2^32.
        giant(vec![u16::MAX; 65_538]),
        // Reaches 2^32 - 65535 (the last exact sum before a wrap can be that
        // small) and then wraps to exactly 2^32.
        giant([vec![u16::MAX; 65_536], vec![1, u16::MAX, 5]].concat()),
        // Large but fits below 2^31.
        giant(vec![30_000; 70_000]),
    ];
    for chunk in &cases {
        let top = chunk.max_total();
        for n_genes in [
            1 << 31,
            WRAP_SAFE_GENES - 1,
            WRAP_SAFE_GENES,
            WRAP_SAFE_GENES + 1,
            u32::MAX,
            top.min(u64::from(u32::MAX)) as u32,
            (top + 1).min(u64::from(u32::MAX)) as u32,
        ] {
            check_gaps_to_indices(chunk, n_genes, (3, 5)).unwrap();
        }
    }
}

#[test]
fn indices_reaching_n_genes_fault_identically() {
    // Gene n_genes - 1 is fine; n_genes is a fault at the cell's last nonzero.
    let chunk = Chunk {
        bounds: vec![0, 20, 20, 37],
        gaps: [vec![0; 1], vec![1; 19], vec![5; 17]].concat(),
    };
    let top = chunk.max_total() as u32;
    check_gaps_to_indices(&chunk, top + 1, (0, 0)).unwrap();
    check_gaps_to_indices(&chunk, top, (1, 2)).unwrap();
    let mut out = vec![0; chunk.n()];
    for t in vector_tables() {
        let got = t.gaps_to_indices(
            Planes::split(&planes_of(&chunk.gaps)),
            chunk.cells(),
            top,
            &mut out,
            Stores::Streaming,
        );
        assert_eq!(
            got,
            Err(Fault::GeneIndex {
                position: 36,
                index: u64::from(top)
            }),
            "{}",
            t.isa()
        );
    }
}

/// Every backend this CPU runs has its richest table among those the suites
/// iterate.
#[test]
fn every_backend_has_a_table_in_the_suites() {
    let tables = crate::tables::<TileKernels>("tile_kernels");
    for backend in Backend::available() {
        let table =
            TileKernels::for_backend(backend).expect("every available backend has tile kernels");
        assert_eq!(table.backend(), backend);
        assert!(
            tables.iter().any(|t| std::ptr::eq(*t, table)),
            "{backend} listed"
        );
    }
}

proptest! {
    /// `Stores::prefetch_edges` is a hint: over any part of a buffer
    /// (empty, one element, ending at the allocation's end) it faults on
    /// nothing and changes nothing, either way of storing.
    #[test]
    fn prefetching_edges_changes_nothing(values in vec(any::<u32>(), 0..300), cut in any::<Index>()) {
        let start = cut.index(values.len() + 1);
        let before = values.clone();
        for stores in Stores::ALL {
            stores.prefetch_edges(&values[start..]);
            stores.prefetch_edges(&values[..start]);
        }
        prop_assert_eq!(values, before);
    }
}
