//! The writer refuses what the format cannot hold and what its policy forbids,
//! with an error that names the problem; it accepts every count type it documents.

use deltacells::engine::ChunkDecoder;
use deltacells::format::tile::TileView;
use deltacells::format::tile_writer::TileEncoder;
use deltacells::format::EncodeError;
use deltacells::{Backend, Csr, CsrRef};

fn encode<V: deltacells::format::tile_writer::CountSource>(
    n_cols: u64,
    indptr: &[i64],
    indices: &[i32],
    values: &[V],
) -> Result<Vec<u8>, EncodeError> {
    TileEncoder::new().with_level(1).encode(CsrRef {
        n_cols,
        indptr,
        indices,
        values,
    })
}

fn input_error(r: Result<Vec<u8>, EncodeError>) -> String {
    match r {
        Err(EncodeError::Input(msg)) => msg,
        other => panic!("expected an input error, got {other:?}"),
    }
}

#[test]
fn refuses_bad_counts_with_the_cell() {
    let msg = input_error(encode(10, &[0, 1, 2], &[1, 2], &[3, 0]));
    assert!(msg.contains("cell 1") && msg.contains("value 0"), "{msg}");
    assert!(input_error(encode(10, &[0, 1], &[1], &[-4i32])).contains("-4"));
    assert!(input_error(encode(10, &[0, 1], &[1], &[2.5f32])).contains("2.5"));
    assert!(input_error(encode(10, &[0, 1], &[1], &[(1u64 << 31) as i64])).contains("2147483648"));
}

#[test]
fn refuses_unsorted_duplicate_and_out_of_range_genes() {
    assert!(input_error(encode(10, &[0, 2], &[5, 3], &[1, 1])).contains("sorted"));
    assert!(input_error(encode(10, &[0, 2], &[5, 5], &[1, 1])).contains("distinct"));
    assert!(input_error(encode(10, &[0, 1], &[10], &[1])).contains("outside"));
    assert!(input_error(encode(10, &[0, 1], &[-1], &[1])).contains("outside"));
    assert!(input_error(encode(0, &[0], &[], &[] as &[i32])).contains("n_genes"));
    assert!(input_error(encode(10, &[0, 2, 1, 2], &[1, 2], &[1, 1])).contains("decreases"));
    assert!(input_error(encode(10, &[0, 5, 2], &[1, 2], &[1, 1])).contains("beyond"));
    assert!(input_error(encode(10, &[0, 3], &[1, 2], &[1, 1])).contains("indptr"));
}

#[test]
fn exception_policy_limits_each_kind() {
    // 1025 cells, each with one count above 65535: more than max(1024, nnz/200).
    let cells = 1025;
    let indptr: Vec<i64> = (0..=cells).collect();
    let indices = vec![0; cells as usize];
    let too_many = vec![70_000i32; cells as usize];
    match encode(10, &indptr, &indices, &too_many) {
        Err(EncodeError::Policy(msg)) => assert!(msg.contains("1025 value exceptions"), "{msg}"),
        other => panic!("expected a policy refusal, got {other:?}"),
    }
    let mut at_limit = too_many.clone();
    at_limit[0] = 1;
    assert!(encode(10, &indptr, &indices, &at_limit).is_ok());
    // Gap exceptions: genes above 65535 in 1025 cells.
    let far = vec![70_000; cells as usize];
    match encode(100_000, &indptr, &far, &vec![1i32; cells as usize]) {
        Err(EncodeError::Policy(msg)) => assert!(msg.contains("gap exceptions"), "{msg}"),
        other => panic!("expected a policy refusal, got {other:?}"),
    }
}

#[test]
fn integral_floats_and_wide_integers_are_counts() {
    let csr = Csr {
        n_cols: 5,
        indptr: vec![0, 2],
        indices: vec![0, 4],
        values: vec![1i32, 70_000],
    };
    for tile in [
        encode(5, &csr.indptr, &csr.indices, &[1.0f32, 70_000.0]).unwrap(),
        encode(5, &csr.indptr, &csr.indices, &[1.0f64, 70_000.0]).unwrap(),
        encode(5, &csr.indptr, &csr.indices, &[1u32, 70_000]).unwrap(),
        encode(5, &csr.indptr, &csr.indices, &[1i64, 70_000]).unwrap(),
    ] {
        let got: Csr<i32> = ChunkDecoder::new()
            .unwrap()
            .decode_tile_to_csr(&TileView::parse(&tile).unwrap())
            .unwrap();
        assert_eq!(got, csr);
    }
}

#[test]
fn streams_are_aligned_and_absent_exception_frames_are_zero() {
    let tile = encode(
        100_000,
        &[0, 2, 4],
        &[0, 90_000, 3, 4],
        &[1i32, 70_000, 2, 3],
    )
    .unwrap();
    let view = TileView::parse(&tile).unwrap();
    assert_eq!(view.header().indptr_off % 8, 0);
    for c in view.chunks() {
        for e in [c.gaps, c.vals, c.vexc, c.gexc] {
            assert_eq!(e.offset % 8, 0);
            if e.len == 0 {
                assert_eq!(e.offset, 0, "absent frames store offset 0");
            }
        }
    }
}

/// The writer's kernels run on any backend, and every backend this CPU runs
/// writes the same bytes (gap and value exceptions included).
#[test]
fn every_backend_writes_the_same_tile() {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |n: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % n
    };
    let n_genes = 200_000u64;
    let (mut indptr, mut indices, mut values) = (vec![0i64], Vec::new(), Vec::new());
    for _ in 0..40 {
        let mut g = next(70_000) as i32;
        for _ in 0..next(300) {
            if g as u64 >= n_genes {
                break;
            }
            indices.push(g);
            let big = next(50) == 0;
            values.push(if big {
                70_000 + next(9) as u32
            } else {
                1 + next(9) as u32
            });
            let far = next(40) == 0;
            g += 1 + next(if far { 80_000 } else { 30 }) as i32;
        }
        indptr.push(indices.len() as i64);
    }
    let tiles: Vec<(Backend, Vec<u8>)> = Backend::available()
        .into_iter()
        .map(|b| {
            let tile = TileEncoder::new()
                .with_level(1)
                .with_chunks(3)
                .with_backend(b)
                .encode(CsrRef {
                    n_cols: n_genes,
                    indptr: &indptr,
                    indices: &indices,
                    values: &values,
                })
                .unwrap();
            (b, tile)
        })
        .collect();
    for (b, tile) in &tiles[1..] {
        assert!(*tile == tiles[0].1, "{b} writes other bytes than scalar");
    }
}
