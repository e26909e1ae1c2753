//! XDelta and its scan kernels: every backend equals the scalar reference
//! (errors included), encode -> decode is the identity, and decoding never
//! panics.

use deltacells::format::xdelta::{Decoder, Encoder, XdeltaError};
use deltacells::kernels::integrate::{Affine, IntegrateKernels, Scale};
use deltacells::kernels::KernelTable;
use deltacells::Backend;
use proptest::prelude::*;

use crate::config;

/// The integration kernels of every table this CPU runs (scalar first).
fn backends(test: &str) -> Vec<&'static IntegrateKernels> {
    crate::tables::<IntegrateKernels>(&format!("xdelta {test}"))
}

/// Bits, with every NaN the same (a NaN's payload may depend on operand order).
fn canon(x: f64) -> u64 {
    if x.is_nan() {
        f64::NAN.to_bits()
    } else {
        x.to_bits()
    }
}

/// Integers that sometimes overflow a running sum: mostly small, some huge.
fn ints() -> impl Strategy<Value = i64> {
    prop_oneof![8 => -1000i64..1000, 1 => any::<i64>(), 1 => prop_oneof![Just(i64::MAX), Just(i64::MIN), Just(i64::MAX / 2 + 1)]]
}

/// A vector around the register widths (2, 4, 8 lanes), and a start offset so
/// that the kernels also see misaligned slices.
fn int_vec() -> impl Strategy<Value = (Vec<i64>, usize)> {
    (prop::collection::vec(ints(), 0..70), 0usize..9)
}

