//! Buffered stdout that treats a closed pipe (`deltacells ... | head`) as a
//! normal end rather than an error.

use std::io::{self, BufWriter, Stdout, Write};

use deltacells::{Error, Result};

/// Buffered standard output.
pub struct Out(BufWriter<Stdout>);

impl Out {
    pub fn stdout() -> Out {
        Out(BufWriter::with_capacity(1 << 16, io::stdout()))
    }

    /// Flushes; a closed pipe is not an error.
    pub fn finish(mut self) -> Result<()> {
        self.0.flush().map_err(out_err)
    }
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// An error writing to standard output (a closed pipe exits quietly).
pub fn out_err(e: io::Error) -> Error {
    if e.kind() == io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    Error::io("writing to standard output", e)
}
