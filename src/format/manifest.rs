//! `manifest.json`: what a dataset holds, read and written (spec "manifest.json").
//!
//! Parsing goes through `serde_json::Value` rather than a derived struct so that
//! every refusal names the rule broken ("version must be 2", "tile_cells sums to
//! 640, n_cells is 700") instead of a generic type error.

use serde_json::{Map, Value};

use crate::format::tile::HEADER_LEN;

/// The `format` value of a dataset manifest.
pub const FORMAT: &str = "deltacells-dataset";
/// The manifest version this crate reads and writes.
pub const VERSION: u64 = 2;

/// A rule of the dataset layout (spec sections "Dataset layout" and "manifest.json").
///
/// The `String` fields say what was found, in words: the rules are checked by
/// hand (not by a derived parser) so that each refusal can name the rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DatasetRule {
    /// There is no `manifest.json`. The manifest is written last, so this is
    /// a dataset whose writer has not finished (or not a dataset). Holds the
    /// dataset's location.
    #[error("{0} has no manifest.json: a dataset whose writing has not finished (the manifest is written last), or no dataset (an input folder is read after `deltacells convert IN OUT`)")]
    ManifestMissing(String),
    /// Nothing at all is stored at the location: no dataset was ever
    /// written there (a mistyped path or prefix). Holds the location.
    #[error("nothing is stored at {0}: no dataset there")]
    NothingStored(String),
    /// `manifest.json` is not valid JSON or not a JSON object; holds the
    /// parser's message.
    #[error("manifest.json is not valid JSON: {0}")]
    ManifestJson(String),
    /// A manifest field is missing or has the wrong type or range.
    #[error("manifest field `{key}`: {problem}")]
    Field {
        /// The manifest key.
        key: &'static str,
        /// What is wrong with it (`missing`, `must be a list`, ...).
        problem: String,
    },
    /// The manifest's `format` is not `"deltacells-dataset"`; holds the value
    /// found, as JSON.
    #[error("manifest format is {0}, expected \"deltacells-dataset\"")]
    Format(String),
    /// The manifest's `version` is not 2; holds the value found, as JSON.
    #[error("manifest version is {0}, this reader knows version 2")]
    Version(String),
    /// Manifest counts disagree with each other (per-tile lists of different
    /// lengths, `tile_cells` not summing to `n_cells`, a tile of fewer bytes
    /// than its cells need, ...); holds which ones and how.
    #[error("manifest counts are inconsistent: {0}")]
    Inconsistent(String),
    /// A tile object's size is not the manifest's `tile_bytes` entry.
    #[error("tile {tile} is {actual} bytes, the manifest says {manifest}")]
    TileBytes {
        /// Index of the tile.
        tile: usize,
        /// Its size in the manifest's `tile_bytes`.
        manifest: u64,
        /// The object's real size.
        actual: u64,
    },
    /// A tile the manifest lists has no object in the store.
    #[error("tile {tile} is missing ({key})")]
    TileMissing {
        /// Index of the tile.
        tile: usize,
        /// The object key it should have (`tiles/tile_NNNNNN.dct`).
        key: String,
    },
    /// A valid tile whose header disagrees with the manifest: its `n_cells`
    /// (vs `tile_cells`), `nnz` (vs `tile_nnz`) or `n_genes`.
    #[error("tile {tile} disagrees with the manifest: {problem}")]
    TileHeader {
        /// Index of the tile.
        tile: usize,
        /// Which count disagrees, with both values.
        problem: String,
    },
    /// `gene_order.npy` is missing although the manifest's `has_gene_order`
    /// says it exists, or is not `n_genes` distinct non-negative `int32`
    /// source columns; holds what is wrong.
    #[error("gene_order.npy: {0}")]
    GeneOrder(String),
    /// `var_names.txt` is missing although `has_var_names` says it exists, is
    /// not UTF-8, or does not hold one line per gene; holds what is wrong.
    #[error("var_names.txt: {0}")]
    VarNames(String),
    /// `var.parquet` is missing although `has_var_table` says it exists, is
    /// not a readable Parquet table, or does not hold one row per gene; holds
    /// what is wrong.
    #[error("var.parquet: {0}")]
    VarTable(String),
    /// The obs sidecar breaks a rule of spec section "Obs": schema, shard
    /// sizes, SHA-256 or fingerprint, row groups per tile, or column types.
    #[error("obs: {0}")]
    Obs(String),
}

