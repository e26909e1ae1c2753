//! Scalar reference kernels.
