//! scipy sparse matrices saved with `scipy.sparse.save_npz`: members
//! `indptr`, `indices`, `data`, `shape` and `format` (`csr` or `csc`), rows
//! are cells. Each member is streamed from the archive (one file handle per
//! member), so memory is one block whatever the matrix size.

use std::path::Path;

use crate::error::{Error, Result};
use crate::format::npy::{open_npz, NpyStream};

use super::compressed::{Compressed, Major, Seq};
use super::counts::{check_claim, check_gene_claim, file_bytes};

/// An `.npz` member as a [`Seq`].
pub(crate) struct Member(NpyStream);

impl Seq<i64> for Member {
    fn next(&mut self, n: usize, out: &mut Vec<i64>) -> Result<()> {
        Ok(self.0.read_i64(n, out)?)
    }

    fn end(&mut self) -> Result<()> {
        Ok(self.0.finish()?)
    }
}

impl Seq<f64> for Member {
    fn next(&mut self, n: usize, out: &mut Vec<f64>) -> Result<()> {
        Ok(self.0.read_f64(n, out)?)
    }

    fn end(&mut self) -> Result<()> {
        Ok(self.0.finish()?)
    }
}

/// A CSR or CSC `.npz` opened for streaming.
pub(crate) type NpzReader = Compressed<Member, Member, Member>;

/// What an `.npz` holds, checked against its members' headers.
pub(crate) struct Npz {
    pub n_cells: u64,
    pub n_genes: u32,
    pub nnz: u64,
    pub major: Major,
}

fn bad(path: &Path, msg: impl std::fmt::Display) -> Error {
    Error::Input(format!("{}: {msg}", path.display()))
}

/// Reads `shape` and `format` and checks every member's length against
/// them, before anything is allocated from a declared size.
pub(crate) fn inspect(path: &Path) -> Result<Npz> {
    let mut shape = NpyStream::open(path, "shape")?;
    if shape.header().count() != Some(2) {
        return Err(bad(path, "shape must have 2 entries"));
    }
    let mut dims = Vec::new();
    shape.read_i64(2, &mut dims)?;
    shape.finish()?;
    let (rows, cols) = (dims[0], dims[1]);
    let has_format = open_npz(path)?.index_for_name("format.npy").is_some();
    let major = match has_format
        .then(|| NpyStream::open(path, "format"))
        .transpose()?
    {
        Some(mut f) => {
            let text = f.read_rest()?;
            f.finish()?;
            match text.as_slice() {
                b"csr" => Major::Cells,
                b"csc" => Major::Genes,
                other => {
                    return Err(bad(
                        path,
                        format!(
                            "format {:?}: only csr and csc matrices are supported",
                            String::from_utf8_lossy(other)
                        ),
                    ))
                }
            }
        }
        // Files written by hand (and older writers) have no format member: CSR.
        None => Major::Cells,
    };
    if rows < 0 || cols < 0 {
        return Err(bad(path, format!("shape ({rows}, {cols}) is negative")));
    }
    let n_genes = u32::try_from(cols)
        .ok()
        .filter(|&g| (1..=1 << 31).contains(&g))
        .ok_or_else(|| bad(path, format!("{cols} genes is outside 1..=2^31")))?;
    let source = path.display().to_string();
    let bytes = file_bytes(path)?;
    check_claim(&source, "cells", rows as u64, bytes)?;
    check_gene_claim(&source, "genes", n_genes.into(), bytes)?;
    let n_major = match major {
        Major::Cells => rows as u64,
        Major::Genes => cols as u64,
    };
    let count = |name: &str| -> Result<u64> {
        let s = NpyStream::open(path, name)?;
        match s.header().shape[..] {
            [n] => Ok(n as u64),
            _ => Err(bad(path, format!("{name} must be one-dimensional"))),
        }
    };
    let ptrs = count("indptr")?;
    if Some(ptrs) != n_major.checked_add(1) {
        return Err(bad(
            path,
            format!("indptr has {ptrs} entries, the shape ({rows}, {cols}) needs {n_major} + 1"),
        ));
    }
    let nnz = count("indices")?;
    if count("data")? != nnz {
        return Err(bad(path, "indices and data differ in length"));
    }
    Ok(Npz {
        n_cells: rows as u64,
        n_genes,
        nnz,
        major,
    })
}

/// Opens the three arrays for one pass.
pub(crate) fn reader(path: &Path, npz: &Npz, block_nnz: usize) -> Result<NpzReader> {
    let open = |name| NpyStream::open(path, name).map(Member);
    let (n_major, n_minor) = match npz.major {
        Major::Cells => (npz.n_cells, u64::from(npz.n_genes)),
        Major::Genes => (u64::from(npz.n_genes), npz.n_cells),
    };
    Ok(Compressed::new(
        path.display().to_string(),
        (open("indptr")?, open("indices")?, open("data")?),
        npz.major,
        n_major,
        n_minor,
        npz.nnz,
        block_nnz,
    ))
}
