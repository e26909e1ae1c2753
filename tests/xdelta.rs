//! XDelta: the spec's examples, the shared test vectors, error cases, the
//! choices documented in `deltacells::format::xdelta` and the encoder.
//! (cli/tests/cli_xdelta.rs runs the `deltacells xdelta` CLI end to end.)

use std::path::PathBuf;

use deltacells::format::xdelta::{self, Decoder, Encoder, Parameter, XdeltaError};
use deltacells::kernels::BackendError;
use deltacells::Backend;

/// Decodes with the scalar kernels and every other backend this CPU has, and
/// checks they agree bit for bit; returns the values.
fn dec(input: &str) -> Vec<Option<f64>> {
    let reference = Decoder::new()
        .backend(Backend::Scalar)
        .decode(input)
        .unwrap_or_else(|e| panic!("{input}: {e}"));
    for backend in Backend::available() {
        let other = Decoder::new().backend(backend).decode(input).unwrap();
        assert_eq!(
            bits(&other.to_options()),
            bits(&reference.to_options()),
            "{input} on {backend}"
        );
    }
    reference.to_options()
}

fn bits(values: &[Option<f64>]) -> Vec<Option<u64>> {
    values.iter().map(|v| v.map(f64::to_bits)).collect()
}

fn err(input: &str) -> XdeltaError {
    match xdelta::decode(input) {
        Err(e) => e,
        other => panic!("{input}: expected an xdelta error, got {other:?}"),
    }
}

fn nums(values: &[f64]) -> Vec<Option<f64>> {
    values.iter().copied().map(Some).collect()
}

fn ints(values: std::ops::RangeInclusive<i32>) -> Vec<Option<f64>> {
    values.map(|v| Some(f64::from(v))).collect()
}

#[test]
fn spec_blank_examples() {
    let want = nums(&[0.0, 0.0, 1.0, 1.0, 1.0, 2.0, 2.0]);
    assert_eq!(dec("v1,br,d0:0,,1,,,2,"), want);
    assert_eq!(dec("v1,b0,d0:0,,1,1,1,2,2"), want);
    assert_eq!(dec("v1,b0,d0:0,,1n3,2,2"), want);
}

#[test]
fn spec_delta_examples() {
    assert_eq!(dec("v1,br,d1:0,1,1,1,1,1,1,1,1,1"), ints(0..=9));
    // The spec lists this as the same 0..9, but it has nine blanks after `1`:
    // by the grammar that is eleven values, 0..10. The grammar wins.
    assert_eq!(dec("v1,br,d1:0,1,,,,,,,,,"), ints(0..=10));
    assert_eq!(dec("v1,br,d1:0,1n9"), ints(0..=9));
    assert_eq!(dec("v1,br,d2:0,1,0,0,0,0,0,0,0,0"), ints(0..=9));
    assert_eq!(dec("v1,br,d2:0,1,0n8"), ints(0..=9));
}

#[test]
fn spec_null_examples() {
    let mut want = vec![None, None, None];
    want.extend(ints(0..=4));
    want.push(None);
    want.extend(ints(5..=9));
    assert_eq!(dec("v1,br,d1:n,n,n,0,1,1,1,1,n,1,1,1,1,1"), want);
    // The spec shows the reduced form without its header; as a whole string
    // it has no version, so it would be v0, which needs a parameter first.
    // With the header of the example above it decodes as the spec says.
    assert_eq!(dec("v1,br,d1:nn3,0,1n4,n,1n5"), want);
    assert!(matches!(
        err("nn3,0,1n4,n,1n5"),
        XdeltaError::Syntax { offset: 0, .. }
    ));
}

#[test]
fn spec_scalar_offset_example() {
    assert_eq!(
        dec("v1,d1,/10,+50:0,1,2,-1,-3,2"),
        nums(&[50.0, 50.1, 50.3, 50.2, 49.9, 50.1])
    );
}

#[test]
fn spec_empty_lists() {
    assert_eq!(dec("v1:"), vec![]);
    assert_eq!(dec("v1,b0:"), vec![]);
    assert_eq!(dec("d:"), vec![]);
}

#[test]
fn xina_v0_example() {
    let want = nums(&[
        1.0, 1.0, 1.0, 1.0, 2.0, 3.0, 4.0, 4.0, 4.0, 3.0, 2.0, 1.0, 0.0, 0.0, 0.0,
    ]);
    assert_eq!(dec("d,b0:1,,n2,1,n2,,,-1,n3,,"), want);
}

