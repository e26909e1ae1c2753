//! A corpus file on arbitrary bytes: never a panic; a file that parses
//! writes back (relative to the same directory) to a file that parses to a
//! corpus of the same members, genes, gene key and source column.

#![no_main]

use std::path::Path;

use deltacells::corpus::file::corpus_file_text;
use deltacells::corpus::parse_corpus_file;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let base = Path::new("/corpora/here");
    let Ok(spec) = parse_corpus_file(data, base) else {
        return;
    };
    let text = corpus_file_text(&spec, base);
    let again = parse_corpus_file(text.as_bytes(), base).expect("a written corpus file parses");
    assert_eq!(again.locations.len(), spec.locations.len(), "{text}");
    assert_eq!(again.genes, spec.genes, "{text}");
    assert_eq!(again.gene_key, spec.gene_key, "{text}");
    assert_eq!(again.source_column, spec.source_column, "{text}");
});
