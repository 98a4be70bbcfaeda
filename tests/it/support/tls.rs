//! TLS for the tests, with certificates made on the spot (rcgen) and nothing beyond loopback:
//!
//! - [`Pki`]: a throw-away CA in a temp directory, issuing server and client certificates as
//!   PEM files ([`Leaf`]); the directory goes when the `Pki` is dropped.
//! - [`TlsUpstream`]: an AG-UI agent over HTTPS (tokio-rustls + hyper, HTTP/1.1 or HTTP/2 by
//!   ALPN), optionally requiring a client certificate from the CA; it records what each request
//!   came with.
//! - [`TlsFront`]: TLS in front of any plaintext mock (the AAP agent, for one).
//! - [`connect`]: a rustls client connection to the gateway, trusting the CA, offering the
//!   ALPN protocols a test chooses.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;
use tokio_rustls::{TlsAcceptor, TlsConnector};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A throw-away certificate authority and the directory its files live in.
pub struct Pki {
    pub dir: PathBuf,
    ca_der: CertificateDer<'static>,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

/// A certificate issued by a [`Pki`], with its key, as PEM files and in memory.
#[derive(Clone)]
pub struct Leaf {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub cert_pem: String,
    pub key_pem: String,
    /// The DER of the certificate, to compare with what a peer presented.
    pub der: Vec<u8>,
}

impl Pki {
    pub fn new() -> Pki {
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("dp-tls-{}-{call}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "dialect-proxy test CA");
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let ca = params.self_signed(&key).unwrap();
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        Pki {
            dir,
            ca_der: ca.der().clone(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// The CA certificate's PEM file (a route's `ca_file`).
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A root store trusting this CA only.
    pub fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca_der.clone()).unwrap();
        roots
    }

    /// A server certificate for `names` (DNS names or IP addresses), written as
    /// `<stem>.pem` and `<stem>-key.pem`.
    pub fn server(&self, stem: &str, names: &[&str]) -> Leaf {
        self.issue(stem, names, rcgen::ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A client certificate, written as `<stem>.pem` and `<stem>-key.pem`.
    pub fn client(&self, stem: &str) -> Leaf {
        self.issue(
            stem,
            &["gateway.client.test"],
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        )
    }

    fn issue(&self, stem: &str, names: &[&str], usage: rcgen::ExtendedKeyUsagePurpose) -> Leaf {
        let key = rcgen::KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = rcgen::CertificateParams::new(names).unwrap();
        // The subject names the file, so two certificates never look alike.
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, stem);
        params.extended_key_usages = vec![usage];
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let leaf = Leaf {
            cert: self.dir.join(format!("{stem}.pem")),
            key: self.dir.join(format!("{stem}-key.pem")),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().to_vec(),
        };
        std::fs::write(&leaf.cert, &leaf.cert_pem).unwrap();
        std::fs::write(&leaf.key, &leaf.key_pem).unwrap();
        leaf
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Leaf {
    fn chain(&self) -> Vec<CertificateDer<'static>> {
        vec![CertificateDer::from(self.der.clone())]
    }

    fn private_key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).unwrap()
    }

    /// Puts this certificate and key in place of the files at `cert` and `key`, each written
    /// aside and renamed over the old one, as a secret mount or a certificate manager does.
    pub fn install_at(&self, cert: &Path, key: &Path) {
        for (path, contents) in [(key, &self.key_pem), (cert, &self.cert_pem)] {
            let aside = path.with_extension("new");
            std::fs::write(&aside, contents).unwrap();
            std::fs::rename(&aside, path).unwrap();
        }
    }
}

/// What one request to a [`TlsUpstream`] came with.
#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    /// The client certificate presented, if any (DER).
    pub client_cert: Option<Vec<u8>>,
    /// The protocol ALPN chose.
    pub alpn: Option<String>,
}

/// An AG-UI agent over HTTPS on `127.0.0.1:0`; it answers every POST with a short run whose
/// ids are the request's.
pub struct TlsUpstream {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: AbortHandle,
}

impl TlsUpstream {
    /// Serves `leaf`; with `client_ca`, a client certificate issued by it is required.
    pub async fn start(leaf: &Leaf, client_ca: Option<&Pki>) -> TlsUpstream {
        let config = server_config(leaf, client_ca);
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, record) = (acceptor.clone(), Arc::clone(&record));
                tokio::spawn(async move {
                    let tls = match acceptor.accept(tcp).into_fallible().await {
                        Ok(tls) => tls,
                        // A refused handshake (no or an untrusted client certificate): the
                        // alert is out; read what the client still sends before closing, so
                        // the close is no reset that could overtake the alert.
                        Err((_, mut tcp)) => {
                            let mut sink = [0u8; 1024];
                            let drain = async {
                                while matches!(tcp.read(&mut sink).await, Ok(n) if n > 0) {}
                            };
                            let _ = tokio::time::timeout(Duration::from_secs(2), drain).await;
                            return;
                        }
                    };
                    let (_, session) = tls.get_ref();
                    let client_cert = session
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .map(|c| c.to_vec());
                    let alpn = session
                        .alpn_protocol()
                        .map(|p| String::from_utf8_lossy(p).into_owned());
                    let service =
                        service_fn(move |request: http::Request<hyper::body::Incoming>| {
                            let record = Arc::clone(&record);
                            let (client_cert, alpn) = (client_cert.clone(), alpn.clone());
                            async move {
                                record.lock().unwrap().push(Seen {
                                    path: request.uri().path().to_owned(),
                                    client_cert,
                                    alpn,
                                });
                                let body = request.into_body().collect().await;
                                let input: Value = body
                                    .ok()
                                    .and_then(|b| serde_json::from_slice(&b.to_bytes()).ok())
                                    .unwrap_or_default();
                                Ok::<_, Infallible>(agui_run(&input))
                            }
                        });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        })
        .abort_handle();
        TlsUpstream { addr, seen, task }
    }

