//! Gene statistics against an independent computation over a dense matrix
//! held by the test: exact counts, sums, means and variances, medians within
//! the sketch's stated error, partial statistics that merge into the whole
//! bit for bit, whatever the thread count, and `gene_stats.parquet`.

use arrow_array::{Array, Float64Array, StringArray, UInt64Array};
use deltacells::dataset::gene_stats::{gene_keys, MEDIAN_RELATIVE_ERROR};
use deltacells::dataset::{GeneStats, GeneTable, OpenOptions};
use deltacells::engine::EngineConfig;
use deltacells::{Csr, Dataset, DatasetWriter, WriterConfig};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

const GENES: usize = 40;
const CELLS: usize = 700;

/// A dense `CELLS x GENES` matrix (a plain LCG): genes of decreasing density,
/// counts from 1 to 70,000, some empty cells, gene 7 never expressed.
fn dense() -> Vec<Vec<u32>> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |bound: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % bound
    };
    (0..CELLS)
        .map(|i| {
            (0..GENES)
                .map(|g| {
                    let expressed = i % 97 != 5 && g != 7 && next(GENES as u64 + 4) > g as u64;
                    match (expressed, next(50)) {
                        (false, _) => 0,
                        (true, 0) => 70_000,
                        (true, r) => 1 + (r * r) as u32 % 300,
                    }
                })
                .collect()
        })
        .collect()
}

fn csr(m: &[Vec<u32>]) -> Csr<i32> {
    let mut c = Csr::empty(GENES as u64);
    for row in m {
        for (g, &v) in row.iter().enumerate().filter(|(_, &v)| v > 0) {
            c.indices.push(g as i32);
            c.values.push(v as i32);
        }
        c.indptr.push(c.indices.len() as i64);
    }
    c
}

