//! TS_2DIFF page throughput: decoding 1M-value FLOAT and DOUBLE pages (a
//! random walk with two decimals, Java's defaults: maxPointNumber 2, 128
//! deltas per block) on every kernel backend, next to a plain copy of the
//! decoded output's size, and encoding the same values.
//!
//! `cargo bench --bench ts2diff`; criterion prints elements (values) per
//! second. Output bandwidth is that times 4 (f32) or 8 (f64) bytes.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use deltacells::format::ts2diff::{Decoder, Encoder};
use deltacells::Backend;

#[path = "common/plots.rs"]
mod plots;

const N: usize = 1_000_000;

/// A random walk in hundredths (steps of -1.00..=+1.00), from a fixed seed.
fn walk() -> Vec<i64> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut v = 2_000i64;
    (0..N)
        .map(|_| {
            // xorshift64*
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let r = state.wrapping_mul(0x2545_F491_4F6C_DD1D);
            v += (r >> 33) as i64 % 201 - 100;
            v
        })
        .collect()
}

fn config() -> Criterion {
    plots::plots(
        Criterion::default()
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2)),
    )
}

fn decode(c: &mut Criterion) {
    let hundredths = walk();
    let f32s: Vec<f32> = hundredths
        .iter()
        .map(|&h| (h as f64 / 100.0) as f32)
        .collect();
    let f64s: Vec<f64> = hundredths.iter().map(|&h| h as f64 / 100.0).collect();
    let page32 = Encoder::new().encode(&f32s).unwrap();
    let page64 = Encoder::new().encode(&f64s).unwrap();
    eprintln!(
        "ts2diff bench: {N} values; f32 page {} bytes, f64 page {} bytes; backends {:?}",
        page32.len(),
        page64.len(),
        Backend::available()
    );

    let mut g = c.benchmark_group("ts2diff_decode");
    g.throughput(Throughput::Elements(N as u64));
    let mut out32 = vec![0f32; N];
    let mut out64 = vec![0f64; N];
    for backend in Backend::available() {
        let decoder = Decoder::new().backend(backend);
        assert_eq!(decoder.decode_into(&page32, &mut out32).unwrap(), N);
        assert_eq!(out32, f32s, "{backend}");
        g.bench_function(BenchmarkId::new("f32", backend), |b| {
            b.iter(|| decoder.decode_into(black_box(&page32), &mut out32).unwrap())
        });
        assert_eq!(decoder.decode_into(&page64, &mut out64).unwrap(), N);
        assert_eq!(out64, f64s, "{backend}");
        g.bench_function(BenchmarkId::new("f64", backend), |b| {
            b.iter(|| decoder.decode_into(black_box(&page64), &mut out64).unwrap())
        });
    }
    // The floor: writing the same output bytes from memory that is already decoded.
    g.bench_function(BenchmarkId::new("f32", "memcpy"), |b| {
        b.iter(|| out32.copy_from_slice(black_box(&f32s)))
    });
    g.bench_function(BenchmarkId::new("f64", "memcpy"), |b| {
        b.iter(|| out64.copy_from_slice(black_box(&f64s)))
    });
    g.finish();

    let mut g = c.benchmark_group("ts2diff_encode");
    g.throughput(Throughput::Elements(N as u64));
    let mut page = Vec::with_capacity(page64.len());
    g.bench_function("f32", |b| {
        b.iter(|| {
            page.clear();
            Encoder::new()
                .encode_into(black_box(&f32s), &mut page)
                .unwrap()
        })
    });
    g.bench_function("f64", |b| {
        b.iter(|| {
            page.clear();
            Encoder::new()
                .encode_into(black_box(&f64s), &mut page)
                .unwrap()
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = decode
}
criterion_main!(benches);
