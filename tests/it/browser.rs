//! A browser page on another origin using the gateway, as a web frontend does: headless
//! Chromium (Debian's `chromium`, driven by `playwright-core` from `tests/node/browser.mjs`)
//! loads a page from `http://127.0.0.1:<port>` that calls a gateway on
//! `https://localhost:<other port>` — a cross-origin request with a CORS preflight (the
//! `Authorization` header makes it one), over TLS with HTTP/2 chosen by ALPN.
//!
//! The page streams AG-UI runs with an API key (one, then eight at once: more than HTTP/1.1's
//! six connections per origin would carry), creates an AAP session and streams a turn with a
//! JWT, and tries a wrong key. Chromium trusts the gateway's certificate by its public key alone
//! (`--ignore-certificate-errors-spki-list`), so nothing else about TLS is relaxed. The HTTP
//! version and connection of each response come from Chromium's DevTools protocol.

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::support::gateway::Gateway;
use crate::support::jwt::{jwks, SigningKey};
use crate::support::node::{ensure_node, node_script};
use crate::support::process::run_command;
use crate::support::tls::Pki;

const CHROMIUM: &str = "/usr/bin/chromium";
const API_KEY: &str = "browser-page-key-7f3a";
const ISSUER: &str = "https://idp.example";
const AUDIENCE: &str = "dialect-proxy";
const PARALLEL_STREAMS: usize = 8;

/// A free loopback port for the page's own origin.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("its address").port()
}

/// The base64 SHA-256 of a certificate key's SubjectPublicKeyInfo, as Chromium's
/// `--ignore-certificate-errors-spki-list` names a key it trusts.
fn spki_pin(key_pem: &str) -> String {
    let key = rcgen::KeyPair::from_pem(key_pem).expect("the leaf's key");
    let b64 = base64::engine::general_purpose::STANDARD;
    let spki_pem = key.public_key_pem();
    let body: String = spki_pem
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    let spki = b64.decode(body).expect("the SPKI PEM's base64");
    b64.encode(Sha256::digest(spki))
}

fn token(key: &SigningKey, sub: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    key.sign(&json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 600}))
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write a test file");
    path.display().to_string()
}

fn types(run: &Value) -> Vec<&str> {
    run["types"]
        .as_array()
        .unwrap_or_else(|| panic!("no events in {run}"))
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

#[test]
fn a_page_on_another_origin_streams_agui_with_a_key_and_aap_with_a_jwt_over_tls_and_h2() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install Debian's chromium (.ci/run does)"
    );
    ensure_node();
    let pki = Pki::new();
    let leaf = pki.server("gateway", &["localhost", "127.0.0.1"]);
    let signing = SigningKey::generate("browser-kid");
    let jwks_file = write(&pki.dir, "jwks.json", &jwks(&[&signing]));
    let page_port = free_port();
    let origin = format!("http://127.0.0.1:{page_port}");
    let config = write(
        &pki.dir,
        "dialect-proxy.toml",
        &format!(
            r#"tls_cert = "{cert}"
tls_key = "{key}"

[[routes]]
path = "/agui"
client = "ag-ui"
upstream = "builtin:demo"

[routes.auth]
api_keys = ["{API_KEY}"]

[routes.cors]
allow_origins = ["{origin}"]

[[routes]]
path = "/aap"
client = "aap"
upstream = "builtin:demo"

[routes.aap]
name = "demo"

[routes.auth]
jwt = {{ jwks_file = "{jwks_file}", issuer = "{ISSUER}", audience = "{AUDIENCE}" }}

[routes.cors]
allow_origins = ["{origin}"]
"#,
            cert = leaf.cert.display(),
            key = leaf.key.display(),
        ),
    );
    let gateway = Gateway::spawn(&["--config", &config]);
    assert_eq!(gateway.scheme(), "https");
    let gateway_url = format!("https://localhost:{}", gateway.addr.port());
    let jwt = token(&signing, "page-user");

    let mut command = node_script("browser.mjs");
    command.args([
        "--gateway",
        &gateway_url,
        "--page-port",
        &page_port.to_string(),
        "--spki",
        &spki_pin(&leaf.key_pem),
        "--agui-path",
        "/agui",
        "--api-key",
        API_KEY,
        "--aap-path",
        "/aap",
        "--jwt",
        &jwt,
        "--streams",
        &PARALLEL_STREAMS.to_string(),
    ]);
    let ran = run_command(&mut command, Duration::from_secs(120)).expect("run browser.mjs");
    let last = ran.stdout.lines().last().unwrap_or_default();
    let result: Value = serde_json::from_str(last).unwrap_or_else(|e| {
        panic!(
            "browser.mjs printed no result ({e}):\nstdout: {}\nstderr: {}\ngateway: {}",
            ran.stdout,
            ran.stderr,
            gateway.stderr()
        )
    });
    assert!(
        ran.success,
        "browser.mjs failed: {result}\nstderr: {}\ngateway: {}",
        ran.stderr,
        gateway.stderr()
    );
    let page = &result["page"];

    // One AG-UI run, then eight at once, all complete.
    for run in std::iter::once(&page["single"]).chain(page["parallel"].as_array().unwrap()) {
        assert_eq!(run["status"], 200, "{run}");
        let types = types(run);
        assert_eq!(types.first(), Some(&"RUN_STARTED"), "{run}");
        assert_eq!(types.last(), Some(&"RUN_FINISHED"), "{run}");
        assert!(types.contains(&"TEXT_MESSAGE_CONTENT"), "{run}");
    }
    assert_eq!(
        page["parallel"].as_array().map(Vec::len),
        Some(PARALLEL_STREAMS)
    );

    // The AAP face: a session and a streamed turn, with the JWT.
    let aap = &page["aap"];
    assert_eq!(aap["status"], 200, "{aap}");
    let turn = types(aap);
    assert_eq!(turn.first(), Some(&"turn_start"), "{aap}");
    assert_eq!(turn.last(), Some(&"turn_stop"), "{aap}");
    assert!(turn.contains(&"text_delta"), "{aap}");

    // A wrong key: the page can read the 401 and its JSON (CORS headers on the refusal too).
    let wrong = &page["wrongKey"];
    assert_eq!(wrong["status"], 401, "{wrong}");
    assert_eq!(wrong["body"]["error"]["code"], "UNAUTHORIZED", "{wrong}");

    // Every response from the gateway came over HTTP/2, the streams sharing connections:
    // fewer connections than streams that were open at once.
    let responses = result["responses"].as_array().expect("responses");
    assert!(
        responses.len() >= PARALLEL_STREAMS + 4,
        "DevTools saw {} responses: {result}",
        responses.len()
    );
    for response in responses {
        assert_eq!(response["protocol"], "h2", "{response}");
    }
    let connections: BTreeSet<String> = responses
        .iter()
        .map(|r| r["connectionId"].to_string())
        .collect();
    eprintln!(
        "{} responses from the gateway, all h2, over {} connection(s)",
        responses.len(),
        connections.len()
    );
    assert!(
        connections.len() < PARALLEL_STREAMS,
        "{} connections for {PARALLEL_STREAMS} parallel streams: {result}",
        connections.len()
    );
    // The principals the gateway saw: the key's and the token's.
    let log = gateway.stderr();
    assert!(log.contains("principal=key-"), "{log}");
    assert!(
        log.contains(&format!("principal=jwt:{ISSUER}#page-user")),
        "{log}"
    );
}
