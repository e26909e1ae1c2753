//! The golden tiles in `../shared/testdata/deltacells/tiles/` were written by an
//! independent implementation: decoding them bit-exactly is the interop proof.
//! Our writer's output for the same input must decode identically too (byte
//! equality is not required: zstd output may differ between builds).

mod common;

use common::{decode_with, expected_csr, read_aligned, testdata};
use deltacells::format::tile::TileView;
use deltacells::format::tile_writer::TileEncoder;
use deltacells::kernels::Stores;
use deltacells::{Backend, Csr};

fn index() -> Vec<serde_json::Value> {
    let path = testdata().join("deltacells/tiles/index.json");
    serde_json::from_slice(&std::fs::read(path).expect("tiles/index.json")).expect("valid JSON")
}

#[test]
fn golden_tiles_decode_exactly_on_every_backend() {
    let dir = testdata().join("deltacells/tiles");
    let entries = index();
    let tiles = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|f| f.as_ref().unwrap().path().extension() == Some("dct".as_ref()));
    assert_eq!(
        entries.len(),
        tiles.count(),
        "index.json lists every golden tile"
    );
    for e in &entries {
        let name = e["name"].as_str().unwrap();
        let bytes = read_aligned(&dir.join(e["tile"].as_str().unwrap()));
        let expected = expected_csr(&dir.join(e["expected"].as_str().unwrap()));
        let view = TileView::parse(bytes.bytes()).unwrap_or_else(|err| panic!("{name}: {err}"));
        assert_eq!(
            view.n_cells() as u64,
            e["n_cells"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(view.nnz() as u64, e["nnz"].as_u64().unwrap(), "{name}");
        assert_eq!(
            u64::from(view.n_genes()),
            e["n_genes"].as_u64().unwrap(),
            "{name}"
        );
        for backend in common::tile_backends() {
            let got = decode_with(bytes.bytes(), backend)
                .unwrap_or_else(|err| panic!("{name} ({backend}): {err}"));
            assert_eq!(got, expected, "{name} decoded with {backend}");
            for stores in Stores::ALL {
                let by_rows = common::decode_rows_with(bytes.bytes(), backend, stores, |_| true)
                    .unwrap_or_else(|err| panic!("{name} ({backend}, {stores:?}), by rows: {err}"));
                assert_eq!(
                    by_rows, expected,
                    "{name} decoded by rows with {backend}, {stores:?}"
                );
            }
            let odd =
                common::decode_rows_with(bytes.bytes(), backend, Stores::Streaming, |c| c % 2 == 1)
                    .unwrap_or_else(|err| panic!("{name} ({backend}), odd rows: {err}"));
            let row = |csr: &Csr<i32>, c: usize| {
                let r = csr.indptr[c] as usize..csr.indptr[c + 1] as usize;
                (csr.indices[r.clone()].to_vec(), csr.values[r].to_vec())
            };
            for c in 0..view.n_cells() {
                let (got, want) = (row(&odd, c), row(&expected, c));
                if c % 2 == 1 {
                    assert_eq!(got, want, "{name} ({backend}): odd row {c}");
                } else {
                    assert!(got.0.is_empty(), "{name}: row {c} was not asked for");
                }
            }
        }
    }
}

#[test]
fn unaligned_tile_bytes_decode_the_same() {
    let dir = testdata().join("deltacells/tiles");
    let raw = std::fs::read(dir.join("realistic_8chunks.dct")).unwrap();
    let mut shifted = vec![0u8; raw.len() + 1];
    shifted[1..].copy_from_slice(&raw);
    let expected = expected_csr(&dir.join("realistic_8chunks.npz"));
    assert_eq!(
        decode_with(&shifted[1..], Backend::Scalar).unwrap(),
        expected
    );
}

#[test]
fn our_writer_reencodes_golden_inputs_identically() {
    let dir = testdata().join("deltacells/tiles");
    for e in index() {
        let name = e["name"].as_str().unwrap();
        let expected = expected_csr(&dir.join(e["expected"].as_str().unwrap()));
        let view_bytes = read_aligned(&dir.join(e["tile"].as_str().unwrap()));
        let chunks = TileView::parse(view_bytes.bytes()).unwrap().n_chunks();
        // Level 3 keeps the test quick; the level does not change what decodes.
        let tile = TileEncoder::new()
            .with_chunks(chunks.max(1))
            .with_level(3)
            .encode(expected.as_ref())
            .unwrap_or_else(|err| panic!("{name}: {err}"));
        let got = decode_with(&tile, Backend::Scalar).unwrap_or_else(|err| panic!("{name}: {err}"));
        assert_eq!(got, expected, "{name} re-encoded");
        assert_eq!(TileView::parse(&tile).unwrap().n_chunks(), chunks, "{name}");
    }
}