fn affine() -> impl Strategy<Value = Affine> {
    let num = prop_oneof![4 => -1e6f64..1e6, 1 => any::<f64>(), 1 => Just(0.1), 1 => Just(10.0)];
    let scale = prop_oneof![
        Just(Scale::None),
        num.clone().prop_map(Scale::Mul),
        num.clone().prop_map(Scale::Div)
    ];
    (scale, prop::option::of(num)).prop_map(|(scale, offset)| Affine { scale, offset })
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn fused_prefix_sums_match_the_reference((data, skip) in int_vec(), affine in affine()) {
        let scans = backends("fused prefix sums");
        let skip = skip.min(data.len());
        let as_bits: Vec<f64> = data.iter().map(|&i| f64::from_bits(i as u64)).collect();
        let bits = |v: &[f64]| v.iter().map(|&x| canon(x)).collect::<Vec<_>>();
        let reference = IntegrateKernels::scalar();
        let (mut want1, mut want2) = (as_bits.clone(), as_bits.clone());
        let want1_r = reference.prefix_sum_to_f64(&mut want1[skip..], affine);
        let want2_r = reference.prefix_sum2_to_f64(&mut want2[skip..], affine);
        // The fused pass is the two passes it replaces.
        let mut ints = data[skip..].to_vec();
        prop_assert_eq!(reference.prefix_sum_i64(&mut ints), want1_r);
        let mut ints2 = data[skip..].to_vec();
        prop_assert_eq!(reference.prefix_sum2_i64(&mut ints2), want2_r);
        if want1_r.is_ok() {
            let mut converted: Vec<f64> = ints.iter().map(|&i| f64::from_bits(i as u64)).collect();
            reference.ints_to_f64(&mut converted, affine);
            prop_assert_eq!(bits(&converted), bits(&want1[skip..]));
        }
        for scan in scans {
            let (mut got1, mut got2) = (as_bits.clone(), as_bits.clone());
            prop_assert_eq!(scan.prefix_sum_to_f64(&mut got1[skip..], affine), want1_r, "{}", scan.isa());
            prop_assert_eq!(bits(&got1), bits(&want1), "{}", scan.isa());
            prop_assert_eq!(scan.prefix_sum2_to_f64(&mut got2[skip..], affine), want2_r, "{}", scan.isa());
            prop_assert_eq!(bits(&got2), bits(&want2), "{}", scan.isa());
        }
    }

    #[test]
    fn prefix_sums_match_the_reference((data, skip) in int_vec()) {
        let scans = backends("prefix sums");
        let skip = skip.min(data.len());
        let mut want = data.clone();
        let want_r = IntegrateKernels::scalar().prefix_sum_i64(&mut want[skip..]);
        let mut want2 = data.clone();
        let want2_r = IntegrateKernels::scalar().prefix_sum2_i64(&mut want2[skip..]);
        for scan in scans {
            let mut got = data.clone();
            prop_assert_eq!(scan.prefix_sum_i64(&mut got[skip..]), want_r, "{}", scan.isa());
            prop_assert_eq!(&got, &want, "{}", scan.isa());
            let mut got2 = data.clone();
            prop_assert_eq!(scan.prefix_sum2_i64(&mut got2[skip..]), want2_r, "{}", scan.isa());
            prop_assert_eq!(&got2, &want2, "{}", scan.isa());
        }
    }

    #[test]
    fn prefix_sum_is_a_checked_running_sum(data in prop::collection::vec(ints(), 1..40)) {
        let mut got = data.clone();
        let r = IntegrateKernels::scalar().prefix_sum_i64(&mut got);
        let mut acc: i128 = 0;
        for (k, &x) in data.iter().enumerate() {
            acc += i128::from(x);
            if i64::try_from(acc).is_err() {
                prop_assert_eq!(r.unwrap_err().index, k);
                return Ok(());
            }
            prop_assert_eq!(i128::from(got[k]), acc);
        }
        prop_assert!(r.is_ok());
    }

    #[test]
    fn scale_offset_passes_match_the_reference(
        floats in prop::collection::vec(any::<f64>(), 0..70),
        ints in prop::collection::vec(any::<i64>(), 0..70),
        affine in affine(),
        skip in 0usize..9,
    ) {
        let scans = backends("scale/offset");
        let mut want = floats.clone();
        let skip_f = skip.min(want.len());
        IntegrateKernels::scalar().affine_f64(&mut want[skip_f..], affine);
        let as_bits: Vec<f64> = ints.iter().map(|&i| f64::from_bits(i as u64)).collect();
        let skip_i = skip.min(as_bits.len());
        let mut want_i = as_bits.clone();
        IntegrateKernels::scalar().ints_to_f64(&mut want_i[skip_i..], affine);
        for scan in scans {
            let mut got = floats.clone();
            scan.affine_f64(&mut got[skip_f..], affine);
            prop_assert_eq!(got.iter().map(|&x| canon(x)).collect::<Vec<_>>(), want.iter().map(|&x| canon(x)).collect::<Vec<_>>(), "{}", scan.isa());
            let mut got_i = as_bits.clone();
            scan.ints_to_f64(&mut got_i[skip_i..], affine);
            prop_assert_eq!(got_i.iter().map(|&x| canon(x)).collect::<Vec<_>>(), want_i.iter().map(|&x| canon(x)).collect::<Vec<_>>(), "{}", scan.isa());
        }
    }
}

/// Decodes with every backend; they must agree bit for bit.
fn decode_all(text: &str) -> Result<Vec<Option<u64>>, TestCaseError> {
    let mut first: Option<Vec<Option<u64>>> = None;
    for backend in Backend::available() {
        let decoded = Decoder::new()
            .backend(backend)
            .decode(text)
            .map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        let bits: Vec<Option<u64>> = decoded.iter().map(|v| v.map(f64::to_bits)).collect();
        match &first {
            None => first = Some(bits),
            Some(f) => prop_assert_eq!(f, &bits, "{} on {}", text, backend),
        }
    }
    Ok(first.unwrap_or_default())
}

/// Plain `v1,d0:` listing with std's shortest round-trip numbers.
fn plain_len(values: &[Option<f64>]) -> usize {
    "v1,d0:".len()
        + values
            .iter()
            .map(|v| v.map_or(1, |x| format!("{x}").len()))
            .sum::<usize>()
        + values.len().saturating_sub(1)
}

fn check_roundtrip(values: &[Option<f64>], encoder: Encoder) -> Result<(), TestCaseError> {
    let text = encoder
        .encode(values)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let want: Vec<Option<u64>> = values.iter().map(|v| v.map(f64::to_bits)).collect();
    prop_assert_eq!(decode_all(&text)?, want, "{}", text);
    prop_assert!(
        text.len() <= plain_len(values),
        "{} longer than the plain listing",
        text
    );
    Ok(())
}

