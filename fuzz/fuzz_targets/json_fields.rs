//! The hand-written JSON reader of flat objects (`json::for_each_field`) against serde_json:
//! whatever it accepts, serde_json reads as the same object, key by key and value by value
//! (strings decoded, integers equal, an integer's text the one serde_json writes).
#![no_main]

use dialect_proxy::json::{for_each_field, Scalar};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

fuzz_target!(|data: &[u8]| {
    let mut fields = Vec::new();
    let read = for_each_field(data, |key, value| {
        let value = match value {
            Scalar::Str(s) => Value::String(s.decode().into_owned()),
            Scalar::Int(n, text) => {
                assert_eq!(text, n.to_string(), "an integer's text is serde_json's");
                Value::from(n)
            }
        };
        fields.push((key.to_owned(), value));
        Some(())
    });
    if read.is_none() {
        return;
    }
    let object: Map<String, Value> = serde_json::from_slice(data)
        .unwrap_or_else(|e| panic!("accepted what serde_json refuses ({e})"));
    // A key twice: serde_json keeps the last; the reader reports both in order.
    let mut expected = Map::new();
    for (key, value) in &fields {
        expected.insert(key.clone(), value.clone());
    }
    assert_eq!(object, expected);
});
