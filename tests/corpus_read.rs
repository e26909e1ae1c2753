//! A corpus of separately written datasets with different genes (subsets,
//! orders, sorted by totals or not) and obs (different columns and
//! categories) reads as one matrix in one vocabulary: every read checked
//! against the written counts placed by gene name, every label against the
//! written values; and bad corpora are refused naming the member.

mod corpus_common;

use corpus_common::{
    dense_of, expected_dense, expected_transformed, member_of, write_member, Lcg, ObsPlan, Scratch,
    Written,
};
use deltacells::corpus::{CorpusSpec, GeneSpace};
use deltacells::dataset::OpenOptions;
use deltacells::engine::Transform;
use deltacells::{CellSelection, Corpus, Csr, Dataset, GeneSelection};

/// Three members: `a` sorted by totals with cell types T/B and a score, `b`
/// with other genes in another order and cell types B/NK and a batch, `c`
/// with no obs at all.
fn three(dir: &std::path::Path) -> Vec<Written> {
    let a = write_member(
        &dir.join("a.dc"),
        &["g0", "g1", "g2", "g3", "g4"],
        300,
        64,
        true,
        &ObsPlan {
            categories: vec![("cell_type", vec!["T", "B"])],
            floats: vec!["score"],
        },
        1,
    );
    let b = write_member(
        &dir.join("b.dc"),
        &["g7", "g2", "g0", "g6"],
        170,
        50,
        false,
        &ObsPlan {
            categories: vec![("cell_type", vec!["B", "NK"]), ("batch", vec!["x", "y"])],
            floats: vec![],
        },
        2,
    );
    let c = write_member(
        &dir.join("c"),
        &["g4", "g3", "g2", "g1", "g0"],
        90,
        40,
        false,
        &ObsPlan {
            categories: vec![],
            floats: vec![],
        },
        3,
    );
    vec![a, b, c]
}

fn spec(members: &[Written]) -> CorpusSpec {
    CorpusSpec::new(members.iter().map(|w| w.location.display().to_string()))
}

