//! The server itself: where it listens (`listen`, `admin_listen`), whether it speaks TLS there
//! (`tls_cert`, `tls_key`: see `tls`), and how long it waits for open streams on shutdown and
//! for a blocked client (`drain_timeout`, `stall_timeout`). Each is the flag (or its environment
//! variable), else the file, else the default.

use std::net::SocketAddr;
use std::time::Duration;

use super::limits::parse_duration;
use super::problems::{Given, Problems};
use super::raw::RawConfig;
use super::Overrides;
use crate::tls::ListenerTls;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The server-wide settings, resolved.
pub(super) struct Server {
    /// `None` after a problem.
    pub listen: Option<SocketAddr>,
    pub admin_listen: Option<SocketAddr>,
    pub drain_timeout: Duration,
    pub stall_timeout: Duration,
    /// TLS on `listen`; `None` without it or after a problem.
    pub tls: Option<ListenerTls>,
}

pub(super) fn server(
    file: &mut Problems,
    flags: &mut Problems,
    raw: &RawConfig,
    overrides: &Overrides,
) -> Server {
    let mut address = |key: &str, given: &Given, example: &str| {
        given
            .text()
            .parse::<SocketAddr>()
            .map_err(|e| {
                let problem = format!("{:?} is not an address like {example} ({e})", given.text());
                given.report(file, flags, key, problem);
            })
            .ok()
    };
    let listen = match Given::pick(&overrides.listen, &raw.listen) {
        Some(given) => address("listen", &given, "127.0.0.1:8080"),
        None => address("listen", &Given::Flag(DEFAULT_LISTEN), "127.0.0.1:8080"),
    };
    let admin_listen = Given::pick(&overrides.admin_listen, &raw.admin_listen)
        .and_then(|given| address("admin_listen", &given, "127.0.0.1:9901"));
    let mut duration = |key: &str, flag, raw, default| match Given::pick(flag, raw) {
        None => default,
        Some(given) => parse_duration(given.text()).unwrap_or_else(|e| {
            given.report(file, flags, key, e);
            default
        }),
    };
    let drain_timeout = duration(
        "drain_timeout",
        &overrides.drain_timeout,
        &raw.drain_timeout,
        DEFAULT_DRAIN_TIMEOUT,
    );
    let stall_timeout = duration(
        "stall_timeout",
        &overrides.stall_timeout,
        &raw.stall_timeout,
        DEFAULT_STALL_TIMEOUT,
    );
    let tls = super::tls::listener_tls(
        file,
        flags,
        Given::pick(&overrides.tls_cert, &raw.tls_cert),
        Given::pick(&overrides.tls_key, &raw.tls_key),
    );
    Server {
        listen,
        admin_listen,
        drain_timeout,
        stall_timeout,
        tls,
    }
}
