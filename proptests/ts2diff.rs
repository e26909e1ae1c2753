//! TS_2DIFF pages and their block kernels: every backend equals the scalar
//! reference for every bit width, encode -> decode returns what the Java
//! reference returns (checked against an independent model of it), and the
//! decoder never panics.

use deltacells::format::ts2diff::{
    inspect, max_point_value, Decoder, Encoder, FloatType, Form, Ts2diffError,
};
use deltacells::kernels::block::{BlockKernels, Divisor};
use deltacells::kernels::KernelTable;
use deltacells::Backend;
use proptest::prelude::*;

use crate::config;

/// The block kernels of every table this CPU runs (scalar first).
fn kernels(test: &str) -> Vec<&'static BlockKernels> {
    crate::tables::<BlockKernels>(&format!("ts2diff {test}"))
}

/// Value counts around every register width (2..16 lanes), 0 and 1, and a
/// few whole blocks.
fn block_len() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => prop::sample::select(vec![0usize, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 128, 129]),
        2 => 0usize..300,
    ]
}

/// Random stream bytes, a misaligned start, and how many bytes after the
/// packed area the kernels may see (0 = the area ends the page).
fn stream() -> impl Strategy<Value = (Vec<u8>, usize, usize)> {
    (
        prop::collection::vec(any::<u8>(), 300 * 8 + 64),
        0usize..16,
        prop_oneof![Just(0usize), 1usize..40],
    )
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn unpack_u32_every_backend_equals_scalar_for_every_width(n in block_len(), (bytes, start, slack) in stream()) {
        let ks = kernels("unpack_u32");
        for width in 0..=32u32 {
            let need = (n * width as usize).div_ceil(8);
            let packed = &bytes[start..start + need + slack];
            let mut want = vec![0u32; n];
            ks[0].unpack_u32(packed, width, &mut want);
            for k in &ks[1..] {
                let mut got = vec![u32::MAX; n];
                k.unpack_u32(packed, width, &mut got);
                prop_assert_eq!(&got, &want, "width {} on {}", width, k.isa());
            }
        }
    }

    #[test]
    fn unpack_u64_every_backend_equals_scalar_for_every_width(n in block_len(), (bytes, start, slack) in stream()) {
        let ks = kernels("unpack_u64");
        for width in 0..=64u32 {
            let need = (n * width as usize).div_ceil(8);
            let packed = &bytes[start..start + need + slack];
            let mut want = vec![0u64; n];
            ks[0].unpack_u64(packed, width, &mut want);
            for k in &ks[1..] {
                let mut got = vec![u64::MAX; n];
                k.unpack_u64(packed, width, &mut got);
                prop_assert_eq!(&got, &want, "width {} on {}", width, k.isa());
            }
        }
    }

    #[test]
    fn delta_every_backend_equals_scalar(
        prev in any::<u64>(),
        min_delta in prop_oneof![Just(0u64), any::<u64>(), Just(u64::MAX), Just(1u64 << 63)],
        words in prop::collection::vec(any::<u64>(), 0..300),
        start in 0usize..9,
    ) {
        let ks = kernels("delta");
        let start = start.min(words.len());
        let mut want64 = words[start..].to_vec();
        let last64 = ks[0].delta_u64(prev, min_delta, &mut want64);
        let narrow: Vec<u32> = words[start..].iter().map(|&w| w as u32).collect();
        let mut want32 = narrow.clone();
        let last32 = ks[0].delta_u32(prev as u32, min_delta as u32, &mut want32);
        for k in &ks[1..] {
            let mut got = words[start..].to_vec();
            prop_assert_eq!(k.delta_u64(prev, min_delta, &mut got), last64, "{}", k.isa());
            prop_assert_eq!(&got, &want64, "{}", k.isa());
            let mut got = narrow.clone();
            prop_assert_eq!(k.delta_u32(prev as u32, min_delta as u32, &mut got), last32, "{}", k.isa());
            prop_assert_eq!(&got, &want32, "{}", k.isa());
        }
    }

    /// The vector backends divide by FMA corrections on the reciprocal; the
    /// scalar reference divides. Full-width i64 quotients are the hard case.
    #[test]
    fn scale_every_backend_equals_division(
        words in prop::collection::vec(prop_oneof![any::<u64>(), (0u64..1 << 24), Just(i64::MIN as u64), Just(i64::MAX as u64)], 0..80),
        mpn in prop_oneof![0i32..=23, 24i32..=300, Just(280), Just(281), Just(308), Just(309), Just(400), Just(-4)],
    ) {
        let ks = kernels("scale");
        let divisor = Divisor::new(max_point_value(mpn));
        let narrow: Vec<u32> = words.iter().map(|&w| w as u32).collect();
        for k in &ks {
            let mut got = vec![0f64; words.len()];
            k.scale_f64(&words, &divisor, &mut got);
            for (i, (&w, g)) in words.iter().zip(&got).enumerate() {
                let want = w as i64 as f64 / divisor.value();
                prop_assert_eq!(g.to_bits(), want.to_bits(), "f64 lane {} of {}: {} / 1e{} on {}", i, words.len(), w as i64, mpn, k.isa());
            }
            let mut got = vec![0f32; narrow.len()];
            k.scale_f32(&narrow, &divisor, &mut got);
            for (&w, g) in narrow.iter().zip(&got) {
                let want = (f64::from(w as i32) / divisor.value()) as f32;
                prop_assert_eq!(g.to_bits(), want.to_bits(), "f32 {} / 1e{} on {}", w as i32, mpn, k.isa());
            }
        }
    }
}

