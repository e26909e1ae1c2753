//! HDF5 inputs (feature `hdf5`), read through the HDF5 C library that h5py
//! and anndata use: AnnData `.h5ad` ([`h5ad`]) and Cell Ranger feature-barcode
//! matrices ([`cellranger`]).
//!
//! Every error names the file, the HDF5 path and the reason; whatever the
//! library reports for a truncated or corrupt file is passed on as an error.

pub(crate) mod cellranger;
mod frame;
pub(crate) mod h5ad;

use std::path::Path;

use hdf5::types::{FixedAscii, FixedUnicode, TypeDescriptor, VarLenAscii, VarLenUnicode};
use hdf5::{Container, Dataset, H5Type};
use hdf5_metno as hdf5;

use super::compressed::Seq;
use crate::error::{Error, Result};

/// An open HDF5 file, named in errors.
pub(crate) struct H5 {
    file: hdf5::File,
    name: String,
    bytes: u64,
}

impl H5 {
    pub(crate) fn open(path: &Path) -> Result<H5> {
        let name = path.display().to_string();
        let bytes = super::counts::file_bytes(path)?;
        let file = hdf5::File::open(path)
            .map_err(|e| Error::Input(format!("{name}: cannot be opened as HDF5: {e}")))?;
        Ok(H5 { file, name, bytes })
    }

    /// The file's size, for [`super::counts::check_claim`].
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// `file: /path: msg`.
    pub(crate) fn err(&self, at: &str, msg: impl std::fmt::Display) -> Error {
        Error::Input(format!("{}: /{at}: {msg}", self.name))
    }

    /// `file: /path`, the source named in value errors.
    pub(crate) fn source(&self, at: &str) -> String {
        format!("{}: /{at}", self.name)
    }

    /// Whether `at` (a `/`-separated path) exists.
    pub(crate) fn exists(&self, at: &str) -> bool {
        let mut prefix = String::new();
        at.split('/').all(|part| {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            self.file.link_exists(&prefix)
        })
    }

    pub(crate) fn is_group(&self, at: &str) -> bool {
        self.exists(at) && self.file.group(at).is_ok()
    }

    pub(crate) fn group(&self, at: &str) -> Result<hdf5::Group> {
        if !self.exists(at) {
            return Err(self.err(at, "missing"));
        }
        self.file
            .group(at)
            .map_err(|e| self.err(at, format!("not a group: {e}")))
    }

    pub(crate) fn dataset(&self, at: &str) -> Result<Dataset> {
        if !self.exists(at) {
            return Err(self.err(at, "missing"));
        }
        self.file
            .dataset(at)
            .map_err(|e| self.err(at, format!("not a dataset: {e}")))
    }

    /// A dataset to be read whole: its declared length must be backed by
    /// the file's bytes (an HDF5 dataset may declare any size and store
    /// nothing), so that reading it allocates no more than the file justifies.
    pub(crate) fn whole(&self, at: &str) -> Result<Dataset> {
        let ds = self.dataset(at)?;
        super::counts::check_claim(&self.source(at), "elements", ds.size() as u64, self.bytes)?;
        Ok(ds)
    }

    /// The string attribute `name` of the object at `at`, if it has one.
    pub(crate) fn attr_string(&self, at: &str, name: &str) -> Result<Option<String>> {
        let attr = if at.is_empty() {
            self.file.attr(name)
        } else if self.is_group(at) {
            self.group(at)?.attr(name)
        } else {
            self.dataset(at)?.attr(name)
        };
        let Ok(attr) = attr else {
            return Ok(None);
        };
        let mut values =
            read_strings(&attr).map_err(|e| self.err(at, format!("attribute {name}: {e}")))?;
        match values.len() {
            1 => Ok(values.pop()),
            n => Err(self.err(at, format!("attribute {name} holds {n} strings, not one"))),
        }
    }

    /// The AnnData `encoding-type` of the object at `at`.
    pub(crate) fn encoding(&self, at: &str) -> Result<Option<String>> {
        self.attr_string(at, "encoding-type")
    }

    /// A 1-D dataset of strings.
    pub(crate) fn strings(&self, at: &str) -> Result<Vec<String>> {
        let ds = self.whole(at)?;
        read_strings(&ds).map_err(|e| self.err(at, e))
    }

