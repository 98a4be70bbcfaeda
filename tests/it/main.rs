//! The integration tests, one module per area (`aap_face`, `proxy_http`, `real_client`, …), and
//! the black-box harness they share (`support`: a scripted upstream, the real gateway binary, SSE
//! and AAP clients, the Node and Python validators).
//!
//! One test binary rather than one per file: `support` is compiled once instead of once per
//! file, and linked once. The tests of all modules share one
//! process, so shared state lives in `support` (the Node and Python installs happen once
//! behind a `OnceLock`) and no test changes the process environment or working directory.
//! Run one area with `cargo test --test it aap_face::`.

mod support;

mod aap_aap;
mod aap_agent_selftest;
mod aap_face;
mod aap_faults;
mod aap_upstream;
mod aap_upstream_real_client;
mod aap_upstream_requests;
mod admin;
mod admission;
mod auth;
mod browser;
mod cors;
mod fault_matrix;
mod golden_aap;
mod golden_aap_hop;
mod golden_aap_upstream;
mod golden_agui;
mod forwarding;
mod golden_hai;
mod golden_hai_hop;
mod hai_client;
mod hops;
mod layering;
mod lifecycle;
mod matrix;
mod log_safety;
mod metrics;
mod no_leaks;
mod proxy_faults;
mod proxy_fixtures;
mod proxy_framing;
mod proxy_h2;
mod proxy_hai;
mod proxy_http;
mod proxy_shutdown;
mod proxy_stall;
mod real_client;
mod robustness;
mod session_owners;
mod session_store_file;
mod session_store_redis;
mod shipped_configs;
mod strict_requests;
mod telemetry;
mod tls;
mod translate_cli;