/// Java's `Math.round` computed on the exact binary value with integers: an
/// independent check of the floating-point version in the crate.
fn exact_round(x: f64) -> i64 {
    if x.is_nan() {
        return 0;
    }
    if x.is_infinite() {
        return if x > 0.0 { i64::MAX } else { i64::MIN };
    }
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1 << 52) - 1);
    let (m, e) = if exp == 0 {
        (frac, -1074)
    } else {
        (frac | 1 << 52, exp - 1075)
    };
    let m = if bits >> 63 == 1 {
        -(m as i128)
    } else {
        m as i128
    };
    let exact = if e >= 0 {
        if e > 70 {
            m.signum() * i128::MAX
        } else {
            m << e
        }
    } else if -e > 120 {
        0 // |x| < 2^-67: floor(x + 1/2) = 0
    } else {
        // floor((2m + 2^s) / 2^(s+1)) for x = m / 2^s.
        let s = -e;
        (2 * m + (1i128 << s)).div_euclid(1i128 << (s + 1))
    };
    exact.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// What the Java reference stores and decodes for one value (layout spec,
/// sections 2 and 3.3): the form (1 scaled, 2 rounded, 3 raw) and the bits.
// The range tests must be false for NaN (as in Java), which `contains` is not.
#[allow(clippy::manual_range_contains)]
fn java_f32(v: f32, mpn: i32) -> (u8, u32) {
    let p = max_point_value(mpn);
    let x = f64::from(v) * p;
    if x > 2147483647.0 || x < -2147483648.0 {
        if v > 2147483648.0 || v < -2147483648.0 {
            (3, v.to_bits())
        } else {
            let i = exact_round(f64::from(v)).clamp(i64::from(i32::MIN), i64::from(i32::MAX));
            (2, (i as f32).to_bits())
        }
    } else if v.is_nan() {
        (3, 0x7fc0_0000)
    } else {
        (1, ((exact_round(x) as i32 as f64 / p) as f32).to_bits())
    }
}

// The range tests must be false for NaN (as in Java), which `contains` is not.
#[allow(clippy::manual_range_contains)]
fn java_f64(v: f64, mpn: i32) -> (u8, u64) {
    let p = max_point_value(mpn);
    let x = v * p;
    let lim = 9223372036854775808.0;
    if x > lim || x < -lim {
        if v > lim || v < -lim {
            (3, v.to_bits())
        } else {
            (2, (exact_round(v) as f64).to_bits())
        }
    } else if v.is_nan() {
        (3, 0x7ff8_0000_0000_0000)
    } else {
        (1, (exact_round(x) as f64 / p).to_bits())
    }
}

/// Values that each force a form or sit on a rounding or range boundary.
fn special_f64() -> impl Strategy<Value = f64> {
    prop::sample::select(vec![
        0.0,
        -0.0,
        f64::MIN_POSITIVE,
        5e-324,
        -5e-324,
        0.5,
        -0.5,
        2.5,
        -2.5,
        0.49999999999999994,
        0.125,
        -12.5,
        4503599627370497.0,
        2147483647.0,
        2147483648.0,
        -2147483648.0,
        2147483904.0,
        -2147483904.0,
        21474836.47,
        21474836.48,
        9223372036854775808.0,
        -9223372036854775808.0,
        18446744073709551616.0,
        1e17,
        1e300,
        f64::MAX,
        f64::MIN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::from_bits(0x7ff0_0000_0000_0001),
        f64::from_bits(0xfff8_0000_0000_0042),
    ])
}

/// Series shaped like real data (random walks, constants, ramps), raw random
/// bit patterns, and specials mixed in.
fn series() -> impl Strategy<Value = Vec<f64>> {
    let walk = (
        -1e6f64..1e6,
        prop::collection::vec(-500i64..500, 0..600),
        0u32..6,
    )
        .prop_map(|(start, steps, digits)| {
            let unit = 10f64.powi(-(digits as i32));
            let mut v = (start / unit).round() * unit;
            steps
                .into_iter()
                .map(|s| {
                    v += s as f64 * unit;
                    v
                })
                .collect::<Vec<_>>()
        });
    let constant = (any::<f64>(), 0usize..400).prop_map(|(x, n)| vec![x; n]);
    let mixed = prop::collection::vec(
        prop_oneof![4 => -1e4f64..1e4, 2 => special_f64(), 1 => any::<f64>(), 1 => any::<u64>().prop_map(f64::from_bits)],
        0..300,
    );
    prop_oneof![3 => walk, 1 => constant, 3 => mixed]
}

fn mpn() -> impl Strategy<Value = i32> {
    prop_oneof![6 => 0i32..=6, 2 => -5i32..0, 2 => 7i32..=20, 1 => Just(400), 1 => Just(i32::MIN)]
}

