//! The scalar references: plain, obviously correct code that defines what
//! every backend of every family computes, errors included.
//!
//! The property tests compare each vector table with these; the vector bodies
//! hand them their ragged ends and, on detecting a fault, the rerun that
//! reports it. Each is also a table of its family ([`KernelTable::scalar`]).
//!
//! [`KernelTable::scalar`]: crate::kernels::KernelTable::scalar

pub mod block;
pub mod integrate;
pub mod rows;
pub mod tile;
