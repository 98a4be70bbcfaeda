//! TLS termination on the listener: the server configuration for `tls_cert` + `tls_key`, and
//! [`ReloadingCert`], which re-reads the two files when they change, so a renewed certificate
//! (cert-manager, a mounted secret) is served without a restart.
//!
//! ALPN offers `h2` first, then `http/1.1`: browsers get HTTP/2 and multiplex their streams on
//! one connection instead of six per origin. The handshake itself runs in each connection's
//! task, under a deadline (`server::connection`).
//!
//! Reloading is checked during handshakes, at most once per [`RELOAD_CHECK_INTERVAL`]: two
//! `stat` calls compare the files' modification time, size and inode with the last ones seen.
//! When they changed, both files are read again; a good pair replaces the certified key for
//! the handshakes that follow (open connections keep theirs), a bad one (unreadable, not PEM,
//! a key that does not match — also a pair caught half-written) is logged as a warning and the
//! previous certificate stays in service until the files change again.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use tokio::time::Instant;

use super::{load_identity, provider, TlsError};

/// How often, at most, a handshake checks whether the certificate files changed.
pub const RELOAD_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// The ALPN protocols the listener offers, preferred first.
pub const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// The listener's TLS: the files it serves and the server configuration.
#[derive(Debug, Clone)]
pub struct ListenerTls {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub config: Arc<ServerConfig>,
}

impl ListenerTls {
    /// The configuration serving `initial` (read from `cert_file` and `key_file` just now), and
    /// whatever those files hold later.
    pub fn new(
        cert_file: PathBuf,
        key_file: PathBuf,
        initial: Arc<CertifiedKey>,
        stamp: Option<Stamp>,
    ) -> Result<ListenerTls, TlsError> {
        let resolver = ReloadingCert::new(cert_file.clone(), key_file.clone(), initial, stamp);
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Provider)?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(resolver));
        config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
        Ok(ListenerTls {
            cert_file,
            key_file,
            config: Arc::new(config),
        })
    }

    /// Reads both files and builds the configuration.
    pub fn load(cert_file: PathBuf, key_file: PathBuf) -> Result<ListenerTls, TlsError> {
        let stamp = Stamp::of(&cert_file, &key_file);
        let initial = load_identity(&cert_file, &key_file)?;
        ListenerTls::new(cert_file, key_file, initial, stamp)
    }
}

/// What identifies one version of the two files without reading them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp([FileStamp; 2]);

#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

impl Stamp {
    /// The stamp of the certificate and key files now; `None` when either cannot be looked at.
    pub fn of(cert: &Path, key: &Path) -> Option<Stamp> {
        Some(Stamp([FileStamp::of(cert)?, FileStamp::of(key)?]))
    }
}

impl FileStamp {
    fn of(path: &Path) -> Option<FileStamp> {
        let meta = std::fs::metadata(path).ok()?;
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&meta);
        #[cfg(not(unix))]
        let inode = 0;
        Some(FileStamp {
            modified: meta.modified().ok(),
            len: meta.len(),
            inode,
        })
    }
}

/// The listener's certificate resolver: see the module docs.
#[derive(Debug)]
pub struct ReloadingCert {
    cert_file: PathBuf,
    key_file: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    current: Arc<CertifiedKey>,
    /// The files as last seen, good or bad: a bad pair is retried only once it changes.
    seen: Option<Stamp>,
    checked: Instant,
}

impl ReloadingCert {
    pub fn new(
        cert_file: PathBuf,
        key_file: PathBuf,
        current: Arc<CertifiedKey>,
        seen: Option<Stamp>,
    ) -> ReloadingCert {
        ReloadingCert {
            cert_file,
            key_file,
            state: Mutex::new(State {
                current,
                seen,
                checked: Instant::now(),
            }),
        }
    }

    /// The certified key to serve now, after reloading it if the files changed.
    pub fn current(&self) -> Arc<CertifiedKey> {
        // A panic while the lock was held cannot leave the state half-updated: keep serving.
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.checked.elapsed() >= RELOAD_CHECK_INTERVAL {
            state.checked = Instant::now();
            let stamp = Stamp::of(&self.cert_file, &self.key_file);
            if stamp != state.seen {
                state.seen = stamp;
                self.reload(&mut state);
            }
        }
        Arc::clone(&state.current)
    }

    fn reload(&self, state: &mut State) {
        match load_identity(&self.cert_file, &self.key_file) {
            Ok(key) => {
                state.current = key;
                tracing::info!(
                    cert_file = %self.cert_file.display(),
                    key_file = %self.key_file.display(),
                    "listener certificate reloaded"
                );
            }
            Err(error) => tracing::warn!(
                cert_file = %self.cert_file.display(),
                key_file = %self.key_file.display(),
                %error,
                "the changed certificate files cannot be used; the previous certificate stays in service"
            ),
        }
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf, Vec<u8>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
        // Written aside and renamed, as a secret mount or cert-manager replaces files.
        std::fs::write(dir.join("cert.tmp"), cert.pem()).unwrap();
        std::fs::write(dir.join("key.tmp"), key.serialize_pem()).unwrap();
        std::fs::rename(dir.join("cert.tmp"), &cert_path).unwrap();
        std::fs::rename(dir.join("key.tmp"), &key_path).unwrap();
        (cert_path, key_path, cert.der().to_vec())
    }

    fn served(resolver: &ReloadingCert) -> Vec<u8> {
        resolver.current().cert[0].to_vec()
    }

    #[tokio::test(start_paused = true)]
    async fn a_changed_pair_is_served_and_a_bad_one_keeps_the_previous() {
        let dir = std::env::temp_dir().join(format!("dp-tls-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key, first) = write_pair(&dir, "first.test");
        let tls = ListenerTls::load(cert.clone(), key.clone()).unwrap();
        assert_eq!(
            tls.config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        let resolver = ReloadingCert::new(
            cert.clone(),
            key.clone(),
            load_identity(&cert, &key).unwrap(),
            Stamp::of(&cert, &key),
        );
        assert_eq!(served(&resolver), first);

        let (_, _, second) = write_pair(&dir, "second.test");
        // Within the check interval the files are not looked at.
        assert_eq!(served(&resolver), first);
        tokio::time::advance(RELOAD_CHECK_INTERVAL).await;
        assert_eq!(served(&resolver), second);

        // A key that belongs to another certificate: the served one stays.
        let other = rcgen::KeyPair::generate().unwrap();
        std::fs::write(dir.join("key.tmp"), other.serialize_pem()).unwrap();
        std::fs::rename(dir.join("key.tmp"), &key).unwrap();
        tokio::time::advance(RELOAD_CHECK_INTERVAL).await;
        assert_eq!(served(&resolver), second);
        std::fs::write(&cert, "garbage").unwrap();
        tokio::time::advance(RELOAD_CHECK_INTERVAL).await;
        assert_eq!(served(&resolver), second);

        let (_, _, third) = write_pair(&dir, "third.test");
        tokio::time::advance(RELOAD_CHECK_INTERVAL).await;
        assert_eq!(served(&resolver), third);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
