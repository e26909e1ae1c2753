//! Fuzz the XDelta decoder: any bytes either decode or fail with an error
//! (never a panic, a hang or an unbounded allocation), every backend decodes
//! alike, and whatever decodes re-encodes to the same bits.

#![no_main]

use deltacells::format::xdelta::{Decoder, Encoder};
use deltacells::Backend;
use libfuzzer_sys::fuzz_target;

/// Values an input may expand to. The default limit (a million values for
/// a short input) makes an input of a few long runs cost milliseconds to
/// decode and re-encode; this smaller one keeps every path (runs, the SIMD
/// loops, the limit itself) and lets the fuzzer try far more inputs.
const MAX_VALUES: usize = 1 << 14;

fuzz_target!(|data: &[u8]| {
    let bits = |d: &deltacells::format::xdelta::Decoded| {
        d.iter().map(|v| v.map(f64::to_bits)).collect::<Vec<_>>()
    };
    let reference = Decoder::new()
        .max_values(MAX_VALUES)
        .backend(Backend::Scalar)
        .decode(data);
    for backend in Backend::available() {
        let other = Decoder::new()
            .max_values(MAX_VALUES)
            .backend(backend)
            .decode(data);
        match (&reference, &other) {
            (Ok(a), Ok(b)) => assert_eq!(bits(a), bits(b), "{backend}"),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{backend}"),
            _ => panic!("{backend} disagrees with scalar on success"),
        }
    }
    if let Ok(decoded) = reference {
        let values = decoded.to_options();
        if values.iter().flatten().all(|x| x.is_finite()) {
            let text = Encoder::new()
                .encode(&values)
                .expect("finite values encode");
            let again = Decoder::new()
                .max_values(usize::MAX)
                .decode(&text)
                .expect("encoder output decodes");
            assert_eq!(bits(&again), bits(&decoded), "{text}");
        }
    }
});
