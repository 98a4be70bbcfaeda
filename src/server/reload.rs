//! Configuration reload (SIGHUP, or a change of the config file when watched): a new
//! configuration, already loaded and checked, becomes the router of every request that starts
//! after it; requests already open keep the gateway they started with (their route, upstream
//! client and limits), since each holds its own reference.
//!
//! What carries over: the session store (sessions and thread records), the global `max_streams`
//! count, the request body budget and the metrics; a route whose `max_streams` is unchanged
//! keeps its count. The listener and what is fixed when it is bound cannot change without a
//! restart: `listen`, `admin_listen`, `tls_cert`/`tls_key` (the files themselves are re-read
//! when they change), the server-wide `[limits]` (`max_streams`, `max_connections`,
//! `request_header_timeout`, `max_buffered_request_bytes`, `max_request_head_bytes`,
//! `max_requests_per_connection`), `stall_timeout` and `[sessions]`.
//! A reload that changes them keeps the running values and says which in the log.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{Admission, Config};
use crate::session::SessionLimits;
use crate::tls::ListenerTls;

use super::{Gateway, Lasting, Router, Routers};

/// Applies new configurations to a running server. Cheap to clone.
#[derive(Clone)]
pub struct Reloader {
    inner: Arc<Inner>,
}

struct Inner {
    routers: Routers,
    lasting: Lasting,
    fixed: Fixed,
}

impl Reloader {
    pub(super) fn new(routers: Routers, lasting: Lasting, started: &Config) -> Reloader {
        Reloader {
            inner: Arc::new(Inner {
                routers,
                lasting,
                fixed: Fixed::of(started),
            }),
        }
    }

    /// Makes `config` the configuration of new requests. Returns the settings it changed that
    /// only a restart applies (their running values are kept).
    pub fn apply(&self, mut config: Config) -> Vec<&'static str> {
        let kept = self.inner.fixed.restore(&mut config);
        let running = self.inner.routers.load();
        let gateway = Gateway::build(config, &self.inner.lasting, &running.gateway.streams);
        self.inner.routers.store(Arc::new(Router::build(gateway)));
        kept
    }
}

/// The settings of the running listener and store.
struct Fixed {
    listen: std::net::SocketAddr,
    admin_listen: Option<std::net::SocketAddr>,
    tls: Option<ListenerTls>,
    admission: Admission,
    stall_timeout: Duration,
    sessions: SessionLimits,
    store: crate::session::StoreSettings,
}

impl Fixed {
    fn of(config: &Config) -> Fixed {
        Fixed {
            listen: config.listen,
            admin_listen: config.admin_listen,
            tls: config.tls.clone(),
            admission: config.admission,
            stall_timeout: config.stall_timeout,
            sessions: config.sessions,
            store: config.store.clone(),
        }
    }

    /// Puts the running values back into `config`; names the ones it differed in.
    fn restore(&self, config: &mut Config) -> Vec<&'static str> {
        let mut kept = Vec::new();
        if config.listen != self.listen {
            kept.push("listen");
        }
        if config.admin_listen != self.admin_listen {
            kept.push("admin_listen");
        }
        if tls_files(config.tls.as_ref()) != tls_files(self.tls.as_ref()) {
            kept.push("tls_cert/tls_key");
        }
        if config.admission != self.admission {
            kept.push("[limits] max_streams/max_connections/request_header_timeout/max_buffered_request_bytes/max_request_head_bytes/max_requests_per_connection");
        }
        if config.stall_timeout != self.stall_timeout {
            kept.push("stall_timeout");
        }
        if config.sessions != self.sessions || config.store != self.store {
            kept.push("[sessions]");
        }
        config.listen = self.listen;
        config.admin_listen = self.admin_listen;
        config.tls = self.tls.clone();
        config.admission = self.admission;
        config.stall_timeout = self.stall_timeout;
        config.sessions = self.sessions;
        config.store = self.store.clone();
        kept
    }
}

fn tls_files(tls: Option<&ListenerTls>) -> Option<(&PathBuf, &PathBuf)> {
    tls.map(|tls| (&tls.cert_file, &tls.key_file))
}
