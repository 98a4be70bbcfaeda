//! TLS, on both sides of the gateway, and nothing else: reading PEM certificates and keys, the
//! rustls configurations built from them, and what a TLS failure looks like. Config uses it to
//! check the files a configuration names (so a bad file is a config problem at its line), the
//! HTTP layer and the server use what config built; it imports nothing of the crate.
//!
//! - [`client`]: how the gateway connects to `https://` upstreams — the system's trust roots
//!   plus a route's `[routes.tls]` table (`ca_file`, `client_cert` + `client_key`).
//! - [`server`]: TLS termination on the listener (`tls_cert`, `tls_key`), with a certificate
//!   that is re-read when its files change.
//!
//! One cryptographic provider, *ring*, is named explicitly wherever a configuration is built
//! ([`provider`]), so nothing depends on rustls picking a process default (which panics when a
//! dependency enables a second provider). Protocol versions are rustls's safe defaults (TLS 1.2
//! and 1.3); certificate and hostname verification are rustls's and cannot be turned off.

pub mod client;
pub mod server;

use std::error::Error as StdError;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

pub use client::{ClientFiles, ClientTls};
pub use server::ListenerTls;

/// A problem with a certificate or key file, or with what rustls made of it. `Display` names
/// the file and is what an operator reads (config problems, reload warnings).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("{} is not valid PEM: {source}", path.display())]
    Pem {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)", path.display())]
    NoCertificate { path: PathBuf },
    #[error("{} holds no PEM private key (PKCS#8, PKCS#1 or SEC1)", path.display())]
    NoKey { path: PathBuf },
    /// rustls refused what the file holds (a CA that is no trust anchor, an unsupported key, a
    /// key that does not match its certificate).
    #[error("{}: {source}", path.display())]
    Refused {
        path: PathBuf,
        source: rustls::Error,
    },
    /// The provider cannot make a configuration (it has no suite for the default versions).
    #[error("TLS is not available: {0}")]
    Provider(rustls::Error),
}

/// The crypto provider every configuration is built with (*ring*). It is also installed as the
/// process default, so a library that asks rustls for the default finds the same one.
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    Arc::clone(PROVIDER.get_or_init(|| {
        let provider = rustls::crypto::ring::default_provider();
        // Fails only when a default is already installed, which is then left alone.
        let _ = provider.clone().install_default();
        Arc::new(provider)
    }))
}

/// Every certificate of a PEM file, in order (a chain: the end-entity certificate first);
/// at least one.
pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Pem {
            path: path.to_path_buf(),
            source,
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

/// The first private key of a PEM file.
pub fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|source| match source {
        rustls::pki_types::pem::Error::NoItemsFound => TlsError::NoKey {
            path: path.to_path_buf(),
        },
        source => TlsError::Pem {
            path: path.to_path_buf(),
            source,
        },
    })
}

/// A certificate chain with its private key, checked to belong together; `key_path` is named
/// when they do not.
pub fn certified_key(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    key_path: &Path,
) -> Result<Arc<CertifiedKey>, TlsError> {
    CertifiedKey::from_der(chain, key, &provider())
        .map(Arc::new)
        .map_err(|source| TlsError::Refused {
            path: key_path.to_path_buf(),
            source,
        })
}

/// [`read_certs`], [`read_key`] and [`certified_key`] in one step.
pub fn load_identity(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, TlsError> {
    let chain = read_certs(cert)?;
    certified_key(chain, read_key(key)?, key)
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The TLS error somewhere in `error`'s chain, when a TLS handshake or record failed (an
/// untrusted certificate, a hostname that does not match, an alert from the peer). I/O errors
/// are looked into as well: they carry rustls's error as their inner error, which
/// `Error::source` skips.
pub fn tls_cause<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(tls) = error.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        next = match error
            .downcast_ref::<io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn StdError + 'static)),
            None => error.source(),
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_errors_are_found_inside_io_errors_and_sources() {
        let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let io = io::Error::new(io::ErrorKind::InvalidData, tls.clone());
        // hyper-rustls wraps the handshake's I/O error in another one.
        let outer = io::Error::other(io);
        assert_eq!(tls_cause(&outer), Some(&tls));
        let plain = io::Error::new(io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(tls_cause(&plain), None);
    }

    #[test]
    fn files_without_pem_items_are_named() {
        let dir = std::env::temp_dir().join(format!("dp-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "nothing here\n").unwrap();
        let cert = read_certs(&empty).unwrap_err().to_string();
        let key = read_key(&empty).unwrap_err().to_string();
        let missing = read_certs(&dir.join("missing.pem"))
            .unwrap_err()
            .to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            cert.contains("empty.pem holds no PEM certificate"),
            "{cert}"
        );
        assert!(key.contains("empty.pem holds no PEM private key"), "{key}");
        assert!(missing.starts_with("cannot read "), "{missing}");
    }
}
