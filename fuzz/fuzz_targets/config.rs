//! The configuration loader on any text: it loads or names its problems, never panics. (A
//! file can name other files, mappings or certificates; those are read as the operator's.)
#![no_main]

use dialect_proxy::config::{load_text, Overrides};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(error) = load_text("fuzz.toml", text, &Overrides::default()) {
        assert!(!error.to_string().is_empty());
    }
});
