//! The integration kernels' reference: plain code that defines what every
//! backend computes, and the tail loops the vector bodies hand their last few
//! elements to.

#[cfg(doc)]
use crate::kernels::integrate::IntegrateKernels;
use crate::kernels::integrate::{Affine, Overflow};

/// Reference for [`IntegrateKernels::prefix_sum_i64`].
pub fn prefix_sum_i64(data: &mut [i64]) -> Result<(), Overflow> {
    prefix_sum_from(data, 1)
}

/// Continues a prefix sum at `start`, given that `data[..start]` is done.
pub(crate) fn prefix_sum_from(data: &mut [i64], start: usize) -> Result<(), Overflow> {
    for k in start.max(1)..data.len() {
        data[k] = data[k - 1]
            .checked_add(data[k])
            .ok_or(Overflow { index: k })?;
    }
    Ok(())
}

/// Reference for [`IntegrateKernels::prefix_sum_to_f64`].
pub fn prefix_sum_to_f64(data: &mut [f64], affine: Affine) -> Result<(), Overflow> {
    let Some(first) = data.first_mut() else {
        return Ok(());
    };
    let running = first.to_bits() as i64;
    *first = affine.apply(running as f64);
    prefix_sum_to_f64_from(data, 1, running, affine)
}

/// Continues a fused prefix sum at `start`, `running` being the sum of
/// `data[..start]` (whose elements are already converted).
pub(crate) fn prefix_sum_to_f64_from(
    data: &mut [f64],
    start: usize,
    mut running: i64,
    affine: Affine,
) -> Result<(), Overflow> {
    for (k, x) in data.iter_mut().enumerate().skip(start) {
        running = running
            .checked_add(x.to_bits() as i64)
            .ok_or(Overflow { index: k })?;
        *x = affine.apply(running as f64);
    }
    Ok(())
}

/// Reference for [`IntegrateKernels::affine_f64`].
pub fn affine_f64(data: &mut [f64], affine: Affine) {
    for x in data {
        *x = affine.apply(*x);
    }
}

/// Reference for [`IntegrateKernels::ints_to_f64`].
pub fn ints_to_f64(data: &mut [f64], affine: Affine) {
    for x in data {
        *x = affine.apply(x.to_bits() as i64 as f64);
    }
}