#[test]
fn a_union_corpus_reads_every_member_in_one_vocabulary() {
    let dir = Scratch::new("corpus-union");
    let members = three(dir.path());
    let corpus = Corpus::open_spec(spec(&members)).unwrap();
    // The union in the order first seen: each member's genes as it stores them.
    let mut want_vocab: Vec<String> = Vec::new();
    for w in &members {
        let ds = Dataset::open(&w.location).unwrap();
        for g in ds.var_names().unwrap() {
            if !want_vocab.contains(g) {
                want_vocab.push(g.clone());
            }
        }
    }
    assert_eq!(corpus.var_names(), want_vocab);
    assert_eq!(corpus.n_genes() as usize, 7);
    assert_eq!(corpus.n_cells(), 560);
    assert_eq!(corpus.limits(), [0, 300, 470, 560]);
    let vocab = corpus.var_names().to_vec();
    // `a` is sorted by totals, so it stores the union's first five genes in
    // order and reads unmapped; `b` and `c` are mapped.
    assert!(corpus.members()[0].mapping().is_none());
    assert!(corpus.members()[1].mapping().is_some());
    assert!(corpus.members()[2].mapping().is_some());

    let all: Vec<u64> = (0..560).collect();
    let csr = corpus.read(0..560).csr::<i32>().unwrap();
    assert_eq!(csr.csr.n_cols, 7);
    assert_eq!(dense_of(&csr.csr), expected_dense(&members, &vocab, &all));
    for r in 0..csr.csr.n_rows() {
        let row = &csr.csr.indices[csr.csr.indptr[r] as usize..csr.csr.indptr[r + 1] as usize];
        assert!(row.windows(2).all(|w| w[0] < w[1]), "row {r} sorted");
    }
    let dense = corpus.read(0..560).dense::<f32>().unwrap();
    let want: Vec<f32> = expected_dense(&members, &vocab, &all)
        .iter()
        .map(|&v| v as f32)
        .collect();
    assert_eq!(dense.rows.data(), want);

    // Random cells across members, duplicates and runs crossing members.
    let mut rng = Lcg(9);
    let mut ids: Vec<u64> = (0..200).map(|_| rng.below(560)).collect();
    ids.extend([299, 300, 301, 469, 470, 559, 0, 0]);
    let got = corpus.read(&ids).dense::<i32>().unwrap();
    assert_eq!(got.cells, ids);
    assert_eq!(got.rows.data(), expected_dense(&members, &vocab, &ids));
    let mut reused = Csr::<i32>::empty(0);
    corpus.read(&ids).uncached().csr_into(&mut reused).unwrap();
    assert_eq!(dense_of(&reused), expected_dense(&members, &vocab, &ids));

    // A gene selection of vocabulary genes, out of order.
    let picked = [6u32, 0, 3];
    let genes = GeneSelection::new(7, &picked).unwrap();
    let got = corpus.read(&ids).genes(&genes).dense::<i32>().unwrap();
    let names: Vec<String> = picked.iter().map(|&g| vocab[g as usize].clone()).collect();
    assert_eq!(got.rows.data(), expected_dense(&members, &names, &ids));
    let got = corpus.read(&ids).genes(&genes).csr::<i32>().unwrap();
    assert_eq!(dense_of(&got.csr), expected_dense(&members, &names, &ids));
    let mask: Vec<bool> = (0..560).map(|i| i % 7 == 3).collect();
    let masked = corpus
        .read(CellSelection::mask(&mask))
        .csr::<i32>()
        .unwrap();
    let kept: Vec<u64> = (0..560).filter(|i| i % 7 == 3).collect();
    assert_eq!(
        dense_of(&masked.csr),
        expected_dense(&members, &vocab, &kept)
    );

    assert!(corpus.read([560]).csr::<i32>().is_err());
    // A selection built for other genes than the vocabulary's is refused,
    // transformed or not.
    let wrong = GeneSelection::new(5, &[0]).unwrap();
    let refusals = [
        corpus.read(0..3).genes(&wrong).csr::<i32>().unwrap_err(),
        corpus
            .read(0..3)
            .genes(&wrong)
            .normalize(1e4)
            .csr::<f32>()
            .unwrap_err(),
        corpus
            .read(0..3)
            .genes(&wrong)
            .log1p()
            .dense::<f32>()
            .unwrap_err(),
    ];
    for e in refusals {
        let want = "gene selection built for 5 genes, the corpus has 7";
        assert!(e.to_string().contains(want), "{e}");
    }
}

#[test]
fn the_members_fetch_on_one_set_of_threads() {
    // Each member started threads of its own, at least two: thousands for a
    // corpus of thousands of files.
    let dir = Scratch::new("corpus-fetch-threads");
    let members = three(dir.path());
    let options = OpenOptions::default().with_fetch_in_flight(5);
    let corpus = Corpus::open_spec_with(spec(&members), options).unwrap();
    let first = corpus.members()[0].dataset().fetcher().threads();
    assert_eq!(first.threads(), 5);
    for m in corpus.members() {
        assert!(std::sync::Arc::ptr_eq(
            m.dataset().fetcher().threads(),
            first
        ));
    }
    // Reads of every member go through them.
    let all: Vec<u64> = (0..corpus.n_cells()).collect();
    let batch = corpus.read(&all).csr::<i32>().unwrap();
    assert_eq!(batch.csr.indptr.len() as u64, corpus.n_cells() + 1);
    assert!(batch.stats.tiles_fetched >= members.len());
}

