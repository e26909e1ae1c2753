//! scipy sparse matrices saved with `scipy.sparse.save_npz`: members
//! `indptr`, `indices`, `data`, `shape` and `format` (`csr` or `csc`), rows
//! are cells. Each member is streamed from the archive (one file handle per
//! member), so memory is one block whatever the matrix size.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::format::npy::{open_npz, NpyError, NpyStream};

use super::compressed::{Compressed, Major, Seq};
use super::counts::{check_claim, check_gene_claim, file_bytes};

/// Names the file and the member an `.npy` error concerns: the array
/// reader's own messages ("unsupported dtype <U3", "CRC-32 mismatch") say
/// neither, and an `.npz` has five members.
fn in_member<'a>(path: &'a Path, name: &'a str) -> impl Fn(NpyError) -> Error + 'a {
    let file = path.display();
    move |e| match e {
        NpyError::Io { context, error } => {
            Error::io(format!("{file}: member {name}.npy ({context})"), error)
        }
        NpyError::Array(m) | NpyError::Archive(m) if m.contains(&format!("{name}.npy")) => {
            Error::Input(format!("{file}: {m}"))
        }
        NpyError::Array(m) | NpyError::Archive(m) => {
            Error::Input(format!("{file}: member {name}.npy: {m}"))
        }
        e @ NpyError::File { .. } => e.into(),
    }
}

/// Opens member `name` of the `.npz` at `path`.
fn open(path: &Path, name: &'static str) -> Result<Member> {
    let stream = NpyStream::open(path, name).map_err(in_member(path, name))?;
    Ok(Member {
        stream,
        path: path.to_path_buf(),
        name,
    })
}

/// An `.npz` member as a [`Seq`], whose errors name it.
pub(crate) struct Member {
    stream: NpyStream,
    path: PathBuf,
    name: &'static str,
}

impl Member {
    fn err(&self) -> impl Fn(NpyError) -> Error + '_ {
        in_member(&self.path, self.name)
    }
}

impl Seq<i64> for Member {
    fn next(&mut self, n: usize, out: &mut Vec<i64>) -> Result<()> {
        let result = self.stream.read_i64(n, out);
        result.map_err(self.err())
    }

    fn end(&mut self) -> Result<()> {
        let result = self.stream.finish();
        result.map_err(self.err())
    }
}

impl Seq<f64> for Member {
    fn next(&mut self, n: usize, out: &mut Vec<f64>) -> Result<()> {
        let result = self.stream.read_f64(n, out);
        result.map_err(self.err())
    }

    fn end(&mut self) -> Result<()> {
        let result = self.stream.finish();
        result.map_err(self.err())
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
    let mut shape = open(path, "shape")?;
    if shape.stream.header().count() != Some(2) {
        return Err(bad(path, "shape must have 2 entries"));
    }
    let mut dims = Vec::new();
    Seq::<i64>::next(&mut shape, 2, &mut dims)?;
    Seq::<i64>::end(&mut shape)?;
    let (rows, cols) = (dims[0], dims[1]);
    let has_format = open_npz(path)?.index_for_name("format.npy").is_some();
    let major = match has_format.then(|| open(path, "format")).transpose()? {
        Some(mut f) => {
            let bytes = f.stream.read_rest().map_err(f.err())?;
            Seq::<i64>::end(&mut f)?;
            let header = f.stream.header();
            let text = header.text(&bytes).ok_or_else(|| {
                bad(
                    path,
                    format!(
                        "member format.npy: dtype {} is not text (|S or <U)",
                        header.descr
                    ),
                )
            })?;
            match text.as_str() {
                "csr" => Major::Cells,
                "csc" => Major::Genes,
                other => {
                    return Err(bad(
                        path,
                        format!(
                            "member format.npy holds {other:?}: only csr and csc matrices are supported"
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
    let count = |name: &'static str| -> Result<u64> {
        let s = open(path, name)?;
        match s.stream.header().shape[..] {
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
    let (n_major, n_minor) = match npz.major {
        Major::Cells => (npz.n_cells, u64::from(npz.n_genes)),
        Major::Genes => (u64::from(npz.n_genes), npz.n_cells),
    };
    Ok(Compressed::new(
        path.display().to_string(),
        (
            open(path, "indptr")?,
            open(path, "indices")?,
            open(path, "data")?,
        ),
        npz.major,
        n_major,
        n_minor,
        npz.nnz,
        block_nnz,
    ))
}
