//! Tile kernel throughput, per kernel and per table this CPU runs (scalar
//! beside every vector one), in nonzeros per second, on a cache-resident chunk
//! (16k nonzeros: 32 KiB of planes) and a DRAM-sized one (16M nonzeros), the
//! decoding kernels on the DRAM-sized one with plain and with streaming
//! stores.
//!
//! The row kernels that keep a gene selection's genes (`select`, and
//! `select_marked` and its first pass `marked` through its marks) and count
//! them (`count_marked`) run over the rows of the cache-resident chunk, with
//! a selection of 2,034 genes (every 18th) and of 18,301 (every other), in
//! genes a second; `scatter_values` places the kept genes' values in a
//! dense row of the selection's columns, in kept genes a second.
//! `classify` looks up Geneformer's classes of those rows' genes (146
//! medians, runs of 28 counts, as the demo's gene statistics give), and
//! `order_by_class` orders the rows' tokens by those classes, and `starts`
//! turns 4,099 counts (a class table's width, mostly 0 and 1) into the
//! classes' starts.
//! `stream` copies a dense row of 2,000 `f32` (composed in the cache) to
//! the next place in a 64 MiB output, as a batch's rows are written: the
//! scalar table copies plainly, the vector ones stream.
//!
//! The data imitates real chunks: cells of 1,000 to 3,000 nonzeros over 36,601
//! genes sorted by decreasing expression (so gaps are mostly small), and
//! counts that are mostly 1 to 10.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use deltacells::kernels::reference::tile as scalar;
use deltacells::kernels::rows::{ClassLookup, RowKernels, CLASS_START_BITS, MEMO_SLOTS};
use deltacells::kernels::{CellBounds, KernelTable, Planes, Stores, TileKernels};

#[path = "common/plots.rs"]
mod plots;

/// Genes in the synthetic data (as in a typical human atlas).
const N_GENES: u32 = 36_601;

/// The sizes benchmarked, L2-resident and DRAM-sized, and how the decoding
/// kernels store.
const SIZES: [(&str, usize, Stores); 3] = [
    ("16k", 16 << 10, Stores::Cached),
    ("16M", 16 << 20, Stores::Cached),
    ("16M-streaming", 16 << 20, Stores::Streaming),
];

/// xorshift64*: deterministic data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One synthetic chunk, with every input the kernels take.
struct Chunk {
    bounds: Vec<i64>,
    indices: Vec<i32>,
    gaps: Vec<u16>,
    gap_planes: Vec<u8>,
    count_planes: Vec<u8>,
}

impl Chunk {
    fn new(nnz: usize) -> Chunk {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut bounds = vec![0i64];
        let mut indices = Vec::with_capacity(nnz);
        let mut expressed = vec![false; N_GENES as usize];
        while indices.len() < nnz {
            let want = (1000 + rng.below(2001) as usize).min(nnz - indices.len());
            expressed.fill(false);
            let mut k = 0;
            while k < want {
                // Squaring a uniform variate crowds picks at the top genes.
                let u = rng.below(1 << 20) as f64 / f64::from(1 << 20);
                let g = (u * u * f64::from(N_GENES)) as usize;
                if !expressed[g] {
                    expressed[g] = true;
                    k += 1;
                }
            }
            indices.extend(
                expressed
                    .iter()
                    .enumerate()
                    .filter(|(_, &e)| e)
                    .map(|(g, _)| g as i32),
            );
            bounds.push(indices.len() as i64);
        }
        let counts: Vec<u16> = (0..nnz)
            .map(|_| match rng.below(100) {
                0..=59 => 1,
                60..=79 => 2,
                80..=98 => 3 + rng.below(8) as u16,
                _ => 11 + rng.below(1000) as u16,
            })
            .collect();
        let mut gaps = vec![0u16; nnz];
        let cells = CellBounds::new(&bounds, nnz).expect("valid bounds");
        scalar::indices_to_gaps(&indices, cells, &mut gaps, &mut Vec::new());
        let planes = |values: &[u16]| {
            let mut p = vec![0u8; 2 * values.len()];
            scalar::split_planes(values, &mut p);
            p
        };
        let (gap_planes, count_planes) = (planes(&gaps), planes(&counts));
        Chunk {
            bounds,
            indices,
            gaps,
            gap_planes,
            count_planes,
        }
    }

    fn cells(&self) -> CellBounds<'_> {
        CellBounds::new(&self.bounds, self.gaps.len()).expect("valid bounds")
    }
}

/// Benchmarks `f` with every table of kernels `K` this CPU runs, scalar
/// first, as group `name` of `elements` elements a run.
fn bench_tables<K: KernelTable + 'static>(
    c: &mut Criterion,
    name: &str,
    elements: usize,
    f: &mut dyn FnMut(&K),
) {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(elements as u64));
    for table in K::available() {
        group.bench_function(BenchmarkId::from_parameter(table.isa()), |b| {
            b.iter(|| f(table))
        });
    }
    group.finish();
}

