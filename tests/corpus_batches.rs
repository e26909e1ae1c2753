//! Batches over a corpus: every cell of every member once per epoch, rows
//! equal to the written counts placed by gene name, a block shuffle mixing
//! members, cells in the epoch order of the members' tiles one after another
//! whichever strategy makes the batches, equal batches per rank, labels in
//! the unified vocabularies.

mod corpus_common;

use std::collections::HashSet;

use corpus_common::{
    dense_of, expected_dense, expected_transformed, member_of, write_member, ObsPlan, Scratch,
    Written,
};
use deltacells::corpus::{CorpusSpec, GeneSpace};
use deltacells::dataset::{BatchConfig, BatchRows, EpochOrder, Shuffle};
use deltacells::engine::Transform;
use deltacells::{Corpus, GeneSelection};

fn two(dir: &std::path::Path) -> Vec<Written> {
    let a = write_member(
        &dir.join("a.dc"),
        &["g0", "g1", "g2", "g3"],
        260,
        32,
        true,
        &ObsPlan {
            categories: vec![("cell_type", vec!["T", "B"])],
            floats: vec![],
        },
        11,
    );
    let b = write_member(
        &dir.join("b.dc"),
        &["g5", "g2", "g0"],
        150,
        40,
        false,
        &ObsPlan {
            categories: vec![("cell_type", vec!["NK"])],
            floats: vec![],
        },
        12,
    );
    vec![a, b]
}

#[test]
fn an_epoch_reads_every_cell_once_in_the_vocabulary() {
    let dir = Scratch::new("corpus-batches");
    let members = two(dir.path());
    let corpus = Corpus::open_spec(CorpusSpec::new(
        members.iter().map(|w| w.location.display().to_string()),
    ))
    .unwrap();
    let vocab = corpus.var_names().to_vec();
    let cache = Scratch::new("corpus-batches-cache");
    for (shuffle, prefetch) in [
        (Shuffle::Block { window_tiles: 4 }, 2),
        (Shuffle::Random, 0),
        (Shuffle::None, 1),
    ] {
        let config = BatchConfig::default()
            .with_batch_size(37)
            .with_seed(3)
            .with_shuffle(shuffle)
            .with_prefetch(prefetch)
            .with_obs_columns(vec!["dataset_id".into(), "cell_type".into()])
            .with_obs_cache_dir(Some(cache.path().to_path_buf()));
        let mut seen = Vec::new();
        let mut mixed = false;
        for batch in corpus.batches_of::<i32>(config).unwrap() {
            let batch = batch.unwrap();
            let BatchRows::Csr(csr) = &batch.rows else {
                panic!("CSR batches")
            };
            assert_eq!(
                dense_of(csr),
                expected_dense(&members, &vocab, &batch.cells)
            );
            let source = batch.labels.get("dataset_id").unwrap();
            let types = batch.labels.get("cell_type").unwrap();
            let mut from = HashSet::new();
            for (row, &cell) in batch.cells.iter().enumerate() {
                let (m, local) = member_of(&members, cell);
                from.insert(m);
                assert_eq!(source.category(row), Some(["a", "b"][m]));
                let written = members[m].obs[0].1[local].as_deref();
                assert_eq!(types.category(row), written);
            }
            mixed |= from.len() > 1;
            seen.extend(batch.cells);
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..410).collect::<Vec<u64>>(), "{shuffle:?}");
        if shuffle != Shuffle::None {
            assert!(mixed, "{shuffle:?} mixes the members' cells");
        }
    }
}

