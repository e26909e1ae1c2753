//! What the tests of Geneformer's row orders (`classes`, `places`) share:
//! a reproducible generator, Geneformer's key, and the order they must
//! give, written as a plain sort.

/// The target sum the tests rank rows for.
pub(super) const TARGET: f64 = 10_000.0;

/// A reproducible generator: the next value below `bound`.
pub(super) fn next(s: &mut u64, bound: u64) -> u64 {
    *s = s
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    (*s >> 33) % bound
}

/// Geneformer's key of a gene of count `c` and median `m` in a cell of
/// `counts`.
pub(super) fn key_of(counts: &[i32]) -> impl Fn(u32, f64) -> u64 {
    let n = counts.iter().map(|&c| u64::from(c as u32)).sum::<u64>() as f64;
    move |c, m| !(((f64::from(c) / n) * TARGET) / m).to_bits()
}

/// The tokens of a row over `columns` (`(median, token)`, a token below 0
/// a skipped column) sorted by key, then token: the order a table must
/// give.
pub(super) fn by_sort(columns: &[(f64, i32)], genes: &[i32], counts: &[i32]) -> Vec<i32> {
    let key = key_of(counts);
    let mut pairs: Vec<(u64, i32)> = genes
        .iter()
        .zip(counts)
        .map(|(&g, &c)| (columns[g as usize], c as u32))
        .filter(|&((_, t), _)| t >= 0)
        .map(|((m, t), c)| (key(c, m), t))
        .collect();
    pairs.sort_unstable();
    pairs.into_iter().map(|p| p.1).collect()
}
