//! CSR.
