//! libFuzzer's Rust glue installs a panic hook that aborts on *every* panic,
//! before unwinding, so even a panic the library catches counts as a crash.
//! The library does catch panics on purpose in one place: the parquet and
//! arrow decoders, run under `obs::reader::guarded`, whose panics on corrupt
//! data become typed errors. Targets that reach those decoders put the
//! default hook back. A panic that escapes the target still fails the run:
//! libfuzzer-sys aborts when the target unwinds.

use std::sync::Once;

/// Lets panics caught inside the library stay caught (see the module docs).
pub fn allow() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| drop(std::panic::take_hook()));
}