#[test]
fn intersections_lists_and_gene_keys_choose_the_vocabulary() {
    let dir = Scratch::new("corpus-spaces");
    let members = three(dir.path());
    let all: Vec<u64> = (0..560).collect();
    let inter = Corpus::open_spec(spec(&members).with_genes(GeneSpace::Intersection)).unwrap();
    let mut names = inter.var_names().to_vec();
    names.sort();
    assert_eq!(names, ["g0", "g2"]);
    let got = inter.read(0..560).dense::<i32>().unwrap();
    assert_eq!(
        got.rows.data(),
        expected_dense(&members, inter.var_names(), &all)
    );

    let listed = GeneSpace::listed(vec!["g6".into(), "nope".into(), "g1".into()]).unwrap();
    let list = Corpus::open_spec(spec(&members).with_genes(listed)).unwrap();
    assert_eq!(list.var_names(), ["g6", "nope", "g1"]);
    let got = list.read(0..560).csr::<i32>().unwrap();
    assert_eq!(
        dense_of(&got.csr),
        expected_dense(&members, list.var_names(), &all)
    );

    // Matched by the var column of ids instead: the same matrix, keyed `E..`.
    let keyed = Corpus::open_spec(spec(&members).with_gene_key(Some("ensembl".into()))).unwrap();
    let by_name: Vec<String> = keyed
        .var_names()
        .iter()
        .map(|k| k.strip_prefix('E').unwrap().to_string())
        .collect();
    let got = keyed.read(0..560).dense::<i32>().unwrap();
    assert_eq!(got.rows.data(), expected_dense(&members, &by_name, &all));
}

#[test]
fn labels_are_unified_with_the_source_column() {
    let dir = Scratch::new("corpus-obs");
    let members = three(dir.path());
    let corpus = Corpus::open_spec(spec(&members)).unwrap();
    let schema = corpus.obs_schema();
    assert_eq!(
        schema.names(),
        ["cell_type", "score", "batch", "dataset_id"]
    );
    let types = schema.columns[0].categories.clone().unwrap();
    assert_eq!(&types[..], ["B", "NK", "T"], "the sorted union");
    let source = schema.columns[3].categories.clone().unwrap();
    assert_eq!(&source[..], ["a", "b", "c"], "the members' stems");

    let cache = Scratch::new("corpus-obs-cache");
    let obs = corpus
        .localize(
            &["dataset_id", "cell_type", "score", "batch"],
            Some(cache.path()),
        )
        .unwrap();
    let mut rng = Lcg(4);
    let ids: Vec<u64> = (0..300).map(|_| rng.below(560)).collect();
    let labels = obs.labels(&ids).unwrap();
    let names = ["a", "b", "c"];
    for (row, &cell) in ids.iter().enumerate() {
        let (m, local) = member_of(&members, cell);
        let written = |column: &str| {
            members[m]
                .obs
                .iter()
                .find(|(n, _)| n == column)
                .and_then(|(_, v)| v[local].clone())
        };
        let source = labels.get("dataset_id").unwrap();
        assert_eq!(source.category(row), Some(names[m]));
        let ct = labels.get("cell_type").unwrap();
        assert_eq!(ct.category(row).map(str::to_string), written("cell_type"));
        let batch = labels.get("batch").unwrap();
        assert_eq!(batch.category(row).map(str::to_string), written("batch"));
        let score = labels.get("score").unwrap().json_value(row);
        let want = written("score").map(|s| s.parse::<f64>().unwrap());
        assert_eq!(score.as_f64(), want, "cell {cell}");
    }
    assert!(corpus.localize(&["nope"], Some(cache.path())).is_err());
}