    /// `https://127.0.0.1:PORT<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// The requests served so far (a refused handshake is none).
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for TlsUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A server configuration serving `leaf`, offering `h2` and `http/1.1`; with `client_ca`, a
/// client certificate issued by it is required.
fn server_config(leaf: &Leaf, client_ca: Option<&Pki>) -> ServerConfig {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match client_ca {
        Some(ca) => builder.with_client_cert_verifier(
            WebPkiClientVerifier::builder_with_provider(Arc::new(ca.roots()), provider())
                .build()
                .unwrap(),
        ),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(leaf.chain(), leaf.private_key())
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config
}

/// A TLS terminator on `127.0.0.1:0` in front of a plaintext server: each connection's bytes,
/// decrypted, go to `backend` and back. Puts any of the plaintext mock agents behind HTTPS.
pub struct TlsFront {
    pub addr: SocketAddr,
    task: AbortHandle,
}

impl TlsFront {
    pub async fn start(leaf: &Leaf, backend: SocketAddr) -> TlsFront {
        let mut config = server_config(leaf, None);
        // The backend speaks HTTP/1.1 only.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let (Ok(mut tls), Ok(mut plain)) = (
                        acceptor.accept(tcp).await,
                        TcpStream::connect(backend).await,
                    ) else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        })
        .abort_handle();
        TlsFront { addr, task }
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A short AG-UI run answering `input`, as one SSE body.
fn agui_run(input: &Value) -> http::Response<Full<Bytes>> {
    let (thread, run) = (&input["threadId"], &input["runId"]);
    let events = [
        json!({"type": "RUN_STARTED", "threadId": thread, "runId": run}),
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "over TLS"}),
        json!({"type": "TEXT_MESSAGE_END", "messageId": "m1"}),
        json!({"type": "RUN_FINISHED", "threadId": thread, "runId": run}),
    ];
    let body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    http::Response::builder()
        .header("content-type", "text/event-stream")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

/// A TLS connection to `addr` for the name `localhost`, trusting `roots` only and offering
/// `alpn` (none when empty).
pub async fn connect(
    addr: SocketAddr,
    roots: RootCertStore,
    alpn: &[&[u8]],
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let tcp = TcpStream::connect(addr).await?;
    TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}
