//! `obs/schema.json` on arbitrary bytes: never a panic; a schema that parses
//! writes back to JSON that parses to the same schema.

#![no_main]

use deltacells::obs::ObsSchema;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(schema) = ObsSchema::parse(data) {
        let text = schema.to_json_text();
        let again = ObsSchema::parse(text.as_bytes()).expect("a written schema parses");
        assert_eq!(again, schema, "{text}");
    }
});
