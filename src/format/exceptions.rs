//! Exception frames: the rare counts and gaps above 65535, listed beside the
//! `u16` streams (spec section "Exceptions").
//!
//! A frame decompresses to `8k` bytes: `k` little-endian `u32` positions, then
//! `k` `u32` payloads. This module checks everything about a list that does not
//! need the decoded streams; the kernels check the 65535 markers and the final
//! gene indices.

use crate::format::tile::{StreamKind, TileRule};

/// A checked exception list borrowed from a decompressed frame.
#[derive(Clone, Copy, Debug)]
pub struct ExceptionList<'a> {
    /// Nonzero positions within the chunk, strictly increasing, each `< n`.
    pub positions: &'a [u32],
    /// One payload per position.
    pub payloads: &'a [u32],
}

impl<'a> ExceptionList<'a> {
    /// The empty list (a chunk without this kind of exception).
    pub const EMPTY: ExceptionList<'static> = ExceptionList {
        positions: &[],
        payloads: &[],
    };

    /// Number of exceptions.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// Checks a decompressed frame of `words` (`2k` little-endian `u32`) for a
    /// chunk of `n` nonzeros: `k <= n`, positions strictly increasing and `< n`,
    /// and payloads in range for `kind` (`vexc`: 65536 ..= 2^31 - 1; `gexc`:
    /// 1 ..= n_genes - 1).
    pub fn parse(
        words: &'a [u32],
        n: u64,
        kind: StreamKind,
        n_genes: u32,
    ) -> Result<ExceptionList<'a>, TileRule> {
        let k = words.len() / 2;
        if !words.len().is_multiple_of(2) || k as u64 > n {
            return Err(TileRule::ExceptionSize {
                stream: kind,
                bytes: 4 * words.len() as u64,
                n,
            });
        }
        let (positions, payloads) = words.split_at(k);
        let mut prev: Option<u32> = None;
        for &p in positions {
            if prev.is_some_and(|q| p <= q) {
                return Err(TileRule::ExceptionOrder {
                    stream: kind,
                    position: p,
                });
            }
            if u64::from(p) >= n {
                return Err(TileRule::ExceptionPosition {
                    stream: kind,
                    position: p,
                    n,
                });
            }
            prev = Some(p);
        }
        let range = match kind {
            StreamKind::Vexc => 65_536..=i32::MAX as u32,
            _ => 1..=n_genes.saturating_sub(1),
        };
        if let Some(&bad) = payloads.iter().find(|v| !range.contains(v)) {
            return Err(TileRule::ExceptionPayload {
                stream: kind,
                payload: bad,
            });
        }
        Ok(ExceptionList {
            positions,
            payloads,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_a_valid_list() {
        let w = [0, 5, 9, 70_000, 65_536, 100_000];
        let l = ExceptionList::parse(&w, 10, StreamKind::Vexc, 100).unwrap();
        assert_eq!(l.positions, &[0, 5, 9]);
        assert_eq!(l.len(), 3);
    }

    #[test]
    fn rejects_each_rule() {
        let v = StreamKind::Vexc;
        assert!(matches!(
            ExceptionList::parse(&[1, 2, 3], 10, v, 9),
            Err(TileRule::ExceptionSize { .. })
        ));
        assert!(matches!(
            ExceptionList::parse(&[0, 1, 70_000, 70_000], 1, v, 9),
            Err(TileRule::ExceptionSize { .. })
        ));
        assert!(matches!(
            ExceptionList::parse(&[3, 3, 70_000, 70_000], 10, v, 9),
            Err(TileRule::ExceptionOrder { .. })
        ));
        assert!(matches!(
            ExceptionList::parse(&[10, 70_000], 10, v, 9),
            Err(TileRule::ExceptionPosition { .. })
        ));
        assert!(matches!(
            ExceptionList::parse(&[1, 1000], 10, v, 9),
            Err(TileRule::ExceptionPayload { payload: 1000, .. })
        ));
        let g = StreamKind::Gexc;
        assert!(matches!(
            ExceptionList::parse(&[1, 0], 10, g, 9),
            Err(TileRule::ExceptionPayload { payload: 0, .. })
        ));
        assert!(matches!(
            ExceptionList::parse(&[1, 9], 10, g, 9),
            Err(TileRule::ExceptionPayload { payload: 9, .. })
        ));
        assert!(ExceptionList::parse(&[1, 8], 10, g, 9).is_ok());
    }
}