/// Lists with runs (repeats are what blanks and `XnY` are for).
fn runs_of<T: Clone + std::fmt::Debug>(
    item: impl Strategy<Value = T>,
) -> impl Strategy<Value = Vec<T>> {
    prop::collection::vec(
        (item, prop_oneof![4 => Just(1usize), 1 => 2usize..12]),
        0..40,
    )
    .prop_map(|runs| {
        runs.into_iter()
            .flat_map(|(x, n)| std::iter::repeat_n(x, n))
            .collect()
    })
}

/// Integers a double holds exactly, mostly small, sometimes a random walk.
fn exact_ints() -> impl Strategy<Value = i64> {
    prop_oneof![4 => -50i64..50, 2 => -1_000_000i64..1_000_000, 1 => -(1i64 << 53)..(1i64 << 53)]
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn integer_lists_round_trip(values in runs_of(exact_ints())) {
        let values: Vec<Option<f64>> = values.into_iter().map(|v| Some(v as f64)).collect();
        check_roundtrip(&values, Encoder::new())?;
    }

    #[test]
    fn integer_walks_with_nulls_round_trip(steps in runs_of(prop::option::weighted(0.8, -20i64..20)), start in exact_ints()) {
        let mut acc = start;
        let values: Vec<Option<f64>> = steps.into_iter().map(|s| s.map(|d| { acc += d; acc as f64 })).collect();
        check_roundtrip(&values, Encoder::new())?;
    }

    #[test]
    fn decimal_lists_with_a_precision_round_trip(
        zs in runs_of(prop::option::weighted(0.9, -10_000_000i64..10_000_000)),
        precision in 0u32..7,
        walk in any::<bool>(),
    ) {
        let divisor = 10f64.powi(precision as i32);
        let mut acc = 0i64;
        let values: Vec<Option<f64>> = zs
            .into_iter()
            .map(|z| z.map(|z| {
                let z = if walk { acc += z / 1000; acc } else { z };
                z as f64 / divisor
            }))
            .collect();
        check_roundtrip(&values, Encoder::new().precision(precision))?;
    }

    #[test]
    fn any_finite_list_round_trips(values in runs_of(prop::option::weighted(0.9, any::<f64>().prop_filter("finite", |x| x.is_finite()))), precision in 0u32..4) {
        check_roundtrip(&values, Encoder::new().precision(precision))?;
    }
}

/// Strings made of the format's own characters, so that many parse deep.
fn xdelta_like() -> impl Strategy<Value = String> {
    let prefix = prop_oneof![
        Just(""),
        Just("v1:"),
        Just("v1,d2:"),
        Just("v1,d0,bn:"),
        Just("d,b0:"),
        Just("dd,/10,+5:")
    ];
    let token = prop_oneof![
        Just(","),
        Just("n"),
        Just("nn"),
        Just("-"),
        Just("."),
        Just("e"),
        Just("e-"),
        Just(":"),
        Just("v1"),
        Just("0"),
        Just("1"),
        Just("7"),
        Just("12"),
        Just("9e18"),
        Just("99999999999"),
        Just("d1"),
        Just("br"),
        Just("/"),
        Just("*"),
        Just("+"),
        Just(" "),
    ];
    (prefix, prop::collection::vec(token, 0..24)).prop_map(|(p, t)| format!("{p}{}", t.concat()))
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn decoding_never_panics(text in xdelta_like(), bytes in prop::collection::vec(any::<u8>(), 0..32)) {
        let decoder = Decoder::new().max_values(100_000);
        for input in [text.as_bytes(), bytes.as_slice()] {
            match decoder.decode(input) {
                Ok(decoded) => {
                    // Whatever decodes (and is finite) re-encodes to the same bits.
                    let values = decoded.to_options();
                    if values.iter().flatten().all(|x| x.is_finite()) {
                        check_roundtrip(&values, Encoder::new())?;
                    }
                }
                Err(e @ XdeltaError::Backend(_)) => return Err(TestCaseError::fail(e.to_string())),
                Err(e) => {
                    prop_assert!(e.offset().is_some_and(|o| o <= input.len()), "{:?}", e);
                }
            }
        }
    }
}
