//! Random access over stores where a request is expensive (object storage),
//! or over datasets larger than the cache: a read that needs a few cells of
//! a tile fetches only the tile's head (header, chunk table, indptr) and then,
//! in one coalesced call, the frames of the chunks holding those cells,
//! instead of the whole tile.
//!
//! The tile is assembled at its offsets in a zeroed buffer of its full
//! length and checked by [`TileView::parse_partial`] (every rule but the
//! whole-tile CRC); such a tile serves only the read it was fetched for and
//! is never put in the tile cache, where a later read might want other chunks.

use crate::dataset::cache::TileBytes;
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::format::manifest::{DatasetRule, Manifest};
use crate::format::tile::{Header, TileView, CHUNK_ENTRY_LEN, HEADER_LEN};
use crate::storage::{coalesce, AlignedBytes, COALESCE_GAP};

impl Dataset {
    /// Whether reading `n_cells` cells of tile `t` should fetch byte ranges:
    /// only when the read needs few of the tile's cells (a scan fetches whole
    /// tiles), and only where whole tiles would not pay off: on a store where
    /// requests are expensive, or when the dataset's tiles do not fit in a
    /// cache of `cache_bytes` (random reads would then fetch and check a whole
    /// tile, only for it to be evicted before the next read of it).
    pub(crate) fn wants_ranges(&self, t: usize, n_cells: usize, cache_bytes: usize) -> bool {
        let m = self.manifest();
        let tiles_fit = m.tile_bytes.iter().sum::<u64>() <= cache_bytes as u64;
        (self.store().is_remote() || !tiles_fit)
            && (n_cells as u64).saturating_mul(4) < m.tile_cells[t]
    }

    /// Fetches, concurrently on the I/O stage, the parts of each tile of
    /// `wanted` (a tile and the local cells needed from it) that hold the
    /// cells; with each, the bytes requested for it.
    pub(crate) fn fetch_ranged(
        &self,
        wanted: &[(usize, Vec<usize>)],
    ) -> Result<Vec<(TileBytes, u64)>> {
        self.fetcher()
            .map_concurrent(wanted, |(t, locals)| self.fetch_tile_ranges(*t, locals))
            .into_iter()
            .collect()
    }

    fn fetch_tile_ranges(&self, t: usize, locals: &[usize]) -> Result<(TileBytes, u64)> {
        let key = Manifest::tile_key(t);
        let m = self.manifest();
        let size = m.tile_bytes[t];
        // The head's length is in the header; guess it from the manifest so
        // that one request usually suffices. That request also gives the
        // object's size, met with the manifest's before anything is sized
        // by its claim (a whole fetch checks it on the bytes it got): a
        // tile cut short or replaced in a bucket is refused here, not read
        // from its intact part.
        let guess = (HEADER_LEN as u64)
            .saturating_add((CHUNK_ENTRY_LEN as u64).saturating_mul(m.n_chunks))
            .saturating_add(m.tile_cells[t].saturating_add(1).saturating_mul(8))
            .clamp((HEADER_LEN as u64).min(size), size);
        let (mut head, actual) = match self.store().get_range_sized(&key, 0..guess) {
            Err(Error::Io { error, .. }) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(DatasetRule::TileMissing { tile: t, key }.into())
            }
            got => got?,
        };
        if actual != size {
            return Err(DatasetRule::TileBytes {
                tile: t,
                manifest: size,
                actual,
            }
            .into());
        }
        let header = Header::read(head.as_bytes()).map_err(|e| Error::InTile {
            tile: t,
            error: Box::new(e.into()),
        })?;
        let head_len = header.head_len().min(size);
        if head_len > guess {
            head = self.store().get_range(&key, 0..head_len)?;
        }
        let len = usize::try_from(size).map_err(|_| {
            Error::Input(format!("tile {t} of {size} bytes does not fit in memory"))
        })?;
        let mut bytes = AlignedBytes::sparse(len)
            .map_err(|e| Error::io(format!("a buffer for the {size} bytes of tile {t}"), e))?;
        bytes.as_mut_bytes()[..head.len()].copy_from_slice(head.as_bytes());
        let frames: Vec<std::ops::Range<u64>> = {
            let view = self.check_view(t, bytes.as_bytes(), false)?;
            let mut chunks: Vec<usize> = locals
                .iter()
                .map(|&c| {
                    view.chunks()
                        .position(|e| (c as u64) < e.cell_hi)
                        .unwrap_or(0)
                })
                .collect();
            chunks.sort_unstable();
            chunks.dedup();
            chunks
                .iter()
                .flat_map(|&c| view.chunk(c).frames())
                .collect()
        };
        let parts = self.store().get_ranges(&key, &frames)?;
        let requested = (guess.max(head.len() as u64))
            + coalesce(&frames, COALESCE_GAP)
                .iter()
                .map(|r| r.end - r.start)
                .sum::<u64>();
        for (r, part) in frames.iter().zip(&parts) {
            bytes.as_mut_bytes()[r.start as usize..r.end as usize].copy_from_slice(part.as_bytes());
        }
        TileView::parse_partial(bytes.as_bytes()).map_err(|e| Error::InTile {
            tile: t,
            error: Box::new(e.into()),
        })?;
        Ok((TileBytes { bytes }, requested))
    }
}
