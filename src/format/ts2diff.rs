//! TsFile FLOAT/DOUBLE TS_2DIFF pages (work in progress: issue 5).

/// Why a TS_2DIFF page could not be decoded or encoded.
#[derive(Debug, thiserror::Error)]
pub enum Ts2diffError {}
