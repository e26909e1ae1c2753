//! Decode buffers that numpy arrays borrow and give back when Python is done.
//!
//! A tile of 4,096 cells decodes to tens of megabytes. A fresh allocation that
//! size comes straight from the kernel (glibc maps it), so every page is
//! faulted in and zeroed on first write, and unmapped again when the arrays
//! die: on a scan that costs more than the decode itself. Instead, the
//! buffers a read fills come from a small per-dataset pool; each numpy array
//! borrows its buffer from an owner object ([`Lease`]) whose drop puts the
//! buffer back. A scan therefore cycles through a few warm buffers, and the
//! arrays are still zero-copy views of what Rust wrote.
//!
//! The pool holds at most [`KEEP`] idle buffers per element type, so what it
//! keeps is bounded by a few reads' worth of output beyond those in flight.
//! Training batches are lent the same way, their buffers going back to the
//! batch iterator's own recycler (`deltacells::dataset::Recycler`).

use std::sync::{Arc, Mutex};

use deltacells::Csr;
use numpy::ndarray::ArrayView1;
use numpy::{Element, PyArray1};
use pyo3::prelude::*;

/// Idle buffers kept per element type: the one being read into, the one the
/// caller holds, and one a prefetching reader fills meanwhile.
const KEEP: usize = 3;

/// Idle buffers of one element type.
pub struct Pool<T> {
    idle: Mutex<Vec<Vec<T>>>,
}

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool {
            idle: Mutex::new(Vec::new()),
        }
    }
}

impl<T> Pool<T> {
    /// An idle buffer (its old contents and length kept: readers overwrite
    /// what they resize to), or a new empty one.
    fn take(&self) -> Vec<T> {
        self.idle
            .lock()
            .ok()
            .and_then(|mut idle| idle.pop())
            .unwrap_or_default()
    }

    /// Keeps `buf` for a later read unless enough are idle already.
    fn give(&self, buf: Vec<T>) {
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() < KEEP {
                idle.push(buf);
            }
        }
    }
}

/// The pools of one dataset handle, one per element type a read produces.
#[derive(Default)]
pub struct Buffers {
    i64s: Arc<Pool<i64>>,
    i32s: Arc<Pool<i32>>,
    f32s: Arc<Pool<f32>>,
}

/// The element types whose buffers are pooled.
pub trait Pooled: Element + Send + Sync + Sized + 'static {
    /// This type's pool among `buffers`.
    fn pool(buffers: &Buffers) -> &Arc<Pool<Self>>;
}

impl Pooled for i64 {
    fn pool(buffers: &Buffers) -> &Arc<Pool<i64>> {
        &buffers.i64s
    }
}

impl Pooled for i32 {
    fn pool(buffers: &Buffers) -> &Arc<Pool<i32>> {
        &buffers.i32s
    }
}

impl Pooled for f32 {
    fn pool(buffers: &Buffers) -> &Arc<Pool<f32>> {
        &buffers.f32s
    }
}

impl Buffers {
    /// A CSR block to read into, its buffers taken from the pools.
    pub fn csr<V: Pooled>(&self) -> Csr<V> {
        Csr {
            n_cols: 0,
            indptr: self.i64s.take(),
            indices: self.i32s.take(),
            values: V::pool(self).take(),
        }
    }

    /// Numpy arrays over `csr`'s buffers, `(indptr, indices, data, n_cols)`;
    /// each buffer returns to its pool when its array (and every view of it)
    /// is gone.
    pub fn arrays<'py, V: Pooled>(
        &self,
        py: Python<'py>,
        csr: Csr<V>,
    ) -> PyResult<crate::arrays::CsrArrays<'py, V>> {
        Ok((
            lend(py, csr.indptr, giving_to(&self.i64s))?,
            lend(py, csr.indices, giving_to(&self.i32s))?,
            lend(py, csr.values, giving_to(V::pool(self)))?,
            csr.n_cols,
        ))
    }
}

/// Gives a buffer back to `pool`.
fn giving_to<T: Send + Sync + 'static>(
    pool: &Arc<Pool<T>>,
) -> impl Fn(Vec<T>) + Send + Sync + 'static {
    let pool = pool.clone();
    move |buf| pool.give(buf)
}

/// A buffer on loan to numpy: the base object of the array over it.
#[pyclass(module = "deltacells._deltacells", frozen)]
pub struct Lease {
    // Dropped (and its buffer given back) when Python frees this object.
    _buf: Box<dyn Send + Sync>,
}

/// Gives the buffer back (to a pool, or to a batch iterator) when dropped.
struct Returning<T, F: Fn(Vec<T>)> {
    buf: Vec<T>,
    back: F,
}

impl<T, F: Fn(Vec<T>)> Drop for Returning<T, F> {
    fn drop(&mut self) {
        (self.back)(std::mem::take(&mut self.buf));
    }
}

/// A numpy array over `buf`, owned by a [`Lease`] that hands `buf` to `back`
/// when numpy lets go of it.
pub fn lend<'py, T: Element + Send + Sync + 'static>(
    py: Python<'py>,
    buf: Vec<T>,
    back: impl Fn(Vec<T>) + Send + Sync + 'static,
) -> PyResult<Bound<'py, PyArray1<T>>> {
    let (ptr, len) = (buf.as_ptr(), buf.len());
    // Moving the Vec into the box moves its header, not its heap buffer, so
    // `ptr` stays valid for as long as the lease lives.
    let lease = Bound::new(
        py,
        Lease {
            _buf: Box::new(Returning { buf, back }),
        },
    )?;
    // SAFETY: `ptr` points at `len` initialised elements of the buffer the
    // lease owns; nothing else can reach that buffer (the lease exposes no
    // access to it) until the lease is dropped, and numpy keeps the lease
    // alive (as the array's base) for as long as the array or any view of it
    // exists. An empty Vec's dangling pointer is non-null and aligned, which
    // is what a zero-length view needs.
    let array = unsafe {
        let view = ArrayView1::from_shape_ptr(len, ptr);
        PyArray1::borrow_from_array(&view, lease.into_any())
    };
    Ok(array)
}
