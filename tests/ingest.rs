//! `convert` from scipy `.npz` and Matrix Market inputs: round trips through
//! the streaming readers and the out-of-core transpose, and hostile inputs
//! refused in memory bounded by their real size (a counting allocator
//! measures what each conversion allocates on its thread).

use std::io::Write;
use std::path::{Path, PathBuf};

use deltacells::dataset::ingest::{convert, ConvertOptions, Input};
use deltacells::dataset::Dataset;
use deltacells::format::npy::{Array, Dtype};
use deltacells::Csr;

#[path = "common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::peak_of;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("deltacells-ingest-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn array<T: bytemuck::Pod>(dtype: Dtype, values: &[T]) -> Vec<u8> {
    Array {
        dtype,
        shape: vec![values.len()],
        data: bytemuck::cast_slice(values).to_vec(),
    }
    .to_npy()
}

/// Writes an `.npz` of the given members (name, `.npy` bytes), deflated.
fn write_npz(path: &Path, members: &[(&str, Vec<u8>)]) {
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(true);
    for (name, bytes) in members {
        z.start_file(format!("{name}.npy"), opts).unwrap();
        z.write_all(bytes).unwrap();
    }
    z.finish().unwrap();
}

/// A scipy-style CSR or CSC npz of `csr` (cells x genes, f32 data).
fn write_sparse_npz(path: &Path, csr: &Csr<u32>, csc: bool) {
    let (indptr, indices, data) = if csc {
        let t = transpose(csr);
        (t.indptr, t.indices, t.values)
    } else {
        (csr.indptr.clone(), csr.indices.clone(), csr.values.clone())
    };
    let data: Vec<f32> = data.iter().map(|&v| v as f32).collect();
    let format = Array {
        dtype: Dtype::U8,
        shape: vec![],
        data: if csc {
            b"csc".to_vec()
        } else {
            b"csr".to_vec()
        },
    }
    .to_npy();
    // numpy writes a byte string as dtype |S3.
    let mut format = format;
    let at = format.windows(5).position(|w| w == b"'|u1'").unwrap();
    format[at..at + 5].copy_from_slice(b"'|S3'");
    write_npz(
        path,
        &[
            ("indices", array(Dtype::I32, &indices)),
            ("indptr", array(Dtype::I64, &indptr)),
            ("format", format),
            (
                "shape",
                array(Dtype::I64, &[csr.n_rows() as i64, csr.n_cols as i64]),
            ),
            ("data", array(Dtype::F32, &data)),
        ],
    );
}

fn transpose(csr: &Csr<u32>) -> Csr<u32> {
    let mut cols: Vec<Vec<(i32, u32)>> = vec![Vec::new(); csr.n_cols as usize];
    for (c, w) in csr.indptr.windows(2).enumerate() {
        for j in w[0] as usize..w[1] as usize {
            cols[csr.indices[j] as usize].push((c as i32, csr.values[j]));
        }
    }
    let mut t = Csr::empty(csr.n_rows() as u64);
    for col in cols {
        for (c, v) in col {
            t.indices.push(c);
            t.values.push(v);
        }
        t.indptr.push(t.indices.len() as i64);
    }
    t
}

/// A deterministic matrix with empty cells, empty genes and a count above 65535.
fn sample(n_cells: usize, n_genes: usize) -> Csr<u32> {
    let mut csr = Csr::empty(n_genes as u64);
    let mut x = 12345u64;
    for c in 0..n_cells {
        if c % 7 != 3 {
            for g in 0..n_genes - 2 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if (x >> 33).is_multiple_of(5) {
                    csr.indices.push(g as i32);
                    csr.values.push(if g == 1 && c == 2 {
                        70_000
                    } else {
                        1 + (x >> 40) as u32 % 9
                    });
                }
            }
        }
        csr.indptr.push(csr.indices.len() as i64);
    }
    csr
}

/// Reads a dataset back as cells x source genes.
fn read_back(dir: &Path) -> Csr<u32> {
    let ds = Dataset::open(dir).unwrap();
    ds.verify().unwrap();
    let got = ds.read(0..ds.n_cells()).csr::<i32>().unwrap().csr;
    let order: Vec<i32> = match ds.gene_order() {
        Some(o) => o.to_vec(),
        None => (0..ds.n_genes() as i32).collect(),
    };
    let mut out = Csr::empty(ds.n_genes() as u64);
    for w in got.indptr.windows(2) {
        let mut row: Vec<(i32, u32)> = (w[0] as usize..w[1] as usize)
            .map(|j| (order[got.indices[j] as usize], got.values[j] as u32))
            .collect();
        row.sort_unstable();
        for (g, v) in row {
            out.indices.push(g);
            out.values.push(v);
        }
        out.indptr.push(out.indices.len() as i64);
    }
    out
}

