//! Chunk and tile decode against zstd-only decompression of the same frames.
//!
//! The tile is realistic: 4,096 synthetic cells x 36,601 genes, ~2,000
//! nonzeros per cell, zstd level 19, 8 chunks (encoding it takes a few seconds
//! before the measurements start). Before criterion runs, a one-shot table
//! prints every backend's throughput as a ratio to zstd-only measured in the
//! same run, which is the figure to compare across machines.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use deltacells::engine::ChunkDecoder;
use deltacells::format::tile::TileView;
use deltacells::format::tile_writer::TileEncoder;
use deltacells::measure::{format_rows, tile_decode_report};
use deltacells::synth::{Synth, SynthConfig};
use deltacells::Backend;

#[path = "common/plots.rs"]
mod plots;

fn realistic_tile() -> Vec<u8> {
    let block = Synth::new(SynthConfig::default()).block(0, 4096);
    TileEncoder::new()
        .with_chunks(8)
        .with_level(19)
        .encode(block.as_ref())
        .expect("encodes")
}

fn bench(c: &mut Criterion) {
    let bytes = realistic_tile();
    let view = TileView::parse(&bytes).expect("valid tile");
    eprintln!(
        "tile: {} cells, {} nonzeros, {} bytes ({:.3} B/nonzero), {} chunks\n{}",
        view.n_cells(),
        view.nnz(),
        bytes.len(),
        bytes.len() as f64 / view.nnz() as f64,
        view.n_chunks(),
        format_rows(&tile_decode_report(&[view], 10).expect("decodes"))
    );

    let chunk = view.chunk(0);
    let n = chunk.nnz() as usize;
    let mut g = c.benchmark_group("chunk");
    g.throughput(Throughput::Elements(n as u64));
    let mut zstd = ChunkDecoder::for_backend(Backend::Scalar).unwrap();
    g.bench_function("zstd-only", |b| {
        b.iter(|| zstd.decompress_chunk(&view, 0).unwrap())
    });
    let (mut indices, mut values) = (vec![0i32; n], vec![0f32; n]);
    for backend in Backend::available() {
        let mut dec = ChunkDecoder::for_backend(backend).unwrap();
        g.bench_with_input(BenchmarkId::new("decode-f32", backend), &backend, |b, _| {
            b.iter(|| {
                dec.decode_chunk(&view, 0, &mut indices, &mut values)
                    .unwrap()
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("tile");
    g.throughput(Throughput::Elements(view.nnz() as u64));
    g.bench_function("zstd-only", |b| {
        b.iter(|| (0..view.n_chunks()).for_each(|i| zstd.decompress_chunk(&view, i).unwrap()))
    });
    let (mut indptr, mut indices, mut values) = (
        vec![0i64; view.n_cells() + 1],
        vec![0i32; view.nnz()],
        vec![0f32; view.nnz()],
    );
    let mut counts = vec![0i32; view.nnz()];
    for backend in Backend::available() {
        let mut dec = ChunkDecoder::for_backend(backend).unwrap();
        g.bench_with_input(BenchmarkId::new("decode-f32", backend), &backend, |b, _| {
            b.iter(|| {
                dec.decode_tile(&view, &mut indptr, &mut indices, &mut values)
                    .unwrap()
            })
        });
        g.bench_with_input(BenchmarkId::new("decode-i32", backend), &backend, |b, _| {
            b.iter(|| {
                dec.decode_tile(&view, &mut indptr, &mut indices, &mut counts)
                    .unwrap()
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = plots::plots(Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3)));
    targets = bench
}
criterion_main!(benches);
