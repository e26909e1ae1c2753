//! JSON text exactly as Python's `json.dumps` writes it.
//!
//! Two byte strings of the format are produced by the Python reference and
//! must be reproduced bit for bit: `obs/schema.json` (`json.dumps(schema,
//! indent=2)` plus a newline) and the canonical JSON hashed into the obs
//! fingerprint (`json.dumps(obj, sort_keys=True)`). Both use Python's defaults:
//! `ensure_ascii` (every character outside `' '..='~'` escaped as lowercase
//! `\uXXXX`, astral characters as surrogate pairs), `": "` between key and
//! value, and `", "` between items on one line or `","` at a line end.
//! serde_json differs on all three points, hence this writer.

use std::fmt::Write;

use serde_json::Value;

/// `json.dumps(value, sort_keys=sort_keys, indent=indent)`.
pub fn dumps(value: &Value, indent: Option<usize>, sort_keys: bool) -> String {
    let mut out = String::new();
    write_value(&mut out, value, indent, sort_keys, 0);
    out
}

fn newline(out: &mut String, indent: Option<usize>, depth: usize) {
    if let Some(n) = indent {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', n * depth));
    }
}

fn write_value(
    out: &mut String,
    value: &Value,
    indent: Option<usize>,
    sort_keys: bool,
    depth: usize,
) {
    let item_sep = if indent.is_some() { "," } else { ", " };
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        // Integers print alike; the format hashes no floats.
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(out, s),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, indent, depth + 1);
                write_value(out, item, indent, sort_keys, depth + 1);
            }
            newline(out, indent, depth);
            out.push(']');
        }
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            if sort_keys {
                // Python compares str by code point, which is UTF-8 byte order.
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, indent, depth + 1);
                write_string(out, key);
                out.push_str(": ");
                write_value(out, item, indent, sort_keys, depth + 1);
            }
            newline(out, indent, depth);
            out.push('}');
        }
    }
}

/// A JSON string with Python's `ensure_ascii` escaping.
fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(out, "\\u{unit:04x}").expect("writing to a String cannot fail");
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn matches_python_compact_sorted() {
        // json.dumps({"b": [1, "x"], "a": {"z": None, "y": True}}, sort_keys=True)
        let v = json!({"b": [1, "x"], "a": {"z": null, "y": true}});
        assert_eq!(
            dumps(&v, None, true),
            r#"{"a": {"y": true, "z": null}, "b": [1, "x"]}"#
        );
    }

    #[test]
    fn matches_python_indented() {
        // json.dumps({"k": [1, [], {}], "e": "é"}, indent=2)
        let v = json!({"k": [1, [], {}], "e": "é"});
        assert_eq!(
            dumps(&v, Some(2), false),
            "{\n  \"k\": [\n    1,\n    [],\n    {}\n  ],\n  \"e\": \"\\u00e9\"\n}"
        );
    }

    #[test]
    fn escapes_like_ensure_ascii() {
        // json.dumps("a\"\\\n\t\x01\x7f\u00ff\u4e2d\U0001F600")
        let s = "a\"\\\n\t\u{1}\u{7f}\u{ff}\u{4e2d}\u{1F600}";
        assert_eq!(
            dumps(&Value::String(s.into()), None, false),
            r#""a\"\\\n\t\u0001\u007f\u00ff\u4e2d\ud83d\ude00""#
        );
    }
}
