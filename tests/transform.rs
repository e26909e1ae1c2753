//! Normalized and log1p reads against an independent computation over the
//! dense matrix the test wrote: CSR and dense `f32` outputs, every gene or a
//! vocabulary of names (out of gene order, with names the dataset lacks read
//! as zero columns), cells in any order, and the requests that are refused.

use deltacells::engine::{AddedRows, Sink, SinkPart, Transform};
use deltacells::{CellSelection, Csr, Dataset, DatasetWriter, GeneSelection, WriterConfig};

const GENES: usize = 30;
const CELLS: usize = 300;

/// A dense matrix (a plain LCG): cells of 0 to ~30 genes, counts up to
/// 70,000, every 50th cell empty.
fn dense() -> Vec<Vec<u32>> {
    let mut state = 0x853C_49E6_748F_EA9Bu64;
    let mut next = |bound: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % bound
    };
    (0..CELLS)
        .map(|i| {
            (0..GENES)
                .map(|_| match (i % 50 == 0, next(3), next(60)) {
                    (true, _, _) | (_, 0, _) => 0,
                    (_, _, 0) => 70_000,
                    (_, _, r) => 1 + r as u32,
                })
                .collect()
        })
        .collect()
}

fn names() -> Vec<String> {
    (0..GENES).map(|g| format!("G{g}")).collect()
}