fn small_blocks() -> ConvertOptions {
    ConvertOptions::default()
        .with_block_nonzeros(7)
        .with_run_nonzeros(16)
}

#[test]
fn csr_and_csc_npz_convert_to_the_same_matrix_in_small_blocks() {
    let dir = tmpdir("npz-rt");
    let source = sample(60, 9);
    for (csc, sort) in [(false, true), (true, true), (false, false), (true, false)] {
        let path = dir.join(format!("m-{csc}.npz"));
        write_sparse_npz(&path, &source, csc);
        let out = dir.join(format!("out-{csc}-{sort}"));
        let options = small_blocks()
            .with_sort_genes(sort)
            .with_writer(deltacells::dataset::WriterConfig::default().with_tile_size(8));
        let m = convert(&Input::detect(&path).unwrap(), &out, options, &|_| {}).unwrap();
        assert_eq!((m.n_cells, m.n_genes), (60, 9));
        assert_eq!(read_back(&out), source, "csc {csc}, sort {sort}");
        let ds = Dataset::open(&out).unwrap();
        assert_eq!(ds.gene_order().is_some(), sort);
        if sort {
            // The two empty genes come last, in source order.
            assert_eq!(&ds.gene_order().unwrap()[7..], &[7, 8]);
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

fn write_mtx(dir: &Path, csr: &Csr<u32>, shuffle: bool) {
    let mut lines = Vec::new();
    for (c, w) in csr.indptr.windows(2).enumerate() {
        for j in w[0] as usize..w[1] as usize {
            lines.push(format!(
                "{} {} {}",
                csr.indices[j] + 1,
                c + 1,
                csr.values[j]
            ));
        }
    }
    if shuffle {
        lines.reverse();
        let n = lines.len();
        lines.swap(0, n / 2);
    }
    let text = format!(
        "%%MatrixMarket matrix coordinate integer general\n% written by a test\n{} {} {}\n{}\n",
        csr.n_cols,
        csr.n_rows(),
        lines.len(),
        lines.join("\n")
    );
    std::fs::write(dir.join("matrix.mtx"), text).unwrap();
}

#[test]
fn matrix_market_entries_in_any_order_are_transposed_out_of_core() {
    let dir = tmpdir("mtx-rt");
    let source = sample(45, 6);
    write_mtx(&dir, &source, true);
    let out = dir.join("out");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    // The run files of a killed transpose (no such process), and a
    // directory of someone else's: the first goes, the second stays.
    let killed = tmp.join("deltacells-transpose-4194305-x1y2z3");
    let other = tmp.join("deltacells-transpose-notes");
    for d in [&killed, &other] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("run_0000"), b"runs").unwrap();
    }
    let options = small_blocks().with_tmp_dir(Some(tmp.clone()));
    let phases = std::sync::Mutex::new(Vec::new());
    convert(&Input::detect(&dir).unwrap(), &out, options, &|p| {
        phases.lock().unwrap().push(p.phase)
    })
    .unwrap();
    let phases = phases.into_inner().unwrap();
    assert_eq!(read_back(&out), source);
    assert!(phases.contains(&deltacells::dataset::ingest::Phase::Transposing));
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(left, [other], "the transpose's run files are removed");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_layer_is_refused_for_an_input_of_one_matrix() {
    let dir = tmpdir("mtx-layer");
    write_mtx(&dir, &sample(10, 4), true);
    let options = small_blocks().with_layer(deltacells::dataset::ingest::Layer::Raw);
    let err = convert(
        &Input::detect(&dir).unwrap(),
        &dir.join("out"),
        options,
        &|_| {},
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("--layer picks a matrix of an .h5ad"),
        "{err}"
    );
    assert!(!dir.join("out/manifest.json").exists());
    std::fs::remove_dir_all(dir).unwrap();
}

/// Conversions of hostile inputs may allocate no more than this on their thread.
const BOUND: usize = 32 << 20;

fn refused(input: &Path, want: &str) {
    let out = input.with_extension("out");
    let (result, peak) = peak_of(|| {
        convert(
            &Input::detect(input).unwrap(),
            &out,
            ConvertOptions::default(),
            &|_| {},
        )
    });
    let err = result
        .expect_err("a hostile input was accepted")
        .to_string();
    assert!(err.contains(want), "{}: {err}", input.display());
    assert!(peak < BOUND, "{}: {peak} bytes allocated", input.display());
    assert!(!out.join("manifest.json").exists());
}

#[test]
fn npz_with_absurd_shapes_is_refused_in_bounded_memory() {
    let dir = tmpdir("npz-shapes");
    let empty = || {
        vec![
            ("indptr", array(Dtype::I64, &[0i64])),
            ("indices", array(Dtype::I32, &[0i32; 0])),
            ("data", array(Dtype::F32, &[0f32; 0])),
        ]
    };
    let huge_genes = dir.join("genes.npz");
    let mut m = empty();
    m.push(("shape", array(Dtype::I64, &[0i64, 1 << 61])));
    write_npz(&huge_genes, &m);
    refused(&huge_genes, "2305843009213693952 genes");
    // Within the 2^31 genes a dataset may have, but not backed by the file's
    // bytes: the build's per-gene tables asked for 16 GiB.
    let many_genes = dir.join("many-genes.npz");
    let mut m = empty();
    m.push(("shape", array(Dtype::I64, &[0i64, 1 << 31])));
    write_npz(&many_genes, &m);
    refused(&many_genes, "2147483648 genes");

    let max_rows = dir.join("rows.npz");
    let mut m = empty();
    m.push(("shape", array(Dtype::I64, &[i64::MAX, 5])));
    write_npz(&max_rows, &m);
    refused(&max_rows, "9223372036854775807 cells");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn matrix_market_size_line_is_checked_against_the_file() {
    let dir = tmpdir("mtx-claim");
    std::fs::write(
        dir.join("matrix.mtx"),
        "%%MatrixMarket matrix coordinate integer general\n1 4294967295 0\n",
    )
    .unwrap();
    refused(&dir, "4294967295 cells");
    std::fs::write(
        dir.join("matrix.mtx"),
        "%%MatrixMarket matrix coordinate integer general\n2147483648 1 0\n",
    )
    .unwrap();
    refused(&dir, "2147483648 genes");
    // Below the floor for cells, above the one for genes (3.7 GiB of tables).
    std::fs::write(
        dir.join("matrix.mtx"),
        "%%MatrixMarket matrix coordinate integer general\n16777216 1 0\n",
    )
    .unwrap();
    refused(&dir, "16777216 genes");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Overwrites the uncompressed size of member `name` in its local and
/// central headers (a directory entry that lies).
fn patch_size(zip: &mut [u8], name: &[u8], size: u32) {
    let mut at = 0;
    while let Some(p) = zip[at..].windows(name.len()).position(|w| w == name) {
        let p = at + p;
        if p >= 46 && zip[p - 46..p - 42] == [0x50, 0x4b, 0x01, 0x02] {
            zip[p - 46 + 24..p - 46 + 28].copy_from_slice(&size.to_le_bytes());
        } else if p >= 30 && zip[p - 30..p - 26] == [0x50, 0x4b, 0x03, 0x04] {
            zip[p - 30 + 22..p - 30 + 26].copy_from_slice(&size.to_le_bytes());
        }
        at = p + 1;
    }
}

#[test]
fn zip_bomb_members_are_refused_without_inflating_them() {
    let dir = tmpdir("bomb");
    // data.npy's header promises 3 floats; the member inflates to 256 MiB.
    let mut bomb = array(Dtype::F32, &[1f32, 2.0, 3.0]);
    let header_len = bomb.len() - 12;
    bomb.resize(256 << 20, 0);
    let members = |data: Vec<u8>| {
        vec![
            ("indptr", array(Dtype::I64, &[0i64, 3])),
            ("indices", array(Dtype::I32, &[0i32, 1, 2])),
            ("data", data),
            ("shape", array(Dtype::I64, &[1i64, 3])),
        ]
    };
    let honest = dir.join("honest.npz");
    write_npz(&honest, &members(bomb.clone()));
    refused(&honest, "header promises 12 data bytes");
    // The same, its directory entries claiming only what the header promises.
    let lying = dir.join("lying.npz");
    let mut bytes = std::fs::read(&honest).unwrap();
    patch_size(&mut bytes, b"data.npy", (header_len + 12) as u32);
    std::fs::write(&lying, bytes).unwrap();
    refused(&lying, "inflates past");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_failed_conversion_leaves_no_manifest_and_can_be_rerun_into_the_same_directory() {
    let dir = tmpdir("rerun");
    let mut source = sample(40, 5);
    let good = source.clone();
    // A non-integral value in the last cell: found only after tiles were
    // written when the first pass is skipped.
    let last = source.values.len() - 1;
    let path = dir.join("m.npz");
    let mut data: Vec<f32> = source.values.iter().map(|&v| v as f32).collect();
    data[last] = 2.5;
    source.values[last] = 0;
    write_npz(
        &path,
        &[
            ("indptr", array(Dtype::I64, &source.indptr)),
            ("indices", array(Dtype::I32, &source.indices)),
            ("data", array(Dtype::F32, &data)),
            ("shape", array(Dtype::I64, &[40i64, 5])),
        ],
    );
    let out = dir.join("out");
    let options = || {
        small_blocks().with_writer(deltacells::dataset::WriterConfig::default().with_tile_size(4))
    };
    let keep = options().with_sort_genes(false);
    let err = convert(&Input::detect(&path).unwrap(), &out, keep, &|_| {}).unwrap_err();
    let last_cell = source
        .indptr
        .iter()
        .position(|&p| p as usize > last)
        .unwrap()
        - 1;
    assert!(
        err.to_string().contains(&format!("cell {last_cell}, gene")),
        "{err}"
    );
    assert!(err.to_string().contains("value 2.5"), "{err}");
    assert!(
        out.join("tiles").read_dir().unwrap().count() > 0,
        "tiles were written"
    );
    assert!(!out.join("manifest.json").exists());
    assert!(Dataset::open(&out).is_err());
    // With the first pass the value is refused before any tile is written.
    let fresh = dir.join("fresh");
    let err = convert(&Input::detect(&path).unwrap(), &fresh, options(), &|_| {}).unwrap_err();
    assert!(err.to_string().contains("value 2.5"), "{err}");
    assert!(!fresh.join("tiles").exists());
    // Fixed input, same directory.
    write_sparse_npz(&path, &good, false);
    convert(&Input::detect(&path).unwrap(), &out, options(), &|_| {}).unwrap();
    assert_eq!(read_back(&out), good);
    std::fs::remove_dir_all(dir).unwrap();
}

/// Writes a 10x folder of `csr` whose genes are `ids` (named `name_<id>`).
fn write_10x(dir: &Path, csr: &Csr<u32>, ids: &[&str]) {
    std::fs::create_dir_all(dir).unwrap();
    write_mtx(dir, csr, true);
    let features: String = ids
        .iter()
        .map(|id| format!("{id}\tname_{id}\tGene Expression\n"))
        .collect();
    std::fs::write(dir.join("features.tsv"), features).unwrap();
    let barcodes: String = (0..csr.n_rows())
        .map(|c| format!("{}-{c}\n", ids[0]))
        .collect();
    std::fs::write(dir.join("barcodes.tsv"), barcodes).unwrap();
}

/// Every cell's counts keyed by gene.
fn keyed(csr: &Csr<u32>, keys: &[String]) -> Vec<std::collections::BTreeMap<String, u32>> {
    csr.indptr
        .windows(2)
        .map(|w| {
            (w[0] as usize..w[1] as usize)
                .map(|j| (keys[csr.indices[j] as usize].clone(), csr.values[j]))
                .collect()
        })
        .collect()
}

#[test]
fn matrix_market_folders_are_staged_and_merged_by_gene_id() {
    use deltacells::dataset::build::{build, plan_inputs, BuildInput};
    let dir = tmpdir("10x-merge");
    let (a, b) = (sample(30, 6), sample(17, 5));
    let a_ids = ["e1", "e2", "e3", "e4", "e5", "e6"];
    let b_ids = ["e4", "e9", "e1", "e2", "e8"];
    write_10x(&dir.join("plate_a"), &a, &a_ids);
    write_10x(&dir.join("plate_b"), &b, &b_ids);
    let inputs: Vec<BuildInput> = ["plate_a", "plate_b"]
        .iter()
        .map(|p| BuildInput::detect(dir.join(p).to_str().unwrap()).unwrap())
        .collect();
    let options = small_blocks()
        .with_gene_key(Some("gene_ids".into()))
        .with_writer(deltacells::WriterConfig::default().with_tile_size(8));
    let fresh = dir.join("fresh");
    build(&inputs, fresh.to_str().unwrap(), &options, &|_| {}).unwrap();

    // By gene id, every cell is its input's cell.
    let ds = Dataset::open(&fresh).unwrap();
    let var = ds.var_table().unwrap().unwrap();
    let table = deltacells::obs::VarTable::from_frame(&var).unwrap();
    let ids: Vec<String> = table
        .values("gene_ids")
        .unwrap()
        .into_iter()
        .map(Option::unwrap)
        .collect();
    let got = ds.read(0..ds.n_cells()).csr::<i32>().unwrap().csr;
    let got = Csr {
        n_cols: got.n_cols,
        indptr: got.indptr,
        indices: got.indices,
        values: got.values.into_iter().map(|v| v as u32).collect(),
    };
    let strings = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut want = keyed(&a, &strings(&a_ids));
    want.extend(keyed(&b, &strings(&b_ids)));
    assert_eq!(keyed(&got, &ids), want);
    let names = ds.var_names().unwrap();
    for (id, name) in ids.iter().zip(names) {
        assert_eq!(name, &format!("name_{id}"));
    }

    // A listed gene no input has: a zero column whose key is in the key column.
    let listed = dir.join("listed");
    let space =
        deltacells::dataset::vocab::GeneSpace::listed(vec!["e2".into(), "e99".into()]).unwrap();
    let opts = options.clone().with_genes(space).with_sort_genes(false);
    build(&inputs, listed.to_str().unwrap(), &opts, &|_| {}).unwrap();
    let ds = Dataset::open(&listed).unwrap();
    let table = deltacells::obs::VarTable::from_frame(&ds.var_table().unwrap().unwrap()).unwrap();
    assert_eq!(
        table.values("gene_ids").unwrap(),
        [Some("e2".to_string()), Some("e99".to_string())]
    );
    let csr = ds.read(0..ds.n_cells()).csr::<i32>().unwrap().csr;
    assert!(csr.indices.iter().all(|&g| g == 0));

    // A rerun that finds the stages of a stopped build reads them instead of
    // transposing again, and writes the same bytes.
    let rerun = dir.join("rerun");
    let store = deltacells::storage::open(&rerun).unwrap();
    plan_inputs(&inputs, &store, rerun.to_str().unwrap(), &options, &|_| {}).unwrap();
    assert!(rerun.join("_build/stage/0000/manifest.json").exists());
    build(&inputs, rerun.to_str().unwrap(), &options, &|_| {}).unwrap();
    assert!(!rerun.join("_build").exists());
    for key in [
        "manifest.json",
        "tiles/tile_000000.dct",
        "var.parquet",
        "obs/obs_0000.parquet",
    ] {
        assert_eq!(
            std::fs::read(fresh.join(key)).unwrap(),
            std::fs::read(rerun.join(key)).unwrap(),
            "{key}"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_10x_folder_with_a_repeated_gene_name_converts_alone_and_names_the_fix_when_matched() {
    use deltacells::dataset::build::{build, BuildInput};
    let dir = tmpdir("10x-dup-names");
    let source = sample(20, 4);
    let plate = dir.join("plate");
    write_10x(&plate, &source, &["e1", "e2", "e3", "e4"]);
    // Two genes share the symbol A, as in real references.
    std::fs::write(
        plate.join("features.tsv"),
        "e1\tA\tGene Expression\ne2\tA\tGene Expression\ne3\tB\tGene Expression\ne4\tC\tGene Expression\n",
    )
    .unwrap();
    let out = dir.join("out");
    let options = small_blocks().with_sort_genes(false);
    convert(
        &Input::detect(&plate).unwrap(),
        &out,
        options.clone(),
        &|_| {},
    )
    .unwrap();
    assert_eq!(read_back(&out), source, "each gene keeps its own counts");
    let ds = Dataset::open(&out).unwrap();
    assert_eq!(ds.var_names().unwrap(), ["A", "A", "B", "C"]);

    // Matched with another input, the repeated name is ambiguous.
    let other = dir.join("other");
    write_10x(&other, &source, &["e1", "e2", "e3", "e4"]);
    let inputs: Vec<BuildInput> = [&plate, &other]
        .iter()
        .map(|p| BuildInput::detect(p.to_str().unwrap()).unwrap())
        .collect();
    let err = build(
        &inputs,
        dir.join("two").to_str().unwrap(),
        &options,
        &|_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("\"A\" appears twice") && err.contains("gene_ids"),
        "{err}"
    );
    // Matched by gene id, it converts.
    let by_id = options.with_gene_key(Some("gene_ids".into()));
    build(
        &inputs,
        dir.join("by-id").to_str().unwrap(),
        &by_id,
        &|_| {},
    )
    .unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_gene_given_twice_in_a_cell_is_refused_naming_the_file_and_the_input_gene() {
    let dir = tmpdir("dup-entries");
    // Cell 0 gives gene 2 twice; sorted, it would be output column 1.
    let source = Csr {
        n_cols: 3,
        indptr: vec![0, 3],
        indices: vec![2, 0, 2],
        values: vec![100, 1, 100],
    };
    let options = || ConvertOptions::default().with_sort_genes(false);
    for csc in [false, true] {
        let path = dir.join(format!("dup-{csc}.npz"));
        write_sparse_npz(&path, &source, csc);
        let err = convert(
            &Input::Npz(path.clone()),
            &dir.join("out"),
            options(),
            &|_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(path.to_str().unwrap()), "csc {csc}: {err}");
        assert!(err.contains("gene 2"), "csc {csc}: {err}");
    }
    // A Matrix Market file listing one element twice.
    let tenx = dir.join("tenx");
    std::fs::create_dir_all(&tenx).unwrap();
    std::fs::write(
        tenx.join("matrix.mtx"),
        "%%MatrixMarket matrix coordinate integer general\n2 1 3\n1 1 4\n2 1 1\n1 1 4\n",
    )
    .unwrap();
    let err = convert(
        &Input::detect(&tenx).unwrap(),
        &dir.join("out"),
        options(),
        &|_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("matrix.mtx") && err.contains("gene 0"),
        "{err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn npz_member_errors_name_the_file_and_the_member() {
    let dir = tmpdir("npz-members");
    let patched = |dtype: Dtype, data: Vec<u8>, shape: Vec<usize>, descr: &[u8]| {
        let mut npy = Array { dtype, shape, data }.to_npy();
        let at = npy.windows(5).position(|w| w == b"'|u1'").unwrap();
        npy[at..at + 5].copy_from_slice(descr);
        npy
    };
    let good = |name: &str| -> Vec<u8> {
        match name {
            "indptr" => array(Dtype::I64, &[0i64, 1]),
            "indices" => array(Dtype::I32, &[0i32]),
            "data" => array(Dtype::F32, &[1f32]),
            _ => array(Dtype::I64, &[1i64, 1]),
        }
    };
    let unicode = |text: &str| {
        let utf32: Vec<u8> = text
            .chars()
            .flat_map(|c| (c as u32).to_le_bytes())
            .collect();
        patched(Dtype::U8, utf32, vec![], b"'<U3'")
    };
    let bool_data = patched(Dtype::U8, vec![1], vec![1], b"'|b1'");
    // A format written as numpy text (`np.savez(..., format="csc")` stores
    // `<U3`), or as bytes padded with NULs, is read as its text.
    let csc = [
        ("format", unicode("csc")),
        ("indptr", array(Dtype::I64, &[0i64, 1, 1])),
        ("indices", array(Dtype::I32, &[0i32])),
        ("data", array(Dtype::F32, &[1f32])),
        ("shape", array(Dtype::I64, &[1i64, 2])),
    ];
    for (i, format) in [
        unicode("csc"),
        patched(Dtype::U8, b"csc\0".to_vec(), vec![], b"'|S4'"),
    ]
    .into_iter()
    .enumerate()
    {
        let path = dir.join(format!("text{i}.npz"));
        let mut members = csc.to_vec();
        members[0].1 = format;
        write_npz(&path, &members);
        let out = dir.join(format!("text{i}"));
        convert(&Input::Npz(path), &out, ConvertOptions::default(), &|_| {}).unwrap();
        let mut want = Csr::empty(2);
        want.indices.push(0);
        want.values.push(1);
        want.indptr.push(1);
        assert_eq!(read_back(&out), want);
    }
    // (member replaced, its new bytes or none, what the message says)
    let cases = [
        ("format", Some(unicode("coo")), "holds \"coo\""),
        (
            "format",
            Some(array(Dtype::I64, &[1i64])),
            "<i8 is not text",
        ),
        ("shape", Some(array(Dtype::F64, &[1f64, 1.0])), "F64"),
        ("data", Some(bool_data), "|b1"),
        ("shape", None, "no member"),
    ];
    for (i, (member, replaced, want)) in cases.into_iter().enumerate() {
        let path = dir.join(format!("m{i}.npz"));
        let mut members: Vec<(&str, Vec<u8>)> = ["indptr", "indices", "data", "shape"]
            .into_iter()
            .filter(|&n| n != member)
            .map(|n| (n, good(n)))
            .collect();
        members.extend(replaced.map(|bytes| (member, bytes)));
        write_npz(&path, &members);
        let err = convert(
            &Input::Npz(path.clone()),
            &dir.join("out"),
            ConvertOptions::default(),
            &|_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(path.to_str().unwrap()), "{member}: {err}");
        assert!(err.contains(&format!("{member}.npy")), "{member}: {err}");
        assert!(err.contains(want), "{member}: {err}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// `--feature-type` on a 10x folder of genes and antibodies keeps the
/// features of that type, in order, with their ids, names and types; a type
/// the folder lacks is refused naming those present, and inputs that name no
/// feature types (an `.npz`, a folder without features.tsv) refuse it.
#[test]
fn a_10x_folder_with_a_feature_type_filter_keeps_those_features() {
    let dir = tmpdir("10x-types");
    let source = sample(30, 7);
    let ids = ["e0", "e1", "CD3", "e3", "CD19", "e5", "e6"];
    let antibody = |g: usize| ids[g].starts_with("CD");
    let folder = dir.join("cite");
    write_10x(&folder, &source, &ids);
    let features: String = ids
        .iter()
        .enumerate()
        .map(|(g, id)| {
            let kind = if antibody(g) {
                "Antibody Capture"
            } else {
                "Gene Expression"
            };
            format!("{id}\tname_{id}\t{kind}\n")
        })
        .collect();
    std::fs::write(folder.join("features.tsv"), features).unwrap();
    for (kind, keep) in [("Gene Expression", false), ("Antibody Capture", true)] {
        let out = dir.join(format!("out-{keep}"));
        let options = small_blocks().with_feature_type(Some(kind.to_string()));
        convert(&Input::detect(&folder).unwrap(), &out, options, &|_| {}).unwrap();
        let kept: Vec<usize> = (0..ids.len()).filter(|&g| antibody(g) == keep).collect();
        let mut want = Csr::empty(kept.len() as u64);
        for w in source.indptr.windows(2) {
            for j in w[0] as usize..w[1] as usize {
                if let Some(k) = kept.iter().position(|&g| g == source.indices[j] as usize) {
                    want.indices.push(k as i32);
                    want.values.push(source.values[j]);
                }
            }
            want.indptr.push(want.indices.len() as i64);
        }
        assert_eq!(read_back(&out), want, "{kind}");
        let ds = Dataset::open(&out).unwrap();
        let order: Vec<usize> = ds
            .gene_order()
            .unwrap()
            .iter()
            .map(|&g| g as usize)
            .collect();
        let names: Vec<String> = (0..kept.len())
            .map(|k| ds.var_names().unwrap()[order.iter().position(|&o| o == k).unwrap()].clone())
            .collect();
        let want_names: Vec<String> = kept.iter().map(|&g| format!("name_{}", ids[g])).collect();
        assert_eq!(names, want_names, "{kind}");
    }
    let refused = |input: Input, kind: &str| {
        let options = small_blocks().with_feature_type(Some(kind.into()));
        let out = dir.join("refused");
        let err = convert(&input, &out, options, &|_| {}).unwrap_err();
        assert!(!out.exists(), "{err}");
        err.to_string()
    };
    let err = refused(Input::detect(&folder).unwrap(), "Peaks");
    assert!(
        err.contains("features.tsv") && err.contains("present: Antibody Capture, Gene Expression"),
        "{err}"
    );
    std::fs::remove_file(folder.join("features.tsv")).unwrap();
    let err = refused(Input::detect(&folder).unwrap(), "Gene Expression");
    assert!(err.contains("needs the folder's features.tsv"), "{err}");
    let npz = dir.join("m.npz");
    write_sparse_npz(&npz, &source, false);
    let err = refused(Input::Npz(npz), "Gene Expression");
    assert!(err.contains("names no feature types"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}