#[test]
fn bad_corpora_are_refused_naming_the_member() {
    let dir = Scratch::new("corpus-bad");
    let members = three(dir.path());
    let missing = dir.path().join("gone.dc").display().to_string();
    let mut locations: Vec<String> = members
        .iter()
        .map(|w| w.location.display().to_string())
        .collect();
    locations.push(missing.clone());
    let err = Corpus::open_spec(CorpusSpec::new(locations)).err().unwrap();
    assert!(err.to_string().contains(&missing), "{err}");

    let err = Corpus::open_spec(spec(&members).with_gene_key(Some("symbol".into())))
        .err()
        .unwrap();
    let msg = err.to_string();
    assert!(msg.contains("a.dc") && msg.contains("\"symbol\""), "{msg}");

    let other = write_member(
        &dir.path().join("other.dc"),
        &["z1", "z2"],
        10,
        8,
        false,
        &ObsPlan {
            categories: vec![],
            floats: vec![],
        },
        5,
    );
    let disjoint = CorpusSpec::new([
        members[0].location.display().to_string(),
        other.location.display().to_string(),
    ])
    .with_genes(GeneSpace::Intersection);
    let msg = Corpus::open_spec(disjoint).err().unwrap().to_string();
    assert!(
        msg.contains("no gene in common") && msg.contains("other.dc"),
        "{msg}"
    );
    assert!(Corpus::open_spec(CorpusSpec::new(Vec::<String>::new())).is_err());
    // Names a corpus file refuses, so a corpus could not be saved and opened
    // again with them.
    for bad in [
        spec(&members).with_source_column(String::new()),
        spec(&members).with_gene_key(Some(String::new())),
    ] {
        let msg = Corpus::open_spec(bad).err().unwrap().to_string();
        assert!(msg.contains("not empty"), "{msg}");
    }
    // Two members with one stem clash in the source column.
    let twice = CorpusSpec::new([
        members[0].location.display().to_string(),
        members[0].location.display().to_string(),
    ]);
    assert!(Corpus::open_spec(twice).is_err());
}

#[test]
fn a_saved_corpus_opens_again_and_names_a_missing_member() {
    let dir = Scratch::new("corpus-file");
    let members = three(dir.path());
    let spec = spec(&members)
        .with_genes(GeneSpace::Intersection)
        .with_source_column("plate".into());
    let corpus = Corpus::open_spec(spec).unwrap();
    let file = dir.path().join("all.corpus.json");
    // Writers of one path at once each write a temporary file of their
    // own: the file is whole after them, and nothing is left beside it.
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| corpus.save(&file).unwrap());
        }
    });
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let text = std::fs::read_to_string(&file).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["format"], "deltacells-corpus");
    assert_eq!(value["version"], 1);
    assert_eq!(
        value["members"],
        serde_json::json!(["a.dc", "b.dc", "c"]),
        "relative to the file's directory"
    );
    let again = Corpus::open(&file).unwrap();
    assert_eq!(again.var_names(), corpus.var_names());
    assert_eq!(again.obs_schema(), corpus.obs_schema());
    assert_eq!(again.obs_schema().names().last(), Some(&"plate"));
    let ids: Vec<u64> = (0..560).rev().collect();
    assert_eq!(
        again.read(&ids).csr::<i32>().unwrap().csr,
        corpus.read(&ids).csr::<i32>().unwrap().csr
    );

    // The directory moves as a whole: the file still finds its members.
    let moved = dir.path().join("moved");
    std::fs::create_dir(&moved).unwrap();
    for name in ["a.dc", "b.dc", "c", "all.corpus.json"] {
        std::fs::rename(dir.path().join(name), moved.join(name)).unwrap();
    }
    let moved_file = moved.join("all.corpus.json");
    assert_eq!(Corpus::open(&moved_file).unwrap().n_cells(), 560);

    // A member gone: the error names it; a broken file: the file.
    std::fs::remove_dir_all(moved.join("b.dc")).unwrap();
    let msg = Corpus::open(&moved_file).err().unwrap().to_string();
    assert!(msg.contains("b.dc"), "{msg}");
    std::fs::write(
        &moved_file,
        "{\"format\": \"deltacells-corpus\", \"version\": 9}",
    )
    .unwrap();
    let err = Corpus::open(&moved_file).err().unwrap();
    assert!(
        matches!(err, deltacells::Error::CorpusFile { ref file, .. } if file.contains("all.corpus.json")),
        "{err}"
    );
    assert!(Corpus::open(moved.join("none.json")).is_err());
}

