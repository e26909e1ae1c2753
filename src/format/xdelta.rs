//! XDelta text codec (work in progress: issue 6).

/// Why an XDelta string could not be decoded or encoded.
#[derive(Debug, thiserror::Error)]
pub enum XdeltaError {}
