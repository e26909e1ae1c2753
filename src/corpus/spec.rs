//! What a corpus is made of: its members and how their genes and cells are
//! matched. A [`CorpusSpec`] is what a corpus file stores and what
//! [`super::Corpus::open_spec`] opens.

use super::GeneSpace;

/// Default name of the obs column naming each cell's member.
pub const DEFAULT_SOURCE_COLUMN: &str = "dataset_id";

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

/// The stem of a location: its last path segment without its extension
/// (`data/plate_1.dc` and `s3://bucket/plate_1.dc/` are both `plate_1`),
/// what the source column calls a member.
pub fn location_stem(location: &str) -> String {
    let last = location
        .trim_end_matches(['/', '\\'])
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(location);
    match last.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem.to_string(),
        _ => last.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_drop_the_directories_and_the_extension() {
        assert_eq!(location_stem("data/plate_1.dc"), "plate_1");
        assert_eq!(location_stem("s3://bucket/a/plate_1.dc/"), "plate_1");
        assert_eq!(location_stem("plain"), "plain");
        assert_eq!(location_stem(".hidden"), ".hidden");
        assert_eq!(location_stem("a.b.c"), "a.b");
    }
}