/// Benchmarks tile kernel `kernel` on a chunk of `size`.
fn bench_kernel(
    c: &mut Criterion,
    kernel: &str,
    size: &str,
    nnz: usize,
    f: &mut dyn FnMut(&TileKernels),
) {
    bench_tables(c, &format!("{kernel}/{size}"), nnz, f);
}

fn kernels(c: &mut Criterion) {
    for (size, nnz, stores) in SIZES {
        let chunk = Chunk::new(nnz);
        let mut f32s = vec![0f32; nnz];
        bench_kernel(c, "counts_f32", size, nnz, &mut |t| {
            t.counts_f32(Planes::split(&chunk.count_planes), &mut f32s, stores)
                .expect("valid counts")
        });
        drop(f32s);
        let mut i32s = vec![0i32; nnz];
        bench_kernel(c, "counts_i32", size, nnz, &mut |t| {
            t.counts_i32(Planes::split(&chunk.count_planes), &mut i32s, stores)
                .expect("valid counts")
        });
        bench_kernel(c, "gaps_to_indices", size, nnz, &mut |t| {
            t.gaps_to_indices(
                Planes::split(&chunk.gap_planes),
                chunk.cells(),
                N_GENES,
                &mut i32s,
                stores,
            )
            .expect("valid gaps")
        });
        drop(i32s);
        if stores == Stores::Streaming {
            // The other kernels write no decoded output.
            continue;
        }
        let mut u16s = vec![0u16; nnz];
        bench_kernel(c, "recombine_u16", size, nnz, &mut |t| {
            t.recombine_u16(&chunk.gap_planes, &mut u16s)
        });
        let mut exceptions = Vec::new();
        bench_kernel(c, "indices_to_gaps", size, nnz, &mut |t| {
            exceptions.clear();
            t.indices_to_gaps(&chunk.indices, chunk.cells(), &mut u16s, &mut exceptions)
        });
        drop(u16s);
        let mut planes = vec![0u8; 2 * nnz];
        bench_kernel(c, "split_planes", size, nnz, &mut |t| {
            t.split_planes(&chunk.gaps, &mut planes)
        });
    }
}

/// A row kernel that keeps some of a row's genes (with their counts) at
/// the front of its outputs and returns how many.
type Keep<'a> = &'a dyn Fn(&RowKernels, &[i32], &[u32], (&mut [i32], &mut [u32])) -> usize;