/// The obs part of a manifest (present when `has_obs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObsManifest {
    /// Tiles (row groups) per shard.
    pub tiles_per_file: u64,
    /// Size of each shard in bytes.
    pub shard_bytes: Vec<u64>,
    /// SHA-256 (hex) of each shard.
    pub shard_sha256: Vec<String>,
    /// 24 hex characters identifying the obs content.
    pub fingerprint: String,
}

/// A validated manifest. Fields are named as in `manifest.json` (the obs
/// fields without their `obs_` prefix, in [`ObsManifest`]); the per-tile lists
/// have one entry per tile, in tile order.
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    /// Cells (rows) in the dataset: the sum of `tile_cells`.
    pub n_cells: u64,
    /// Genes (columns), `1 ..= 2^31`; every tile has this `n_genes`.
    pub n_genes: u32,
    /// Cells per tile; every tile but the last holds exactly this many.
    pub tile_size: u64,
    /// Cells of each tile.
    pub tile_cells: Vec<u64>,
    /// Stored nonzeros of each tile.
    pub tile_nnz: Vec<u64>,
    /// Size in bytes of each tile object; a reader checks it before parsing.
    pub tile_bytes: Vec<u64>,
    /// Encoder setting (informational).
    pub n_chunks: u64,
    /// Encoder setting (informational).
    pub zstd_level: i64,
    /// Whether `gene_order.npy` exists.
    pub has_gene_order: bool,
    /// Whether `var_names.txt` exists.
    pub has_var_names: bool,
    /// Whether `var.parquet` exists.
    pub has_var_table: bool,
    /// Present exactly when `has_obs` is true.
    pub obs: Option<ObsManifest>,
    /// Free-form metadata.
    pub metadata: Map<String, Value>,
}

fn field(key: &'static str, problem: impl Into<String>) -> DatasetRule {
    DatasetRule::Field {
        key,
        problem: problem.into(),
    }
}

fn get<'v>(obj: &'v Map<String, Value>, key: &'static str) -> Result<&'v Value, DatasetRule> {
    obj.get(key).ok_or_else(|| field(key, "missing"))
}

fn uint(obj: &Map<String, Value>, key: &'static str) -> Result<u64, DatasetRule> {
    get(obj, key)?
        .as_u64()
        .ok_or_else(|| field(key, "must be a non-negative integer"))
}

fn boolean(obj: &Map<String, Value>, key: &'static str) -> Result<bool, DatasetRule> {
    get(obj, key)?
        .as_bool()
        .ok_or_else(|| field(key, "must be true or false"))
}

fn uint_list(obj: &Map<String, Value>, key: &'static str) -> Result<Vec<u64>, DatasetRule> {
    get(obj, key)?
        .as_array()
        .ok_or_else(|| field(key, "must be a list"))?
        .iter()
        .map(|v| {
            v.as_u64()
                .ok_or_else(|| field(key, "entries must be non-negative integers"))
        })
        .collect()
}

/// One more than the most cells a tile of `bytes` bytes can hold: after the
/// header, each cell costs at least its 8-byte indptr entry, plus one closing entry.
fn max_tile_cells(bytes: u64) -> u64 {
    bytes.saturating_sub(HEADER_LEN as u64) / 8
}

fn inconsistent(msg: String) -> DatasetRule {
    DatasetRule::Inconsistent(msg)
}

impl Manifest {
    /// Number of tiles.
    pub fn n_tiles(&self) -> usize {
        self.tile_cells.len()
    }

    /// Number of obs shards `ceil(n_tiles / tiles_per_file)` for `tiles_per_file`.
    pub fn shards_for(n_tiles: usize, tiles_per_file: u64) -> usize {
        n_tiles.div_ceil(tiles_per_file.max(1) as usize)
    }

    /// Object key of tile `i`.
    pub fn tile_key(i: usize) -> String {
        format!("tiles/tile_{i:06}.dct")
    }

