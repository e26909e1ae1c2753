//! The row kernels: every backend places columns as the reference does, and
//! the reference puts them (with their counts) in increasing order, checked
//! against a sort.

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
    fn every_backend_places_like_a_sort((columns, words) in marked()) {
        let mut marks = vec![0u64; words];
        for &c in &columns {
            marks[(c >> 6) as usize] |= 1 << (c & 63);
        }
        let mut sorted = columns.clone();
        sorted.sort_unstable();
        let counts: Vec<u32> = columns.iter().map(|&c| c.wrapping_mul(2_654_435_761)).collect();
        let mut want = (vec![0; words], vec![0i32; columns.len()], vec![0u32; columns.len()]);
        RowKernels::scalar().place(&marks, &mut want.0, (&columns, &counts), (&mut want.1, &mut want.2));
        let sorted: Vec<i32> = sorted.iter().map(|&c| c as i32).collect();
        prop_assert_eq!(&want.1, &sorted);
        for (&c, &v) in want.1.iter().zip(&want.2) {
            prop_assert_eq!(v, (c as u32).wrapping_mul(2_654_435_761));
        }
        for k in crate::tables::<RowKernels>("rows") {
            let mut got = (vec![u32::MAX; words], vec![-1i32; columns.len()], vec![0u32; columns.len()]);
            k.place(&marks, &mut got.0, (&columns, &counts), (&mut got.1, &mut got.2));
            prop_assert_eq!(&got, &want, "{}", k.isa());
        }
    }
}