#[test]
fn ranks_get_equal_shares_and_dense_selected_rows() {
    let dir = Scratch::new("corpus-ranks");
    let members = two(dir.path());
    let corpus = Corpus::open_spec(CorpusSpec::new(
        members.iter().map(|w| w.location.display().to_string()),
    ))
    .unwrap();
    let vocab = corpus.var_names().to_vec();
    let picked = [4u32, 0];
    let genes = GeneSelection::new(corpus.n_genes(), &picked).unwrap();
    let names: Vec<String> = picked.iter().map(|&g| vocab[g as usize].clone()).collect();
    let mut counts = Vec::new();
    let mut all = Vec::new();
    for rank in 0..3 {
        let config = BatchConfig::default()
            .with_batch_size(16)
            .with_rank(rank, 3)
            .with_dense(true)
            .with_genes(Some(genes.clone()));
        let batches: Vec<_> = corpus
            .batches_of::<f32>(config)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        counts.push(batches.len());
        for b in batches {
            let BatchRows::Dense(d) = &b.rows else {
                panic!("dense batches")
            };
            let want: Vec<f32> = expected_dense(&members, &names, &b.cells)
                .iter()
                .map(|&v| v as f32)
                .collect();
            assert_eq!(d.data(), want);
            all.extend(b.cells);
        }
    }
    assert!(counts.windows(2).all(|w| w[0] == w[1]), "{counts:?}");
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 410);
    let wrong = BatchConfig::default().with_genes(Some(GeneSelection::new(3, &[0]).unwrap()));
    assert!(corpus.batches(wrong).is_err());
    assert!(corpus
        .batches(BatchConfig::default().with_rank(2, 2))
        .is_err());
}

#[test]
fn batches_follow_the_epoch_order_whichever_strategy_makes_them() {
    let dir = Scratch::new("corpus-strategies");
    let members = two(dir.path());
    let locations: Vec<String> = members
        .iter()
        .map(|w| w.location.display().to_string())
        .collect();
    // Both members (the second one's genes mapped, out of order; in the
    // intersection, some dropped), and the first alone (unmapped).
    let corpora = [
        (CorpusSpec::new(locations.clone()), 2),
        (
            CorpusSpec::new(locations.clone()).with_genes(GeneSpace::Intersection),
            2,
        ),
        (CorpusSpec::new([locations[0].clone()]), 1),
    ];
    let shuffle = Shuffle::Block { window_tiles: 3 };
    for (spec, n) in corpora {
        let corpus = Corpus::open_spec(spec).unwrap();
        let vocab = corpus.var_names().to_vec();
        let mut limits = vec![0u64];
        for (m, member) in corpus.members().iter().enumerate() {
            let own = member.dataset().limits();
            limits.extend(own[1..].iter().map(|&l| corpus.limits()[m] + l));
        }
        let mut order = EpochOrder::new(&limits, shuffle, 5, 1);
        let epoch = order.cells(0..order.len());
        // Windows decoded once (CSR rows, dense rows), and reads through a
        // cache too small for a window.
        for (dense, cache_bytes) in [(false, 64 << 20), (true, 64 << 20), (false, 1 << 10)] {
            let config = BatchConfig::default()
                .with_batch_size(29)
                .with_seed(5)
                .with_epoch(1)
                .with_shuffle(shuffle)
                .with_dense(dense)
                .with_cache_bytes(cache_bytes);
            let mut cells = Vec::new();
            for batch in corpus.batches_of::<i32>(config.clone()).unwrap() {
                let batch = batch.unwrap();
                let rows = match &batch.rows {
                    BatchRows::Csr(csr) => {
                        for r in 0..csr.n_rows() {
                            let row =
                                &csr.indices[csr.indptr[r] as usize..csr.indptr[r + 1] as usize];
                            assert!(row.windows(2).all(|w| w[0] < w[1]), "genes ascend");
                        }
                        dense_of(csr)
                    }
                    BatchRows::Dense(d) => d.data().to_vec(),
                    BatchRows::Tokens(_) => panic!("counts were asked for"),
                };
                assert_eq!(rows, expected_dense(&members, &vocab, &batch.cells));
                cells.extend(batch.cells);
            }
            assert_eq!(
                cells, epoch,
                "{n} members, dense {dense}, cache {cache_bytes}"
            );
            // The next epoch made ahead is the one a fresh iterator makes,
            // and an iterator of the other count type makes its own.
            let ahead = config.clone().with_next_epoch_ahead(true);
            let batches = corpus.batches_of::<i32>(ahead.clone()).unwrap();
            let recycler = batches.recycler();
            batches.for_each(|b| drop(b.unwrap()));
            let next = ahead
                .clone()
                .with_epoch(2)
                .with_recycler(Some(recycler.clone()));
            let rows = |it: deltacells::dataset::BatchIter<i32>| -> Vec<_> {
                it.map(|b| b.unwrap().rows).collect()
            };
            assert_eq!(
                rows(corpus.batches_of::<i32>(next.clone()).unwrap()),
                rows(
                    corpus
                        .batches_of::<i32>(config.clone().with_epoch(2))
                        .unwrap()
                )
            );
            assert!(recycler.holds_next_epoch(), "epoch 3 made ahead");
            // Without prefetch nothing is made before the first `next`, so
            // the iterator cannot have left an epoch of its own yet.
            let floats = corpus
                .batches_of::<f32>(next.with_epoch(3).with_prefetch(0))
                .unwrap();
            assert!(!recycler.holds_next_epoch(), "dropped: another count type");
            let fresh = corpus
                .batches_of::<f32>(config.clone().with_epoch(3))
                .unwrap();
            for (a, b) in floats.zip(fresh) {
                assert_eq!(a.unwrap().rows, b.unwrap().rows);
            }
            // Float counts come in the same rows (mapped where they were
            // decoded, for a member whose genes all are in the vocabulary).
            let ints = corpus.batches_of::<i32>(config.clone()).unwrap();
            for (i, f) in ints.zip(corpus.batches_of::<f32>(config).unwrap()) {
                let (i, f) = (i.unwrap().rows, f.unwrap().rows);
                match (&i, &f) {
                    (BatchRows::Csr(i), BatchRows::Csr(f)) => {
                        assert_eq!((&i.indptr, &i.indices), (&f.indptr, &f.indices));
                        let floats: Vec<f32> = i.values.iter().map(|&v| v as f32).collect();
                        assert_eq!(floats, f.values);
                    }
                    (BatchRows::Dense(i), BatchRows::Dense(f)) => {
                        let floats: Vec<f32> = i.data().iter().map(|&v| v as f32).collect();
                        assert_eq!(floats, f.data());
                    }
                    _ => panic!("the same kind of rows for either count type"),
                }
            }
        }
    }
}

