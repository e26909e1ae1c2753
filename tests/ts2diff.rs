//! TS_2DIFF FLOAT/DOUBLE pages against the Java reference's vectors
//! (`../shared/testdata/ts2diff/public.jsonl`) and typed errors for corrupt
//! pages. (cli/tests/cli_ts2diff.rs runs the `deltacells ts2diff` CLI end to
//! end.)

mod ts2diff_vectors;

use deltacells::format::ts2diff::{
    inspect, Decoder, Encoder, Field, FloatType, Form, Ts2diffError,
};
use deltacells::kernels::BackendError;
use deltacells::Backend;
use ts2diff_vectors::vectors;

/// Decodes with `backend` through both APIs (exact-size slice and Vec) and
/// returns the raw bit patterns.
fn decode_bits(page: &[u8], ty: FloatType, backend: Backend) -> Result<Vec<u64>, Ts2diffError> {
    let decoder = Decoder::new().backend(backend);
    Ok(match ty {
        FloatType::Float => {
            let v: Vec<f32> = decoder.decode(page)?;
            let mut exact = vec![0f32; v.len()];
            assert_eq!(decoder.decode_into(page, &mut exact)?, v.len());
            assert_eq!(
                v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                exact.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
            );
            v.iter().map(|x| u64::from(x.to_bits())).collect()
        }
        FloatType::Double => {
            let v: Vec<f64> = decoder.decode(page)?;
            let mut exact = vec![0f64; v.len()];
            assert_eq!(decoder.decode_into(page, &mut exact)?, v.len());
            assert_eq!(
                v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                exact.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
            );
            v.iter().map(|x| x.to_bits()).collect()
        }
    })
}

fn encode_bits(
    ty: FloatType,
    mpn: i32,
    block_size: u32,
    values: &[u64],
) -> Result<Vec<u8>, Ts2diffError> {
    let encoder = Encoder::new().max_point_number(mpn).block_size(block_size);
    match ty {
        FloatType::Float => encoder.encode(
            &values
                .iter()
                .map(|&b| f32::from_bits(b as u32))
                .collect::<Vec<_>>(),
        ),
        FloatType::Double => encoder.encode(
            &values
                .iter()
                .map(|&b| f64::from_bits(b))
                .collect::<Vec<_>>(),
        ),
    }
}

#[test]
fn every_vector_decodes_to_javas_answer_on_every_backend() {
    let backends = Backend::available();
    eprintln!("ts2diff vectors: backends {backends:?}");
    let mut checked = 0;
    for v in vectors() {
        for &backend in &backends {
            let got = decode_bits(&v.encoded, v.ty, backend)
                .unwrap_or_else(|e| panic!("{} on {backend}: {e}", v.id));
            assert_eq!(got, v.decoded, "{} on {backend}", v.id);
            if let Some(alt) = &v.alt {
                let got = decode_bits(alt, v.ty, backend)
                    .unwrap_or_else(|e| panic!("{} alt on {backend}: {e}", v.id));
                assert_eq!(got, v.decoded, "{} alt on {backend}", v.id);
            }
            checked += 1;
        }
    }
    assert!(checked >= 70);
}

#[test]
fn every_vector_encodes_to_javas_bytes_with_clean_padding() {
    for v in vectors() {
        let page = encode_bits(v.ty, v.mpn, v.block_size, &v.values).unwrap();
        assert_eq!(page, v.zero_padding, "{}", v.id);
        if !v.encoded.is_empty() {
            // Java's own bytes differ at most in pad bits.
            assert_eq!(page.len(), v.encoded.len(), "{}", v.id);
        }
    }
}

#[test]
fn inspect_reports_form_mpn_and_count() {
    for v in vectors() {
        let info = inspect(&v.encoded, v.ty).unwrap();
        assert_eq!(info.form.map_or(0, Form::number), v.form, "{}", v.id);
        assert_eq!(info.max_point_number, v.mpn_on_wire, "{}", v.id);
        assert_eq!(info.values, v.values.len() as u64, "{}", v.id);
        let per_block = u64::from(v.block_size) + 1;
        assert_eq!(
            info.blocks,
            (v.values.len() as u64).div_ceil(per_block),
            "{}",
            v.id
        );
    }
}

