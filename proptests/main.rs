//! Property tests: every kernel backend equals the scalar reference, and every
//! encoder round-trips through its decoder. Case counts are sized for a 2-core CI
//! run; set `PROPTEST_CASES` to run more locally.

use std::io::Write as _;
use std::sync::Mutex;

use deltacells::kernels::block::BlockKernels;
use deltacells::kernels::integrate::IntegrateKernels;
use deltacells::kernels::rows::RowKernels;
use deltacells::kernels::{KernelTable, TileKernels};

mod dataset;
mod obs;
mod rows;
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

/// Every table of one kernel family this CPU runs, scalar first: the one list
/// every parity suite iterates. Announced once per suite straight to stderr
/// (past the harness's capture), so CI logs show which tables ran.
pub fn tables<T: KernelTable>(suite: &str) -> Vec<&'static T> {
    static ANNOUNCED: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let tables = T::available();
    let mut announced = ANNOUNCED.lock().unwrap_or_else(|e| e.into_inner());
    if !announced.iter().any(|s| s == suite) {
        let names: Vec<&str> = tables.iter().map(|t| t.isa().name()).collect();
        let _ = writeln!(std::io::stderr(), "{suite}: tables {}", names.join(", "));
        announced.push(suite.to_string());
    }
    tables
}

/// The tables this CPU should run, from the CPU's own report (std's feature
/// detection, not the crate's): the reference, and each vector level whose
/// features are all present.
fn reported_by_the_cpu() -> Vec<&'static str> {
    let mut want = vec!["portable"];
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") && has!("bmi2") && has!("fma") && has!("popcnt") {
            want.push("avx2");
            if has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512dq") {
                want.push("avx512");
                if has!("avx512vbmi") {
                    want.push("avx512+vbmi");
                }
            }
        }
    }
    // NEON is part of every AArch64 Linux CPU: a run without it is broken.
    #[cfg(target_arch = "aarch64")]
    {
        assert!(
            std::arch::is_aarch64_feature_detected!("neon"),
            "NEON not reported"
        );
        want.push("neon");
    }
    want
}

/// The parity suites cannot pass vacuously: the list they iterate (`tables`)
/// holds, for every family, exactly the tables the CPU reports it can run.
#[test]
fn every_table_the_cpu_reports_is_exercised() {
    fn names<T: KernelTable>(family: &str) -> Vec<&'static str> {
        tables::<T>(family).iter().map(|t| t.isa().name()).collect()
    }
    let want = reported_by_the_cpu();
    let _ = writeln!(std::io::stderr(), "CPU reports tables: {}", want.join(", "));
    assert_eq!(names::<TileKernels>("tile"), want, "tile kernels");
    assert_eq!(names::<BlockKernels>("block"), want, "block kernels");
    assert_eq!(
        names::<IntegrateKernels>("integrate"),
        want,
        "integrate kernels"
    );
    assert_eq!(names::<RowKernels>("rows"), want, "row kernels");
}
