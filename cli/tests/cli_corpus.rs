//! `deltacells info` on a corpus file: the corpus's shape, gene space, obs
//! columns and a line per member; a corpus file naming a missing dataset
//! fails naming it.

mod common;
#[path = "../../tests/corpus_common/mod.rs"]
mod corpus_common;

use common::run_cli as deltacells;
use corpus_common::{write_member, ObsPlan, Scratch};
use deltacells::corpus::CorpusSpec;
use deltacells::Corpus;

#[test]
fn info_describes_a_corpus_and_names_a_missing_member() {
    let dir = Scratch::new("cli-corpus");
    let plan = ObsPlan {
        categories: vec![("cell_type", vec!["T", "B"])],
        floats: vec![],
    };
    let a = write_member(
        &dir.path().join("a.dc"),
        &["g0", "g1"],
        30,
        16,
        false,
        &plan,
        1,
    );
    let b = write_member(
        &dir.path().join("b.dc"),
        &["g2", "g1"],
        20,
        16,
        false,
        &plan,
        2,
    );
    let spec = CorpusSpec::new([
        a.location.display().to_string(),
        b.location.display().to_string(),
    ]);
    let file = dir.path().join("ab.json");
    Corpus::open_spec(spec).unwrap().save(&file).unwrap();
    let (ok, out, err) = deltacells(&["info", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        out.contains("corpus of 2 datasets, 50 cells x 3 genes"),
        "{out}"
    );
    assert!(out.contains("obs: cell_type, dataset_id"), "{out}");
    assert!(
        out.contains("member 1 b: 20 cells x 2 genes, cells from 30"),
        "{out}"
    );

    std::fs::remove_dir_all(&b.location).unwrap();
    let (ok, _, err) = deltacells(&["info", file.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("b.dc"), "{err}");
}