#[test]
fn gene_statistics_cover_every_member_in_the_vocabulary() {
    // Each vocabulary gene's statistics over every cell of every member: a
    // member without the gene counts its cells as zeros, and a cell's
    // normalized counts divide by its total over all of its member's genes
    // (the intersection drops genes the totals still count).
    let dir = Scratch::new("corpus-stats");
    let members = three(dir.path());
    for space in [GeneSpace::Union, GeneSpace::Intersection] {
        let corpus = Corpus::open_spec(spec(&members).with_genes(space.clone())).unwrap();
        let table = corpus.gene_stats().unwrap().table();
        let vocab = corpus.var_names();
        let n_obs: usize = members.iter().map(|w| w.cells.len()).sum();
        assert_eq!(table.len(), vocab.len(), "{space:?}");
        for (g, name) in vocab.iter().enumerate() {
            let (mut n_cells, mut sum, mut sum_sq) = (0u64, 0u64, 0u128);
            let mut normalized = Vec::new();
            for w in &members {
                for cell in &w.cells {
                    let total: u64 = cell.values().map(|&c| u64::from(c)).sum();
                    if let Some(&c) = cell.get(name).filter(|&&c| c > 0) {
                        n_cells += 1;
                        sum += u64::from(c);
                        sum_sq += u128::from(c) * u128::from(c);
                        normalized.push(deltacells::dataset::gene_stats::normalized(c, total));
                    }
                }
            }
            let case = format!("{space:?} gene {name}");
            assert_eq!((table.n_cells[g], table.sum[g]), (n_cells, sum), "{case}");
            let n = n_obs as f64;
            assert_eq!(table.mean[g], sum as f64 / n, "{case}");
            let exact_var =
                (n_obs as u128 * sum_sq - u128::from(sum) * u128::from(sum)) as f64 / n / n;
            assert_eq!(table.var[g], exact_var, "{case}");
            let norm_mean = normalized.iter().sum::<f64>() / n;
            assert!(
                (table.norm_mean[g] - norm_mean).abs() <= 1e-9 * norm_mean.max(1.0),
                "{case}"
            );
            normalized.sort_by(f64::total_cmp);
            match normalized.get(normalized.len().saturating_sub(1) / 2) {
                Some(&median) => assert!(
                    (table.norm_median[g] - median).abs() <= 0.01 * median,
                    "{case}: {} against {median}",
                    table.norm_median[g]
                ),
                None => assert!(table.norm_median[g].is_nan(), "{case}"),
            }
        }
    }
}

#[test]
fn normalized_reads_divide_by_the_total_over_all_of_a_members_genes() {
    // As a dataset's normalized read, before any gene is dropped: the
    // intersection and a selection leave each cell's total as its member
    // has it, in CSR and dense alike, for cells of every member in any order.
    let dir = Scratch::new("corpus-normalized-read");
    let members = three(dir.path());
    let transform = Transform::NONE.normalize(1e4).log1p();
    let n_cells: u64 = members.iter().map(|w| w.cells.len() as u64).sum();
    let cells: Vec<u64> = (0..n_cells).rev().step_by(3).chain([0, 0]).collect();
    for (space, picks) in [
        (GeneSpace::Union, None),
        (GeneSpace::Intersection, None),
        (GeneSpace::Union, Some(vec![4u32, 0, 2])),
    ] {
        let corpus = Corpus::open_spec(spec(&members).with_genes(space.clone())).unwrap();
        let all = corpus.var_names().to_vec();
        let selection = picks
            .as_ref()
            .map(|p| GeneSelection::new(all.len() as u32, p).unwrap());
        let vocab: Vec<String> = match &picks {
            Some(p) => p.iter().map(|&g| all[g as usize].clone()).collect(),
            None => all.clone(),
        };
        let read = || {
            corpus
                .read(&cells[..])
                .genes(selection.as_ref())
                .normalize(1e4)
                .log1p()
        };
        let csr = read().csr::<f32>().unwrap().csr;
        let dense = read().dense::<f32>().unwrap().rows;
        let want = expected_transformed(&members, &vocab, &cells, transform);
        let case = format!("{space:?} {picks:?}");
        assert_eq!(dense_of(&csr), want, "CSR {case}");
        assert_eq!(dense.data(), want, "dense {case}");
    }
    let corpus = Corpus::open_spec(spec(&members)).unwrap();
    assert!(corpus.read(0..3).normalize(0.0).csr::<f32>().is_err());
    assert!(corpus.read(0..3).normalize(1e4).csr::<i32>().is_err());
}