struct Dir(std::path::PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

fn written(name: &str, m: &[Vec<u32>]) -> Dir {
    let dir = std::env::temp_dir().join(format!("deltacells-stats-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let names = (0..GENES).map(|g| format!("G{g}")).collect();
    let config = WriterConfig::default()
        .with_tile_size(64)
        .with_n_chunks(4)
        .with_level(1)
        .with_var_names(Some(names));
    let mut w = DatasetWriter::create(&dir, GENES as u32, config).unwrap();
    w.push(csr(m).as_ref()).unwrap();
    w.finish().unwrap();
    Dir(dir)
}

fn open(dir: &Dir, threads: usize) -> Dataset {
    let options = OpenOptions::default().with_engine(
        EngineConfig::default()
            .with_threads(threads)
            .with_pin(false),
    );
    Dataset::open_with(&dir.0, options).unwrap()
}

/// Every column's bits, so NaN compares equal to NaN.
fn bits(t: &GeneTable) -> Vec<Vec<u64>> {
    let mut out = vec![t.n_cells.clone(), t.sum.clone()];
    for c in [&t.mean, &t.var, &t.norm_mean, &t.norm_var, &t.norm_median] {
        out.push(c.iter().map(|v| v.to_bits()).collect());
    }
    out
}

fn close(got: f64, want: f64, rel: f64) -> bool {
    (got - want).abs() <= rel * want.abs().max(f64::MIN_POSITIVE)
}

#[test]
fn statistics_match_an_independent_computation() {
    let m = dense();
    let dir = written("exact", &m);
    let ds = open(&dir, 3);
    let stats = ds.gene_stats().unwrap();
    assert_eq!((stats.n_obs(), stats.n_genes()), (CELLS as u64, GENES));
    let t = stats.table();
    let n = CELLS as f64;
    let totals: Vec<u64> = m
        .iter()
        .map(|r| r.iter().map(|&c| u64::from(c)).sum())
        .collect();
    for g in 0..GENES {
        let col: Vec<u64> = m.iter().map(|r| u64::from(r[g])).collect();
        let sum: u64 = col.iter().sum();
        assert_eq!(t.n_cells[g], col.iter().filter(|&&c| c > 0).count() as u64);
        assert_eq!(t.sum[g], sum);
        assert_eq!(t.mean[g], sum as f64 / n, "gene {g}");
        // The variance as the exact sum of squared deviations, over N^3.
        let dev: i128 = col
            .iter()
            .map(|&c| (CELLS as i128 * c as i128 - sum as i128).pow(2))
            .sum();
        let exact = dev as f64 / (n * n * n);
        assert!(
            close(t.var[g], exact, 1e-14),
            "gene {g}: {} vs {exact}",
            t.var[g]
        );
        // Normalized values, summed naively in cell order.
        let x: Vec<f64> = col
            .iter()
            .zip(&totals)
            .map(|(&c, &tot)| {
                if c == 0 {
                    0.0
                } else {
                    (c as f64 / tot as f64) * 10_000.0
                }
            })
            .collect();
        let mean = x.iter().sum::<f64>() / n;
        let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        assert!(close(t.norm_mean[g], mean, 1e-12), "gene {g}");
        assert!(close(t.norm_var[g], var, 1e-9), "gene {g}");
        let mut nonzero: Vec<f64> = x.into_iter().filter(|&v| v > 0.0).collect();
        nonzero.sort_by(f64::total_cmp);
        if nonzero.is_empty() {
            assert!(t.norm_median[g].is_nan(), "gene {g}");
        } else {
            let lower = nonzero[(nonzero.len() - 1) / 2];
            let err = (t.norm_median[g] - lower).abs();
            assert!(
                err <= MEDIAN_RELATIVE_ERROR * lower * (1.0 + 1e-12),
                "gene {g}: median {} vs {lower}",
                t.norm_median[g]
            );
        }
    }
    assert_eq!(t.n_cells[7], 0);
    assert!(t.norm_median[7].is_nan() && t.var[7] == 0.0 && t.norm_var[7] == 0.0);
}

#[test]
fn halves_merge_into_the_whole_with_any_thread_count() {
    let m = dense();
    let dir = written("merge", &m);
    let whole = bits(&open(&dir, 1).gene_stats().unwrap().table());
    let ds = open(&dir, 3);
    assert_eq!(bits(&ds.gene_stats().unwrap().table()), whole);
    // Cut inside a tile and at a tile limit; merged in either order.
    for cut in [333u64, 320] {
        let first = ds.gene_stats_of(0..cut).unwrap();
        let second = ds.gene_stats_of(cut..CELLS as u64).unwrap();
        let mut a = first.clone();
        a.merge(&second).unwrap();
        assert_eq!(a.n_obs(), CELLS as u64);
        assert_eq!(bits(&a.table()), whole, "cut {cut}");
        let mut b = second.clone();
        b.merge(&first).unwrap();
        assert_eq!(bits(&b.table()), whole, "cut {cut}, merged the other way");
    }
    // Through bytes (a task's share handed to another process) alike.
    let mut carried = GeneStats::from_bytes(&ds.gene_stats_of(0..333).unwrap().to_bytes()).unwrap();
    let rest = ds.gene_stats_of(333..CELLS as u64).unwrap().to_bytes();
    carried
        .merge(&GeneStats::from_bytes(&rest).unwrap())
        .unwrap();
    assert_eq!(bits(&carried.table()), whole);
    // Rows added directly (any CSR over the genes) agree too.
    let mut direct = GeneStats::new(GENES as u32);
    direct.add_csr(csr(&m).as_ref()).unwrap();
    assert_eq!(bits(&direct.table()), whole);
}

#[test]
fn bad_requests_are_errors() {
    let m = dense();
    let dir = written("bad", &m);
    let ds = open(&dir, 2);
    assert!(ds.gene_stats_of(0..CELLS as u64 + 1).is_err());
    let mut s = GeneStats::new(GENES as u32);
    assert!(s.merge(&GeneStats::new(3)).is_err());
    assert!(s.add_csr(Csr::<i32>::empty(3).as_ref()).is_err());
    let empty = ds.gene_stats_of(5..5).unwrap().table();
    assert!(empty.mean.iter().chain(&empty.norm_var).all(|v| v.is_nan()));
    assert!(gene_keys(&ds, Some("no_such_column")).is_err());
    let bytes = ds.gene_stats().unwrap().to_bytes();
    for cut in [0, 7, 19, 100, bytes.len() - 1] {
        assert!(
            GeneStats::from_bytes(&bytes[..cut]).is_err(),
            "cut at {cut}"
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(GeneStats::from_bytes(&longer).is_err());
    // Placed in columns: outside them, or two genes in one, refused.
    let whole = ds.gene_stats().unwrap();
    assert!(whole.into_columns(GENES as u32 - 1, Some).is_err());
    assert!(whole.into_columns(GENES as u32, |_| Some(0)).is_err());
    let reversed = whole
        .into_columns(GENES as u32 + 1, |g| Some(GENES as u32 - g))
        .unwrap()
        .table();
    let table = whole.table();
    assert_eq!(reversed.n_cells[0], 0, "a column no gene lands in");
    assert!(reversed.norm_median[0].is_nan());
    for g in 0..GENES {
        assert_eq!(reversed.sum[GENES - g], table.sum[g]);
        assert_eq!(reversed.var[GENES - g], table.var[g]);
    }
    let mut renamed = bytes.clone();
    renamed[0] = b'X';
    assert!(GeneStats::from_bytes(&renamed).is_err());
    let mut huge = bytes.clone();
    huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(GeneStats::from_bytes(&huge).is_err());
    // A sketch of another length than its cells: the first gene's count.
    let mut miscounted = bytes;
    miscounted[20] ^= 1;
    assert!(GeneStats::from_bytes(&miscounted).is_err());
    // Any byte changed gives statistics or an error, never a panic.
    let mut small = GeneStats::new(2);
    let rows = Csr {
        n_cols: 2,
        indptr: vec![0, 2, 3],
        indices: vec![0, 1, 1],
        values: vec![3i32, 900, 4],
    };
    small.add_csr(rows.as_ref()).unwrap();
    let bytes = small.to_bytes();
    for i in 0..bytes.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[i] ^= flip;
            let _ = GeneStats::from_bytes(&b);
        }
    }
}

#[test]
fn parquet_holds_every_column_and_the_gene_key() {
    let m = dense();
    let dir = written("parquet", &m);
    let ds = open(&dir, 2);
    let t = ds.gene_stats().unwrap().table();
    let (key, keys) = gene_keys(&ds, None).unwrap();
    assert_eq!((key.as_str(), keys[3].as_str()), ("gene", "G3"));
    let bytes = t.to_parquet(&key, &keys).unwrap();
    assert!(t.to_parquet(&key, &keys[1..]).is_err());
    let mut reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
        .unwrap()
        .build()
        .unwrap();
    let batch = reader.next().unwrap().unwrap();
    let names: Vec<&str> = batch
        .schema_ref()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(
        names,
        [
            "gene",
            "n_cells",
            "sum",
            "mean",
            "var",
            "norm_mean",
            "norm_var",
            "norm_median"
        ]
    );
    let col = |name: &str| batch.column_by_name(name).unwrap().clone();
    let genes = col("gene");
    let genes = genes.as_any().downcast_ref::<StringArray>().unwrap();
    assert_eq!(genes.value(GENES - 1), format!("G{}", GENES - 1));
    let sums = col("sum");
    assert_eq!(
        sums.as_any()
            .downcast_ref::<UInt64Array>()
            .unwrap()
            .values(),
        &t.sum[..]
    );
    let medians = col("norm_median");
    let medians = medians.as_any().downcast_ref::<Float64Array>().unwrap();
    assert_eq!(medians.len(), GENES);
    assert_eq!(medians.value(0).to_bits(), t.norm_median[0].to_bits());
}

#[test]
fn a_manifest_claiming_more_genes_than_the_tiles_hold_is_an_error_not_an_allocation() {
    // No var names, so nothing else is sized by the gene count: the
    // statistics' table of 2^31 genes (48 GiB) had aborted the process
    // before any tile was checked.
    let dir = std::env::temp_dir().join(format!("deltacells-stats-{}-claim", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = WriterConfig::default().with_tile_size(64).with_level(1);
    let mut w = DatasetWriter::create(&dir, GENES as u32, config).unwrap();
    w.push(csr(&dense()).as_ref()).unwrap();
    w.finish().unwrap();
    let dir = Dir(dir);
    let path = dir.0.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    manifest["n_genes"] = (1u64 << 31).into();
    std::fs::write(&path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let err = open(&dir, 2).gene_stats().unwrap_err().to_string();
    assert!(err.contains("disagrees with the manifest"), "{err}");
    // The handles print (an embedder's structs holding them derive Debug).
    let shown = format!("{:?}", open(&dir, 2));
    assert!(shown.contains("n_genes: 2147483648"), "{shown}");
}
