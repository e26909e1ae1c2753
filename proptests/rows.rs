//! The row kernels: every backend gives the reference's ranks, and the
//! ranks put the marked columns in increasing order (checked against a sort).

use deltacells::kernels::rows::RowKernels;
use deltacells::kernels::KernelTable;
use proptest::prelude::*;

use crate::config;

/// Distinct columns below `64 * words`, in no order, and the word count:
/// rows from empty to every column of a few words, and sparse ones over many.
fn marked() -> impl Strategy<Value = (Vec<u32>, usize)> {
    (1usize..40).prop_flat_map(|words| {
        let n = 64 * words as u32;
        (
            prop::collection::hash_set(0..n, 0..(n as usize).min(300)),
            Just(words),
        )
            .prop_map(|(set, words)| (set.into_iter().collect(), words))
    })
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn every_backend_ranks_like_a_sort((columns, words) in marked()) {
        let mut marks = vec![0u64; words];
        for &c in &columns {
            marks[(c >> 6) as usize] |= 1 << (c & 63);
        }
        let mut sorted = columns.clone();
        sorted.sort_unstable();
        for k in crate::tables::<RowKernels>("rows") {
            let (mut before, mut at) = (vec![u32::MAX; words], vec![u32::MAX; columns.len()]);
            k.ranks(&marks, &mut before, &columns, &mut at);
            for (&c, &a) in columns.iter().zip(&at) {
                prop_assert_eq!(sorted[a as usize], c, "{}", k.isa());
            }
            let mut want = (vec![0; words], vec![0; columns.len()]);
            RowKernels::scalar().ranks(&marks, &mut want.0, &columns, &mut want.1);
            prop_assert_eq!((&before, &at), (&want.0, &want.1), "{}", k.isa());
        }
    }
}
