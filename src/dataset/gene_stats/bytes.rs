//! Partial statistics as bytes, so tasks in other processes (Dask workers)
//! can hand theirs to the one that merges: every sum as it is, each sketch
//! in DDSketch's portable binary form, which keeps its bins, count, minimum
//! and maximum, so a decoded sketch gives the same median and merges alike.
//!
//! Layout (little-endian): `DCGSTAT1`, genes (`u32`), cells (`u64`), then
//! per gene `n_cells`, `sum` (`u64`), `sum_sq`, `norm_sum`, `norm_sq`
//! (`u128`), the sketch's length (`u32`) and bytes.

use sketches_ddsketch::DDSketch;

use super::accumulate::{sketch_config, GeneAcc};
use super::GeneStats;
use crate::error::{Error, Result};

const MAGIC: &[u8; 8] = b"DCGSTAT1";

impl GeneStats {
    /// The statistics as bytes ([`GeneStats::from_bytes`] reads them back).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(20 + self.genes.len() * 96);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(self.genes.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.n_obs.to_le_bytes());
        for a in &self.genes {
            out.extend_from_slice(&a.n_cells.to_le_bytes());
            out.extend_from_slice(&a.sum.to_le_bytes());
            for v in [a.sum_sq, a.norm_sum, a.norm_sq] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            let sketch = a.sketch.to_java_bytes();
            out.extend_from_slice(&(sketch.len() as u32).to_le_bytes());
            out.extend_from_slice(&sketch);
        }
        out
    }

    /// Statistics written by [`GeneStats::to_bytes`]; anything else is an
    /// error naming what is wrong.
    pub fn from_bytes(bytes: &[u8]) -> Result<GeneStats> {
        let mut r = Reader(bytes);
        if r.take(MAGIC.len())? != MAGIC {
            return Err(bad("they do not start with DCGSTAT1".into()));
        }
        let n_genes = u32::from_le_bytes(r.array()?);
        let n_obs = u64::from_le_bytes(r.array()?);
        let config = sketch_config();
        let mut stats = GeneStats::new(0);
        stats.n_obs = n_obs;
        // Each gene takes at least 60 bytes: a count past what is left is refused
        // before anything is sized by it.
        if (n_genes as usize).saturating_mul(60) > r.0.len() {
            return Err(bad(format!("{n_genes} genes in {} bytes", bytes.len())));
        }
        stats.genes.reserve(n_genes as usize);
        for g in 0..n_genes {
            let n_cells = u64::from_le_bytes(r.array()?);
            let sum = u64::from_le_bytes(r.array()?);
            let sum_sq = u128::from_le_bytes(r.array()?);
            let norm_sum = u128::from_le_bytes(r.array()?);
            let norm_sq = u128::from_le_bytes(r.array()?);
            let len = u32::from_le_bytes(r.array()?) as usize;
            let sketch = DDSketch::from_java_bytes(r.take(len)?)
                .map_err(|e| bad(format!("gene {g}: its sketch does not decode: {e}")))?;
            let mut acc = GeneAcc::new(config);
            acc.sketch.merge(&sketch).map_err(|_| {
                bad(format!(
                    "gene {g}: its sketch has another relative accuracy"
                ))
            })?;
            if acc.sketch.count() as u64 != n_cells {
                return Err(bad(format!(
                    "gene {g}: {n_cells} cells but a sketch of {}",
                    acc.sketch.count()
                )));
            }
            acc.n_cells = n_cells;
            acc.sum = sum;
            acc.sum_sq = sum_sq;
            acc.norm_sum = norm_sum;
            acc.norm_sq = norm_sq;
            stats.genes.push(acc);
        }
        if !r.0.is_empty() {
            return Err(bad(format!("{} bytes after the last gene", r.0.len())));
        }
        Ok(stats)
    }
}

/// The error for bytes that are not partial statistics.
fn bad(what: String) -> Error {
    Error::Input(format!("not gene statistics bytes: {what}"))
}

/// The bytes not read yet.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.0.len() {
            return Err(bad("they end early".into()));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
}
