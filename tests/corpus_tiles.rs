//! Every tile case of `../shared/testdata/deltacells/corpus/corpus.json` judged
//! as listed: `accept` decodes to exactly its expected arrays, `reject` (the
//! `derived` ones included: we are a strict reader) is refused with an error,
//! `either` may go both ways but must decode exactly if accepted. The rule each
//! rejection reports is checked against the rule the case breaks.

mod common;

use common::{decode_with, expected_csr, read_aligned, testdata};
use deltacells::format::tile::{StreamKind, TileError, TileRule};
use deltacells::Error;

/// Whether `rule` is the right report for the named corpus case.
fn matches_case(name: &str, rule: &TileRule) -> bool {
    use TileRule::*;
    match name {
        "zero_length_file" => matches!(rule, TooShort(0)),
        "bad_magic" => matches!(rule, BadMagic),
        "flags_nonzero" => matches!(rule, Flags(_)),
        "reserved_nonzero" => matches!(rule, Reserved(_)),
        "truncated" => matches!(rule, TotalSize { .. }),
        "crc_mismatch" => matches!(rule, Crc { .. }),
        "n_genes_too_large" => matches!(rule, NGenes(_)),
        "n_cells_plus_one" => matches!(
            rule,
            IndptrEnd { .. } | IndptrBounds { .. } | ChunkCoverage { .. }
        ),
        "n_chunks_zero" => matches!(rule, ChunkCount { .. }),
        "n_chunks_too_large" => matches!(rule, ChunkTableBounds { .. }),
        "indptr_off_in_chunk_table" => matches!(rule, IndptrOffset(_)),
        "indptr_beyond_file" => matches!(rule, IndptrBounds { .. }),
        "chunk_first_not_zero" => matches!(rule, ChunkCoverage { .. }),
        "chunk_cell_hi_beyond" => matches!(
            rule,
            ChunkBounds {
                field: "cell_hi",
                ..
            }
        ),
        "stream_out_of_bounds" => matches!(rule, StreamBounds { .. }),
        "stream_misaligned" => matches!(rule, StreamMisaligned { .. }),
        "stream_len_zero" => matches!(rule, StreamEmpty { .. }),
        "frame_wrong_size" => matches!(
            rule,
            FrameSize {
                stream: StreamKind::Gaps,
                ..
            }
        ),
        "frame_no_content_size" => matches!(rule, FrameNoContentSize { .. }),
        "frame_trailing_bytes" => matches!(rule, FrameTrailing { .. }),
        "frame_content_size_lie" => matches!(rule, FrameCorrupt { .. }),
        "frame_skippable" => matches!(rule, FrameMagic { .. }),
        "indices_not_increasing" => matches!(rule, ZeroGap),
        "indptr_decreasing" => matches!(rule, IndptrDecreasing { .. }),
        "indptr_negative" => matches!(rule, IndptrDecreasing { .. } | IndptrStart(_)),
        "exc_positions_duplicate" => matches!(rule, ExceptionOrder { .. }),
        "exc_position_huge" => matches!(rule, ExceptionPosition { .. }),
        "exc_payload_small_1000" => matches!(
            rule,
            ExceptionPayload {
                stream: StreamKind::Vexc,
                payload: 1000
            }
        ),
        "gexc_payload_zero" => matches!(
            rule,
            ExceptionPayload {
                stream: StreamKind::Gexc,
                payload: 0
            }
        ),
        "exc_k_greater_than_n" => matches!(rule, ExceptionSize { .. }),
        "exc_frame_wrong_size" => matches!(rule, ExceptionSize { .. }),
        "exc_frame_corrupt" => matches!(rule, FrameCorrupt { .. }),
        _ => false,
    }
}

#[test]
fn corpus_tile_cases_are_judged_as_listed() {
    let dir = testdata().join("deltacells/corpus");
    let mut judged = 0;
    for case in common::corpus_cases("tile") {
        let name = case["name"].as_str().unwrap();
        let bytes = read_aligned(&dir.join(case["path"].as_str().unwrap()));
        for backend in common::tile_backends() {
            let result = decode_with(bytes.bytes(), backend);
            match (case["expect"].as_str().unwrap(), result) {
                ("reject", Ok(_)) => {
                    panic!("{name}: accepted a tile that breaks: {}", case["rule"])
                }
                ("reject", Err(Error::Tile(TileError { rule, at }))) => {
                    assert!(
                        matches_case(name, &rule),
                        "{name}: wrong rule {rule} {at:?} for {}",
                        case["rule"]
                    );
                }
                ("reject", Err(other)) => panic!("{name}: not a tile error: {other}"),
                ("accept" | "either", Ok(csr)) => {
                    let expected = expected_csr(&dir.join(case["expected"].as_str().unwrap()));
                    assert_eq!(csr, expected, "{name} ({backend})");
                }
                ("accept", Err(e)) => panic!("{name}: refused a valid tile: {e}"),
                ("either", Err(_)) => {}
                (other, _) => panic!("{name}: unknown expectation {other}"),
            }
        }
        judged += 1;
    }
    assert!(judged >= 40, "only {judged} tile cases found");
}
