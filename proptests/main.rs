//! Property tests: every kernel backend equals the scalar reference, and every
//! encoder round-trips through its decoder. Case counts are sized for a 2-core CI
//! run; set `PROPTEST_CASES` to run more locally.

mod dataset;
mod obs;
mod tile;
mod tile_kernels;
mod ts2diff;
mod xdelta;

/// A proptest config with `default_cases` cases, unless `PROPTEST_CASES` is set.
pub fn config(default_cases: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    proptest::test_runner::Config::with_cases(cases)
}
