//! The I/O step of every read: fetching the tiles a plan needs on the I/O
//! stage and checking them against the manifest on the pool, before anything
//! is sized by what they say.

use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;

use crate::dataset::cache::{ChunkCache, TileBytes};
use crate::dataset::read::ReadStats;
use crate::dataset::Dataset;
use crate::engine::decoded::in_tile;
use crate::engine::plan::Piece;
use crate::error::Result;
use crate::format::manifest::{DatasetRule, Manifest};
use crate::format::tile::TileView;
use crate::storage::AlignedBytes;

impl Dataset {
    /// Fetches every tile in `tiles` that the cache lacks, concurrently on
    /// the I/O stage: whole, or, for a read of a few cells on a remote store,
    /// only the byte ranges of the chunks holding the cells of `wanted`.
    pub(crate) fn fetch_tiles_for(
        &self,
        tiles: &[usize],
        wanted: &[Piece],
        cache: &ChunkCache,
        stats: &mut ReadStats,
    ) -> Result<HashMap<usize, Arc<TileBytes>>> {
        let mut out = HashMap::with_capacity(tiles.len());
        let mut missing = Vec::new();
        for &t in tiles {
            match cache.tile(t) {
                Some(b) => {
                    out.insert(t, b);
                }
                None => missing.push(t),
            }
        }
        stats.tiles_fetched += missing.len();
        let mut needed: HashMap<usize, usize> = HashMap::new();
        for p in wanted {
            *needed.entry(p.tile).or_default() += p.local.len();
        }
        let (ranged, whole): (Vec<usize>, Vec<usize>) = missing.into_iter().partition(|t| {
            let cells = needed.get(t).copied().unwrap_or(usize::MAX);
            self.wants_ranges(*t, cells, cache.capacity())
        });
        // Only tiles of which few cells are read are fetched by ranges, so
        // listing those cells one by one stays small.
        let ranged: Vec<(usize, Vec<usize>)> = ranged
            .into_iter()
            .map(|t| {
                let locals = wanted
                    .iter()
                    .filter(|p| p.tile == t)
                    .flat_map(|p| p.local.clone())
                    .collect();
                (t, locals)
            })
            .collect();
        for (&(t, _), (tile, requested)) in ranged.iter().zip(self.fetch_ranged(&ranged)?) {
            stats.bytes_fetched += requested;
            out.insert(t, Arc::new(tile));
        }
        stats.bytes_fetched += whole
            .iter()
            .map(|&t| self.manifest().tile_bytes[t])
            .sum::<u64>();
        let keys: Vec<String> = whole.iter().map(|&t| Manifest::tile_key(t)).collect();
        let objects = self.fetcher().get_many(&keys);
        let fetched: Vec<(usize, Arc<TileBytes>)> = self.engine().install(|| {
            whole
                .par_iter()
                .zip(objects)
                .map(|(&t, object)| Ok((t, Arc::new(self.check_tile(t, object?)?))))
                .collect::<Result<_>>()
        })?;
        for (t, b) in fetched {
            cache.put_tile(t, b.clone());
            out.insert(t, b);
        }
        Ok(out)
    }

    /// Fetches `tiles` on the I/O stage (taking prefetched ones) and checks
    /// them on the pool, in order.
    pub(crate) fn fetch_group(&self, tiles: std::ops::Range<usize>) -> Result<Vec<TileBytes>> {
        let keys: Vec<String> = tiles.clone().map(Manifest::tile_key).collect();
        let objects = self.fetcher().get_many(&keys);
        self.engine().install(|| {
            tiles
                .into_par_iter()
                .zip(objects)
                .map(|(t, object)| self.check_tile(t, object?))
                .collect()
        })
    }

    /// Checks fetched tile `t`: size against the manifest, every structural
    /// rule, and the header against the manifest's counts.
    pub(crate) fn check_tile(&self, t: usize, bytes: Option<AlignedBytes>) -> Result<TileBytes> {
        let bytes = bytes.ok_or_else(|| DatasetRule::TileMissing {
            tile: t,
            key: Manifest::tile_key(t),
        })?;
        self.check_view(t, bytes.as_bytes(), true)?;
        Ok(TileBytes { bytes })
    }

    /// Checks the bytes of tile `t` (`whole`: every byte is there, CRC
    /// included; else see [`TileView::parse_partial`]) against the manifest.
    pub(crate) fn check_view<'b>(
        &self,
        t: usize,
        bytes: &'b [u8],
        whole: bool,
    ) -> Result<TileView<'b>> {
        let expected = self.manifest().tile_bytes[t];
        if bytes.len() as u64 != expected {
            return Err(DatasetRule::TileBytes {
                tile: t,
                manifest: expected,
                actual: bytes.len() as u64,
            }
            .into());
        }
        let parsed = if whole {
            TileView::parse(bytes)
        } else {
            TileView::parse_partial(bytes)
        };
        let view = parsed.map_err(in_tile(t))?;
        let m = self.manifest();
        let problem = if view.n_cells() as u64 != m.tile_cells[t] {
            Some(format!(
                "{} cells, manifest says {}",
                view.n_cells(),
                m.tile_cells[t]
            ))
        } else if view.nnz() as u64 != m.tile_nnz[t] {
            Some(format!(
                "{} nonzeros, manifest says {}",
                view.nnz(),
                m.tile_nnz[t]
            ))
        } else if view.n_genes() != m.n_genes {
            Some(format!(
                "{} genes, manifest says {}",
                view.n_genes(),
                m.n_genes
            ))
        } else {
            None
        };
        match problem {
            Some(problem) => Err(DatasetRule::TileHeader { tile: t, problem }.into()),
            None => Ok(view),
        }
    }
}
