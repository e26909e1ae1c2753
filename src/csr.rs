//! Compressed sparse row blocks: what the writer takes and the decoder returns.

/// A borrowed CSR block of `indptr.len() - 1` rows (cells) and `n_cols` columns (genes).
///
/// Row `r` holds the nonzeros `indptr[r] .. indptr[r + 1]` of `indices`/`values`.
#[derive(Clone, Copy, Debug)]
pub struct CsrRef<'a, V> {
    /// Number of columns (genes).
    pub n_cols: u64,
    /// Row offsets, `n_rows + 1` entries, starting at 0.
    pub indptr: &'a [i64],
    /// Column index of each nonzero.
    pub indices: &'a [i32],
    /// Value of each nonzero.
    pub values: &'a [V],
}

impl<V> CsrRef<'_, V> {
    /// Number of rows (cells); 0 for an empty `indptr`.
    pub fn n_rows(&self) -> usize {
        self.indptr.len().saturating_sub(1)
    }

    /// Number of stored nonzeros.
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }
}

/// An owned CSR block (see [`CsrRef`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Csr<V> {
    /// Number of columns (genes).
    pub n_cols: u64,
    /// Row offsets, `n_rows + 1` entries, starting at 0.
    pub indptr: Vec<i64>,
    /// Column index of each nonzero.
    pub indices: Vec<i32>,
    /// Value of each nonzero.
    pub values: Vec<V>,
}

impl<V> Csr<V> {
    /// A block of no rows and `n_cols` columns.
    pub fn empty(n_cols: u64) -> Csr<V> {
        Csr {
            n_cols,
            indptr: vec![0],
            indices: Vec::new(),
            values: Vec::new(),
        }
    }

    /// Number of rows (cells).
    pub fn n_rows(&self) -> usize {
        self.indptr.len().saturating_sub(1)
    }

    /// Number of stored nonzeros.
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }

    /// Borrows the block.
    pub fn as_ref(&self) -> CsrRef<'_, V> {
        CsrRef {
            n_cols: self.n_cols,
            indptr: &self.indptr,
            indices: &self.indices,
            values: &self.values,
        }
    }
}
