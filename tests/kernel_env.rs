//! `DELTACELLS_KERNEL` is honoured by the writer as by the reader: naming a
//! backend this CPU cannot run is an error for both, never a silent fallback.
//! Its own test binary, because the variable is read once per process.

use deltacells::engine::ChunkDecoder;
use deltacells::format::tile_writer::TileEncoder;
use deltacells::format::EncodeError;
use deltacells::kernels::BackendError;
use deltacells::{CsrRef, Error};

/// A backend of the other architecture: never available here.
#[cfg(target_arch = "aarch64")]
const FOREIGN: &str = "avx2";
#[cfg(not(target_arch = "aarch64"))]
const FOREIGN: &str = "neon";

#[test]
fn a_forced_backend_the_cpu_lacks_stops_the_writer_and_the_reader() {
    // Set before anything in this process reads the variable.
    std::env::set_var("DELTACELLS_KERNEL", FOREIGN);
    let written = TileEncoder::new().encode(CsrRef {
        n_cols: 10,
        indptr: &[0, 2],
        indices: &[1, 7],
        values: &[3u32, 1],
    });
    let writer = match written {
        Err(EncodeError::Backend(e)) => Some(e),
        other => panic!("writer: expected a backend error, got {other:?}"),
    };
    let reader = match ChunkDecoder::new() {
        Err(Error::Backend(e)) => Some(e),
        Err(e) => panic!("reader: expected a backend error, got {e:?}"),
        Ok(_) => None,
    };
    for (who, err) in [("writer", writer), ("reader", reader)] {
        match err {
            Some(e @ BackendError::Env { .. }) => {
                let BackendError::Env { value, reason } = &e else {
                    unreachable!()
                };
                assert_eq!(value, FOREIGN, "{who}");
                assert!(
                    matches!(**reason, BackendError::Unavailable(_)),
                    "{who}: {reason:?}"
                );
                assert!(e.to_string().contains("DELTACELLS_KERNEL"), "{who}: {e}");
            }
            other => panic!("{who}: expected a DELTACELLS_KERNEL error, got {other:?}"),
        }
    }
}