    /// Parses and validates manifest bytes.
    pub fn parse(bytes: &[u8]) -> Result<Manifest, DatasetRule> {
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| DatasetRule::ManifestJson(e.to_string()))?;
        let obj = value
            .as_object()
            .ok_or_else(|| DatasetRule::ManifestJson("not a JSON object".into()))?;
        match get(obj, "format")? {
            Value::String(s) if s == FORMAT => {}
            other => return Err(DatasetRule::Format(other.to_string())),
        }
        match get(obj, "version")? {
            Value::Number(n) if n.as_u64() == Some(VERSION) => {}
            other => return Err(DatasetRule::Version(other.to_string())),
        }
        let n_genes = uint(obj, "n_genes")?;
        if n_genes == 0 || n_genes > 1 << 31 {
            return Err(field("n_genes", format!("{n_genes} is outside 1..=2^31")));
        }
        let tile_size = uint(obj, "tile_size")?;
        if tile_size == 0 {
            return Err(field("tile_size", "must be at least 1"));
        }
        let has_obs = boolean(obj, "has_obs")?;
        let obs = if has_obs {
            let tiles_per_file = uint(obj, "obs_tiles_per_file")?;
            if tiles_per_file == 0 {
                return Err(field("obs_tiles_per_file", "must be at least 1"));
            }
            let shard_sha256 = get(obj, "obs_shard_sha256")?
                .as_array()
                .ok_or_else(|| field("obs_shard_sha256", "must be a list"))?
                .iter()
                .map(|v| {
                    v.as_str()
                        .filter(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
                        .map(str::to_string)
                        .ok_or_else(|| {
                            field("obs_shard_sha256", "entries must be 64 hex characters")
                        })
                })
                .collect::<Result<_, _>>()?;
            let fingerprint = get(obj, "obs_fingerprint")?
                .as_str()
                .filter(|s| s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()))
                .ok_or_else(|| field("obs_fingerprint", "must be 24 hex characters"))?
                .to_string();
            Some(ObsManifest {
                tiles_per_file,
                shard_bytes: uint_list(obj, "obs_shard_bytes")?,
                shard_sha256,
                fingerprint,
            })
        } else {
            None
        };
        let metadata = match obj.get("metadata") {
            None => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(field("metadata", "must be a JSON object")),
        };
        let m = Manifest {
            n_cells: uint(obj, "n_cells")?,
            n_genes: n_genes as u32,
            tile_size,
            tile_cells: uint_list(obj, "tile_cells")?,
            tile_nnz: uint_list(obj, "tile_nnz")?,
            tile_bytes: uint_list(obj, "tile_bytes")?,
            n_chunks: uint(obj, "n_chunks")?,
            zstd_level: get(obj, "zstd_level")?
                .as_i64()
                .ok_or_else(|| field("zstd_level", "must be an integer"))?,
            has_gene_order: boolean(obj, "has_gene_order")?,
            has_var_names: boolean(obj, "has_var_names")?,
            has_var_table: boolean(obj, "has_var_table")?,
            obs,
            metadata,
        };
        m.validate()?;
        Ok(m)
    }

    /// Checks that every count agrees with every other.
    pub fn validate(&self) -> Result<(), DatasetRule> {
        let n = self.tile_cells.len();
        for (key, len) in [
            ("tile_nnz", self.tile_nnz.len()),
            ("tile_bytes", self.tile_bytes.len()),
        ] {
            if len != n {
                return Err(inconsistent(format!(
                    "{key} has {len} entries, tile_cells has {n}"
                )));
            }
        }
        let total = self
            .tile_cells
            .iter()
            .try_fold(0u64, |a, &c| a.checked_add(c));
        if total != Some(self.n_cells) {
            return Err(inconsistent(match total {
                Some(total) => format!("tile_cells sums to {total}, n_cells is {}", self.n_cells),
                None => format!("tile_cells sums past 2^64, n_cells is {}", self.n_cells),
            }));
        }
        // Readers add these up (a dataset's bytes and nonzeros, the nonzeros
        // before a tile): each total must be a number.
        for (key, list) in [
            ("tile_nnz", &self.tile_nnz),
            ("tile_bytes", &self.tile_bytes),
        ] {
            if list
                .iter()
                .try_fold(0u64, |a, &v| a.checked_add(v))
                .is_none()
            {
                return Err(inconsistent(format!("{key} sums past 2^64")));
            }
        }
        if let Some((last, full)) = self.tile_cells.split_last() {
            if *last == 0 || *last > self.tile_size {
                return Err(inconsistent(format!(
                    "the last tile holds {last} cells (must be 1..={})",
                    self.tile_size
                )));
            }
            if let Some(t) = full.iter().position(|&c| c != self.tile_size) {
                return Err(inconsistent(format!(
                    "tile {t} holds {} cells; every tile but the last holds tile_size = {}",
                    full[t], self.tile_size
                )));
            }
        }
        // Bound every cell count by the bytes that hold it (a tile stores a
        // header and `cells + 1` 8-byte indptr entries), so that nothing sized
        // by a claimed count is allocated before the tile is read.
        for (t, (&cells, &bytes)) in self.tile_cells.iter().zip(&self.tile_bytes).enumerate() {
            if cells >= max_tile_cells(bytes) {
                return Err(inconsistent(format!(
                    "tile {t} claims {cells} cells, but its {bytes} bytes hold at most {}",
                    max_tile_cells(bytes).saturating_sub(1)
                )));
            }
        }
        if let Some(obs) = &self.obs {
            let shards = Manifest::shards_for(n, obs.tiles_per_file);
            for (key, len) in [
                ("obs_shard_bytes", obs.shard_bytes.len()),
                ("obs_shard_sha256", obs.shard_sha256.len()),
            ] {
                if len != shards {
                    return Err(inconsistent(format!(
                        "{key} has {len} entries; {n} tiles at {} per shard make {shards} shards",
                        obs.tiles_per_file
                    )));
                }
            }
        }
        Ok(())
    }

    /// The manifest as JSON, keys in the spec's order, one-space indent.
    pub fn to_json(&self) -> Vec<u8> {
        let mut m = Map::new();
        m.insert("format".into(), FORMAT.into());
        m.insert("version".into(), VERSION.into());
        m.insert("n_cells".into(), self.n_cells.into());
        m.insert("n_genes".into(), self.n_genes.into());
        m.insert("tile_size".into(), self.tile_size.into());
        m.insert("tile_cells".into(), self.tile_cells.clone().into());
        m.insert("tile_nnz".into(), self.tile_nnz.clone().into());
        m.insert("tile_bytes".into(), self.tile_bytes.clone().into());
        m.insert("n_chunks".into(), self.n_chunks.into());
        m.insert("zstd_level".into(), self.zstd_level.into());
        m.insert("has_gene_order".into(), self.has_gene_order.into());
        m.insert("has_var_names".into(), self.has_var_names.into());
        m.insert("has_var_table".into(), self.has_var_table.into());
        m.insert("has_obs".into(), self.obs.is_some().into());
        if let Some(obs) = &self.obs {
            m.insert("obs_tiles_per_file".into(), obs.tiles_per_file.into());
            m.insert("obs_shard_bytes".into(), obs.shard_bytes.clone().into());
            m.insert("obs_shard_sha256".into(), obs.shard_sha256.clone().into());
            m.insert("obs_fingerprint".into(), obs.fingerprint.clone().into());
        }
        m.insert("metadata".into(), Value::Object(self.metadata.clone()));
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(
            &mut out,
            serde_json::ser::PrettyFormatter::with_indent(b" "),
        );
        serde::Serialize::serialize(&Value::Object(m), &mut ser).expect("a JSON value serialises");
        out.push(b'\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            n_cells: 5,
            n_genes: 10,
            tile_size: 2,
            tile_cells: vec![2, 2, 1],
            tile_nnz: vec![3, 0, 1],
            tile_bytes: vec![100, 90, 80],
            n_chunks: 8,
            zstd_level: 19,
            has_gene_order: false,
            has_var_names: true,
            has_var_table: false,
            obs: None,
            metadata: Map::new(),
        }
    }

    #[test]
    fn round_trips() {
        let m = sample();
        assert_eq!(Manifest::parse(&m.to_json()).unwrap(), m);
    }

    #[test]
    fn refuses_inconsistent_counts() {
        let mut m = sample();
        m.tile_cells = vec![2, 1, 2];
        assert!(matches!(
            Manifest::parse(&m.to_json()),
            Err(DatasetRule::Inconsistent(_))
        ));
        let mut m = sample();
        m.tile_nnz.pop();
        assert!(matches!(
            Manifest::parse(&m.to_json()),
            Err(DatasetRule::Inconsistent(_))
        ));
        // More cells than a tile's bytes can hold: refused before any read.
        let mut m = sample();
        m.tile_bytes[2] = 64 + 8;
        assert!(matches!(
            Manifest::parse(&m.to_json()),
            Err(DatasetRule::Inconsistent(ref e)) if e.contains("tile 2 claims 1 cells")
        ));
        m.tile_bytes[2] = 64 + 16;
        assert!(Manifest::parse(&m.to_json()).is_ok());
        // Totals past 2^64: readers that add them up had overflowed.
        for nnz in [true, false] {
            let mut m = sample();
            let list = if nnz {
                &mut m.tile_nnz
            } else {
                &mut m.tile_bytes
            };
            list[2] = u64::MAX;
            assert!(matches!(
                Manifest::parse(&m.to_json()),
                Err(DatasetRule::Inconsistent(ref e)) if e.contains("sums past 2^64")
            ));
        }
        let text = String::from_utf8(sample().to_json())
            .unwrap()
            .replace("\"version\": 2", "\"version\": \"2\"");
        assert!(matches!(
            Manifest::parse(text.as_bytes()),
            Err(DatasetRule::Version(_))
        ));
    }
}
