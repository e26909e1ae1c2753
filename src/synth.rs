//! Realistic synthetic count matrices, of any size, without downloading data:
//! for trying the format, for benchmarking a data loader or a training
//! pipeline at the scale of real atlases, and for tests. Behind the cargo
//! feature `synth`: the command-line tool's demo and bench, the benches and
//! the tests turn it on; an embedder reading datasets leaves it off.
//!
//! Real single-cell data has a few genes with very high counts (mitochondrial
//! and ribosomal genes, MALAT1), a long tail of rarely seen genes, cell types
//! that switch programmes of genes on, and library sizes that vary several-fold
//! between cells. This generator draws each cell's total count from a log-normal
//! law, then that many reads from a mixture of a global Zipf-like gene profile
//! and its cell type's profile, which gives overdispersed (negative-binomial
//! like) counts with ~2,000 distinct genes per cell at the defaults. Genes come
//! out sorted by decreasing mean expression, as the converter writes them.
//!
//! Every cell is generated from its own seed `(seed, cell)`, so any block of
//! cells is reproducible on its own, in any order, on any number of threads.

use rand::{Rng, SeedableRng};
use rand_distr::{weighted::WeightedAliasIndex, Distribution, LogNormal};
use rand_pcg::Pcg64Mcg;

use crate::csr::Csr;
use crate::kernels::reference::rows::{self, GOLDEN};

/// Parameters of the synthetic data.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthConfig {
    /// Number of genes (columns).
    pub n_genes: u32,
    /// Median total count (UMIs) per cell.
    pub median_umis: f64,
    /// Number of cell types.
    pub n_types: usize,
    /// Seed of everything.
    pub seed: u64,
}

impl Default for SynthConfig {
    /// 36,601 genes (the GRCh38 10x reference), ~2,000 nonzeros per cell.
    fn default() -> Self {
        SynthConfig {
            n_genes: 36_601,
            median_umis: 3_500.0,
            n_types: 12,
            seed: 42,
        }
    }
}

/// Draws cells for a [`SynthConfig`]. Building it costs a few milliseconds
/// (alias tables); drawing a cell costs one table lookup per read.
pub struct Synth {
    config: SynthConfig,
    types: Vec<WeightedAliasIndex<f64>>,
    library: LogNormal<f64>,
}

/// A 64-bit mix of two words (SplitMix64's finalizer), to derive per-cell seeds.
fn mix(a: u64, b: u64) -> u64 {
    rows::mix(a ^ b.wrapping_mul(GOLDEN))
}

impl Synth {
    /// Builds the gene profiles. Panics if `n_genes` is 0 or `n_types` is 0.
    pub fn new(config: SynthConfig) -> Synth {
        assert!(
            config.n_genes > 0 && config.n_types > 0,
            "need genes and cell types"
        );
        let n = config.n_genes as usize;
        // Global profile: a few dominant genes, then a Zipf-like tail.
        let global: Vec<f64> = (0..n)
            .map(|g| match g {
                0 => 0.03,
                1 => 0.015,
                2..=12 => 0.004,
                _ => 0.9 / (g as f64 + 20.0).powf(1.05),
            })
            .collect();
        let mut rng = Pcg64Mcg::seed_from_u64(mix(config.seed, u64::MAX));
        let types = (0..config.n_types)
            .map(|_| {
                // Each type switches on a programme of ~400 mid-ranked genes,
                // drawn past the 50 dominant ones; with fewer than 400 of
                // those, all of them (400 draws among a few would boost one
                // gene hundreds of times, past any finite weight).
                let mut w = global.clone();
                if n >= 450 {
                    for _ in 0..400 {
                        w[rng.random_range(50..n)] *= 25.0;
                    }
                } else {
                    w.iter_mut().skip(50).for_each(|x| *x *= 25.0);
                }
                WeightedAliasIndex::new(w).expect("positive finite weights")
            })
            .collect();
        let library = LogNormal::new(config.median_umis.ln(), 0.45).expect("valid log-normal");
        Synth {
            config,
            types,
            library,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SynthConfig {
        &self.config
    }

    /// Cell `cell`'s type, `0..n_types` (the profile its counts are drawn from).
    pub fn cell_type(&self, cell: u64) -> usize {
        self.start(cell).1
    }

    /// Cell `cell`'s generator, after it drew the cell's type (returned).
    fn start(&self, cell: u64) -> (Pcg64Mcg, usize) {
        let mut rng = Pcg64Mcg::seed_from_u64(mix(self.config.seed, cell));
        let t = rng.random_range(0..self.types.len());
        (rng, t)
    }

    /// Appends cell `cell`'s sorted gene indices and counts.
    pub fn cell_into(
        &self,
        cell: u64,
        indices: &mut Vec<i32>,
        counts: &mut Vec<i32>,
        reads: &mut Vec<u32>,
    ) {
        let (mut rng, t) = self.start(cell);
        let table = &self.types[t];
        let total = self.library.sample(&mut rng).clamp(200.0, 2.0e6) as usize;
        reads.clear();
        reads.extend((0..total).map(|_| table.sample(&mut rng) as u32));
        reads.sort_unstable();
        for run in reads.chunk_by(|a, b| a == b) {
            indices.push(run[0] as i32);
            counts.push(run.len() as i32);
        }
    }

    /// Cells `first .. first + n` as a CSR block.
    pub fn block(&self, first: u64, n: usize) -> Csr<i32> {
        let mut csr = Csr {
            n_cols: u64::from(self.config.n_genes),
            indptr: vec![0],
            indices: Vec::new(),
            values: Vec::new(),
        };
        let mut reads = Vec::new();
        for cell in first..first + n as u64 {
            self.cell_into(cell, &mut csr.indices, &mut csr.values, &mut reads);
            csr.indptr.push(csr.indices.len() as i64);
        }
        csr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_reproducible_and_sorted() {
        let s = Synth::new(SynthConfig {
            n_genes: 2000,
            median_umis: 500.0,
            ..SynthConfig::default()
        });
        let a = s.block(10, 20);
        let b = s.block(0, 40);
        assert_eq!(
            a.indices[..],
            b.indices[b.indptr[10] as usize..b.indptr[30] as usize]
        );
        for w in a.indptr.windows(2) {
            let row = &a.indices[w[0] as usize..w[1] as usize];
            assert!(row.windows(2).all(|p| p[0] < p[1]));
            assert!(row.iter().all(|&g| (0..2000).contains(&g)));
        }
        assert!(a.values.iter().all(|&v| v >= 1));
    }

    #[test]
    fn a_handful_of_genes_draws_cells_over_them() {
        for n_genes in [1, 5, 50, 51, 449, 450] {
            let s = Synth::new(SynthConfig {
                n_genes,
                ..SynthConfig::default()
            });
            let block = s.block(0, 8);
            assert!(block
                .indices
                .iter()
                .all(|&g| (0..n_genes as i32).contains(&g)));
            assert!(block.values.iter().sum::<i32>() >= 8 * 200, "{n_genes}");
        }
    }
}
