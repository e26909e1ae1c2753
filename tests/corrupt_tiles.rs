//! A corrupt-input test for every reader rule: each edit recomputes the CRC so
//! the deeper check is the one that catches it, and each asserts the specific
//! rule. Plus every truncation of a small tile, random bytes and random
//! mutations (none may panic), and the allocation bound on hostile headers.

mod common;

use common::{assemble_tile, fix_crc, RawChunk};
use deltacells::engine::ChunkDecoder;
use deltacells::format::tile::{StreamKind, TileError, TileRule, TileView};
use deltacells::format::tile_writer::TileEncoder;
use deltacells::kernels::Stores;
use deltacells::{Backend, Csr, Error};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;

fn decode_all(bytes: &[u8], backend: Backend) -> Result<Csr<i32>, Error> {
    let view = TileView::parse(bytes)?;
    ChunkDecoder::for_backend(backend)?.decode_tile_to_csr(&view)
}

/// The rule a tile breaks, checked to be the same on every backend, and the
/// same error (rule and place) whether the tile is decoded chunk by chunk or
/// row by row.
fn rule_of(bytes: &[u8]) -> TileRule {
    let mut rules = common::tile_backends()
        .into_iter()
        .map(|b| match decode_all(bytes, b) {
            Err(Error::Tile(TileError { rule, at })) => {
                for stores in Stores::ALL {
                    match common::decode_rows_with(bytes, b, stores, |_| true) {
                        Err(Error::Tile(TileError {
                            rule: by_rows,
                            at: at_rows,
                        })) => {
                            assert_eq!((&by_rows, at_rows), (&rule, at), "by rows, {b}, {stores:?}")
                        }
                        other => panic!("by rows, {b}, {stores:?}: {other:?}"),
                    }
                }
                rule
            }
            Err(e) => panic!("not a tile error: {e}"),
            Ok(_) => panic!("corrupt tile accepted by {b}"),
        });
    let first = rules.next().unwrap();
    for other in rules {
        assert_eq!(other, first, "backends disagree");
    }
    first
}

/// A small valid tile with both kinds of exceptions, 3 chunks, and an empty cell.
fn sample_tile() -> (Vec<u8>, Csr<i32>) {
    let csr = Csr {
        n_cols: 100_000,
        indptr: vec![0, 3, 3, 6, 8, 12],
        indices: vec![
            0, 5, 70_000, 1, 2, 99_999, 10, 20, 0, 66_000, 99_000, 99_001,
        ],
        values: vec![
            1,
            70_000,
            3,
            1,
            2,
            65_535,
            9,
            65_536,
            4,
            5,
            6,
            2_147_483_647,
        ],
    };
    let tile = TileEncoder::new()
        .with_chunks(3)
        .with_level(3)
        .encode(csr.as_ref())
        .unwrap();
    (tile, csr)
}

