//! XDelta codec benchmarks.
//!
//! Two 1M-value series: a random walk of two-decimal values (encoded with
//! precision 2: integer deltas and a `/100` scalar) and a mostly-constant
//! series (long runs with rare spikes). For each: decode throughput in MB/s of
//! text and values/s, next to a naive `split(',')` + `str::parse::<f64>` of the
//! same numbers printed plainly; encode throughput; encoded size against the
//! plain listing. Criterion measures; a plain summary with the ratios is
//! printed first (best of several runs, to resist a busy machine). The scan
//! kernels are timed per backend at the end (each iteration includes copying
//! the input back, since the kernels work in place).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use deltacells::format::xdelta::{Decoder, Encoder};
use deltacells::kernels::integrate::{Affine, IntegrateKernels, Scale};
use deltacells::kernels::KernelTable;
use deltacells::Backend;

#[path = "common/plots.rs"]
mod plots;

const N: usize = 1_000_000;

/// A small deterministic generator (xorshift), so runs are comparable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A price-like walk: 100.00 plus steps of -0.50..+0.50, two decimals.
fn random_walk() -> Vec<Option<f64>> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut cents: i64 = 10_000;
    (0..N)
        .map(|_| {
            cents += (rng.next() % 101) as i64 - 50;
            Some(cents as f64 / 100.0)
        })
        .collect()
}

/// Mostly 0, with a spike roughly every 200 values and rare nulls.
fn mostly_constant() -> Vec<Option<f64>> {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    (0..N)
        .map(|_| match rng.next() % 1000 {
            0..=4 => Some((rng.next() % 90 + 10) as f64),
            5 => None,
            _ => Some(0.0),
        })
        .collect()
}

/// The same numbers printed plainly (std's shortest round-trip), `n` for nulls.
fn plain_listing(values: &[Option<f64>]) -> String {
    let items: Vec<String> = values
        .iter()
        .map(|v| v.map_or("n".to_string(), |x| format!("{x}")))
        .collect();
    items.join(",")
}

/// The naive baseline: split on commas, parse each number.
fn naive_decode(text: &str, out: &mut Vec<Option<f64>>) {
    out.clear();
    out.extend(text.split(',').map(|t| t.parse::<f64>().ok()));
}

struct Series {
    name: &'static str,
    values: Vec<Option<f64>>,
    encoder: Encoder,
    encoded: String,
    plain: String,
}

fn series() -> Vec<Series> {
    [
        ("random_walk", random_walk(), Encoder::new().precision(2)),
        ("mostly_constant", mostly_constant(), Encoder::new()),
    ]
    .into_iter()
    .map(|(name, values, encoder)| {
        let encoded = encoder.encode(&values).expect("finite values encode");
        let plain = plain_listing(&values);
        Series {
            name,
            values,
            encoder,
            encoded,
            plain,
        }
    })
    .collect()
}

/// Best time of a few runs of `f` (a quick, noise-resistant point estimate).
fn best_of(runs: usize, mut f: impl FnMut()) -> Duration {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn summary(all: &[Series]) {
    let decoder = Decoder::new();
    println!(
        "xdelta summary (kernel backend: {}; best of 9 runs, {N} values)",
        Backend::active().expect("backend")
    );
    for s in all {
        let (mut values, mut validity, mut naive) = (Vec::new(), Vec::new(), Vec::new());
        let ours = best_of(9, || {
            decoder
                .decode_into(&s.encoded, &mut values, &mut validity)
                .expect("decodes");
        });
        let base = best_of(9, || naive_decode(&s.plain, &mut naive));
        let enc = best_of(3, || {
            black_box(s.encoder.encode(&s.values).expect("encodes"));
        });
        let mb = |bytes: usize, t: Duration| bytes as f64 / t.as_secs_f64() / 1e6;
        let mv = |t: Duration| N as f64 / t.as_secs_f64() / 1e6;
        println!(
            "  {:<16} decode: {:>8.1} MB/s {:>7.1} Mvalues/s | naive split+parse: {:>7.1} MB/s {:>6.1} Mvalues/s | ratio {:.1}x",
            s.name,
            mb(s.encoded.len(), ours),
            mv(ours),
            mb(s.plain.len(), base),
            mv(base),
            base.as_secs_f64() / ours.as_secs_f64(),
        );
        println!(
            "  {:<16} encode: {:>7.1} Mvalues/s | size {} bytes vs plain listing {} bytes ({:.1}%)",
            "",
            mv(enc),
            s.encoded.len(),
            s.plain.len() + "v1,d0:".len(),
            100.0 * s.encoded.len() as f64 / (s.plain.len() + "v1,d0:".len()) as f64,
        );
    }
}

fn bench(c: &mut Criterion) {
    let all = series();
    summary(&all);
    let decoder = Decoder::new();

    let mut group = c.benchmark_group("xdelta_decode_text");
    for s in &all {
        let (mut values, mut validity, mut naive) = (Vec::new(), Vec::new(), Vec::new());
        group.throughput(Throughput::Bytes(s.encoded.len() as u64));
        group.bench_function(BenchmarkId::new("xdelta", s.name), |b| {
            b.iter(|| {
                decoder
                    .decode_into(black_box(&s.encoded), &mut values, &mut validity)
                    .expect("decodes")
            })
        });
        group.throughput(Throughput::Bytes(s.plain.len() as u64));
        group.bench_function(BenchmarkId::new("naive_split_parse", s.name), |b| {
            b.iter(|| naive_decode(black_box(&s.plain), &mut naive))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("xdelta_values");
    group.throughput(Throughput::Elements(N as u64));
    for s in &all {
        let (mut values, mut validity) = (Vec::new(), Vec::new());
        group.bench_function(BenchmarkId::new("decode", s.name), |b| {
            b.iter(|| {
                decoder
                    .decode_into(black_box(&s.encoded), &mut values, &mut validity)
                    .expect("decodes")
            })
        });
        group.bench_function(BenchmarkId::new("encode", s.name), |b| {
            b.iter(|| s.encoder.encode(black_box(&s.values)).expect("encodes"))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("scan_kernels");
    let deltas: Vec<i64> = (0..N as i64).map(|i| (i * 7919) % 201 - 100).collect();
    group.throughput(Throughput::Elements(N as u64));
    for backend in Backend::available() {
        let scan = IntegrateKernels::for_backend(backend).expect("available");
        let mut data = deltas.clone();
        group.bench_function(BenchmarkId::new("prefix_sum_i64", backend), |b| {
            b.iter(|| {
                data.copy_from_slice(&deltas);
                scan.prefix_sum_i64(&mut data).expect("no overflow");
            })
        });
        let affine = Affine {
            scale: Scale::Div(100.0),
            offset: Some(50.0),
        };
        let ints: Vec<f64> = deltas.iter().map(|&i| f64::from_bits(i as u64)).collect();
        let mut floats = ints.clone();
        group.bench_function(BenchmarkId::new("ints_to_f64_div_add", backend), |b| {
            b.iter(|| {
                floats.copy_from_slice(&ints);
                scan.ints_to_f64(&mut floats, affine);
            })
        });
        group.bench_function(
            BenchmarkId::new("prefix_sum_to_f64_div_add", backend),
            |b| {
                b.iter(|| {
                    floats.copy_from_slice(&ints);
                    scan.prefix_sum_to_f64(&mut floats, affine)
                        .expect("no overflow");
                })
            },
        );
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = plots::plots(
        Criterion::default()
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2)),
    );
    targets = bench
}
criterion_main!(benches);
