//! Many inputs built into one dataset: the merged matrix and obs equal an
//! independent merge written here, the bytes do not depend on how many
//! threads ran the tasks, and a rerun after a failure reuses what is intact.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use deltacells::dataset::build::{build, input_stats, plan, run_task, BuildInput, BuildPlan};
use deltacells::dataset::ingest::ConvertOptions;
use deltacells::dataset::vocab::GeneSpace;
use deltacells::obs::{ObsColumn, ObsConfig};
use deltacells::{CsrRef, Dataset, DatasetWriter, WriterConfig};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("deltacells-build-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A deterministic sparse count of `cell` for gene `name`.
fn count(seed: u64, cell: u64, name: &str) -> u32 {
    let h = name.bytes().fold(
        seed.wrapping_mul(0x9e37_79b9) ^ cell.wrapping_mul(0x85eb_ca6b),
        |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3),
    );
    if h % 3 == 0 {
        (h >> 40) as u32 % 50 + 1
    } else {
        0
    }
}

struct Part {
    genes: Vec<&'static str>,
    cells: u64,
    seed: u64,
    cell_types: Vec<&'static str>,
}

/// Writes `part` as a dataset in its own gene order with obs `cell_type`
/// (its own vocabulary) and, for odd seeds, a numeric column `score`.
fn write(dir: &Path, part: &Part) {
    let names: Vec<String> = part.genes.iter().map(|g| g.to_string()).collect();
    let cts = part.cell_types.clone();
    let mut obs = vec![ObsColumn::categorical(
        "cell_type",
        (0..part.cells).map(|c| Some(cts[c as usize % cts.len()])),
    )];
    if part.seed % 2 == 1 {
        obs.push(
            ObsColumn::from_arrow(
                "score",
                std::sync::Arc::new(arrow_array::Float64Array::from(
                    (0..part.cells).map(|c| c as f64 / 2.0).collect::<Vec<_>>(),
                )),
            )
            .unwrap(),
        );
    }
    let config = WriterConfig::default()
        .with_tile_size(7)
        .with_var_names(Some(names.clone()))
        .with_obs(Some(ObsConfig::new(obs)));
    let mut w = DatasetWriter::create(dir, names.len() as u32, config).unwrap();
    let (mut indptr, mut indices, mut values) = (vec![0i64], vec![], vec![]);
    for c in 0..part.cells {
        for (g, name) in part.genes.iter().enumerate() {
            let v = count(part.seed, c, name);
            if v > 0 {
                indices.push(g as i32);
                values.push(v);
            }
        }
        indptr.push(indices.len() as i64);
    }
    w.push(CsrRef {
        n_cols: names.len() as u64,
        indptr: &indptr,
        indices: &indices,
        values: &values,
    })
    .unwrap();
    w.finish().unwrap();
}

fn parts() -> Vec<Part> {
    vec![
        Part {
            genes: vec!["g3", "g1", "g7", "g2"],
            cells: 23,
            seed: 1,
            cell_types: vec!["T", "B"],
        },
        Part {
            genes: vec!["g2", "g5", "g1"],
            cells: 9,
            seed: 2,
            cell_types: vec!["NK", "T"],
        },
        Part {
            genes: vec!["g9", "g1", "g3", "g5", "g2"],
            cells: 30,
            seed: 3,
            cell_types: vec!["B"],
        },
    ]
}

/// The inputs written under `dir`, as build inputs.
fn inputs(dir: &Path) -> Vec<BuildInput> {
    parts()
        .iter()
        .enumerate()
        .map(|(i, part)| {
            let d = dir.join(format!("part{i}"));
            if !d.join("manifest.json").exists() {
                write(&d, part);
            }
            BuildInput::detect(d.to_str().unwrap()).unwrap()
        })
        .collect()
}