/// A page has no end marker, so a Form 1 page cut exactly between two blocks
/// is a valid shorter page; every other cut must be a typed error.
#[test]
fn every_truncation_of_every_vector_is_a_typed_error_or_a_block_prefix() {
    for v in vectors() {
        let per_block = v.block_size as usize + 1;
        for cut in 1..v.encoded.len() {
            for &backend in &Backend::available() {
                match decode_bits(&v.encoded[..cut], v.ty, backend) {
                    Err(e) if !matches!(e, Ts2diffError::Backend(_)) => {}
                    Ok(prefix)
                        if v.form == 1 && !prefix.is_empty() && prefix.len() % per_block == 0 =>
                    {
                        assert_eq!(
                            prefix,
                            v.decoded[..prefix.len()],
                            "{} cut at {cut} on {backend}",
                            v.id
                        );
                    }
                    other => panic!("{} cut at {cut} on {backend}: {other:?}", v.id),
                }
            }
        }
    }
}

fn ts2diff_err(r: Result<Vec<f32>, Ts2diffError>) -> Ts2diffError {
    match r {
        Err(e) => e,
        other => panic!("expected a TS_2DIFF error, got {other:?}"),
    }
}

fn dec32(page: &[u8]) -> Result<Vec<f32>, Ts2diffError> {
    Decoder::new().decode(page)
}

/// A FLOAT block header.
fn block32(write_index: i32, width: i32, min_delta: i32, first: i32) -> Vec<u8> {
    [write_index, width, min_delta, first]
        .iter()
        .flat_map(|x| x.to_be_bytes())
        .collect()
}

#[test]
fn corrupt_headers_are_typed_errors_with_offsets() {
    // Truncated varint: continuation bit on the last byte.
    assert_eq!(
        ts2diff_err(dec32(&[0x82])),
        Ts2diffError::TruncatedVarint {
            field: Field::Marker,
            offset: 0
        }
    );
    // A varint beyond 32 bits.
    assert_eq!(
        ts2diff_err(dec32(&[0xFF, 0xFF, 0xFF, 0xFF, 0x1F])),
        Ts2diffError::VarintOverflow {
            field: Field::Marker,
            offset: 0
        }
    );
    // Form 2 bitmap of 100 values (13 bytes) with 2 bytes left.
    let mut page = vec![0xFF, 0xFF, 0xFF, 0xFF, 0x07, 100, 0, 0];
    assert_eq!(
        ts2diff_err(dec32(&page)),
        Ts2diffError::BitmapPastEnd {
            field: Field::ScaledBitmap,
            offset: 6,
            count: 100,
            need: 13,
            have: 2
        }
    );
    // Form 3 count above i32::MAX.
    page = vec![0xFE, 0xFF, 0xFF, 0xFF, 0x07, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F];
    assert_eq!(
        ts2diff_err(dec32(&page)),
        Ts2diffError::ValueCount {
            offset: 5,
            count: u32::MAX
        }
    );
    // Header without blocks.
    assert_eq!(
        ts2diff_err(dec32(&[2])),
        Ts2diffError::NoBlocks { offset: 1 }
    );
    // Truncated block header.
    assert_eq!(
        ts2diff_err(dec32(&[2, 0, 0, 0, 1, 0, 0])),
        Ts2diffError::Truncated {
            field: Field::BlockHeader,
            offset: 1,
            need: 16,
            have: 6
        }
    );
    // Negative writeIndex.
    page = [vec![2], block32(-1, 0, 0, 0)].concat();
    assert_eq!(
        ts2diff_err(dec32(&page)),
        Ts2diffError::NegativeWriteIndex {
            offset: 1,
            write_index: -1
        }
    );
    // bitWidth above 32 on a FLOAT page (fine for DOUBLE, which has 24-byte headers).
    page = [vec![2], block32(1, 33, 0, 0)].concat();
    assert_eq!(
        ts2diff_err(dec32(&page)),
        Ts2diffError::BitWidth {
            offset: 1,
            bit_width: 33,
            max: 32
        }
    );
    page = [vec![2], block32(1, -3, 0, 0)].concat();
    assert_eq!(
        ts2diff_err(dec32(&page)),
        Ts2diffError::BitWidth {
            offset: 1,
            bit_width: -3,
            max: 32
        }
    );
    // 1000 deltas of 7 bits need 875 bytes.
    page = [vec![2], block32(1000, 7, 0, 0), vec![0; 10]].concat();
    assert_eq!(
        ts2diff_err(dec32(&page)),
        Ts2diffError::PackedPastEnd {
            offset: 1,
            deltas: 1000,
            bit_width: 7,
            need: 875,
            have: 10
        }
    );
    // A block of 2^31 - 1 zero-width deltas: 17 bytes must not allocate 8 GiB.
    page = [vec![2], block32(i32::MAX, 0, 0, 0)].concat();
    assert!(matches!(
        ts2diff_err(dec32(&page)),
        Ts2diffError::TooManyValues { offset: 0, .. }
    ));
    let mut small = [0f32; 4];
    assert!(matches!(
        Decoder::new().decode_into(&page, &mut small),
        Err(Ts2diffError::TooManyValues {
            offset: 1,
            limit: 4
        })
    ));
}

