//! TLS on both sides of the gateway, with certificates made by the test (`support::tls`):
//! `https://` upstreams trusted through a route's `ca_file` (and refused when untrusted or for
//! another host, with a 502 that does not name the upstream), mutual TLS toward an upstream
//! that asks for a client certificate, an AAP agent behind TLS, and the listener's `tls_cert`/`tls_key`: HTTP/2 or
//! HTTP/1.1 by ALPN, a certificate replaced on disk served to new connections, and a client
//! that never says hello closed within the handshake bound.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use support::aap_agent::AapAgent;
use support::tls::{connect, Pki, TlsFront, TlsUpstream};
use support::{assert_run_envelope, run_input, send, Gateway, Request, PATIENCE};
use tokio::io::AsyncReadExt;

const THREAD: &str = "thread-tls";
const RUN: &str = "run-tls";
/// What the gateway's own certificate is issued for.
const GATEWAY_NAMES: &[&str] = &["localhost", "127.0.0.1"];

/// Writes `toml` as the gateway's config file in the test's directory.
fn config_file(pki: &Pki, toml: &str) -> PathBuf {
    let path = pki.dir.join("dialect-proxy.toml");
    std::fs::write(&path, toml).unwrap();
    path
}

/// An AG-UI route at `path` to `upstream`, with `tls` (a `[routes.tls]` table, or nothing).
fn route(path: &str, upstream: &str, tls: &str) -> String {
    format!("[[routes]]\npath = \"{path}\"\nclient = \"ag-ui\"\nupstream = \"{upstream}\"\n{tls}")
}

fn ca_table(pki: &Pki) -> String {
    format!("[routes.tls]\nca_file = '{}'\n", pki.ca_file().display())
}

fn gateway_with_config(path: &Path) -> Gateway {
    Gateway::spawn(&["--config", path.to_str().unwrap()])
}

/// A gateway serving the demo agent over TLS with the certificate at `cert` and `key`.
fn tls_gateway(cert: &Path, key: &Path) -> Gateway {
    let gateway = Gateway::demo_tls(cert, key, &[]);
    assert_eq!(gateway.scheme(), "https", "the announced scheme");
    gateway
}

/// Posts a run to `path` and reads it to its end: 200 and a well-formed run that finished.
async fn stream_run(gateway: &Gateway, path: &str) -> Vec<Value> {
    let mut response = send(
        gateway.addr,
        &Request::post_json(path, run_input(THREAD, RUN)),
    )
    .await;
    assert_eq!(response.status, 200);
    let events = response.events_to_end().await;
    let terminal = assert_run_envelope(&events, THREAD, RUN);
    assert_eq!(terminal["type"], "RUN_FINISHED", "{events:?}");
    events
}

