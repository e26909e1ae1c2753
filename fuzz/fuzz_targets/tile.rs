//! Tile parser and decoder on arbitrary bytes: never a panic, and every kernel
//! backend reaches the same verdict (the same rows, or the same rule).
#![no_main]

use deltacells::engine::ChunkDecoder;
use deltacells::format::tile::TileView;
use deltacells::Backend;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Tiles carry a CRC; fix it so mutations reach the structural checks.
    let mut bytes = data.to_vec();
    if bytes.len() >= 64 {
        let crc = crc32fast::hash(&bytes[64..]);
        bytes[56..60].copy_from_slice(&crc.to_le_bytes());
    }
    let Ok(view) = TileView::parse(&bytes) else {
        return;
    };
    let verdicts: Vec<String> = Backend::available()
        .into_iter()
        .map(|b| {
            let mut dec = ChunkDecoder::for_backend(b).expect("available backend");
            match dec.decode_tile_to_csr::<i32>(&view) {
                Ok(csr) => format!("{:?}", (csr.indptr, csr.indices, csr.values)),
                Err(e) => e.to_string(),
            }
        })
        .collect();
    assert!(
        verdicts.windows(2).all(|w| w[0] == w[1]),
        "backends disagree"
    );
});
