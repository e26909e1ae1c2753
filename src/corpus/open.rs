//! An open corpus: its members opened on one decode pool, their genes matched
//! into one vocabulary and their obs into one schema.

use std::sync::Arc;

use super::spec::CorpusSpec;
use crate::dataset::vocab::{dataset_keys, InputGenes, Vocabulary};
use crate::dataset::{Dataset, OpenOptions};
use crate::engine::{Engine, GeneSelection};
use crate::error::{Error, Result};
use crate::obs::{InputObs, ObsSchema, ObsUnion, SourceColumn, DEFAULT_MAX_CATEGORIES};
use crate::storage::location_stem;
use crate::storage::{FetchThreads, Location};

/// Members opened at once (each open reads a manifest and the side files,
/// a round trip or a few on an object store).
const OPENING_AT_ONCE: usize = 16;

/// One dataset of a corpus.
pub struct Member {
    location: String,
    name: String,
    dataset: Dataset,
    /// Its genes into the vocabulary; `None` when they are the vocabulary's
    /// first genes, in order (rows then decode unmapped, in place).
    mapping: Option<GeneSelection>,
}

impl Member {
    /// The location, as the corpus names it (relative paths of a corpus
    /// file resolved against its directory).
    pub fn location(&self) -> &str {
        &self.location
    }

    /// What the source column calls it: its location's stem.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The dataset.
    pub fn dataset(&self) -> &Dataset {
        &self.dataset
    }

    /// Its genes into the vocabulary (`None`: its genes are the vocabulary's
    /// first genes, in its order, so its rows read unmapped, decoded in
    /// place: the first member of a union, every member of a corpus of
    /// datasets with the same genes).
    pub fn mapping(&self) -> Option<&GeneSelection> {
        self.mapping.as_ref()
    }
}

/// Several datasets read as one matrix over one gene vocabulary: the cells
/// are the members' cells in member order, each member's genes mapped into
/// the vocabulary as its rows are decoded (a vocabulary gene it lacks reads
/// as zero, a gene outside the vocabulary is dropped). Nothing is rewritten:
/// adding a dataset is converting it alone and listing it. A cheap handle:
/// clones share the members.
#[derive(Clone)]
pub struct Corpus {
    inner: Arc<Inner>,
}

/// The corpus's members and shape.
impl std::fmt::Debug for Corpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Corpus")
            .field("members", &self.inner.members.len())
            .field("n_cells", &self.n_cells())
            .field("n_genes", &self.n_genes())
            .finish_non_exhaustive()
    }
}

struct Inner {
    spec: CorpusSpec,
    members: Vec<Member>,
    vocabulary: Vocabulary,
    /// First corpus cell of each member, then the number of cells.
    limits: Vec<u64>,
    obs: ObsUnion,
    engine: Arc<Engine>,
}

impl Corpus {
    /// A number no other open corpus or dataset has while this one lives.
    pub(crate) fn identity(&self) -> usize {
        Arc::as_ptr(&self.inner) as *const () as usize
    }

    /// Opens the corpus `spec` describes with default options.
    pub fn open_spec(spec: CorpusSpec) -> Result<Corpus> {
        Corpus::open_spec_with(spec, OpenOptions::default())
    }

    /// Opens the corpus `spec` describes: every member on one decode pool
    /// (`options.engine`), sharing `options.cache_bytes` and
    /// `options.fetch_in_flight` between them. Errors name the member.
    pub fn open_spec_with(spec: CorpusSpec, options: OpenOptions) -> Result<Corpus> {
        if spec.locations.is_empty() {
            return Err(Error::Input("a corpus needs at least one dataset".into()));
        }
        // As a corpus file refuses them, so that a corpus saves to a file
        // that opens again.
        if spec.source_column.is_empty() || spec.gene_key.as_deref() == Some("") {
            return Err(Error::Input(
                "a corpus's source_column and gene_key are names, not empty".into(),
            ));
        }
        // Local members by absolute path: the spec is what a pickled corpus
        // (a Dask task's) reopens from, in a process whose working directory
        // may be another.
        let spec = CorpusSpec {
            locations: spec.locations.iter().map(|l| absolute(l)).collect(),
            ..spec
        };
        let engine = Arc::new(Engine::new(options.engine.clone())?);
        // One set of I/O threads for every member: threads of each member's
        // own, at least two apiece, came to thousands for a corpus of
        // thousands of files.
        let fetch = FetchThreads::new(options.fetch_in_flight)?;
        let n = spec.locations.len();
        let each = options
            .clone()
            .with_cache_bytes(options.cache_bytes / n)
            .with_fetch_in_flight(options.fetch_in_flight.div_ceil(n).max(2));
        let datasets = open_all(&spec.locations, &each, &engine, &fetch)?;
        let mut genes = Vec::with_capacity(n);
        for (location, ds) in spec.locations.iter().zip(&datasets) {
            let keys = dataset_keys(ds, spec.gene_key.as_deref(), location)?;
            genes.push(InputGenes {
                name: location.clone(),
                keys,
            });
        }
        let vocabulary = Vocabulary::build(&genes, &spec.genes)?;
        let names: Vec<String> = spec.locations.iter().map(|l| location_stem(l)).collect();
        let empty = ObsSchema {
            columns: Vec::new(),
        };
        let inputs: Vec<InputObs<'_>> = spec
            .locations
            .iter()
            .zip(&datasets)
            .map(|(name, ds)| InputObs {
                name,
                schema: ds.obs().map_or(&empty, |o| o.schema()),
            })
            .collect();
        let source = SourceColumn {
            name: spec.source_column.clone(),
            values: names.clone(),
        };
        let obs = ObsUnion::new(&inputs, Some(&source), DEFAULT_MAX_CATEGORIES)?;
        let mut limits = vec![0u64];
        let mut members = Vec::with_capacity(n);
        for (i, ((dataset, location), name)) in datasets
            .into_iter()
            .zip(&spec.locations)
            .zip(names)
            .enumerate()
        {
            limits.push(limits[i] + dataset.n_cells());
            let columns = vocabulary.columns(i);
            let leading = columns
                .iter()
                .enumerate()
                .all(|(g, c)| *c == Some(g as u32));
            let mapping = if leading {
                None
            } else {
                Some(GeneSelection::mapping(
                    dataset.n_genes(),
                    columns,
                    vocabulary.len() as u32,
                )?)
            };
            members.push(Member {
                location: location.clone(),
                name,
                dataset,
                mapping,
            });
        }
        Ok(Corpus {
            inner: Arc::new(Inner {
                spec,
                members,
                vocabulary,
                limits,
                obs,
                engine,
            }),
        })
    }

