//! How the gateway connects to `https://` upstreams: a rustls client configuration per distinct
//! `[routes.tls]` table ([`ClientFiles`]), built once when the configuration is loaded.
//!
//! Trust: the system's roots, plus the PEM certificates of `ca_file` when a route names one.
//! The system roots come from `rustls-native-certs` (on Linux `/etc/ssl/certs` and the usual
//! bundle files, or `SSL_CERT_FILE`/`SSL_CERT_DIR` when set), not from a compiled-in copy of
//! Mozilla's list (`webpki-roots`): the gateway runs as a sidecar in images whose operators
//! manage the trust store — a company CA installed in the image is trusted, a distrusted root
//! is removed by updating the image, with no new gateway release. They are read once per
//! process.
//!
//! Identity: `client_cert` + `client_key` (both or neither) are presented to an upstream that
//! asks for a client certificate (mutual TLS).
//!
//! SNI and hostname verification are rustls's defaults: the name sent and checked is the
//! upstream URL's host (a DNS name or an IP address). There is no way to turn verification off.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;

use rustls::client::ResolvesClientCert;
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{ClientConfig, RootCertStore};

use super::{provider, read_certs, TlsError};

/// The files of a route's `[routes.tls]` table; all absent for an `https://` upstream without
/// one. Routes with equal files share one pooled client.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ClientFiles {
    /// Extra trust roots (PEM).
    pub ca_file: Option<PathBuf>,
    /// The client certificate chain (PEM), with `client_key`.
    pub client_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM), with `client_cert`.
    pub client_key: Option<PathBuf>,
}

/// How one route talks TLS to its upstream: the files it came from, and the configuration.
/// Two are equal when they came from the same files.
#[derive(Debug, Clone)]
pub struct ClientTls {
    pub files: ClientFiles,
    pub config: Arc<ClientConfig>,
}

impl ClientTls {
    /// The configuration for `files`, whose contents were read already: `extra_roots` from
    /// `ca_file`, `identity` from `client_cert` and `client_key`.
    pub fn new(
        files: ClientFiles,
        extra_roots: RootCertStore,
        identity: Option<Arc<CertifiedKey>>,
    ) -> Result<ClientTls, TlsError> {
        let mut roots = system_roots().clone();
        roots.roots.extend(extra_roots.roots);
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Provider)?
            .with_root_certificates(roots);
        let config = match identity {
            Some(identity) => {
                let resolver: Arc<dyn ResolvesClientCert> =
                    Arc::new(SingleCertAndKey::from(identity));
                builder.with_client_cert_resolver(resolver)
            }
            None => builder.with_no_client_auth(),
        };
        Ok(ClientTls {
            files,
            config: Arc::new(config),
        })
    }

    /// The system roots alone: an `https://` upstream without a `[routes.tls]` table.
    pub fn system() -> Result<ClientTls, TlsError> {
        ClientTls::new(ClientFiles::default(), RootCertStore::empty(), None)
    }
}

impl PartialEq for ClientTls {
    fn eq(&self, other: &ClientTls) -> bool {
        self.files == other.files
    }
}

/// A connector for `http://` URLs and, with `tls`, for `https://` ones (without it an
/// `https://` request fails verification: nothing is trusted). It offers only `http/1.1` by
/// ALPN: one request per connection at a time keeps cancellation simple (dropping a request
/// closes its connection) and lets a TLS failure reach the caller as itself. SNI and
/// verification use the URL's host.
pub fn https_connector(
    connect_timeout: Duration,
    tls: Option<&ClientTls>,
) -> HttpsConnector<HttpConnector> {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(connect_timeout));
    connector.set_nodelay(true);
    // The TLS layer above decides the scheme.
    connector.enforce_http(false);
    let mut config = match tls {
        Some(tls) => ClientConfig::clone(&tls.config),
        None => ClientConfig::clone(&plain_only()),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    HttpsConnector::from((connector, config))
}

/// The trust anchors of a `ca_file`; every certificate in it must be one.
pub fn read_roots(path: &std::path::Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs(path)? {
        roots.add(cert).map_err(|source| TlsError::Refused {
            path: path.to_path_buf(),
            source,
        })?;
    }
    Ok(roots)
}

/// A configuration that trusts nothing, for clients that only ever speak plain `http://` (the
/// connector wants one all the same); any `https://` request through it fails verification.
pub fn plain_only() -> Arc<ClientConfig> {
    static CONFIG: OnceLock<Arc<ClientConfig>> = OnceLock::new();
    Arc::clone(CONFIG.get_or_init(|| {
        let config = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("the ring provider supports TLS 1.2 and 1.3")
            .with_root_certificates(RootCertStore::empty())
            .with_no_client_auth();
        Arc::new(config)
    }))
}

/// The system's trust roots, read on first use. Unreadable entries are skipped (and logged);
/// a system without roots trusts only the routes' `ca_file`s.
fn system_roots() -> &'static RootCertStore {
    static ROOTS: OnceLock<RootCertStore> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        for error in &found.errors {
            tracing::warn!(%error, "a system trust root could not be read");
        }
        let mut roots = RootCertStore::empty();
        let (added, ignored) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            tracing::warn!(
                ignored,
                "no system trust roots found; https upstreams need a ca_file"
            );
        } else {
            tracing::debug!(added, ignored, "system trust roots loaded");
        }
        roots
    })
}