#[test]
fn normalized_batches_divide_by_the_total_over_all_of_a_members_genes() {
    // Normalization divides each cell by its total over every gene its
    // member has, before any selection: a vocabulary that drops some of a
    // member's genes (the intersection, a listed selection) leaves the
    // totals as they are, whichever strategy makes the batches.
    let dir = Scratch::new("corpus-normalized");
    let members = two(dir.path());
    let locations: Vec<String> = members
        .iter()
        .map(|w| w.location.display().to_string())
        .collect();
    let transform = Transform::NONE.normalize(1e4).log1p();
    let spaces = [
        (GeneSpace::Union, None),
        (GeneSpace::Intersection, None),
        (GeneSpace::Union, Some(vec![3u32, 0])),
    ];
    for (space, selection) in spaces {
        let corpus =
            Corpus::open_spec(CorpusSpec::new(locations.clone()).with_genes(space.clone()))
                .unwrap();
        let all = corpus.var_names().to_vec();
        let genes = selection
            .as_ref()
            .map(|s| GeneSelection::new(all.len() as u32, s).unwrap());
        let vocab: Vec<String> = match &selection {
            Some(s) => s.iter().map(|&g| all[g as usize].clone()).collect(),
            None => all.clone(),
        };
        for (dense, cache_bytes, shuffle) in [
            (false, 64 << 20, Shuffle::Block { window_tiles: 3 }),
            (true, 64 << 20, Shuffle::Block { window_tiles: 3 }),
            (false, 1 << 10, Shuffle::Block { window_tiles: 3 }),
            (true, 64 << 20, Shuffle::Random),
            (false, 64 << 20, Shuffle::None),
        ] {
            let config = BatchConfig::default()
                .with_batch_size(29)
                .with_seed(5)
                .with_shuffle(shuffle)
                .with_dense(dense)
                .with_genes(genes.clone())
                .with_transform(transform)
                .with_cache_bytes(cache_bytes);
            let case =
                format!("{space:?} {selection:?} dense {dense} cache {cache_bytes} {shuffle:?}");
            let mut seen = 0;
            for batch in corpus.batches(config).unwrap() {
                let batch = batch.unwrap();
                let got: Vec<f32> = match &batch.rows {
                    BatchRows::Csr(csr) => dense_of(csr),
                    BatchRows::Dense(d) => d.data().to_vec(),
                    BatchRows::Tokens(_) => panic!("values were asked for"),
                };
                let want = expected_transformed(&members, &vocab, &batch.cells, transform);
                assert_eq!(got, want, "{case}");
                seen += batch.cells.len();
            }
            assert_eq!(seen, 410, "{case}");
        }
    }
}
