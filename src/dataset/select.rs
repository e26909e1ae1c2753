//! Gene selection: keep some output columns, renumbered `0..k` in the order given.

use crate::error::{Error, Result};

/// Which genes to keep and where each lands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneSelection {
    /// For every gene of the dataset, its output column, or -1 to drop it.
    map: Vec<i32>,
    /// The kept genes, in output order.
    genes: Vec<u32>,
    /// Whether output columns increase with gene index (rows then need no re-sort).
    monotone: bool,
}

impl GeneSelection {
    /// Keeps `genes` (columns of the dataset), which become output columns `0..k`
    /// in the order given. Duplicates and out-of-range genes are errors.
    pub fn new(n_genes: u32, genes: &[u32]) -> Result<GeneSelection> {
        let mut map = vec![-1i32; n_genes as usize];
        for (k, &g) in genes.iter().enumerate() {
            let slot = map
                .get_mut(g as usize)
                .ok_or_else(|| Error::Input(format!("gene {g} is outside 0..{n_genes}")))?;
            if *slot >= 0 {
                return Err(Error::Input(format!("gene {g} is selected twice")));
            }
            *slot = k as i32;
        }
        let monotone = genes.windows(2).all(|w| w[0] < w[1]);
        Ok(GeneSelection {
            map,
            genes: genes.to_vec(),
            monotone,
        })
    }

    /// Keeps the genes named `names`, looked up in `var_names` (the dataset's
    /// gene names in column order). Unknown or ambiguous names are errors.
    pub fn by_names(var_names: &[String], names: &[&str]) -> Result<GeneSelection> {
        let mut index = std::collections::HashMap::with_capacity(var_names.len());
        for (i, n) in var_names.iter().enumerate() {
            index
                .entry(n.as_str())
                .and_modify(|v: &mut Option<u32>| *v = None)
                .or_insert(Some(i as u32));
        }
        let genes = names
            .iter()
            .map(|&n| match index.get(n) {
                Some(Some(i)) => Ok(*i),
                Some(None) => Err(Error::Input(format!(
                    "gene name {n:?} appears more than once in var_names"
                ))),
                None => Err(Error::Input(format!("no gene named {n:?}"))),
            })
            .collect::<Result<Vec<_>>>()?;
        GeneSelection::new(var_names.len() as u32, &genes)
    }

    /// Number of output columns.
    pub fn len(&self) -> usize {
        self.genes.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.genes.is_empty()
    }

    /// The kept genes in output order.
    pub fn genes(&self) -> &[u32] {
        &self.genes
    }

    /// Output column of `gene`, if kept.
    #[inline]
    pub fn column(&self, gene: i32) -> Option<i32> {
        self.map.get(gene as usize).copied().filter(|&c| c >= 0)
    }

    /// Whether output columns increase with gene index.
    pub fn is_monotone(&self) -> bool {
        self.monotone
    }

    /// Number of dataset genes this selection was built for.
    pub fn n_genes(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_and_refuses() {
        let s = GeneSelection::new(10, &[7, 2]).unwrap();
        assert_eq!(
            (s.column(7), s.column(2), s.column(3)),
            (Some(0), Some(1), None)
        );
        assert!(!s.is_monotone());
        assert!(GeneSelection::new(10, &[10]).is_err());
        assert!(GeneSelection::new(10, &[1, 1]).is_err());
        let names: Vec<String> = ["A", "B", "A", "C"].iter().map(|s| s.to_string()).collect();
        assert_eq!(
            GeneSelection::by_names(&names, &["C", "B"])
                .unwrap()
                .genes(),
            &[3, 1]
        );
        assert!(GeneSelection::by_names(&names, &["A"]).is_err());
        assert!(GeneSelection::by_names(&names, &["Z"]).is_err());
    }
}