struct Dir(std::path::PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

fn written(name: &str, m: &[Vec<u32>]) -> (Dir, Dataset) {
    let dir = std::env::temp_dir().join(format!(
        "deltacells-transform-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let mut c = Csr::empty(GENES as u64);
    for row in m {
        for (g, &v) in row.iter().enumerate().filter(|(_, &v)| v > 0) {
            c.indices.push(g as i32);
            c.values.push(v as i32);
        }
        c.indptr.push(c.indices.len() as i64);
    }
    let config = WriterConfig::default()
        .with_tile_size(64)
        .with_n_chunks(4)
        .with_level(1)
        .with_var_names(Some(names()));
    let mut w = DatasetWriter::create(&dir, GENES as u32, config).unwrap();
    w.push(c.as_ref()).unwrap();
    w.finish().unwrap();
    let ds = deltacells::open(&dir).unwrap();
    (Dir(dir), ds)
}

/// The expected dense rows of `cells` over `vocab` (a gene per column, or
/// `None` for a column of zeros), computed as the formulas say.
fn expected(
    m: &[Vec<u32>],
    cells: &[u64],
    vocab: &[Option<usize>],
    target: Option<f64>,
    log: bool,
) -> Vec<f32> {
    let mut out = Vec::new();
    for &i in cells {
        let row = &m[i as usize];
        let total: u64 = row.iter().map(|&c| u64::from(c)).sum();
        for gene in vocab {
            let c = gene.map_or(0, |g| row[g]);
            if c == 0 {
                out.push(0.0);
                continue;
            }
            let mut x = f64::from(c);
            if let Some(t) = target {
                x = x / total as f64 * t;
            }
            if log {
                x = x.ln_1p();
            }
            out.push(x as f32);
        }
    }
    out
}

/// `csr` as dense rows.
fn densify(csr: &Csr<f32>) -> Vec<f32> {
    let n = csr.n_cols as usize;
    let mut out = vec![0.0; csr.n_rows() * n];
    for r in 0..csr.n_rows() {
        let span = csr.indptr[r] as usize..csr.indptr[r + 1] as usize;
        assert!(
            csr.indices[span.clone()].windows(2).all(|w| w[0] < w[1]),
            "row {r} unsorted"
        );
        for k in span {
            out[r * n + csr.indices[k] as usize] = csr.values[k];
        }
    }
    out
}

#[test]
fn every_gene_normalized_and_logged_as_the_formulas_say() {
    let m = dense();
    let (_dir, ds) = written("all", &m);
    let all: Vec<Option<usize>> = (0..GENES).map(Some).collect();
    let cells: Vec<u64> = (0..CELLS as u64).collect();
    for (target, log) in [
        (Some(1e4), true),
        (Some(1e4), false),
        (None, true),
        (Some(37.5), true),
    ] {
        let mut read = ds.read(0..CELLS as u64);
        if let Some(t) = target {
            read = read.normalize(t);
        }
        if log {
            read = read.log1p();
        }
        let csr = read.csr::<f32>().unwrap().csr;
        let want = expected(&m, &cells, &all, target, log);
        assert_eq!(densify(&csr), want, "{target:?} {log}");
        let stored: usize = m.iter().flatten().filter(|&&c| c > 0).count();
        assert_eq!(csr.indices.len(), stored);
    }
    // A cell with no counts stays all zeros; rows of any cells, in order.
    let picked = [299u64, 0, 51, 51, 100];
    let rows = ds
        .read(&picked[..])
        .normalize(1e4)
        .log1p()
        .dense::<f32>()
        .unwrap();
    assert_eq!(
        rows.rows.data(),
        &expected(&m, &picked, &all, Some(1e4), true)[..]
    );
    assert!(rows.rows.data()[GENES..2 * GENES].iter().all(|&v| v == 0.0));
    // The same cells as CSR: decoded whole chunks (uncached) and copied
    // spans of cached ones give the same values.
    for read in [ds.read(&picked[..]).uncached(), ds.read(&picked[..])] {
        let csr = read.normalize(1e4).log1p().csr::<f32>().unwrap().csr;
        assert_eq!(densify(&csr), rows.rows.data());
    }
    let tiles = ds
        .read(60..200)
        .uncached()
        .normalize(1e4)
        .csr::<f32>()
        .unwrap()
        .csr;
    let span: Vec<u64> = (60..200).collect();
    assert_eq!(densify(&tiles), expected(&m, &span, &all, Some(1e4), false));
}

#[test]
fn a_vocabulary_of_names_is_normalized_by_the_whole_cell() {
    let m = dense();
    let (_dir, ds) = written("vocab", &m);
    let cells: Vec<u64> = (0..CELLS as u64).step_by(3).collect();
    let selection = CellSelection::from(&cells[..]);
    // Out of gene order, so rows need sorting: a few genes of their span
    // (dense rows then scatter the kept genes' values), and most of it.
    for picked in [
        &["G17", "G3", "G25", "G4"][..],
        &["G9", "G2", "G5", "G3", "G4", "G8"],
    ] {
        let genes = GeneSelection::by_names(&names(), picked).unwrap();
        let vocab: Vec<Option<usize>> = picked
            .iter()
            .map(|n| Some(n[1..].parse().unwrap()))
            .collect();
        let want = expected(&m, &cells, &vocab, Some(1e4), true);
        let dense = ds
            .read(selection.clone())
            .genes(&genes)
            .normalize(1e4)
            .log1p()
            .dense::<f32>();
        assert_eq!(dense.unwrap().rows.data(), &want[..], "{picked:?}");
        let csr = ds
            .read(selection.clone())
            .genes(&genes)
            .normalize(1e4)
            .log1p()
            .csr::<f32>();
        assert_eq!(densify(&csr.unwrap().csr), want, "{picked:?}");
    }
    // Names the dataset lacks are zero columns with missing = zero.
    let with_missing = ["NOPE", "G29", "G0", "ALSO_MISSING", "G11"];
    assert!(GeneSelection::by_names(&names(), &with_missing).is_err());
    let genes = GeneSelection::by_names_or_zero(&names(), &with_missing).unwrap();
    let vocab = [None, Some(29), Some(0), None, Some(11)];
    let want = expected(&m, &cells, &vocab, Some(1e4), false);
    let dense = ds
        .read(selection.clone())
        .genes(&genes)
        .normalize(1e4)
        .dense::<f32>()
        .unwrap();
    assert_eq!((dense.rows.n_cols(), dense.rows.data()), (5, &want[..]));
    let csr = ds
        .read(selection.clone())
        .genes(&genes)
        .normalize(1e4)
        .csr::<f32>()
        .unwrap();
    assert_eq!((csr.csr.n_cols, densify(&csr.csr)), (5, want));
    // Without a transform, the mapping reads raw counts as zero columns too.
    let raw = ds
        .read(selection.clone())
        .genes(&genes)
        .dense::<i32>()
        .unwrap();
    let want: Vec<i32> = expected(&m, &cells, &vocab, None, false)
        .into_iter()
        .map(|v| v as i32)
        .collect();
    assert_eq!(raw.rows.data(), &want[..]);
    // And as CSR, whose rows (100 of them: sized on the pool, counted in
    // parallel) hold only the kept genes.
    let raw = ds.read(selection).genes(&genes).csr::<f32>().unwrap();
    let want: Vec<f32> = want.iter().map(|&v| v as f32).collect();
    assert_eq!((raw.csr.n_cols, densify(&raw.csr)), (5, want));
}

/// An output that takes rows as given.
struct Rows;
struct RowsPart;
impl Sink for Rows {
    type Part<'p> = RowsPart;
    fn stores_rows(&self) -> bool {
        false
    }
    fn start(&mut self, _n_cols: u32) {}
    fn extend(&mut self, _rows: &AddedRows<'_>) -> deltacells::Result<()> {
        Ok(())
    }
    fn split(&mut self, cuts: &[usize]) -> Vec<RowsPart> {
        cuts.windows(2).map(|_| RowsPart).collect()
    }
}
impl SinkPart for RowsPart {
    type Value = f32;
    fn stored(&mut self) -> Option<(&mut [i32], &mut [f32])> {
        None
    }
    fn write_row(&mut self, _row: usize, _genes: &[i32], _counts: &[i32]) {}
}

#[test]
fn requests_a_transform_cannot_serve_are_refused() {
    let m = dense();
    let (_dir, ds) = written("bad", &m);
    let err = ds.read(0..4).normalize(1e4).csr::<i32>().unwrap_err();
    assert!(err.to_string().contains("f32"), "{err}");
    assert!(ds.read(0..4).log1p().dense::<i32>().is_err());
    for bad in [0.0, -1.0, f64::INFINITY, f64::NAN] {
        assert!(ds.read(0..4).normalize(bad).csr::<f32>().is_err(), "{bad}");
    }
    assert!(ds.read(0..4).log1p().into_sink(Rows).is_err());
    assert!(ds.read(0..4).into_sink(Rows).is_ok());
    let wrong = GeneSelection::new(5, &[1]).unwrap();
    assert!(ds.read(0..4).genes(&wrong).log1p().csr::<f32>().is_err());
    assert!(ds.read(0..CELLS as u64 + 1).log1p().csr::<f32>().is_err());
    assert!(Transform::NONE.log1p().normalize(2.0).target_sum() == Some(2.0));
}
