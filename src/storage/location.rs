//! Locations: a local path or a URL, turned into a [`Store`].

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::{LocalStore, Store};
use crate::error::{Error, Result};

/// Where a dataset lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A local directory (a plain path or a `file://` URL).
    Local(PathBuf),
    /// An object store URL: `s3://bucket/prefix`, `gs://...`, `az://...`,
    /// `http(s)://...`.
    Url(String),
}

impl Location {
    /// Reads a location: anything of the form `scheme://...` is a URL
    /// (`file://` meaning a local path), everything else a path.
    pub fn parse(location: impl AsRef<OsStr>) -> Location {
        let raw = location.as_ref();
        let Some(text) = raw.to_str() else {
            return Location::Local(PathBuf::from(raw));
        };
        match text.split_once("://") {
            Some(("file", path)) => Location::Local(PathBuf::from(path)),
            Some((scheme, _))
                if !scheme.is_empty()
                    && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                    && scheme
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
            {
                Location::Url(text.to_string())
            }
            _ => Location::Local(PathBuf::from(raw)),
        }
    }

    /// The location of `key` below this one (a subdirectory, or a longer prefix).
    pub fn join(&self, key: &str) -> Location {
        match self {
            Location::Local(p) => Location::Local(p.join(key)),
            Location::Url(u) => Location::Url(format!("{}/{key}", u.trim_end_matches('/'))),
        }
    }

    /// The store for this location. Local directories need not exist yet
    /// (a writer creates them); object store URLs take credentials, region
    /// and endpoint from the environment (see [`super::object`]).
    pub fn store(&self) -> Result<Arc<dyn Store>> {
        match self {
            Location::Local(path) => Ok(Arc::new(LocalStore::new(path))),
            Location::Url(url) => url_store(url),
        }
    }

    /// Runs `write` on this location's store; when it fails and this is a
    /// local directory that did not exist before, the directory is removed
    /// if it is empty (a write refused before its first file leaves nothing
    /// behind; one that wrote files keeps them for its rerun).
    pub fn write_new<T>(&self, write: impl FnOnce(Arc<dyn Store>) -> Result<T>) -> Result<T> {
        let fresh = match self {
            Location::Local(path) => (!path.exists()).then_some(path),
            Location::Url(_) => None,
        };
        let result = self.store().and_then(write);
        if let (Err(_), Some(dir)) = (&result, fresh) {
            // Fails, leaving it, unless it is an empty directory.
            let _ = std::fs::remove_dir(dir);
        }
        result
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::Url(u) => f.write_str(u),
        }
    }
}

#[cfg(feature = "object-store")]
fn url_store(url: &str) -> Result<Arc<dyn Store>> {
    Ok(Arc::new(super::object::ObjectStore::from_url(url)?))
}

#[cfg(not(feature = "object-store"))]
fn url_store(url: &str) -> Result<Arc<dyn Store>> {
    Err(Error::Config(format!(
        "{url}: this build has no object storage (cargo feature `object-store`)"
    )))
}

/// The stem of a location: its last path segment without its extension
/// (`data/plate_1.dc` and `s3://bucket/plate_1.dc/` are both `plate_1`),
/// what the source column calls a member.
pub fn location_stem(location: &str) -> String {
    let last = location
        .trim_end_matches(['/', '\\'])
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(location);
    match last.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem.to_string(),
        _ => last.to_string(),
    }
}

/// The store behind a location (a path or a URL; see [`Location::parse`]).
pub fn open(location: impl AsRef<OsStr>) -> Result<Arc<dyn Store>> {
    Location::parse(location).store()
}

/// Refuses a local location that is not an existing directory (readers),
/// saying which it is: nothing, or a file (a corpus file, say, given to a
/// command that reads datasets only).
pub(crate) fn require_dir(location: &Location) -> Result<()> {
    use std::io::{Error as IoError, ErrorKind};
    match location {
        Location::Local(p) if !p.is_dir() => Err(Error::io(
            p.display().to_string(),
            if p.exists() {
                IoError::new(ErrorKind::NotADirectory, "a file, not a dataset directory")
            } else {
                IoError::new(ErrorKind::NotFound, "no such directory")
            },
        )),
        _ => Ok(()),
    }
}

/// Local `path` as the file system resolves it, absolute: its longest
/// existing ancestor resolved (symbolic links followed), the rest taken by
/// name (`..` undoing the component before it), as the directories a write
/// would make resolve. What tells whether two paths name one place (a member
/// beside a corpus file, an output inside what it describes) where a
/// comparison by name is fooled by links.
pub fn resolved(path: &Path) -> PathBuf {
    let path = if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    };
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    let mut out = loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            break real;
        }
        match (existing.parent(), existing.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                existing = parent;
            }
            // The root: nothing exists below it.
            _ => break PathBuf::new(),
        }
    };
    for part in rest.into_iter().rev() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            part => out.push(part),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_is_told_what_lies_at_a_location_that_is_no_directory() {
        let dir = std::env::temp_dir().join(format!("dc-require-dir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("corpus.json");
        std::fs::write(&file, "{}").unwrap();
        let message = |p: &std::path::Path| {
            require_dir(&Location::Local(p.to_path_buf()))
                .unwrap_err()
                .to_string()
        };
        assert!(message(&file).ends_with("a file, not a dataset directory"));
        assert!(message(&dir.join("nothing")).ends_with("no such directory"));
        assert!(require_dir(&Location::Local(dir.clone())).is_ok());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn urls_and_paths_are_told_apart() {
        assert_eq!(
            Location::parse("s3://bucket/a/b"),
            Location::Url("s3://bucket/a/b".into())
        );
        assert_eq!(
            Location::parse("file:///tmp/x"),
            Location::Local("/tmp/x".into())
        );
        assert_eq!(
            Location::parse("data/ds"),
            Location::Local("data/ds".into())
        );
        assert_eq!(
            Location::parse("odd name:// here"),
            Location::Local("odd name:// here".into())
        );
        assert_eq!(
            Location::parse(std::path::Path::new("./x")),
            Location::Local("./x".into())
        );
    }

    #[test]
    fn stems_drop_the_directories_and_the_extension() {
        assert_eq!(location_stem("data/plate_1.dc"), "plate_1");
        assert_eq!(location_stem("s3://bucket/a/plate_1.dc/"), "plate_1");
        assert_eq!(location_stem("plain"), "plain");
        assert_eq!(location_stem(".hidden"), ".hidden");
        assert_eq!(location_stem("a.b.c"), "a.b");
    }
}
