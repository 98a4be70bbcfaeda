//! The HAI reader on any bytes, into every client dialect: no panic, and the client's stream
//! is well formed and ends with its terminal once per run.
#![no_main]

use dialect_proxy::dialect::Dialect;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| dialect_proxy_fuzz::check_reader(Dialect::Hai, data));
