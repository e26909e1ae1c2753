//! x86-64 backends: thin [`Vector`](super::generic::Vector) implementations
//! over `std::arch` intrinsics.

pub(crate) mod avx2;
pub(crate) mod avx512;
