//! Fuzz the TS_2DIFF page decoder: any bytes either decode or fail with a
//! typed error (never a panic, a hang or an allocation beyond the decoder's
//! cap), as FLOAT and as DOUBLE pages, every backend decodes alike, and the
//! header walk (`inspect`) agrees with the decoder on validity and count.

#![no_main]

use deltacells::format::ts2diff::{inspect, Decoder, FloatType};
use deltacells::Backend;
use libfuzzer_sys::fuzz_target;

fn bits32(v: Vec<f32>) -> Vec<u64> {
    v.into_iter().map(|x| u64::from(x.to_bits())).collect()
}

fn bits64(v: Vec<f64>) -> Vec<u64> {
    v.into_iter().map(f64::to_bits).collect()
}

fuzz_target!(|data: &[u8]| {
    for ty in [FloatType::Float, FloatType::Double] {
        let decode = |backend: Backend| {
            let decoder = Decoder::new().backend(backend);
            match ty {
                FloatType::Float => decoder.decode::<f32>(data).map(bits32),
                FloatType::Double => decoder.decode::<f64>(data).map(bits64),
            }
            .map_err(|e| e.to_string())
        };
        let reference = decode(Backend::Scalar);
        for backend in Backend::available() {
            assert_eq!(decode(backend), reference, "{ty} on {backend}");
        }
        let info = inspect(data, ty);
        if let Ok(values) = &reference {
            assert_eq!(info.map(|i| i.values), Ok(values.len() as u64), "{ty}");
        }
    }
});