fn block_size() -> impl Strategy<Value = u32> {
    prop_oneof![4 => 1u32..=20, 2 => Just(128), 2 => 21u32..=700, 1 => 1000u32..3000]
}

fn expected_form(forms: impl Iterator<Item = u8>) -> Option<Form> {
    forms.max().map(|f| match f {
        1 => Form::Scaled,
        2 => Form::Rounded,
        _ => Form::Raw,
    })
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn f64_encode_decode_returns_javas_answer(values in series(), mpn in mpn(), bs in block_size()) {
        let ks = kernels("f64_round_trip");
        let page = Encoder::new().max_point_number(mpn).block_size(bs).encode(&values).unwrap();
        let want: Vec<(u8, u64)> = values.iter().map(|&v| java_f64(v, mpn)).collect();
        let info = inspect(&page, FloatType::Double).unwrap();
        prop_assert_eq!(info.values, values.len() as u64);
        prop_assert_eq!(info.form, expected_form(want.iter().map(|w| w.0)));
        for k in &ks {
            let got: Vec<f64> = Decoder::new().backend(k.backend()).decode(&page).unwrap();
            let got: Vec<u64> = got.iter().map(|x| x.to_bits()).collect();
            let want: Vec<u64> = want.iter().map(|w| w.1).collect();
            prop_assert_eq!(got, want, "on {}", k.isa());
        }
    }

    #[test]
    fn f32_encode_decode_returns_javas_answer(values in series(), mpn in mpn(), bs in block_size()) {
        let ks = kernels("f32_round_trip");
        let values: Vec<f32> = values.iter().map(|&v| v as f32).collect();
        let page = Encoder::new().max_point_number(mpn).block_size(bs).encode(&values).unwrap();
        let want: Vec<(u8, u32)> = values.iter().map(|&v| java_f32(v, mpn)).collect();
        let info = inspect(&page, FloatType::Float).unwrap();
        prop_assert_eq!(info.values, values.len() as u64);
        prop_assert_eq!(info.form, expected_form(want.iter().map(|w| w.0)));
        for k in &ks {
            let got: Vec<f32> = Decoder::new().backend(k.backend()).decode(&page).unwrap();
            let got: Vec<u32> = got.iter().map(|x| x.to_bits()).collect();
            let want: Vec<u32> = want.iter().map(|w| w.1).collect();
            prop_assert_eq!(got, want, "on {}", k.isa());
        }
    }
}

/// Decodes on every backend and checks that they agree exactly (values or
/// error). Panics inside are what the tests below look for.
fn decode_everywhere(page: &[u8], ks: &[&BlockKernels]) -> Result<(), TestCaseError> {
    let show = |r: Result<Vec<u64>, Ts2diffError>| r.map_err(|e| e.to_string());
    let f32s = |b: Backend| {
        show(
            Decoder::new()
                .backend(b)
                .decode::<f32>(page)
                .map(|v| v.iter().map(|x| u64::from(x.to_bits())).collect()),
        )
    };
    let f64s = |b: Backend| {
        show(
            Decoder::new()
                .backend(b)
                .decode::<f64>(page)
                .map(|v| v.iter().map(|x| x.to_bits()).collect()),
        )
    };
    let (want32, want64) = (f32s(Backend::Scalar), f64s(Backend::Scalar));
    for k in &ks[1..] {
        prop_assert_eq!(f32s(k.backend()), want32.clone(), "f32 on {}", k.isa());
        prop_assert_eq!(f64s(k.backend()), want64.clone(), "f64 on {}", k.isa());
    }
    // The slice API agrees with the Vec API, and never writes past a short slice.
    if let Ok(want) = &want32 {
        let mut out = vec![0f32; want.len() + 1];
        prop_assert_eq!(
            Decoder::new().decode_into(page, &mut out).ok(),
            Some(want.len())
        );
        if !want.is_empty() {
            let mut short = vec![0f32; want.len() - 1];
            prop_assert!(Decoder::new().decode_into(page, &mut short).is_err());
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let ks = kernels("arbitrary_bytes");
        decode_everywhere(&bytes, &ks)?;
    }

    /// Random bytes rarely get past the first block header; damaged valid
    /// pages reach the bitmaps, the block walk and the kernels.
    #[test]
    fn decoding_damaged_pages_never_panics(
        values in series(),
        mpn in mpn(),
        bs in block_size(),
        damage in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
        double in any::<bool>(),
    ) {
        let ks = kernels("damaged_pages");
        let encoder = Encoder::new().max_point_number(mpn).block_size(bs);
        let mut page = if double {
            encoder.encode(&values).unwrap()
        } else {
            encoder.encode(&values.iter().map(|&v| v as f32).collect::<Vec<_>>()).unwrap()
        };
        if page.is_empty() {
            return Ok(());
        }
        for (at, byte) in damage {
            let i = at.index(page.len());
            page[i] ^= byte;
        }
        let keep = page.len() - cut.index(page.len().min(8));
        decode_everywhere(&page[..keep], &ks)?;
    }
}
