//! Natural order of category names, as `anndata.concat` sorts a merged
//! vocabulary (`natsort.natsorted`'s default): a name is split into runs of
//! text and runs of ASCII digits, always starting with a text run (empty when
//! the name starts with a digit); runs compare in turn, text by code point,
//! digits as unsigned integers. So `c2` comes before `c10`. Names whose runs
//! all compare equal (`x01` and `x1`) are ordered by code point.

use std::cmp::Ordering;

/// One run of a name.
#[derive(PartialEq, Eq)]
enum Run<'a> {
    Text(&'a str),
    /// Digits without their leading zeros (compared by length, then bytes).
    Number(&'a str),
}

impl Ord for Run<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Run::Text(a), Run::Text(b)) => a.cmp(b),
            (Run::Number(a), Run::Number(b)) => a.len().cmp(&b.len()).then_with(|| a.cmp(b)),
            // Runs alternate from a text run, so these meet only when one
            // name ends where the other goes on; never in practice.
            (Run::Text(_), Run::Number(_)) => Ordering::Greater,
            (Run::Number(_), Run::Text(_)) => Ordering::Less,
        }
    }
}

impl PartialOrd for Run<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The runs of `name`: text, number, text, number, ...
fn runs(name: &str) -> Vec<Run<'_>> {
    let mut out = Vec::new();
    let mut rest = name;
    let mut text = true;
    while !rest.is_empty() || text && out.is_empty() {
        let end = rest
            .find(|c: char| c.is_ascii_digit() == text)
            .unwrap_or(rest.len());
        let (run, tail) = rest.split_at(end);
        out.push(if text {
            Run::Text(run)
        } else {
            Run::Number(run.trim_start_matches('0'))
        });
        rest = tail;
        text = !text;
    }
    out
}

/// Compares two names in natural order ([module docs](self)).
pub(in crate::obs) fn natural_cmp(a: &str, b: &str) -> Ordering {
    runs(a).cmp(&runs(b)).then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_as_natsort_sorts_them() {
        // natsort.natsorted of these (natsort 8.4), ties by code point.
        let mut names = vec![
            "x1", "x01", "c10", "B", "a", "c2", "c1", "", "1a", "a 2", "a10b3", "a10b20",
        ];
        names.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            names,
            ["", "1a", "B", "a", "a10b3", "a10b20", "a 2", "c1", "c2", "c10", "x01", "x1"]
        );
    }
}
