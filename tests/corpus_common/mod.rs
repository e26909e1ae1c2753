//! Small corpora for the corpus tests: datasets with different genes (subsets,
//! orders, a var column of ids), obs with different columns and categories,
//! and what every cell holds, by gene name, to check reads against.
#![allow(dead_code)]

#[path = "../common/scratch.rs"]
mod scratch;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use deltacells::dataset::{DatasetWriter, WriterConfig};
use deltacells::engine::Transform;
use deltacells::obs::{ObsColumn, ObsConfig, VarTable};
use deltacells::Csr;
#[allow(unused_imports)] // not every test that includes this module makes folders
pub use scratch::Scratch;

/// One member as written: its genes (source order), each cell's counts by
/// gene name, and its obs columns' values per cell as text (`None`: missing).
pub struct Written {
    pub location: PathBuf,
    pub genes: Vec<String>,
    pub cells: Vec<HashMap<String, u32>>,
    pub obs: Vec<(String, Vec<Option<String>>)>,
}

/// A small deterministic generator.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Obs of a member: categorical columns (name, categories to draw from) and
/// numeric ones.
pub struct ObsPlan<'a> {
    pub categories: Vec<(&'a str, Vec<&'a str>)>,
    pub floats: Vec<&'a str>,
}

/// Writes `n_cells` cells over `genes` at `dir`: a var table indexed by the
/// names with an `ensembl` column (`E` + name), genes sorted by totals when
/// `sort`, tiles of `tile_size` cells.
pub fn write_member(
    dir: &Path,
    genes: &[&str],
    n_cells: usize,
    tile_size: usize,
    sort: bool,
    obs: &ObsPlan<'_>,
    seed: u64,
) -> Written {
    let mut rng = Lcg(seed);
    let n_genes = genes.len();
    let mut csr = Csr::<u32> {
        n_cols: n_genes as u64,
        indptr: vec![0],
        indices: Vec::new(),
        values: Vec::new(),
    };
    let mut cells = Vec::with_capacity(n_cells);
    let mut totals = vec![0f64; n_genes];
    for _ in 0..n_cells {
        let mut cell = HashMap::new();
        for (g, name) in genes.iter().enumerate() {
            if rng.below(3) == 0 {
                // Some large counts: exceptions above 65535 too.
                let v = if rng.below(50) == 0 {
                    70_000 + rng.below(1000) as u32
                } else {
                    1 + rng.below(20) as u32
                };
                csr.indices.push(g as i32);
                csr.values.push(v);
                totals[g] += f64::from(v);
                cell.insert(name.to_string(), v);
            }
        }
        csr.indptr.push(csr.indices.len() as i64);
        cells.push(cell);
    }
    let names: Vec<String> = genes.iter().map(|g| g.to_string()).collect();
    let var = VarTable::new("gene", names.clone())
        .with_column("ensembl", names.iter().map(|n| format!("E{n}")).collect())
        .unwrap();
    let mut columns = Vec::new();
    let mut obs_values = Vec::new();
    for (name, cats) in &obs.categories {
        let values: Vec<Option<String>> = (0..n_cells)
            .map(|_| {
                let k = rng.below(cats.len() as u64 + 1) as usize;
                cats.get(k).map(|c| c.to_string())
            })
            .collect();
        columns.push(ObsColumn::categorical(*name, values.clone()));
        obs_values.push((name.to_string(), values));
    }
    for name in &obs.floats {
        let values: Vec<f64> = (0..n_cells).map(|_| rng.below(1000) as f64 / 8.0).collect();
        let array = std::sync::Arc::new(arrow_array::Float64Array::from(values.clone()));
        columns.push(ObsColumn::from_arrow(*name, array).unwrap());
        obs_values.push((
            name.to_string(),
            values.iter().map(|v| Some(v.to_string())).collect(),
        ));
    }
    let mut config = WriterConfig::default()
        .with_tile_size(tile_size)
        .with_n_chunks(2)
        .with_level(3)
        .with_var_names(Some(names.clone()))
        .with_var_table(Some(var));
    if sort {
        config = config.with_gene_totals(Some(totals));
    }
    if !columns.is_empty() {
        config = config.with_obs(Some(ObsConfig::new(columns)));
    }
    let mut writer = DatasetWriter::create(dir, n_genes as u32, config).unwrap();
    writer.push(csr.as_ref()).unwrap();
    writer.finish().unwrap();
    Written {
        location: dir.to_path_buf(),
        genes: names,
        cells,
        obs: obs_values,
    }
}

/// The expected dense rows of `cells` (corpus ids over `members`, in member
/// order) over the genes `vocabulary`, each value placed by gene name.
pub fn expected_dense(members: &[Written], vocabulary: &[String], cells: &[u64]) -> Vec<i32> {
    let position: HashMap<&str, usize> = vocabulary
        .iter()
        .enumerate()
        .map(|(j, g)| (g.as_str(), j))
        .collect();
    let mut out = vec![0i32; cells.len() * vocabulary.len()];
    for (row, &cell) in cells.iter().enumerate() {
        let (m, local) = member_of(members, cell);
        for (name, &v) in &members[m].cells[local] {
            if let Some(&j) = position.get(name.as_str()) {
                out[row * vocabulary.len() + j] = v as i32;
            }
        }
    }
    out
}

/// The member and local cell of corpus cell `cell`.
pub fn member_of(members: &[Written], mut cell: u64) -> (usize, usize) {
    for (m, w) in members.iter().enumerate() {
        if (cell as usize) < w.cells.len() {
            return (m, cell as usize);
        }
        cell -= w.cells.len() as u64;
    }
    panic!("cell past the corpus");
}

/// The rows of `csr` as dense row-major values.
pub fn dense_of<V: Copy + Default>(csr: &Csr<V>) -> Vec<V> {
    let n = csr.n_cols as usize;
    let mut out = vec![V::default(); csr.n_rows() * n];
    for r in 0..csr.n_rows() {
        for k in csr.indptr[r] as usize..csr.indptr[r + 1] as usize {
            out[r * n + csr.indices[k] as usize] = csr.values[k];
        }
    }
    out
}

/// The expected values of `cells` over the genes `vocabulary` under
/// `transform`, dense: each count as [`Transform::value`] gives it for its
/// cell's total over all of its member's genes (zeros stay zero).
pub fn expected_transformed(
    members: &[Written],
    vocabulary: &[String],
    cells: &[u64],
    transform: Transform,
) -> Vec<f32> {
    let counts = expected_dense(members, vocabulary, cells);
    let n = vocabulary.len();
    let mut out = vec![0f32; counts.len()];
    for (row, &cell) in cells.iter().enumerate() {
        let (m, local) = member_of(members, cell);
        let total: u64 = members[m].cells[local]
            .values()
            .map(|&c| u64::from(c))
            .sum();
        for j in 0..n {
            let c = counts[row * n + j] as u32;
            if c > 0 {
                out[row * n + j] = transform.value(c, total);
            }
        }
    }
    out
}