    /// What the corpus was opened from.
    pub fn spec(&self) -> &CorpusSpec {
        &self.inner.spec
    }

    /// The members, in cell order.
    pub fn members(&self) -> &[Member] {
        &self.inner.members
    }

    /// The gene vocabulary: the corpus's columns.
    pub fn vocabulary(&self) -> &Vocabulary {
        &self.inner.vocabulary
    }

    /// The vocabulary's gene keys, in column order.
    pub fn var_names(&self) -> &[String] {
        self.inner.vocabulary.keys()
    }

    /// Number of cells: every member's.
    pub fn n_cells(&self) -> u64 {
        self.inner.limits[self.inner.limits.len() - 1]
    }

    /// Number of genes (output columns): the vocabulary's.
    pub fn n_genes(&self) -> u32 {
        self.inner.vocabulary.len() as u32
    }

    /// First corpus cell of each member, then the number of cells.
    pub fn limits(&self) -> &[u64] {
        &self.inner.limits
    }

    /// Member and member-local cell of corpus cell `cell`.
    pub fn locate(&self, cell: u64) -> Result<(usize, u64)> {
        if cell >= self.n_cells() {
            return Err(Error::Input(format!(
                "cell {cell} is outside 0..{}",
                self.n_cells()
            )));
        }
        let m = self.inner.limits.partition_point(|&l| l <= cell) - 1;
        Ok((m, cell - self.inner.limits[m]))
    }

    /// The unified obs: every member's columns (missing where a member
    /// lacks one), category vocabularies merged, and the source column.
    pub fn obs_union(&self) -> &ObsUnion {
        &self.inner.obs
    }

    /// The unified obs schema (see [`Corpus::obs_union`]).
    pub fn obs_schema(&self) -> &ObsSchema {
        self.inner.obs.schema()
    }

    /// The decode pool every member decodes on.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }
}

/// Opens every location on `engine`, a few at once; errors name the member.
fn open_all(
    locations: &[String],
    options: &OpenOptions,
    engine: &Arc<Engine>,
    fetch: &Arc<FetchThreads>,
) -> Result<Vec<Dataset>> {
    let mut out = Vec::with_capacity(locations.len());
    for group in locations.chunks(OPENING_AT_ONCE) {
        let opened: Vec<Result<Dataset>> = std::thread::scope(|s| {
            let handles: Vec<_> = group
                .iter()
                .map(|location| {
                    s.spawn(move || {
                        Dataset::open_at_sharing(
                            &Location::parse(location),
                            options.clone(),
                            engine.clone(),
                            fetch.clone(),
                        )
                        .map_err(Error::in_member(location.as_str()))
                    })
                })
                .collect();
            handles
                .into_iter()
                .zip(group)
                .map(|(h, location)| {
                    h.join().unwrap_or_else(|p| {
                        Err(Error::panicked(format!("opening {location}"), p.as_ref()))
                    })
                })
                .collect()
        });
        for ds in opened {
            out.push(ds?);
        }
    }
    Ok(out)
}

/// A relative local path made absolute against the working directory (by
/// name: no symbolic link is followed); URLs and absolute paths as they are.
fn absolute(location: &str) -> String {
    match Location::parse(location) {
        Location::Local(p) if p.is_relative() => std::path::absolute(&p)
            .map_or_else(|_| location.to_string(), |a| a.display().to_string()),
        _ => location.to_string(),
    }
}