#[test]
fn bitmap_count_must_match_the_blocks() {
    // Form 2 header for 3 values, then one block of 2 values.
    let header = vec![0xFF, 0xFF, 0xFF, 0xFF, 0x07, 3, 0b101, 2];
    let page = [header.clone(), block32(1, 0, 0, 0)].concat();
    assert_eq!(
        ts2diff_err(dec32(&page)),
        Ts2diffError::CountMismatch {
            offset: page.len(),
            declared: 3,
            found: 2
        }
    );
    // ... or two blocks of 2 values: too many.
    let page = [header, block32(1, 0, 0, 0), block32(1, 0, 0, 0)].concat();
    assert_eq!(
        ts2diff_err(dec32(&page)),
        Ts2diffError::CountMismatch {
            offset: 24,
            declared: 3,
            found: 4
        }
    );
    // The caller's slice is checked against the declared count up front.
    let mut out = [0f32; 2];
    assert!(matches!(
        Decoder::new().decode_into(&page, &mut out),
        Err(Ts2diffError::TooManyValues {
            offset: 5,
            limit: 2
        })
    ));
}

#[test]
fn one_value_blocks_ignore_min_delta_and_pad_bits_are_ignored() {
    // The C++ writer leaves 0 or stale values in a one-value block's minDelta.
    let page = [vec![0], block32(0, 0, 12345, 7)].concat();
    assert_eq!(dec32(&page).unwrap(), vec![7.0]);
    // Two deltas of 3 bits (6 bits used) with the 2 pad bits set.
    #[allow(clippy::unusual_byte_groupings)] // grouped as td0, td1, pad
    let page = [vec![0], block32(2, 3, 1, 10), vec![0b001_010_11]].concat();
    assert_eq!(dec32(&page).unwrap(), vec![10.0, 12.0, 15.0]);
}

#[test]
fn forcing_an_unavailable_backend_is_an_error() {
    let missing = Backend::ALL.into_iter().find(|b| !b.is_available());
    if let Some(b) = missing {
        assert!(matches!(
            Decoder::new().backend(b).decode::<f32>(&[2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
            Err(Ts2diffError::Backend(BackendError::Unavailable(x))) if x == b
        ));
    }
}

#[test]
fn encoder_refuses_a_max_point_number_that_is_a_page_marker() {
    // A page of scaled values starts with its maxPointNumber: these two
    // would read back as the marker of a page of another form.
    for mpn in [i32::MAX, i32::MAX - 1] {
        assert!(matches!(
            Encoder::new().max_point_number(mpn).encode(&[0.0f64]),
            Err(Ts2diffError::MaxPointNumber(m)) if m == mpn
        ));
        assert!(matches!(
            Encoder::new().max_point_number(mpn).encode(&[1.5f32]),
            Err(Ts2diffError::MaxPointNumber(m)) if m == mpn
        ));
    }
    // Any other round trips, the largest included.
    for mpn in [i32::MAX - 2, 309, i32::MIN] {
        let page = Encoder::new()
            .max_point_number(mpn)
            .encode(&[0.0f64, 2.5])
            .unwrap();
        let back = Decoder::new().decode::<f64>(&page).unwrap();
        assert_eq!(back.len(), 2, "mpn {mpn}");
    }
}

#[test]
fn encoder_refuses_bad_block_sizes() {
    for bs in [0, 1 << 31] {
        assert!(matches!(
            Encoder::new().block_size(bs).encode(&[1.0f32]),
            Err(Ts2diffError::BlockSize(b)) if b == bs
        ));
    }
}
