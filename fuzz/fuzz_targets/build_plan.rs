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
        let text = plan.to_json().expect("a parsed plan writes");
        let again = BuildPlan::from_json(&text).expect("a written plan parses");
        assert_eq!(again.to_json().expect("a parsed plan writes"), text);
    }
    if let Ok(stats) = InputStats::from_json(text) {
        let text = stats.to_json().expect("parsed statistics write");
        let again = InputStats::from_json(&text).expect("written statistics parse");
        assert_eq!(again.to_json().expect("parsed statistics write"), text);
    }
    if let Ok(report) = TaskReport::from_json(text) {
        let again = TaskReport::from_json(&report.to_json()).expect("a written report parses");
        assert_eq!(again, report);
    }
});
