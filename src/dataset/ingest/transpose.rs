//! Out-of-core transpose: nonzeros that arrive in gene order (CSC) or in no
//! order at all (Matrix Market) come out as blocks of consecutive cells.
//!
//! The cells are split into *runs* of consecutive cells sized so that one
//! run's nonzeros fit the memory budget. Each nonzero is appended to its
//! run's temporary file as `(cell in run, gene, count)`, 12 bytes; then each
//! run is read back, counting-sorted by cell, each cell's genes sorted (so that
//! a gene given twice, which the file's own order cannot show, is refused
//! naming the source) and handed out. Memory is one
//! run plus a write buffer per run, whatever the matrix size; the disk holds
//! 12 bytes per nonzero until the conversion ends. Gene totals for sorting
//! are summed on the way in, so no second pass over the input is needed.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::csr::Csr;
use crate::error::{Error, Result};

use super::counts::Rows;

/// Most runs (open files): beyond it runs grow past the budget instead.
const MAX_RUNS: u64 = 512;

/// Bytes per nonzero in a run file.
const ENTRY: usize = 12;

/// Collects nonzeros into per-run temporary files.
pub(crate) struct Transposer {
    /// What errors call the input (its file, or the matrix in it).
    source: String,
    dir: tempfile::TempDir,
    n_cells: u64,
    n_genes: u32,
    cells_per_run: u64,
    runs: Vec<Option<BufWriter<File>>>,
    run_nnz: Vec<u64>,
    totals: Option<Vec<f64>>,
}

/// Prefix of a transpose's temporary directory, which the process id
/// follows: a transpose removes those of killed ones ([`remove_abandoned`]).
const TEMP_PREFIX: &str = "deltacells-transpose-";

