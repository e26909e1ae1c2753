//! The Java reference's TS_2DIFF vectors (`ts2diff/public.jsonl` of the
//! shared test data), parsed once for the library's tests and the
//! command-line tool's (cli/tests, which include this file).
#![allow(dead_code)]

#[path = "../common/testdata.rs"]
mod testdata;

use deltacells::format::ts2diff::FloatType;
use testdata::testdata;

/// One vector: the values, the reference's pages and what they decode to.
pub struct Vector {
    pub id: String,
    pub ty: FloatType,
    pub mpn: i32,
    pub block_size: u32,
    pub values: Vec<u64>,
    pub encoded: Vec<u8>,
    pub alt: Option<Vec<u8>>,
    pub zero_padding: Vec<u8>,
    pub decoded: Vec<u64>,
    pub form: u8,
    pub mpn_on_wire: Option<i32>,
}

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn bits_list(v: &serde_json::Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|b| u64::from_str_radix(b.as_str().unwrap(), 16).unwrap())
        .collect()
}

pub fn vectors() -> Vec<Vector> {
    let path = testdata().join("ts2diff/public.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let vectors: Vec<Vector> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            Vector {
                id: v["id"].as_str().unwrap().to_string(),
                ty: v["type"].as_str().unwrap().parse().unwrap(),
                mpn: v["mpn"].as_i64().unwrap() as i32,
                block_size: v["block_size"].as_u64().unwrap() as u32,
                values: bits_list(&v["values_bits"]),
                encoded: hex(v["encoded_hex"].as_str().unwrap()),
                alt: v["alt_encoded_hex"].as_str().map(hex),
                zero_padding: hex(v["encoded_hex_zero_padding"].as_str().unwrap()),
                decoded: bits_list(&v["decoded_bits"]),
                form: v["form"].as_u64().unwrap() as u8,
                mpn_on_wire: v["mpn_on_wire"].as_i64().map(|m| m as i32),
            }
        })
        .collect();
    assert!(
        vectors.len() >= 70,
        "expected the full public vector set, found {}",
        vectors.len()
    );
    vectors
}
