//! The build's JSON (plans, input statistics, task reports) on arbitrary
//! bytes: never a panic; what parses writes back to JSON that parses to the
//! same value.

#![no_main]

use deltacells::dataset::build::{BuildPlan, InputStats, TaskReport};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(plan) = BuildPlan::from_json(text) {
        let again = BuildPlan::from_json(&plan.to_json()).expect("a written plan parses");
        assert_eq!(again.to_json(), plan.to_json());
    }
    if let Ok(stats) = InputStats::from_json(text) {
        let again = InputStats::from_json(&stats.to_json()).expect("written statistics parse");
        assert_eq!(again.to_json(), stats.to_json());
    }
    if let Ok(report) = TaskReport::from_json(text) {
        let again = TaskReport::from_json(&report.to_json()).expect("a written report parses");
        assert_eq!(again, report);
    }
});