fn rows(c: &mut Criterion) {
    let chunk = Chunk::new(SIZES[0].1);
    let rows: Vec<&[i32]> = chunk
        .bounds
        .windows(2)
        .map(|w| &chunk.indices[w[0] as usize..w[1] as usize])
        .collect();
    let counts: Vec<u32> = (1..=chunk.indices.len() as u32).collect();
    let mut out = (
        vec![0i32; chunk.indices.len()],
        vec![0u32; chunk.indices.len()],
    );
    for every in [18, 2] {
        let table: Vec<i32> = (0..N_GENES as i32)
            .map(|g| if g % every == 0 { g / every } else { -1 })
            .collect();
        let mut marks = vec![0u32; table.len().div_ceil(32)];
        for (i, &v) in table.iter().enumerate() {
            marks[i / 32] |= u32::from(v >= 0) << (i % 32);
        }
        let kept = table.iter().filter(|&&v| v >= 0).count();
        let mut keep = |name: &str, kernel: Keep<'_>| {
            bench_tables::<RowKernels>(c, &format!("{name}/{kept}"), counts.len(), &mut |k| {
                let mut at = 0;
                for row in &rows {
                    let end = at + row.len();
                    let o = (&mut out.0[at..end], &mut out.1[at..end]);
                    std::hint::black_box(kernel(k, row, &counts[at..end], o));
                    at = end;
                }
            })
        };
        keep("select", &|k, row, counts, o| {
            k.select(&table, 0, row, counts, o)
        });
        keep("select_marked", &|k, row, counts, o| {
            k.select_marked(&table, &marks, 0, row, counts, o)
        });
        keep("marked", &|k, row, counts, o| {
            k.marked(table.len(), &marks, 0, row, counts, o)
        });
        // A dense row's kept genes placed: each row's kept offsets (found
        // once, outside the timing) and small counts, their values from a
        // memo scattered over a row of the selection's columns.
        let small: Vec<u32> = (0..counts.len())
            .map(|i| [1, 1, 2, 1, 3, 1, 1, 2][i % 8])
            .collect();
        let kept_rows: Vec<(Vec<i32>, Vec<u32>)> = rows
            .iter()
            .scan(0, |at, row| {
                let (mut offsets, mut counts) = (vec![0; row.len()], vec![0; row.len()]);
                let n = RowKernels::scalar().marked(
                    table.len(),
                    &marks,
                    0,
                    row,
                    &small[*at..*at + row.len()],
                    (&mut offsets, &mut counts),
                );
                *at += row.len();
                offsets.truncate(n);
                counts.truncate(n);
                Some((offsets, counts))
            })
            .collect();
        let memo: [f32; MEMO_SLOTS] = std::array::from_fn(|i| (i as f32).ln_1p());
        let mut dense = vec![0f32; kept];
        let placed = kept_rows.iter().map(|r| r.0.len()).sum();
        bench_tables::<RowKernels>(c, &format!("scatter_values/{kept}"), placed, &mut |k| {
            for (offsets, counts) in &kept_rows {
                k.scatter_values(&memo, (&table, offsets), counts, &mut dense, &|c| c as f32);
            }
            std::hint::black_box(&dense);
        });
        bench_tables::<RowKernels>(
            c,
            &format!("count_marked/{kept}"),
            chunk.indices.len(),
            &mut |k| {
                for row in &rows {
                    std::hint::black_box(k.count_marked(&marks, 0, row));
                }
            },
        );
    }
    let (medians, run) = (146, 28);
    let order: Vec<u32> = (0..medians * run)
        .map(|i: u32| i.wrapping_mul(2_654_435_761) % 4_096)
        .collect();
    let columns: Vec<u32> = (0..N_GENES)
        .map(|g| (g << CLASS_START_BITS) | (g % medians * run))
        .collect();
    let lookup = ClassLookup {
        columns: &columns,
        order: &order,
        top: run - 1,
        stray: 4_095,
    };
    // Mostly 1, as in a cell's counts.
    let small: Vec<u32> = (0..counts.len())
        .map(|i| [1, 1, 2, 1, 3, 1, 1, 2][i % 8])
        .collect();
    let mut strays = Vec::new();
    bench_tables::<RowKernels>(c, "classify", counts.len(), &mut |k| {
        let mut at = 0;
        for row in &rows {
            let end = at + row.len();
            strays.clear();
            let o = (&mut out.1[at..end], &mut out.0[at..end]);
            std::hint::black_box(k.classify(&lookup, row, &small[at..end], o, &mut strays));
            at = end;
        }
    });
    // The rows' classes, as the portable table finds them: ordered with
    // their tokens (Geneformer's counting pass by class).
    let classes = {
        let (mut classes, mut tokens) = (vec![0u32; counts.len()], vec![0i32; counts.len()]);
        let mut at = 0;
        for row in &rows {
            let end = at + row.len();
            let o = (&mut classes[at..end], &mut tokens[at..end]);
            RowKernels::available()[0].classify(&lookup, row, &small[at..end], o, &mut strays);
            at = end;
        }
        (classes, tokens)
    };
    let (mut ends, mut placed) = (Vec::new(), vec![0i32; counts.len()]);
    bench_tables::<RowKernels>(c, "order_by_class", counts.len(), &mut |k| {
        let mut at = 0;
        for row in &rows {
            let end = at + row.len();
            let (classes, tokens) = (&classes.0[at..end], &classes.1[at..end]);
            k.order_by_class(classes, tokens, 4_096, &mut ends, &mut placed[at..end]);
            at = end;
        }
        std::hint::black_box(&placed);
    });
    let class_counts: Vec<u32> = (0..4_099u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 30) & 1)
        .collect();
    let mut starts = class_counts.clone();
    bench_tables::<RowKernels>(c, "starts", class_counts.len(), &mut |k| {
        starts.copy_from_slice(&class_counts);
        std::hint::black_box(k.starts(&mut starts));
    });
}

/// Values in a dense row of the `stream` benchmark, and its output's size.
const ROW_VALUES: usize = 2_000;
const STREAM_OUTPUT_BYTES: usize = 64 << 20;

fn stream(c: &mut Criterion) {
    let row: Vec<f32> = (0..ROW_VALUES).map(|i| (i % 7) as f32).collect();
    let mut output = vec![0f32; STREAM_OUTPUT_BYTES / 4];
    let places = output.len() / ROW_VALUES;
    let mut next = 0;
    bench_tables::<RowKernels>(c, "stream/dense_row", ROW_VALUES, &mut |k| {
        let at = next * ROW_VALUES;
        k.stream(&row, &mut output[at..at + ROW_VALUES]);
        next = (next + 1) % places;
    });
}

fn config() -> Criterion {
    plots::plots(
        Criterion::default()
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2)),
    )
}

criterion_group! {
    name = benches;
    config = config();
    targets = kernels, rows, stream
}
criterion_main!(benches);
