//! Tokenizer dictionaries (two-column text: gene key, value) on arbitrary
//! bytes, split at the first NUL into a token file and a median file: never
//! a panic. A file that parses writes back as text that parses to the same
//! pairs, and dictionaries that both parse make a Geneformer and an scGPT
//! tokenizer, or a typed error, whose tables for the dictionaries' genes
//! (the class table of repeated medians included) are built without a panic.

#![no_main]

use deltacells::tokenize::{GeneMap, Geneformer, ScGpt, Tokenizer};
use libfuzzer_sys::fuzz_target;

/// The pairs of `map` as text that [`GeneMap::parse`] reads back: one pair
/// a line, split by a tab (`None` where a key holds a tab, as one of a
/// comma-separated file may).
fn written<V: Copy + std::fmt::Display>(map: &GeneMap<V>) -> Option<String> {
    if map.iter().any(|(k, _)| k.contains('\t')) {
        return None;
    }
    Some(map.iter().map(|(k, v)| format!("{k}\t{v}\n")).collect())
}

/// The pairs of `map`, sorted, each value as `bits` gives it (NaN equal to
/// itself).
fn pairs<V: Copy>(map: &GeneMap<V>, bits: impl Fn(V) -> u64) -> Vec<(String, u64)> {
    let mut pairs: Vec<_> = map.iter().map(|(k, v)| (k.to_string(), bits(v))).collect();
    pairs.sort();
    pairs
}

fuzz_target!(|data: &[u8]| {
    let at = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let tokens_text = String::from_utf8_lossy(&data[..at]);
    let medians_text = String::from_utf8_lossy(data.get(at + 1..).unwrap_or_default());
    let tokens = GeneMap::<i32>::parse(&tokens_text);
    let medians = GeneMap::<f64>::parse(&medians_text);
    if let Ok(t) = &tokens {
        if let Some(text) = written(t) {
            let again = GeneMap::<i32>::parse(&text).expect("written tokens parse");
            let bits = |v: i32| v as u32 as u64;
            assert_eq!(pairs(&again, bits), pairs(t, bits), "{text:?}");
        }
    }
    if let Ok(m) = &medians {
        if let Some(text) = written(m) {
            let again = GeneMap::<f64>::parse(&text).expect("written medians parse");
            assert_eq!(
                pairs(&again, f64::to_bits),
                pairs(m, f64::to_bits),
                "{text:?}"
            );
        }
    }
    let (Ok(tokens), Ok(medians)) = (tokens, medians) else {
        return;
    };
    // Each key once: a key two tokenized columns share is refused (below).
    let mut keys: Vec<String> = tokens.iter().map(|(k, _)| k.to_string()).collect();
    let named: std::collections::HashSet<String> = keys.iter().cloned().collect();
    keys.extend(
        medians
            .iter()
            .map(|(k, _)| k.to_string())
            .filter(|k| !named.contains(k)),
    );
    keys.push("a gene neither names".into());
    if let Ok(g) = Geneformer::new(tokens.clone(), medians) {
        let special = data.len() % 2 == 0;
        if let Ok(g) = g.with_max_len(1 + data.len() % 5, special) {
            // Refused only when no key has both a token and a median.
            match Tokenizer::Geneformer(g).for_keys(&keys) {
                Ok(table) => assert_eq!(table.n_cols(), keys.len()),
                Err(e) => assert!(e.to_string().contains("for none of"), "{e}"),
            }
        }
    }
    if let Ok(s) = ScGpt::new(tokens) {
        if let Ok(s) = s
            .with_n_bins(data.len() % 60)
            .and_then(|s| s.with_max_len(data.len() % 7))
        {
            // Every key of the tokens is among the keys: some has a token.
            let scgpt = Tokenizer::ScGpt(s);
            let table = scgpt.for_keys(&keys).expect("a key has a token");
            assert!(table.has_values());
            // A token's key twice is refused, naming it.
            let mut twice = keys.clone();
            twice.push(keys[0].clone());
            let e = scgpt.for_keys(&twice).expect_err("a key twice");
            assert!(e.to_string().contains("appears twice"), "{e}");
        }
    }
});