/// `../shared/testdata/xdelta/vectors.jsonl`, relative to the crate root.
fn vectors() -> Vec<serde_json::Value> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/xdelta/vectors.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn shared_vectors_decode_bit_exactly() {
    let mut checked = 0;
    for v in vectors().iter().filter(|v| v["kind"] != "error") {
        let input = v["input"].as_str().unwrap();
        let want: Vec<Option<f64>> = v["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().map(|s| s.parse::<f64>().unwrap()))
            .collect();
        assert_eq!(bits(&dec(input)), bits(&want), "{input}");
        checked += 1;
    }
    assert!(checked >= 60, "only {checked} vectors");
}

#[test]
fn shared_error_vectors_are_rejected_for_their_reason() {
    let mut checked = 0;
    for v in vectors().iter().filter(|v| v["kind"] == "error") {
        let input = v["input"].as_str().unwrap();
        let reason = v["error"].as_str().unwrap();
        let e = err(input);
        let expected = match reason {
            "whitespace" => matches!(e, XdeltaError::Whitespace { .. }),
            "repeated parameter d" => matches!(
                e,
                XdeltaError::RepeatedParameter {
                    parameter: Parameter::Delta,
                    ..
                }
            ),
            "repeated parameter b" => matches!(
                e,
                XdeltaError::RepeatedParameter {
                    parameter: Parameter::Blank,
                    ..
                }
            ),
            "/0" => matches!(e, XdeltaError::ZeroDivisor { .. }),
            "blank first" => matches!(e, XdeltaError::BlankFirst { .. }),
            r if r.starts_with("bad number") => matches!(e, XdeltaError::BadNumber { .. }),
            _ => true,
        };
        assert!(expected, "{input}: want {reason}, got {e:?}");
        assert!(
            e.offset().is_some_and(|o| o <= input.len()),
            "{input}: {e:?}"
        );
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} error vectors");
}

#[test]
fn errors_name_the_offset_and_what_was_expected() {
    assert_eq!(err("v1,d1 :1"), XdeltaError::Whitespace { offset: 5 });
    assert_eq!(err("v1:1, 2"), XdeltaError::Whitespace { offset: 5 });
    assert_eq!(err("v1:1\n"), XdeltaError::Whitespace { offset: 4 });
    assert_eq!(
        err("v1,d1,d2:1"),
        XdeltaError::RepeatedParameter {
            offset: 6,
            parameter: Parameter::Delta
        }
    );
    assert_eq!(
        err("v1,*2,/3:1"),
        XdeltaError::RepeatedParameter {
            offset: 6,
            parameter: Parameter::Scalar
        }
    );
    assert_eq!(
        err("v1,+2,-3:1"),
        XdeltaError::RepeatedParameter {
            offset: 6,
            parameter: Parameter::Offset
        }
    );
    assert_eq!(err("v1,/0:1"), XdeltaError::ZeroDivisor { offset: 3 });
    assert_eq!(err("v1,/-0.0e3:1"), XdeltaError::ZeroDivisor { offset: 3 });
    assert_eq!(err("v1:,1"), XdeltaError::BlankFirst { offset: 3 });
    assert_eq!(err("v1:n2,1"), XdeltaError::BlankFirst { offset: 3 });
    assert_eq!(err("d:n2"), XdeltaError::BlankFirst { offset: 2 });
    assert!(matches!(
        err("v1:01"),
        XdeltaError::BadNumber { offset: 4, .. }
    ));
    assert!(matches!(
        err("v1:.5"),
        XdeltaError::BadNumber { offset: 3, .. }
    ));
    assert!(matches!(
        err("v1:1.,2"),
        XdeltaError::BadNumber { offset: 5, .. }
    ));
    assert!(matches!(
        err("v1:1e+"),
        XdeltaError::BadNumber { offset: 6, .. }
    ));
    assert!(matches!(
        err("v1:1n0"),
        XdeltaError::BadCount { offset: 5, .. }
    ));
    assert!(matches!(
        err("v1:1n01"),
        XdeltaError::BadCount { offset: 5, .. }
    ));
    assert!(matches!(
        err("v1:1,nn"),
        XdeltaError::BadCount { offset: 7, .. }
    ));
    assert!(matches!(
        err("v1:1n-2"),
        XdeltaError::BadCount { offset: 5, .. }
    ));
    assert!(matches!(
        err("v1:1n2.5"),
        XdeltaError::Syntax { offset: 6, .. }
    ));
    assert_eq!(
        err("v2:1"),
        XdeltaError::UnknownVersion {
            offset: 0,
            version: 2
        }
    );
    assert_eq!(
        err("v0,d:1"),
        XdeltaError::UnknownVersion {
            offset: 0,
            version: 0
        }
    );
    assert!(matches!(
        err("v01:1"),
        XdeltaError::Syntax { offset: 2, .. }
    ));
    assert!(matches!(
        err("v1,d3:1"),
        XdeltaError::Syntax { offset: 4, .. }
    ));
    assert!(matches!(
        err("v1,x:1"),
        XdeltaError::Syntax { offset: 3, .. }
    ));
    assert!(matches!(
        err("v1,d1"),
        XdeltaError::Syntax { offset: 5, .. }
    ));
    assert!(matches!(
        err("v1:1x"),
        XdeltaError::Syntax { offset: 4, .. }
    ));
    assert!(matches!(err(""), XdeltaError::Syntax { offset: 0, .. }));
    assert!(matches!(err(":1"), XdeltaError::Syntax { offset: 0, .. }));
    // v0 has no nulls, no `bn`, no `XnY` and no `d0`.
    assert!(matches!(
        err("d:1,n"),
        XdeltaError::BadCount { offset: 5, .. }
    ));
    assert!(matches!(
        err("bn:1"),
        XdeltaError::BadNumber { offset: 1, .. }
    ));
    assert!(matches!(
        err("d:1n2"),
        XdeltaError::Syntax { offset: 3, .. }
    ));
    assert!(matches!(err("d0:1"), XdeltaError::Syntax { offset: 1, .. }));
    let message = err("v1:01").to_string();
    assert!(
        message.contains("byte 4") && message.contains("leading 0"),
        "{message}"
    );
}

#[test]
fn expansion_is_bounded_by_a_limit_sized_to_the_input() {
    let e = err("v1:0n99999999999");
    assert!(
        matches!(e, XdeltaError::TooManyValues { offset: 3, limit } if limit == Decoder::DEFAULT_MIN_VALUES),
        "{e:?}"
    );
    assert!(matches!(
        err("v1:1,n99999999999999999999999999"),
        XdeltaError::TooManyValues { offset: 5, .. }
    ));
    // Many small runs add up against the same limit.
    let many = format!("v1:{}", vec!["0n99999"; 20].join(","));
    assert!(matches!(err(&many), XdeltaError::TooManyValues { .. }));
    assert_eq!(
        Decoder::new()
            .max_values(usize::MAX)
            .decode(&many)
            .unwrap()
            .len(),
        1_999_980
    );
    assert_eq!(
        Decoder::new()
            .max_values(3)
            .decode("v1:1,2,3")
            .unwrap()
            .len(),
        3
    );
    assert!(Decoder::new().max_values(2).decode("v1:1,2,3").is_err());
    // A mostly-constant series of 1M values fits the default for its size.
    assert_eq!(xdelta::decode("v1:0n1000000").unwrap().len(), 1_000_000);
}

#[test]
fn integer_literals_follow_double_arithmetic_past_2_pow_53() {
    // Within 2^53 the integer path gives the doubles' bits.
    let d = xdelta::decode("v1:4503599627370496,4503599627370490,-3").unwrap();
    assert!(d.summary().integer_path);
    assert_eq!(
        d.values(),
        [4503599627370496.0, 9007199254740986.0, 9007199254740983.0]
    );
    // Past it the doubles round at every step, as the spec's arithmetic does:
    // 2^53 + 1 is 2^53 again, however the literals are spelled.
    for input in ["v1:9007199254740992,1,1", "v1:9007199254740992,1,1.0e0"] {
        let d = xdelta::decode(input).unwrap();
        assert!(!d.summary().integer_path, "{input}");
        assert_eq!(d.values(), [9007199254740992.0; 3], "{input}");
    }
    // A literal past 2^53 is the nearest double before anything is added.
    assert_eq!(
        dec("v1:9007199254740993,-9007199254740992"),
        nums(&[9007199254740992.0, 0.0])
    );
    // No overflow: sums past i64 are doubles like any other.
    assert_eq!(
        dec("v1:9223372036854775807,1"),
        nums(&[9.223372036854776e18, 9.223372036854776e18])
    );
    assert_eq!(dec("v1,d2:0,5e18,0")[2], Some(1e19));
    // The second sums of d2 are bounded by the values' count too.
    let d = xdelta::decode("v1,d2:0,1n3,0").unwrap();
    assert!(d.summary().integer_path);
    let d = xdelta::decode("v1,d2:0,4503599627370496,0,0").unwrap();
    assert!(!d.summary().integer_path);
    assert_eq!(d.values()[3], 3.0 * 4503599627370496.0);
    // Whatever the encoder writes decodes to the same bits, past 2^53 too
    // (its integer deltas are kept to where the decoder integrates exactly).
    let decoded = xdelta::decode("v1,b44444244460440:6,,444444444244460442n4,n").unwrap();
    let values = decoded.to_options();
    let text = xdelta::Encoder::new().encode(&values).unwrap();
    let again = xdelta::decode(&text).unwrap();
    let bits = |v: &[Option<f64>]| v.iter().map(|x| x.map(f64::to_bits)).collect::<Vec<_>>();
    assert_eq!(bits(&again.to_options()), bits(&values), "{text}");
    // A literal beyond i64 takes the double path too.
    assert_eq!(
        dec("v1:9223372036854775807,1e19"),
        nums(&[9.223372036854776e18, 1.9223372036854776e19])
    );
}

#[test]
fn br_blank_after_a_null_repeats_the_null() {
    assert_eq!(dec("v1:n,"), vec![None, None]);
    assert_eq!(
        dec("v1:5,n,,n2,3,,"),
        vec![
            Some(5.0),
            None,
            None,
            None,
            None,
            Some(8.0),
            Some(11.0),
            Some(14.0)
        ]
    );
    assert_eq!(
        dec("v1,d0:nn2,,7,"),
        vec![None, None, None, Some(7.0), Some(7.0)]
    );
}

#[test]
fn other_documented_choices() {
    // v0 without a delta parameter: no delta. v1 default: d1.
    assert_eq!(dec("br:1,2,3"), nums(&[1.0, 2.0, 3.0]));
    assert_eq!(dec("v1:1,2,3"), nums(&[1.0, 3.0, 6.0]));
    // v0's nY repeats the previous item even with a static blank.
    assert_eq!(dec("b9:4,,n2"), nums(&[4.0, 9.0, 9.0, 9.0]));
    // d2: the first value static, the second a delta from it; nulls carry state.
    assert_eq!(
        dec("v1,d2:10,n,1,nn2,1,1"),
        vec![
            Some(10.0),
            None,
            Some(11.0),
            None,
            None,
            Some(13.0),
            Some(16.0)
        ]
    );
    // Absent steps are skipped, so -0 survives; an offset of +0 is applied.
    assert_eq!(bits(&dec("v1,d0:-0")), bits(&[Some(-0.0)]));
    assert_eq!(bits(&dec("v1,d0,+0:-0")), bits(&[Some(0.0)]));
    // Nulls read 0.0 in the value buffer.
    let d = xdelta::decode("v1:nn2,4").unwrap();
    assert_eq!(d.values(), [0.0, 0.0, 4.0]);
    assert_eq!(d.validity(), [0b100]);
    assert_eq!(d.null_count(), 2);
    // Literal overflow rounds to infinity, as IEEE-754 says.
    assert_eq!(dec("v1:1e400"), nums(&[f64::INFINITY]));
}

#[test]
fn decode_into_reuses_the_callers_buffers() {
    let decoder = Decoder::new();
    let (mut values, mut validity) = (Vec::new(), Vec::new());
    let s = decoder
        .decode_into("v1,d1:n,1n9", &mut values, &mut validity)
        .unwrap();
    assert_eq!((s.len, s.null_count), (10, 1));
    assert_eq!(values[9], 9.0);
    let capacity = values.capacity();
    let s = decoder
        .decode_into("v1:2,3", &mut values, &mut validity)
        .unwrap();
    assert_eq!(
        (s.len, s.null_count, values.as_slice(), validity.as_slice()),
        (2, 0, &[2.0, 5.0][..], &[0b11][..])
    );
    assert_eq!(values.capacity(), capacity);
}

#[test]
fn a_forced_backend_the_cpu_lacks_is_an_error() {
    let missing = Backend::ALL.into_iter().find(|b| !b.is_available());
    if let Some(backend) = missing {
        assert!(matches!(
            Decoder::new().backend(backend).decode("v1:1"),
            Err(XdeltaError::Backend(BackendError::Unavailable(_)))
        ));
    }
}

/// The plain `v1,d0:` listing, numbers in std's shortest round-trip form.
fn plain(values: &[Option<f64>]) -> String {
    let items: Vec<String> = values
        .iter()
        .map(|v| v.map_or("n".to_string(), |x| format!("{x}")))
        .collect();
    format!("v1,d0:{}", items.join(","))
}

fn roundtrip(values: &[Option<f64>], encoder: Encoder) -> String {
    let text = encoder.encode(values).unwrap();
    assert_eq!(bits(&dec(&text)), bits(values), "{text}");
    assert!(
        text.len() <= plain(values).len(),
        "{text} is longer than {}",
        plain(values)
    );
    text
}

/// The spec's data sets: the encoder's string is never longer than the
/// spec's hand-made one (ties may pick another string of the same length).
#[test]
fn encoder_is_at_least_as_short_as_the_spec() {
    let mut with_nulls = vec![None, None, None];
    with_nulls.extend(ints(0..=4));
    with_nulls.push(None);
    with_nulls.extend(ints(5..=9));
    let decimals = nums(&[50.0, 50.1, 50.3, 50.2, 49.9, 50.1]);
    let cases: [(Vec<Option<f64>>, Encoder, &str); 5] = [
        (ints(0..=9), Encoder::new(), "v1,br,d1:0,1n9"),
        (
            nums(&[0.0, 0.0, 1.0, 1.0, 1.0, 2.0, 2.0]),
            Encoder::new(),
            "v1,br,d0:0,,1,,,2,",
        ),
        (with_nulls, Encoder::new(), "v1,br,d1:nn3,0,1n4,n,1n5"),
        (
            decimals.clone(),
            Encoder::new().precision(1),
            "v1,d1,/10,+50:0,1,2,-1,-3,2",
        ),
        (
            decimals,
            Encoder::new(),
            "v1,d0:50,50.1,50.3,50.2,49.9,50.1",
        ),
    ];
    for (values, encoder, spec) in cases {
        let text = roundtrip(&values, encoder);
        assert!(text.len() <= spec.len(), "{text} is longer than {spec}");
    }
    assert_eq!(roundtrip(&ints(0..=9), Encoder::new()), "v1:0,1n9");
    assert_eq!(
        roundtrip(
            &nums(&[50.0, 50.1, 50.3, 50.2, 49.9, 50.1]),
            Encoder::new().precision(1)
        ),
        "v1,/10:500,1,2,-1,-3,2"
    );
}

#[test]
fn encoder_prints_numbers_minimally_and_uses_runs() {
    assert_eq!(
        roundtrip(&nums(&[1000.0, 1e21, 0.5, -0.0]), Encoder::new()),
        "v1,d0:1e3,1e21,0.5,-0"
    );
    assert_eq!(roundtrip(&[None; 5], Encoder::new()), "v1:nn5");
    assert_eq!(roundtrip(&[], Encoder::new()), "v1:");
    let mostly_zero: Vec<Option<f64>> = (0..100)
        .map(|i| Some(if i % 30 == 7 { 3.0 } else { 0.0 }))
        .collect();
    let text = roundtrip(&mostly_zero, Encoder::new());
    assert!(text.len() < 40, "{text}");
    let big = nums(&[1e300, 5e-324, f64::MAX, -f64::MIN_POSITIVE]);
    roundtrip(&big, Encoder::new().precision(3));
    // Values off the precision grid still round-trip, just without the scalar.
    roundtrip(&nums(&[0.1, 0.25, 1.0 / 3.0]), Encoder::new().precision(2));
}

#[test]
fn encoder_rejects_what_the_format_cannot_hold() {
    assert!(matches!(
        xdelta::encode(&[Some(1.0), Some(f64::NAN)]),
        Err(XdeltaError::NotFinite { index: 1, .. })
    ));
    assert!(matches!(
        Encoder::new().precision(23).encode(&[Some(1.0)]),
        Err(XdeltaError::Precision { precision: 23 })
    ));
}