    /// The type of the elements of the dataset at `at`.
    pub(crate) fn descriptor(&self, at: &str) -> Result<TypeDescriptor> {
        self.dataset(at)?
            .dtype()
            .and_then(|t| t.to_descriptor())
            .map_err(|e| self.err(at, format!("datatype: {e}")))
    }

    /// A 1-D numeric dataset read front to back; `ints` requires an integer type.
    pub(crate) fn seq(&self, at: &str, ints: bool) -> Result<H5Seq> {
        let ds = self.dataset(at)?;
        if ds.ndim() != 1 {
            return Err(self.err(at, format!("{} dimensions, expected 1", ds.ndim())));
        }
        match self.descriptor(at)? {
            TypeDescriptor::Integer(_) | TypeDescriptor::Unsigned(_) => {}
            TypeDescriptor::Float(_) if !ints => {}
            t => {
                let want = if ints { "integers" } else { "numbers" };
                return Err(self.err(at, format!("unexpected dtype {t} (expected {want})")));
            }
        }
        Ok(H5Seq {
            len: ds.size(),
            ds,
            pos: 0,
            source: self.source(at),
        })
    }
}

/// The strings of a 1-D (or scalar) string dataset or attribute, whatever
/// its string type: variable-length UTF-8 or ASCII (h5py, anndata) or
/// fixed-length (Cell Ranger's `|S` arrays).
fn read_strings(c: &Container) -> std::result::Result<Vec<String>, String> {
    let e = |e: hdf5::Error| e.to_string();
    let desc = c.dtype().and_then(|t| t.to_descriptor()).map_err(e)?;
    macro_rules! fixed {
        ($n:expr, $ty:ident, $($size:literal)*) => {
            $(if $n <= $size {
                return Ok(c
                    .read_raw::<$ty<$size>>()
                    .map_err(e)?
                    .iter()
                    .map(|s| String::from_utf8_lossy(s.as_bytes()).into_owned())
                    .collect());
            })*
        };
    }
    match desc {
        TypeDescriptor::VarLenUnicode => Ok(c
            .read_raw::<VarLenUnicode>()
            .map_err(e)?
            .iter()
            .map(|s| s.as_str().to_string())
            .collect()),
        TypeDescriptor::VarLenAscii => Ok(c
            .read_raw::<VarLenAscii>()
            .map_err(e)?
            .iter()
            .map(|s| String::from_utf8_lossy(s.as_bytes()).into_owned())
            .collect()),
        TypeDescriptor::FixedAscii(n) => {
            fixed!(n, FixedAscii, 16 64 256 1024 4096);
            Err(format!("fixed strings of {n} bytes are too long"))
        }
        TypeDescriptor::FixedUnicode(n) => {
            fixed!(n, FixedUnicode, 16 64 256 1024 4096);
            Err(format!("fixed strings of {n} bytes are too long"))
        }
        t => Err(format!("unexpected dtype {t} (expected strings)")),
    }
}

/// A 1-D dataset read in consecutive slices; the library converts the
/// stored type to the one asked for.
pub(crate) struct H5Seq {
    ds: Dataset,
    pos: usize,
    len: usize,
    source: String,
}

impl H5Seq {
    /// Elements in the dataset.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl<T: H5Type + Copy> Seq<T> for H5Seq {
    fn next(&mut self, n: usize, out: &mut Vec<T>) -> Result<()> {
        let end = self.pos + n;
        if end > self.len {
            return Err(Error::Input(format!(
                "{}: elements {}..{end} wanted, the dataset has {}",
                self.source, self.pos, self.len
            )));
        }
        if n > 0 {
            let part = self.ds.read_slice_1d::<T, _>(self.pos..end).map_err(|e| {
                Error::Input(format!("{}: reading {}..{end}: {e}", self.source, self.pos))
            })?;
            out.extend(part.iter().copied());
        }
        self.pos = end;
        Ok(())
    }

    fn skip(&mut self, n: usize) -> Result<()> {
        if self.pos + n > self.len {
            return Err(Error::Input(format!(
                "{}: cannot skip to {} of {} elements",
                self.source,
                self.pos + n,
                self.len
            )));
        }
        self.pos += n;
        Ok(())
    }
}