/// Posts a run to `path` and checks the refusal: 502 `UPSTREAM_UNAVAILABLE`, a message that
/// names neither the upstream's URL nor its address.
async fn assert_refused_without_naming(gateway: &Gateway, path: &str, upstream: &TlsUpstream) {
    let mut response = send(
        gateway.addr,
        &Request::post_json(path, run_input(THREAD, RUN)),
    )
    .await;
    let text = response.text().await;
    assert_eq!(response.status, 502, "body: {text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["error"]["code"], "UPSTREAM_UNAVAILABLE", "{body}");
    assert!(
        !body["error"]["message"].as_str().unwrap_or("").is_empty(),
        "{body}"
    );
    for secret in [
        upstream.url(""),
        upstream.addr.to_string(),
        upstream.addr.port().to_string(),
    ] {
        assert!(
            !text.contains(&secret),
            "the refusal names {secret}: {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_upstream_trusted_through_its_ca_file_streams_through() {
    let pki = Pki::new();
    let upstream = TlsUpstream::start(&pki.server("upstream", &["127.0.0.1"]), None).await;
    let file = config_file(&pki, &route("/", &upstream.url("/agent"), &ca_table(&pki)));
    let gateway = gateway_with_config(&file);

    let events = stream_run(&gateway, "/").await;
    assert!(
        events.iter().any(|e| e["delta"] == "over TLS"),
        "the upstream's text went through: {events:?}"
    );
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].path, "/agent");
    assert_eq!(seen[0].alpn.as_deref(), Some("http/1.1"), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_of_an_unknown_issuer_is_a_502_that_does_not_name_it() {
    let pki = Pki::new();
    let upstream = TlsUpstream::start(&pki.server("upstream", &["127.0.0.1"]), None).await;
    // Flags only: the system roots, which do not hold the test CA.
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);

    assert_refused_without_naming(&gateway, "/", &upstream).await;
    assert!(upstream.seen().is_empty(), "no request crossed");
    // The details are for the operator.
    gateway.wait_for_stderr("UnknownIssuer").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_host_is_refused() {
    let pki = Pki::new();
    // Trusted issuer, but issued for a name the URL does not use.
    let upstream = TlsUpstream::start(&pki.server("elsewhere", &["elsewhere.test"]), None).await;
    let file = config_file(&pki, &route("/", &upstream.url("/agent"), &ca_table(&pki)));
    let gateway = gateway_with_config(&file);

    assert_refused_without_naming(&gateway, "/", &upstream).await;
    assert!(upstream.seen().is_empty(), "no request crossed");
    gateway
        .wait_for_stderr("certificate not valid for name")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mtls_upstream_gets_the_routes_client_certificate_and_refuses_a_route_without() {
    let pki = Pki::new();
    let upstream = TlsUpstream::start(&pki.server("upstream", &["127.0.0.1"]), Some(&pki)).await;
    let client = pki.client("gateway-client");
    let with = format!(
        "{}client_cert = '{}'\nclient_key = '{}'\n",
        ca_table(&pki),
        client.cert.display(),
        client.key.display()
    );
    let file = config_file(
        &pki,
        &format!(
            "{}{}",
            route("/with", &upstream.url("/agent"), &with),
            route("/without", &upstream.url("/agent"), &ca_table(&pki)),
        ),
    );
    let gateway = gateway_with_config(&file);

    stream_run(&gateway, "/with").await;
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0].client_cert.as_deref(),
        Some(client.der.as_slice()),
        "the upstream saw the route's client certificate"
    );

    assert_refused_without_naming(&gateway, "/without", &upstream).await;
    assert_eq!(
        upstream.seen().len(),
        1,
        "the route without a certificate got nothing through"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aap_upstream_is_reached_over_tls_with_the_routes_roots() {
    let pki = Pki::new();
    let agent = AapAgent::start().await;
    let front = TlsFront::start(&pki.server("aap-agent", &["127.0.0.1"]), agent.addr()).await;
    let base = format!("https://{}{}", front.addr, agent.base());
    let file = config_file(
        &pki,
        &format!(
            "{}upstream_dialect = \"aap\"\n{}",
            route("/", &base, ""),
            ca_table(&pki)
        ),
    );
    let gateway = gateway_with_config(&file);

    stream_run(&gateway, "/").await;
    // /meta, the session and the turn all went through the TLS front.
    assert_eq!(agent.meta_calls(), 1);
    assert_eq!(agent.sessions_created().len(), 1);
    assert_eq!(agent.all_turns().len(), 1);
}

fn post(uri: &str, body: String) -> http::Request<Full<Bytes>> {
    http::Request::post(uri)
        .header("content-type", "application/json")
        .header("host", "localhost")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

/// The JSON events of an AG-UI SSE body.
fn events(body: &[u8]) -> Vec<Value> {
    std::str::from_utf8(body)
        .unwrap()
        .split_terminator("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .map(|j| serde_json::from_str(j).unwrap())
        .collect()
}

/// Reads a streamed run's response to the end and checks it.
async fn assert_streamed_run(response: http::Response<hyper::body::Incoming>, run_id: &str) {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let body = tokio::time::timeout(PATIENCE, response.into_body().collect())
        .await
        .expect("the run ends in time")
        .unwrap()
        .to_bytes();
    let events = events(&body);
    assert_eq!(
        assert_run_envelope(&events, THREAD, run_id)["type"],
        "RUN_FINISHED"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_speaks_h2_by_alpn_and_streams_runs_over_it() {
    let pki = Pki::new();
    let leaf = pki.server("gateway", GATEWAY_NAMES);
    let gateway = tls_gateway(&leaf.cert, &leaf.key);

    let tls = connect(gateway.addr, pki.roots(), &[b"h2", b"http/1.1"])
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .expect("HTTP/2 over TLS");
    tokio::spawn(connection);
    // Two runs at once on the one connection.
    let runs: Vec<_> = ["r1", "r2"]
        .into_iter()
        .map(|run| {
            let mut sender = sender.clone();
            tokio::spawn(async move {
                let response = sender
                    .send_request(post("https://localhost/", run_input(THREAD, run)))
                    .await
                    .unwrap();
                assert_eq!(response.version(), http::Version::HTTP_2);
                assert_streamed_run(response, run).await;
            })
        })
        .collect();
    for run in runs {
        run.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_serves_http1_clients() {
    let pki = Pki::new();
    let leaf = pki.server("gateway", GATEWAY_NAMES);
    let gateway = tls_gateway(&leaf.cert, &leaf.key);

    let offers: [&[&[u8]]; 2] = [&[b"http/1.1"], &[]];
    for alpn in offers {
        let tls = connect(gateway.addr, pki.roots(), alpn).await.unwrap();
        let chosen = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        assert_eq!(chosen, alpn.first().map(|p| p.to_vec()), "offered {alpn:?}");
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .expect("HTTP/1.1 over TLS");
        tokio::spawn(connection);
        let response = sender
            .send_request(post("/", run_input(THREAD, RUN)))
            .await
            .unwrap();
        assert_eq!(response.version(), http::Version::HTTP_11);
        assert_streamed_run(response, RUN).await;
    }
}

/// The end-entity certificate a TLS connection was served.
fn served(tls: &tokio_rustls::client::TlsStream<tokio::net::TcpStream>) -> Vec<u8> {
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_certificate_is_served_to_new_connections() {
    let pki = Pki::new();
    let (cert, key) = (
        pki.dir.join("listener.pem"),
        pki.dir.join("listener-key.pem"),
    );
    let first = pki.server("gateway-first", GATEWAY_NAMES);
    first.install_at(&cert, &key);
    let mut gateway = tls_gateway(&cert, &key);
    let before = connect(gateway.addr, pki.roots(), &[b"http/1.1"])
        .await
        .unwrap();
    assert_eq!(served(&before), first.der);

    let second = pki.server("gateway-second", GATEWAY_NAMES);
    assert_ne!(second.der, first.der);
    second.install_at(&cert, &key);
    // The files are looked at during handshakes, at most once a second.
    let deadline = Instant::now() + PATIENCE;
    let after = loop {
        let tls = connect(gateway.addr, pki.roots(), &[b"http/1.1"])
            .await
            .unwrap();
        if served(&tls) == second.der {
            break tls;
        }
        assert_eq!(served(&tls), first.der);
        assert!(
            Instant::now() < deadline,
            "still the first certificate {PATIENCE:?} after the files were replaced"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(gateway.is_running());
    gateway
        .wait_for_stderr("listener certificate reloaded")
        .await;
    // Both the new connection and the one opened before serve runs.
    for tls in [after, before] {
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(connection);
        let response = sender
            .send_request(post("/", run_input(THREAD, RUN)))
            .await
            .unwrap();
        assert_streamed_run(response, RUN).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_never_says_hello_is_closed_within_the_request_header_timeout() {
    let pki = Pki::new();
    let leaf = pki.server("gateway", GATEWAY_NAMES);
    // The deadline from accept to the first request head covers the handshake.
    const HEADER_TIMEOUT: Duration = Duration::from_secs(1);
    let gateway = Gateway::demo_tls(&leaf.cert, &leaf.key, &["--request-header-timeout", "1s"]);

    let mut silent = tokio::net::TcpStream::connect(gateway.addr).await.unwrap();
    let opened = Instant::now();
    // While it hangs there, other clients are accepted and served.
    let tls = connect(gateway.addr, pki.roots(), &[b"http/1.1"])
        .await
        .expect("a handshake while another connection stays silent");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(connection);
    let response = sender
        .send_request(post("/", run_input(THREAD, RUN)))
        .await
        .unwrap();
    assert_streamed_run(response, RUN).await;

    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(HEADER_TIMEOUT + PATIENCE, silent.read(&mut byte))
        .await
        .expect("the silent connection is closed within the request header timeout");
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "closed without a byte: {read:?}"
    );
    eprintln!(
        "silent connection closed after {:?} (bound {HEADER_TIMEOUT:?})",
        opened.elapsed()
    );
}
