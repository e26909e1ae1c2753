//! AArch64 backends: a thin [`Vector`](super::generic::Vector) implementation
//! over `std::arch` intrinsics.

pub(crate) mod neon;