fn put_u32(t: &mut [u8], off: usize, v: u32) {
    t[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(t: &mut [u8], off: usize, v: u64) {
    t[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

fn get_u64(t: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(t[off..off + 8].try_into().unwrap())
}

/// Byte offset of field `f` (0..12) of chunk `c`'s table entry.
fn field(c: usize, f: usize) -> usize {
    64 + 96 * c + 8 * f
}

/// Applies `edit` to a copy of the sample tile, recomputes the CRC, and returns the rule.
fn edited(edit: impl FnOnce(&mut Vec<u8>)) -> TileRule {
    let (mut t, _) = sample_tile();
    edit(&mut t);
    fix_crc(&mut t);
    rule_of(&t)
}

#[test]
fn sample_tile_is_valid() {
    let (t, csr) = sample_tile();
    for b in common::tile_backends() {
        assert_eq!(decode_all(&t, b).unwrap(), csr);
        for stores in Stores::ALL {
            assert_eq!(
                common::decode_rows_with(&t, b, stores, |_| true).unwrap(),
                csr
            );
        }
    }
    let view = TileView::parse(&t).unwrap();
    assert!(view.chunks().any(|c| c.vexc.len > 0) && view.chunks().any(|c| c.gexc.len > 0));
}

#[test]
fn header_rules() {
    assert_eq!(rule_of(&[0u8; 10]), TileRule::TooShort(10));
    assert_eq!(edited(|t| t[0] = b'X'), TileRule::BadMagic);
    assert_eq!(edited(|t| put_u32(t, 8, 3)), TileRule::Version(3));
    assert_eq!(edited(|t| put_u32(t, 12, 1)), TileRule::Flags(1));
    assert_eq!(edited(|t| put_u32(t, 60, 7)), TileRule::Reserved(7));
    assert!(matches!(
        edited(|t| t.extend_from_slice(&[0; 8])),
        TileRule::TotalSize { .. }
    ));
    let (mut t, _) = sample_tile();
    let last = t.len() - 1;
    t[last] ^= 0xFF;
    assert!(matches!(rule_of(&t), TileRule::Crc { .. }));
    assert_eq!(edited(|t| put_u32(t, 32, 0)), TileRule::NGenes(0));
    assert_eq!(
        edited(|t| put_u32(t, 32, (1 << 31) + 1)),
        TileRule::NGenes((1 << 31) + 1)
    );
    assert_eq!(
        edited(|t| put_u32(t, 36, 1 << 20)),
        TileRule::ChunkTableBounds { n_chunks: 1 << 20 }
    );
    assert!(matches!(
        edited(|t| put_u32(t, 36, 0)),
        TileRule::ChunkCount { n_chunks: 0, .. }
    ));
    assert!(matches!(
        edited(|t| {
            let v = get_u64(t, 40);
            put_u64(t, 40, v + 4)
        }),
        TileRule::IndptrOffset(_)
    ));
    assert!(matches!(
        edited(|t| put_u64(t, 40, 64 + 96)),
        TileRule::IndptrOffset(160)
    ));
    assert!(matches!(
        edited(|t| put_u64(t, 16, 1 << 40)),
        TileRule::IndptrBounds { .. }
    ));
}

#[test]
fn indptr_rules() {
    let off = |t: &[u8], cell: usize| get_u64(t, 40) as usize + 8 * cell;
    assert_eq!(
        edited(|t| {
            let o = off(t, 0);
            put_u64(t, o, 1)
        }),
        TileRule::IndptrStart(1)
    );
    assert!(matches!(
        edited(|t| {
            let o = off(t, 2);
            put_u64(t, o, 1)
        }),
        TileRule::IndptrDecreasing { cell: 2 }
    ));
    assert!(matches!(
        edited(|t| {
            let o = off(t, 1);
            put_u64(t, o, u64::MAX)
        }),
        TileRule::IndptrDecreasing { cell: 1 }
    ));
    assert!(matches!(
        edited(|t| put_u64(t, 24, 13)),
        TileRule::IndptrEnd { last: 12, nnz: 13 }
    ));
}

#[test]
fn chunk_table_rules() {
    assert!(matches!(
        edited(|t| put_u64(t, field(0, 0), 1)),
        TileRule::ChunkCoverage {
            field: "cell_lo",
            ..
        }
    ));
    assert!(matches!(
        edited(|t| put_u64(t, field(1, 2), 4)),
        TileRule::ChunkCoverage {
            field: "nnz_lo",
            ..
        }
    ));
    assert!(matches!(
        edited(|t| put_u64(t, field(2, 1), 6)),
        TileRule::ChunkBounds {
            field: "cell_hi",
            ..
        }
    ));
    assert!(matches!(
        edited(|t| put_u64(t, field(2, 3), 13)),
        TileRule::ChunkBounds {
            field: "nnz_hi",
            ..
        }
    ));
    // Move the boundary between chunks 0 and 1 by a cell without fixing nnz.
    let rule = edited(|t| {
        let hi = get_u64(t, field(0, 1));
        put_u64(t, field(0, 1), hi + 1);
        put_u64(t, field(1, 0), hi + 1);
    });
    assert!(matches!(rule, TileRule::ChunkIndptr { .. }), "{rule:?}");
    // The last chunk ends early: drop it from the count.
    assert!(matches!(
        edited(|t| put_u32(t, 36, 2)),
        TileRule::ChunkCoverage {
            field: "last cell_hi",
            ..
        }
    ));
}

#[test]
fn stream_extent_rules() {
    assert_eq!(
        edited(|t| put_u64(t, field(1, 5), 0)),
        TileRule::StreamEmpty {
            stream: StreamKind::Gaps
        }
    );
    assert_eq!(
        edited(|t| put_u64(t, field(0, 7), 0)),
        TileRule::StreamEmpty {
            stream: StreamKind::Vals
        }
    );
    let rule = edited(|t| {
        let v = get_u64(t, field(0, 4));
        put_u64(t, field(0, 4), v + 1)
    });
    assert!(matches!(
        rule,
        TileRule::StreamMisaligned {
            stream: StreamKind::Gaps,
            ..
        }
    ));
    let rule = edited(|t| put_u64(t, field(0, 6), 1 << 40));
    assert!(matches!(
        rule,
        TileRule::StreamBounds {
            stream: StreamKind::Vals,
            ..
        }
    ));
    let rule = edited(|t| put_u64(t, field(0, 7), u64::MAX - 3));
    assert!(matches!(rule, TileRule::StreamBounds { .. }));
    // A stream pointing into the indptr.
    let rule = edited(|t| {
        let v = get_u64(t, 40);
        put_u64(t, field(0, 4), v)
    });
    assert!(matches!(rule, TileRule::StreamBounds { .. }));
    let with_vexc = |t: &[u8]| (0..3).find(|&c| get_u64(t, field(c, 9)) > 0).unwrap();
    let rule = edited(|t| {
        let c = with_vexc(t);
        let v = get_u64(t, field(c, 8));
        put_u64(t, field(c, 8), v + 4)
    });
    assert!(matches!(
        rule,
        TileRule::StreamMisaligned {
            stream: StreamKind::Vexc,
            ..
        }
    ));
}

#[test]
fn frame_rules() {
    // Overwrite the gaps frame's magic.
    let rule = edited(|t| {
        let o = get_u64(t, field(0, 4)) as usize;
        t[o] ^= 0xFF;
    });
    assert_eq!(
        rule,
        TileRule::FrameMagic {
            stream: StreamKind::Gaps
        }
    );
    // Point chunk 0's gaps at chunk 2's (a different n): wrong content size.
    let rule = edited(|t| {
        let (o, l) = (get_u64(t, field(2, 4)), get_u64(t, field(2, 5)));
        put_u64(t, field(0, 4), o);
        put_u64(t, field(0, 5), l);
    });
    assert!(
        matches!(
            rule,
            TileRule::FrameSize {
                stream: StreamKind::Gaps,
                ..
            }
        ),
        "{rule:?}"
    );
    // Extend the gaps stream over the start of the next frame: trailing bytes.
    let rule = edited(|t| {
        let v = get_u64(t, field(0, 6)) - get_u64(t, field(0, 4));
        put_u64(t, field(0, 5), v + 8)
    });
    assert!(
        matches!(
            rule,
            TileRule::FrameTrailing {
                stream: StreamKind::Gaps,
                ..
            }
        ),
        "{rule:?}"
    );
    // Cut the last byte off the vals frame.
    let rule = edited(|t| {
        let v = get_u64(t, field(1, 7));
        put_u64(t, field(1, 7), v - 1)
    });
    assert!(
        matches!(
            rule,
            TileRule::FrameCorrupt {
                stream: StreamKind::Vals,
                ..
            }
        ),
        "{rule:?}"
    );
}

/// One chunk of 2 cells with 3 nonzeros each, genes < 10, as raw streams.
fn raw(gaps: Vec<u16>, vals: Vec<u16>, vexc: Option<Vec<u32>>, gexc: Option<Vec<u32>>) -> Vec<u8> {
    assemble_tile(
        10,
        &[0, 3, 6],
        &[RawChunk {
            cells: 0..2,
            gaps,
            vals,
            vexc,
            gexc,
        }],
    )
}

#[test]
fn element_rules() {
    let ok_gaps = || vec![1, 2, 3, 0, 4, 5];
    let ok_vals = || vec![1, 2, 3, 4, 5, 6];
    assert!(decode_all(&raw(ok_gaps(), ok_vals(), None, None), Backend::Scalar).is_ok());
    assert_eq!(
        rule_of(&raw(ok_gaps(), vec![1, 2, 3, 4, 0, 6], None, None)),
        TileRule::ZeroCount
    );
    assert_eq!(
        rule_of(&raw(vec![1, 0, 3, 0, 4, 5], ok_vals(), None, None)),
        TileRule::ZeroGap
    );
    assert_eq!(
        rule_of(&raw(vec![1, 2, 3, 0, 4, 6], ok_vals(), None, None)),
        TileRule::GeneIndex {
            index: 10,
            n_genes: 10
        }
    );
    assert_eq!(
        rule_of(&raw(vec![1, 2, 3, 0, 4, 65_535], ok_vals(), None, None)),
        TileRule::GeneIndex {
            index: 65_539,
            n_genes: 10
        }
    );
}

#[test]
fn exception_rules() {
    let gaps = || vec![1, 2, 3, 0, 4, 5];
    let vals = || vec![1, 65_535, 3, 4, 5, 65_535];
    let dec = |vexc, gexc| rule_of(&raw(gaps(), vals(), vexc, gexc));
    let ok = raw(gaps(), vals(), Some(vec![1, 5, 70_000, 80_000]), None);
    assert_eq!(
        decode_all(&ok, Backend::Scalar).unwrap().values,
        vec![1, 70_000, 3, 4, 5, 80_000]
    );
    let v = StreamKind::Vexc;
    assert_eq!(
        dec(Some(vec![1, 1, 70_000, 70_000]), None),
        TileRule::ExceptionOrder {
            stream: v,
            position: 1
        }
    );
    assert_eq!(
        dec(Some(vec![1, 6, 70_000, 70_000]), None),
        TileRule::ExceptionPosition {
            stream: v,
            position: 6,
            n: 6
        }
    );
    assert_eq!(
        dec(Some(vec![1, 1000]), None),
        TileRule::ExceptionPayload {
            stream: v,
            payload: 1000
        }
    );
    assert_eq!(
        dec(Some(vec![1, 1 << 31]), None),
        TileRule::ExceptionPayload {
            stream: v,
            payload: 1 << 31
        }
    );
    assert_eq!(
        dec(Some(vec![2, 70_000]), None),
        TileRule::ExceptionUnmarked {
            stream: v,
            stored: 3
        }
    );
    assert!(matches!(
        dec(Some(vec![1, 70_000, 3]), None),
        TileRule::ExceptionSize {
            stream: StreamKind::Vexc,
            bytes: 12,
            n: 6
        }
    ));
    assert!(matches!(
        dec(Some((0..7).chain((0..7).map(|_| 70_000)).collect()), None),
        TileRule::ExceptionSize { bytes: 56, .. }
    ));
    let g = StreamKind::Gexc;
    let gaps_marked = || vec![1, 65_535, 3, 0, 4, 5];
    let gdec = |gexc: Vec<u32>, n_genes: u32| {
        rule_of(&assemble_tile(
            n_genes,
            &[0, 3, 6],
            &[RawChunk {
                cells: 0..2,
                gaps: gaps_marked(),
                vals: vec![1; 6],
                vexc: None,
                gexc: Some(gexc),
            }],
        ))
    };
    assert_eq!(
        gdec(vec![1, 0], 200_000),
        TileRule::ExceptionPayload {
            stream: g,
            payload: 0
        }
    );
    assert_eq!(
        gdec(vec![1, 200_000], 200_000),
        TileRule::ExceptionPayload {
            stream: g,
            payload: 200_000
        }
    );
    assert_eq!(
        gdec(vec![2, 10], 200_000),
        TileRule::ExceptionUnmarked {
            stream: g,
            stored: 3
        }
    );
    // 1 + 65535 + 3 = 65539, plus 134_461 reaches exactly n_genes = 200_000.
    assert_eq!(
        gdec(vec![1, 134_461], 200_000),
        TileRule::GeneIndex {
            index: 200_000,
            n_genes: 200_000
        }
    );
    let fine = assemble_tile(
        200_000,
        &[0, 3, 6],
        &[RawChunk {
            cells: 0..2,
            gaps: gaps_marked(),
            vals: vec![1; 6],
            vexc: None,
            gexc: Some(vec![1, 134_460]),
        }],
    );
    assert_eq!(
        decode_all(&fine, Backend::Scalar).unwrap().indices,
        vec![1, 199_996, 199_999, 0, 4, 9]
    );
}

#[test]
fn every_truncation_is_refused_without_panic() {
    let (t, _) = sample_tile();
    for len in 0..t.len() {
        assert!(
            decode_all(&t[..len], Backend::Scalar).is_err(),
            "prefix of {len} bytes accepted"
        );
        let mut fixed = t[..len].to_vec();
        if len >= 64 {
            put_u64(&mut fixed, 48, len as u64);
            fix_crc(&mut fixed);
        }
        assert!(
            decode_all(&fixed, Backend::Scalar).is_err(),
            "prefix of {len} bytes with fixed size accepted"
        );
    }
}

/// SplitMix64: a tiny deterministic generator for the random-input tests.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[test]
fn random_bytes_and_mutations_never_panic() {
    let mut rng = Rng(7);
    for _ in 0..2000 {
        let len = (rng.next() % 600) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if len >= 8 && rng.next().is_multiple_of(2) {
            bytes[..8].copy_from_slice(b"DELTACEL");
        }
        let _ = decode_all(&bytes, Backend::Scalar);
    }
    let (t, _) = sample_tile();
    for _ in 0..3000 {
        let mut m = t.clone();
        for _ in 0..1 + rng.next() % 4 {
            let at = (rng.next() as usize) % m.len();
            m[at] = rng.next() as u8;
        }
        fix_crc(&mut m);
        for b in common::tile_backends() {
            let _ = decode_all(&m, b);
        }
    }
}

/// The rule `TileView::parse` reports for `t`, and the most bytes it had allocated at once.
fn parse_cost(t: &[u8]) -> (TileRule, usize) {
    let (err, peak) = counting_alloc::peak_of(|| TileView::parse(t).unwrap_err());
    (err.rule, peak)
}

#[test]
fn hostile_counts_are_refused_without_large_allocation() {
    // 100 bytes claiming 2^40 cells and 2^40 nonzeros.
    let mut t = vec![0u8; 100];
    t[..8].copy_from_slice(b"DELTACEL");
    put_u32(&mut t, 8, 2);
    put_u64(&mut t, 16, 1 << 40);
    put_u64(&mut t, 24, 1 << 40);
    put_u32(&mut t, 32, 36_601);
    put_u64(&mut t, 40, 64);
    put_u64(&mut t, 48, 100);
    fix_crc(&mut t);
    let (rule, cost) = parse_cost(&t);
    assert!(
        matches!(rule, TileRule::ChunkCount { .. }) && cost <= t.len(),
        "{rule:?} {cost}"
    );
    put_u32(&mut t, 36, 1); // one chunk: its table entry does not fit in 100 bytes
    fix_crc(&mut t);
    let (rule, cost) = parse_cost(&t);
    assert!(
        matches!(rule, TileRule::ChunkTableBounds { .. }) && cost <= t.len(),
        "{rule:?} {cost}"
    );
    t.resize(200, 0); // now the table fits, and the indptr of 2^40 + 1 entries cannot
    put_u64(&mut t, 40, 160);
    put_u64(&mut t, 48, 200);
    fix_crc(&mut t);
    let (rule, cost) = parse_cost(&t);
    assert!(
        matches!(rule, TileRule::IndptrBounds { .. }) && cost <= t.len(),
        "{rule:?} {cost}"
    );

    // A chunk table pointing past the end, in a tile whose indptr fits.
    let (mut big, _) = sample_tile();
    put_u64(&mut big, field(0, 4), 1 << 50);
    fix_crc(&mut big);
    let (rule, cost) = parse_cost(&big);
    assert!(
        matches!(rule, TileRule::StreamBounds { .. }) && cost <= big.len(),
        "{rule:?} {cost}"
    );

    // A tile that claims 2^31 nonzeros in one chunk backed by a tiny frame is
    // refused at parse time (frame expansion bound), before any decode buffer.
    let mut claim = raw_claim();
    fix_crc(&mut claim);
    let (rule, cost) = parse_cost(&claim);
    assert!(
        matches!(rule, TileRule::FrameRatio { .. }) && cost <= claim.len(),
        "{rule:?} {cost}"
    );
}

/// A one-cell tile whose header and indptr claim 2^31 nonzeros.
fn raw_claim() -> Vec<u8> {
    let mut t = assemble_tile(
        10,
        &[0, 1],
        &[RawChunk {
            cells: 0..1,
            gaps: vec![1],
            vals: vec![1],
            vexc: None,
            gexc: None,
        }],
    );
    let n = 1u64 << 31;
    put_u64(&mut t, 24, n);
    let ip = get_u64(&t, 40) as usize;
    put_u64(&mut t, ip + 8, n);
    put_u64(&mut t, field(0, 3), n);
    t
}
