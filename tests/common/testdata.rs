//! Where the shared test data lies, for every test helper module (the
//! library's tests and the command-line tool's include this file).

use std::path::{Path, PathBuf};

/// `shared/testdata` beside the repository root (where CI lays it too): the
/// nearest one at or above the directory of the package under test, the
/// library's or the command-line tool's.
pub fn testdata() -> PathBuf {
    let package = Path::new(env!("CARGO_MANIFEST_DIR"));
    package
        .ancestors()
        .map(|dir| dir.join("shared/testdata"))
        .find(|dir| dir.is_dir())
        .unwrap_or_else(|| package.join("../shared/testdata"))
}
