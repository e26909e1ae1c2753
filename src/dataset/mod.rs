//! Datasets: a directory (or bucket prefix) of tiles plus `manifest.json`.
//!
//! Opening, validating, random access and training batches land here on top of
//! [`crate::engine`] (see ARCHITECTURE.md, "Dataset").
