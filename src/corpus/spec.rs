//! What a corpus is made of: its members and how their genes and cells are
//! matched. A [`CorpusSpec`] is what a corpus file stores and what
//! [`super::Corpus::open_spec`] opens.

use crate::dataset::vocab::GeneSpace;
use crate::obs::DEFAULT_SOURCE_COLUMN;

/// The description of a corpus: build it with [`CorpusSpec::new`], then the
/// `with_*` setters.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CorpusSpec {
    /// The members' locations (directories or URLs), in cell order: the
    /// corpus's cells are the first member's, then the second's, ...
    pub locations: Vec<String>,
    /// Which genes the corpus has (default: the union of the members').
    pub genes: GeneSpace,
    /// The var column whose values match genes across members (default:
    /// `None`, the var index as `var_names.txt` holds it).
    pub gene_key: Option<String>,
    /// The obs column naming each cell's member by the stem of its location
    /// (default [`DEFAULT_SOURCE_COLUMN`]).
    pub source_column: String,
}

impl CorpusSpec {
    /// A corpus of the datasets at `locations`, with the defaults.
    pub fn new<S: Into<String>>(locations: impl IntoIterator<Item = S>) -> CorpusSpec {
        CorpusSpec {
            locations: locations.into_iter().map(Into::into).collect(),
            genes: GeneSpace::Union,
            gene_key: None,
            source_column: DEFAULT_SOURCE_COLUMN.into(),
        }
    }
}

crate::setters!(CorpusSpec {
    /// Sets [`CorpusSpec::genes`].
    with_genes: genes: GeneSpace,
    /// Sets [`CorpusSpec::gene_key`].
    with_gene_key: gene_key: Option<String>,
    /// Sets [`CorpusSpec::source_column`].
    with_source_column: source_column: String,
});