/// Removes the temporary directories under `tmp` of transposes whose
/// process is gone (a killed convert's run files, about 12 bytes a
/// nonzero; a finished or failed one removes its own). Where processes
/// cannot be looked up (no `/proc`), none. Best effort: a directory that
/// cannot be removed is left, and the transpose goes on.
fn remove_abandoned(tmp: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix(TEMP_PREFIX)
            .and_then(|rest| rest.split_once('-'))
            .map(|(pid, _)| pid)
            .filter(|pid| crate::storage::is_decimal(pid));
        if let Some(pid) = pid {
            if !Path::new("/proc").join(pid).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::io(path.display().to_string(), e)
}

impl Transposer {
    /// A transpose of `n_cells` cells of `source`, expecting about
    /// `nnz_hint` nonzeros, `run_nnz` of them per run, with temporary files
    /// under `tmp`.
    pub(crate) fn new(
        source: String,
        n_cells: u64,
        n_genes: u32,
        nnz_hint: u64,
        run_nnz: usize,
        tmp: &Path,
        want_totals: bool,
    ) -> Result<Transposer> {
        remove_abandoned(tmp);
        let dir = tempfile::Builder::new()
            .prefix(&format!("{TEMP_PREFIX}{}-", std::process::id()))
            .tempdir_in(tmp)
            .map_err(|e| io_err(tmp, e))?;
        let runs = nnz_hint
            .div_ceil(run_nnz.max(1) as u64)
            .clamp(1, MAX_RUNS)
            .min(n_cells.max(1));
        let cells_per_run = n_cells.div_ceil(runs).max(1);
        if cells_per_run > u64::from(u32::MAX) {
            return Err(Error::Input(format!(
                "{n_cells} cells with so few nonzeros cannot be transposed"
            )));
        }
        let n_runs = n_cells.div_ceil(cells_per_run) as usize;
        Ok(Transposer {
            source,
            dir,
            n_cells,
            n_genes,
            cells_per_run,
            runs: (0..n_runs).map(|_| None).collect(),
            run_nnz: vec![0; n_runs],
            totals: want_totals.then(|| vec![0f64; n_genes as usize]),
        })
    }

    fn run_path(&self, run: usize) -> PathBuf {
        self.dir.path().join(format!("run_{run:04}"))
    }

    /// Adds one nonzero (the caller has checked `cell < n_cells`, `gene < n_genes`, `count > 0`).
    pub(crate) fn push(&mut self, cell: u64, gene: u32, count: u32) -> Result<()> {
        debug_assert!(cell < self.n_cells && gene < self.n_genes && count > 0);
        let run = (cell / self.cells_per_run) as usize;
        let offset = (cell % self.cells_per_run) as u32;
        if self.runs[run].is_none() {
            let path = self.run_path(run);
            let f = File::create(&path).map_err(|e| io_err(&path, e))?;
            self.runs[run] = Some(BufWriter::with_capacity(1 << 16, f));
        }
        let w = self.runs[run].as_mut().expect("opened above");
        let mut entry = [0u8; ENTRY];
        entry[..4].copy_from_slice(&offset.to_le_bytes());
        entry[4..8].copy_from_slice(&gene.to_le_bytes());
        entry[8..].copy_from_slice(&count.to_le_bytes());
        w.write_all(&entry)
            .map_err(|e| Error::io(format!("transpose run {run}"), e))?;
        self.run_nnz[run] += 1;
        if let Some(t) = &mut self.totals {
            t[gene as usize] += f64::from(count);
        }
        Ok(())
    }

    /// Closes the run files; returns the gene totals (when asked for) and the
    /// cells in order.
    pub(crate) fn finish(mut self) -> Result<(Option<Vec<f64>>, TransposedRows)> {
        for (run, w) in self.runs.iter_mut().enumerate() {
            if let Some(w) = w.take() {
                w.into_inner()
                    .map_err(|e| Error::io(format!("transpose run {run}"), e.into_error()))?;
            }
        }
        let totals = self.totals.take();
        Ok((
            totals,
            TransposedRows {
                next: 0,
                source: self,
            },
        ))
    }
}

/// The transposed cells, one run per block.
pub(crate) struct TransposedRows {
    source: Transposer,
    next: usize,
}

impl Rows for TransposedRows {
    fn next_block(&mut self) -> Result<Option<Csr<u32>>> {
        let t = &self.source;
        let run = self.next;
        if run >= t.run_nnz.len() {
            return Ok(None);
        }
        self.next += 1;
        let first = run as u64 * t.cells_per_run;
        let cells = t.cells_per_run.min(t.n_cells - first) as usize;
        let nnz = t.run_nnz[run] as usize;
        let mut bytes = vec![0u8; nnz * ENTRY];
        if nnz > 0 {
            let path = t.run_path(run);
            File::open(&path)
                .and_then(|mut f| f.read_exact(&mut bytes))
                .map_err(|e| io_err(&path, e))?;
            // The run is read: give its disk space back now.
            let _ = std::fs::remove_file(&path);
        }
        let word =
            |e: &[u8], k: usize| u32::from_le_bytes(e[k..k + 4].try_into().expect("4 bytes"));
        let mut indptr = vec![0i64; cells + 1];
        for e in bytes.chunks_exact(ENTRY) {
            indptr[word(e, 0) as usize + 1] += 1;
        }
        for c in 0..cells {
            indptr[c + 1] += indptr[c];
        }
        let mut fill: Vec<usize> = indptr[..cells].iter().map(|&p| p as usize).collect();
        let mut entries = vec![(0u32, 0u32); nnz];
        for e in bytes.chunks_exact(ENTRY) {
            let c = word(e, 0) as usize;
            entries[fill[c]] = (word(e, 4), word(e, 8));
            fill[c] += 1;
        }
        // Peak memory stays at 20 bytes per nonzero: the run file's bytes go
        // before the entries are split into indices and values.
        drop(bytes);
        for (c, w) in indptr.windows(2).enumerate() {
            let row = &mut entries[w[0] as usize..w[1] as usize];
            row.sort_unstable_by_key(|e| e.0);
            if let Some(p) = row.windows(2).find(|p| p[0].0 == p[1].0) {
                return Err(Error::Input(format!(
                    "{}: cell {} has two entries for gene {} (0-based)",
                    t.source,
                    first + c as u64,
                    p[0].0
                )));
            }
        }
        let indices = entries.iter().map(|e| e.0 as i32).collect();
        let values = entries.iter().map(|e| e.1).collect();
        Ok(Some(Csr {
            n_cols: u64::from(t.n_genes),
            indptr,
            indices,
            values,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_in_any_order_come_out_by_cell_in_runs() {
        let tmp = std::env::temp_dir();
        // 10 cells, about 2 nonzeros per run: several runs.
        let mut t = Transposer::new("m".into(), 10, 3, 12, 2, &tmp, true).unwrap();
        let entries = [
            (9, 0, 1),
            (0, 2, 5),
            (4, 1, 2),
            (0, 0, 3),
            (9, 2, 7),
            (5, 1, 1),
        ];
        for &(c, g, v) in &entries {
            t.push(c, g, v).unwrap();
        }
        let (totals, mut rows) = t.finish().unwrap();
        assert_eq!(totals.unwrap(), vec![4.0, 3.0, 12.0]);
        let mut cells: Vec<Vec<(i32, u32)>> = Vec::new();
        while let Some(b) = rows.next_block().unwrap() {
            assert!(b.n_rows() > 0);
            for w in b.indptr.windows(2) {
                let mut row: Vec<(i32, u32)> = (w[0] as usize..w[1] as usize)
                    .map(|j| (b.indices[j], b.values[j]))
                    .collect();
                row.sort_unstable();
                cells.push(row);
            }
        }
        assert_eq!(cells.len(), 10);
        assert_eq!(cells[0], vec![(0, 3), (2, 5)]);
        assert_eq!(cells[4], vec![(1, 2)]);
        assert_eq!(cells[9], vec![(0, 1), (2, 7)]);
        assert!(cells[1].is_empty() && cells[8].is_empty());
    }

    #[test]
    fn a_gene_given_twice_for_a_cell_is_refused_naming_the_source() {
        let mut t =
            Transposer::new("m.mtx".into(), 3, 4, 4, 100, &std::env::temp_dir(), false).unwrap();
        for &(c, g) in &[(1, 3), (2, 0), (1, 0), (1, 3)] {
            t.push(c, g, 1).unwrap();
        }
        let err = t.finish().unwrap().1.next_block().unwrap_err().to_string();
        assert!(
            err.contains("m.mtx: cell 1 has two entries for gene 3"),
            "{err}"
        );
    }
}