/// Every cell's counts by gene name, read back through `gene_order` and `var_names`.
fn by_name(ds: &Dataset) -> Vec<BTreeMap<String, i32>> {
    let names = ds.var_names().unwrap().to_vec();
    let csr = ds.read(0..ds.n_cells()).csr::<i32>().unwrap().csr;
    (0..csr.n_rows())
        .map(|r| {
            let (a, b) = (csr.indptr[r] as usize, csr.indptr[r + 1] as usize);
            (a..b)
                .map(|j| (names[csr.indices[j] as usize].clone(), csr.values[j]))
                .collect()
        })
        .collect()
}

/// The expected merge, computed from the generator directly.
fn expected(keep: impl Fn(&str) -> bool) -> Vec<BTreeMap<String, i32>> {
    let keep = &keep;
    parts()
        .iter()
        .flat_map(|p| {
            (0..p.cells).map(move |c| {
                p.genes
                    .iter()
                    .filter(|g| keep(g))
                    .map(|g| (g.to_string(), count(p.seed, c, g) as i32))
                    .filter(|e| e.1 > 0)
                    .collect::<BTreeMap<_, _>>()
            })
        })
        .collect()
}

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let key = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(key, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// The output store and the plan of a build of `ins` into `out`, its
/// statistics pass run, none of its tasks.
fn planned(
    ins: &[BuildInput],
    out: &Path,
    opts: &ConvertOptions,
) -> (std::sync::Arc<dyn deltacells::storage::Store>, BuildPlan) {
    let store = deltacells::storage::Location::parse(out).store().unwrap();
    let stats: Vec<_> = ins
        .iter()
        .enumerate()
        .map(|(i, input)| input_stats(input, i, &store, opts, &mut |_| {}).unwrap())
        .collect();
    let p = plan(&stats, out.to_str().unwrap(), opts).unwrap();
    (store, p)
}

fn options() -> ConvertOptions {
    ConvertOptions::default()
        .with_writer(WriterConfig::default().with_tile_size(8))
        .with_tiles_per_task(2)
}

#[test]
fn a_union_build_equals_the_inputs_merged_by_gene_name() {
    let dir = tmpdir("union");
    let ins = inputs(&dir);
    let out = dir.join("out");
    let m = build(&ins, out.to_str().unwrap(), &options(), &|_| {}).unwrap();
    assert_eq!(m.n_cells, 62);
    let ds = Dataset::open(&out).unwrap();
    let mut genes: Vec<String> = ds.var_names().unwrap().to_vec();
    genes.sort();
    assert_eq!(genes, ["g1", "g2", "g3", "g5", "g7", "g9"]);
    assert_eq!(by_name(&ds), expected(|_| true));
    // Genes sorted by decreasing totals over the whole corpus.
    let csr = ds.read(0..ds.n_cells()).csr::<i32>().unwrap().csr;
    let mut totals = vec![0i64; ds.n_genes() as usize];
    for (&g, &v) in csr.indices.iter().zip(&csr.values) {
        totals[g as usize] += i64::from(v);
    }
    assert!(totals.windows(2).all(|w| w[0] >= w[1]), "{totals:?}");
    // Obs: the union of columns, one vocabulary, the source column.
    let obs = ds.obs().unwrap();
    assert_eq!(obs.schema().names(), ["cell_type", "score", "dataset_id"]);
    let ct = &obs.schema().columns[0];
    assert_eq!(&ct.categories.clone().unwrap()[..], ["B", "NK", "T"]);
    let src = &obs.schema().columns[2];
    assert_eq!(
        &src.categories.clone().unwrap()[..],
        ["part0", "part1", "part2"]
    );
    // Nothing of the build is left behind.
    assert!(!out.join("_build").exists() || files(&out.join("_build")).is_empty());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_build_removes_stale_tiles_and_shards_and_nothing_else() {
    let dir = tmpdir("strays");
    let ins = inputs(&dir);
    let out = dir.join("out");
    // A tile and a shard of a killed build of another plan, and files of
    // the user's own under the same folders.
    for (key, bytes) in [
        ("tiles/tile_009999.dct", &b"stale"[..]),
        ("obs/obs_0999.parquet", b"stale"),
        ("tiles/notes.txt", b"mine"),
        ("tiles/tile_copy.dct", b"mine"),
        ("obs/labels.csv", b"mine"),
    ] {
        let path = out.join(key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    build(&ins, out.to_str().unwrap(), &options(), &|_| {}).unwrap();
    assert!(!out.join("tiles/tile_009999.dct").exists());
    assert!(!out.join("obs/obs_0999.parquet").exists());
    for mine in ["tiles/notes.txt", "tiles/tile_copy.dct", "obs/labels.csv"] {
        assert_eq!(std::fs::read(out.join(mine)).unwrap(), b"mine", "{mine}");
    }
    Dataset::open(&out).unwrap().verify().unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

/// Every value of the float obs column `name` (`None` where missing).
fn floats(ds: &Dataset, name: &str) -> Vec<Option<f64>> {
    use arrow_array::Array;
    let obs = ds.obs().unwrap();
    obs.read_column(name, 0..ds.n_tiles())
        .unwrap()
        .iter()
        .flat_map(|a| {
            let a = a
                .as_any()
                .downcast_ref::<arrow_array::Float64Array>()
                .unwrap()
                .clone();
            (0..a.len()).map(move |r| a.is_valid(r).then(|| a.value(r)))
        })
        .collect()
}

/// `--obs-columns` with several inputs names columns of their union: a
/// column one input lacks is missing for its cells, the order is the list's,
/// dataset inputs are narrowed as files are, and a column no input has is
/// refused naming every input's columns.
#[test]
fn obs_columns_of_several_inputs_are_their_union_in_the_order_listed() {
    let dir = tmpdir("obs-columns");
    let ins = inputs(&dir);
    // The dataset built keeping `names`, or the build's refusal.
    let built = |out: &str, names: &[&str]| {
        let keep = names.iter().map(|n| n.to_string()).collect();
        let out = dir.join(out);
        let options = options().with_obs_columns(Some(keep));
        build(&ins, out.to_str().unwrap(), &options, &|_| {})
            .map(|_| Dataset::open(&out).unwrap())
            .map_err(|e| {
                assert!(!out.join("manifest.json").exists());
                e.to_string()
            })
    };
    let ds = built("out", &["score", "cell_type"]).unwrap();
    let obs = ds.obs().unwrap();
    assert_eq!(obs.schema().names(), ["score", "cell_type", "dataset_id"]);
    // part1 (even seed) has no score: its 9 cells are missing.
    let want: Vec<Option<f64>> = parts()
        .iter()
        .flat_map(|p| (0..p.cells).map(|c| (p.seed % 2 == 1).then_some(c as f64 / 2.0)))
        .collect();
    assert_eq!(floats(&ds, "score"), want);

    let ds = built("out-types", &["cell_type"]).unwrap();
    assert_eq!(
        ds.obs().unwrap().schema().names(),
        ["cell_type", "dataset_id"]
    );

    let err = built("out-nope", &["cell_type", "nope"]).err().unwrap();
    assert!(err.contains("no input has an obs column \"nope\""), "{err}");
    assert!(
        err.contains("part1 has \"cell_type\";") && err.contains("\"cell_type\", \"score\""),
        "{err}"
    );
    let err = built("out-twice", &["score", "score"]).err().unwrap();
    assert!(err.contains("lists \"score\" twice"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_intersection_or_a_list_keeps_exactly_those_genes() {
    let dir = tmpdir("inter");
    let ins = inputs(&dir);
    let out = dir.join("inter");
    let opts = options().with_genes(GeneSpace::Intersection);
    build(&ins, out.to_str().unwrap(), &opts, &|_| {}).unwrap();
    let ds = Dataset::open(&out).unwrap();
    assert_eq!(by_name(&ds), expected(|g| g == "g1" || g == "g2"));

    let listed = GeneSpace::listed(vec!["g5".into(), "zz".into(), "g3".into()]).unwrap();
    let out = dir.join("listed");
    let opts = options().with_genes(listed).with_sort_genes(false);
    build(&ins, out.to_str().unwrap(), &opts, &|_| {}).unwrap();
    let ds = Dataset::open(&out).unwrap();
    assert_eq!(ds.var_names().unwrap(), ["g5", "zz", "g3"]);
    assert_eq!(by_name(&ds), expected(|g| g == "g5" || g == "g3"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_bytes_do_not_depend_on_threads_and_a_rerun_reuses_intact_tasks() {
    let dir = tmpdir("bytes");
    let ins = inputs(&dir);
    let run = |name: &str, threads: usize| {
        let out = dir.join(name);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| build(&ins, out.to_str().unwrap(), &options(), &|_| {}))
            .unwrap();
        files(&out)
    };
    let one = run("one", 1);
    assert_eq!(one, run("two", 2));

    // A build stopped after its first task: no manifest; the rerun reuses
    // the finished task and ends identical.
    let out = dir.join("rerun");
    let opts = options();
    let (store, p) = planned(&ins, &out, &opts);
    let first = run_task(&p, 0, &store, &mut |_| {}).unwrap();
    assert!(!first.reused);
    assert!(!out.join("manifest.json").exists());
    // A tile of the second task half-written by a killed worker, and the
    // temporary file of a put that never finished.
    std::fs::write(out.join("tiles/tile_000002.dct"), b"partial").unwrap();
    std::fs::write(out.join("tiles/.tile_000003.dct.1-0-0.tmp"), b"cut").unwrap();
    build(&ins, out.to_str().unwrap(), &opts, &|_| {}).unwrap();
    assert_eq!(files(&out), one);

    // A build of another plan killed after its tasks (tiles of 4 cells:
    // twice as many), then the build of this one into the same output: it
    // ends with this plan's tiles and shards alone (the other's last tiles
    // and shards stayed beside them).
    let out = dir.join("replanned");
    let small = options().with_writer(WriterConfig::default().with_tile_size(4));
    let (store, p) = planned(&ins, &out, &small);
    for t in 0..p.tasks.len() {
        run_task(&p, t, &store, &mut |_| {}).unwrap();
    }
    build(&ins, out.to_str().unwrap(), &opts, &|_| {}).unwrap();
    assert_eq!(files(&out), one);
    std::fs::remove_dir_all(dir).unwrap();
}

/// A 10x folder (genes x cells, so a build stages it) of `cells` cells over
/// genes g0..g4, counts from `seed`.
fn tenx(dir: &Path, cells: u64, seed: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let genes = ["g0", "g1", "g2", "g3", "g4"];
    let mut entries = Vec::new();
    for c in 0..cells {
        for (g, name) in genes.iter().enumerate() {
            let v = count(seed, c, name);
            if v > 0 {
                entries.push(format!("{} {} {v}\n", g + 1, c + 1));
            }
        }
    }
    let head = format!(
        "%%MatrixMarket matrix coordinate integer general\n{} {cells} {}\n",
        genes.len(),
        entries.len()
    );
    std::fs::write(dir.join("matrix.mtx"), head + &entries.concat()).unwrap();
    let features: String = genes
        .iter()
        .map(|g| format!("{g}\t{g}\tGene Expression\n"))
        .collect();
    std::fs::write(dir.join("features.tsv"), features).unwrap();
    let barcodes: String = (0..cells).map(|c| format!("s{seed}-{c}\n")).collect();
    std::fs::write(dir.join("barcodes.tsv"), barcodes).unwrap();
}

#[test]
fn a_stage_or_a_task_of_other_inputs_is_not_reused() {
    let dir = tmpdir("stale");
    let (a, b) = (dir.join("a"), dir.join("b"));
    tenx(&a, 12, 1);
    tenx(&b, 7, 2);
    let input = |p: &Path| BuildInput::detect(p.to_str().unwrap()).unwrap();
    let fresh = |ins: &[BuildInput], name: &str| {
        let out = dir.join(name);
        build(ins, out.to_str().unwrap(), &options(), &|_| {}).unwrap();
        files(&out)
    };
    // A build of [a, b] stopped after a's stage (b refused, say), then the
    // build of [b] alone into the same output: b's cells, where a's stage,
    // made for the first input too, had been read in their place.
    let out = dir.join("restaged");
    let store = deltacells::storage::Location::parse(&out).store().unwrap();
    input_stats(&input(&a), 0, &store, &options(), &mut |_| {}).unwrap();
    build(&[input(&b)], out.to_str().unwrap(), &options(), &|_| {}).unwrap();
    assert_eq!(files(&out), fresh(&[input(&b)], "b_alone"));

    // A build stopped after its first task, then an input rewritten with
    // other counts: the rerun reuses neither its stage nor its task.
    let out = dir.join("changed");
    let ins = [input(&a), input(&b)];
    let (store, p) = planned(&ins, &out, &options());
    run_task(&p, 0, &store, &mut |_| {}).unwrap();
    tenx(&a, 12, 3);
    build(&ins, out.to_str().unwrap(), &options(), &|_| {}).unwrap();
    assert_eq!(files(&out), fresh(&ins, "changed_fresh"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_inputs_are_refused_naming_the_file_and_leave_no_manifest() {
    let dir = tmpdir("bad");
    let ins = inputs(&dir);
    let out = dir.join("out");
    let opts = options().with_gene_key(Some("gene_ids".into()));
    let err = build(&ins, out.to_str().unwrap(), &opts, &|_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("part") && err.contains("gene_ids"), "{err}");
    assert!(!out.join("manifest.json").exists());
    // An empty source column had named a column "".
    let opts = options().with_source_column(Some(String::new()));
    let err = build(&ins, out.to_str().unwrap(), &opts, &|_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("not empty"), "{err}");

    // An input that shares no gene with another: an empty intersection.
    let lone = dir.join("lone");
    write(
        &lone,
        &Part {
            genes: vec!["x1"],
            cells: 3,
            seed: 5,
            cell_types: vec!["T"],
        },
    );
    let pair = [
        ins[0].clone(),
        BuildInput::detect(lone.to_str().unwrap()).unwrap(),
    ];
    let out = dir.join("out2");
    let opts = options().with_genes(GeneSpace::Intersection);
    let err = build(&pair, out.to_str().unwrap(), &opts, &|_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no gene in common") && err.contains("lone"),
        "{err}"
    );
    assert!(!out.join("manifest.json").exists());
    // Refused before its first file: the directory made for it is removed
    // again (an existing one is kept).
    for fresh in [true, false] {
        let out = dir.join(format!("out-{fresh}"));
        if !fresh {
            std::fs::create_dir(&out).unwrap();
        }
        let err = build(&pair, out.to_str().unwrap(), &opts, &|_| {}).unwrap_err();
        assert!(err.to_string().contains("no gene in common"), "{err}");
        assert_eq!(out.exists(), !fresh);
    }
    // A missing input is named as such, not as a member of an archive.
    let err = BuildInput::detect(dir.join("missing.npz").to_str().unwrap())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("missing.npz: no such file or directory"),
        "{err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// The shared datasets (written by an independent implementation) built into
/// one: every cell's counts by gene name are the expected matrices'.
#[test]
fn the_shared_datasets_build_into_one_read_by_gene_name() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/deltacells/datasets");
    let names = ["small_obs", "exceptions_70k"];
    let ins: Vec<BuildInput> = names
        .iter()
        .map(|n| BuildInput::detect(data.join(n).to_str().unwrap()).unwrap())
        .collect();
    let dir = tmpdir("shared");
    let out = dir.join("out");
    build(
        &ins,
        out.to_str().unwrap(),
        &ConvertOptions::default(),
        &|_| {},
    )
    .unwrap();
    let merged = by_name(&Dataset::open(&out).unwrap());
    let mut want = Vec::new();
    for n in names {
        let ds = Dataset::open(data.join(n)).unwrap();
        want.extend(by_name(&ds));
    }
    assert_eq!(merged, want);
    assert!(
        !out.join("_build").exists(),
        "the build's own files are removed"
    );
    let ds = Dataset::open(&out).unwrap();
    let obs = ds.obs().unwrap();
    let source = obs.schema().column("dataset_id").unwrap().1;
    assert_eq!(&source.categories.clone().unwrap()[..], names);
    std::fs::remove_dir_all(dir).unwrap();
}

/// A corpus over the inputs, nothing rewritten, reads exactly the merged
/// dataset's matrix in vocabulary order (through its `gene_order`).
#[test]
fn a_corpus_of_the_inputs_reads_the_merged_datasets_matrix() {
    let dir = tmpdir("corpus");
    let ins = inputs(&dir);
    let out = dir.join("merged");
    build(&ins, out.to_str().unwrap(), &options(), &|_| {}).unwrap();
    let merged = Dataset::open(&out).unwrap();
    let locations: Vec<String> = (0..parts().len())
        .map(|i| dir.join(format!("part{i}")).display().to_string())
        .collect();
    let corpus = deltacells::Corpus::open_spec(deltacells::CorpusSpec::new(locations)).unwrap();
    assert_eq!(corpus.var_names().len(), merged.n_genes() as usize);
    // Merged output column j is vocabulary gene gene_order[j].
    let order = merged.gene_order().unwrap();
    let m = merged.read(0..merged.n_cells()).csr::<i32>().unwrap().csr;
    let c = corpus.read(0..corpus.n_cells()).csr::<i32>().unwrap().csr;
    assert_eq!(m.indptr, c.indptr);
    for r in 0..m.n_rows() {
        let (a, b) = (m.indptr[r] as usize, m.indptr[r + 1] as usize);
        let mut row: Vec<(i32, i32)> = (a..b)
            .map(|j| (order[m.indices[j] as usize], m.values[j]))
            .collect();
        row.sort_unstable();
        let want: Vec<(i32, i32)> = (a..b).map(|j| (c.indices[j], c.values[j])).collect();
        assert_eq!(row, want, "cell {r}");
    }
    assert_eq!(
        corpus.var_names(),
        &(0..merged.n_genes() as usize)
            .map(|v| {
                let j = order.iter().position(|&g| g as usize == v).unwrap();
                merged.var_names().unwrap()[j].clone()
            })
            .collect::<Vec<_>>()[..]
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_build_of_a_thousand_tasks_over_a_dataset_input_ends() {
    // Each write task reads the dataset input on the input's decode pool;
    // a task waiting for that pool ran the build's other tasks on top of
    // it, and 1,000 tasks overflowed a thread's stack.
    let dir = tmpdir("many_tasks");
    let part = Part {
        genes: vec!["g1", "g2", "g3"],
        cells: 1000,
        seed: 7,
        cell_types: vec!["T", "B"],
    };
    write(&dir.join("in"), &part);
    let input = BuildInput::detect(dir.join("in").to_str().unwrap()).unwrap();
    let opts = ConvertOptions::default()
        .with_writer(WriterConfig::default().with_tile_size(1))
        .with_tiles_per_task(1);
    let out = dir.join("out");
    let manifest = build(&[input], out.to_str().unwrap(), &opts, &|_| {}).unwrap();
    assert_eq!(manifest.tile_cells.len(), 1000);
    let ds = Dataset::open(&out).unwrap();
    assert_eq!(
        by_name(&ds),
        by_name(&Dataset::open(dir.join("in")).unwrap())
    );
    std::fs::remove_dir_all(dir).unwrap();
}
