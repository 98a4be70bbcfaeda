//! Inbound authentication and outbound credentials, over real sockets against the real binary:
//! API keys on AG-UI, HAI and AAP routes; JWTs signed in the test with keys generated in the
//! test, checked against a JWKS file or a JWKS URL served by the test (with key rotation);
//! what the upstream (a recording AG-UI upstream, an AAP agent) sees as `Authorization`.

use crate::support;

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use dialect_proxy::session::Principal;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use support::aap::AapClient;
use support::aap_agent::AapAgent;
use support::jwt::{jwks, SigningKey};
use support::{run_input, send, Gateway, Request, Response, Script, ScriptedUpstream, PATIENCE};

const ISSUER: &str = "https://idp.test";
const AUDIENCE: &str = "dialect-proxy";

/// A directory of the test's files (config, JWKS, tokens), removed when dropped.
struct Files(PathBuf);

impl Files {
    fn new(name: &str) -> Files {
        let dir = std::env::temp_dir().join(format!("dp-it-auth-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the test directory");
        Files(dir)
    }

    /// Writes `text` to `name`; its path.
    fn write(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("write a test file");
        path.display().to_string()
    }

    /// `dialect-proxy serve --config <toml>` with `env` set for the gateway only.
    fn gateway(&self, toml: &str, env: &[(&str, &str)]) -> Gateway {
        let config = self.write("dialect-proxy.toml", toml);
        Gateway::spawn_with_env(&["--config", &config], env)
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

/// Claims of a token valid for ten minutes, for `sub`.
fn claims(sub: &str) -> Value {
    let now = now();
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now, "nbf": now - 5, "exp": now + 600})
}

/// An AG-UI run posted to `path` with `Authorization: Bearer <credential>`.
async fn run(gateway: &Gateway, path: &str, credential: Option<&str>) -> Response {
    let mut request = Request::post_json(path, run_input("t-auth", "r-auth"));
    if let Some(credential) = credential {
        request = request.header("authorization", &format!("Bearer {credential}"));
    }
    send(gateway.addr, &request).await
}

/// Reads a 200 event stream to its end; panics with the body otherwise.
async fn expect_stream(mut response: Response) {
    if response.status != 200 {
        let status = response.status;
        panic!("expected 200, got {status}: {}", response.text().await);
    }
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    let events = response.events_to_end().await;
    let last = events.last().expect("some events");
    assert_eq!(last["type"], "RUN_FINISHED", "{events:?}");
}

/// Checks a 401: its challenge (with `error="invalid_token"` when a credential was given), a
/// JSON body that does not contain `secret`; returns the body.
async fn expect_unauthorized(mut response: Response, rejected: bool, secret: &str) -> Value {
    let text = response.text().await;
    assert_eq!(response.status, 401, "{text}");
    let expected = if rejected {
        r#"Bearer realm="dialect-proxy", error="invalid_token""#
    } else {
        r#"Bearer realm="dialect-proxy""#
    };
    assert_eq!(response.header("www-authenticate"), Some(expected));
    assert!(
        response
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/json")),
        "{:?}",
        response.headers
    );
    assert!(
        secret.is_empty() || !text.contains(secret),
        "the 401 echoes the credential: {text}"
    );
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("401 body is not JSON ({e}): {text}"))
}

/// The AG-UI and HAI error shape, `{"error":{"code":"UNAUTHORIZED","message"}}`.
fn assert_run_dialect_error(body: &Value) {
    assert_eq!(body["error"]["code"], "UNAUTHORIZED", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );
}

// ---------------------------------------------------------------------------------------------
// API keys

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_guard_agui_hai_and_aap_routes() {
    let files = Files::new("keys");
    let gateway = files.gateway(
        r#"
[[routes]]
path = "/agui"
client = "ag-ui"
upstream = "builtin:demo"
[routes.auth]
api_keys = ["agui-key-1"]

[[routes]]
path = "/hai"
client = "hai"
upstream = "builtin:demo"
[routes.auth]
api_keys_env = "DP_TEST_HAI_KEYS"

[[routes]]
path = "/aap"
client = "aap"
upstream = "builtin:demo"
[routes.aap]
name = "demo"
[routes.auth]
api_keys = ["aap-key-1"]
"#,
        &[("DP_TEST_HAI_KEYS", "hai-key-1, hai-key-2")],
    );

    for (path, key) in [("/agui", "agui-key-1"), ("/hai", "hai-key-2")] {
        let body = expect_unauthorized(run(&gateway, path, None).await, false, "").await;
        assert_run_dialect_error(&body);
        let body = expect_unauthorized(
            run(&gateway, path, Some("wrong-key-xyz")).await,
            true,
            "wrong-key-xyz",
        )
        .await;
        assert_run_dialect_error(&body);
        // A key of another route is no key here.
        let other = if path == "/agui" {
            "hai-key-1"
        } else {
            "agui-key-1"
        };
        expect_unauthorized(run(&gateway, path, Some(other)).await, true, other).await;
        expect_stream(run(&gateway, path, Some(key)).await).await;
    }

    let aap = AapClient::new(gateway.addr, "/aap", None);
    let reply = aap.meta().await;
    assert_eq!(reply.status, 401);
    let text = reply.expect_error(401);
    assert!(!text.contains("aap-key-1"));
    let wrong = send(
        gateway.addr,
        &aap.with_key(Some("agui-key-1")).build("GET", "/meta", b""),
    )
    .await;
    let body = expect_unauthorized(wrong, true, "agui-key-1").await;
    assert!(body["error"].is_string(), "the AAP error shape: {body}");
    let meta = aap.with_key(Some("aap-key-1")).meta().await;
    assert_eq!(meta.expect_json(200)["agents"][0]["name"], "demo");

    // The principal of a key is named by its digest; the key itself is never logged.
    gateway
        .wait_for_stderr(&format!(
            "principal={}",
            Principal::for_api_key("agui-key-1")
        ))
        .await;
    let log = gateway
        .wait_for_stderr(&format!(
            "principal={}",
            Principal::for_api_key("aap-key-1")
        ))
        .await;
    for secret in ["agui-key-1", "hai-key-2", "aap-key-1", "wrong-key-xyz"] {
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
    }
}

// ---------------------------------------------------------------------------------------------
// JWT

fn jwt_config(jwt: &str) -> String {
    format!(
        r#"
[[routes]]
path = "/agent"
client = "ag-ui"
upstream = "builtin:demo"
[routes.auth]
jwt = {{ {jwt}, issuer = "{ISSUER}", audience = "{AUDIENCE}" }}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_checked_against_a_jwks_file() {
    let files = Files::new("jwks-file");
    let key = SigningKey::generate("key-1");
    let stranger = SigningKey::generate("key-1");
    let jwks_file = files.write("jwks.json", &jwks(&[&key]));
    let gateway = files.gateway(&jwt_config(&format!("jwks_file = \"{jwks_file}\"")), &[]);

    let valid = key.sign(&claims("alice"));
    expect_stream(run(&gateway, "/agent", Some(&valid)).await).await;
    let log = gateway
        .wait_for_stderr(&format!("principal=jwt:{ISSUER}#alice"))
        .await;
    assert!(!log.contains(&valid), "the token is in the log");

    let now = now();
    let mut expired = claims("alice");
    expired["exp"] = json!(now - 300);
    let mut early = claims("alice");
    early["nbf"] = json!(now + 300);
    let mut wrong_issuer = claims("alice");
    wrong_issuer["iss"] = json!("https://other-idp.test");
    let mut wrong_audience = claims("alice");
    wrong_audience["aud"] = json!("someone-else");
    let mut no_subject = claims("alice");
    if let Some(claims) = no_subject.as_object_mut() {
        claims.remove("sub");
    }
    let alg_none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#),
        URL_SAFE_NO_PAD.encode(claims("alice").to_string())
    );
    // HS256 keyed with the public key: a verifier that took the key for a secret would pass it.
    let mut hs_header = Header::new(Algorithm::HS256);
    hs_header.kid = Some("key-1".into());
    let hs_with_public_key = jsonwebtoken::encode(
        &hs_header,
        &claims("alice"),
        &EncodingKey::from_secret(key.public_pem.as_bytes()),
    )
    .expect("sign HS256");
    let cases = [
        ("expired", key.sign(&expired)),
        ("not valid yet", key.sign(&early)),
        ("wrong issuer", key.sign(&wrong_issuer)),
        ("wrong audience", key.sign(&wrong_audience)),
        ("no sub", key.sign(&no_subject)),
        ("bad signature", stranger.sign(&claims("alice"))),
        ("unknown kid", key.sign_as("key-2", &claims("alice"))),
        ("alg none", alg_none),
        ("HS256 with the public key", hs_with_public_key),
        ("not a JWT", "a.b.c".to_owned()),
    ];
    for (case, token) in &cases {
        let response = run(&gateway, "/agent", Some(token)).await;
        let body = expect_unauthorized(response, true, token).await;
        assert_run_dialect_error(&body);
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("invalid token"), "{case}: {message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_and_tokens_together_each_pass() {
    let files = Files::new("both");
    let key = SigningKey::generate("k");
    let jwks_file = files.write("jwks.json", &jwks(&[&key]));
    let gateway = files.gateway(
        &jwt_config(&format!("jwks_file = \"{jwks_file}\"")).replace(
            "[routes.auth]\n",
            "[routes.auth]\napi_keys = [\"static-key\"]\n",
        ),
        &[],
    );
    expect_stream(run(&gateway, "/agent", Some("static-key")).await).await;
    expect_stream(run(&gateway, "/agent", Some(&key.sign(&claims("bob")))).await).await;
    expect_unauthorized(
        run(&gateway, "/agent", Some("other-key")).await,
        true,
        "other-key",
    )
    .await;
    expect_unauthorized(run(&gateway, "/agent", None).await, false, "").await;
    gateway
        .wait_for_stderr(&format!("principal=jwt:{ISSUER}#bob"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwks_url_is_fetched_once_and_again_for_a_rotated_key_not_for_made_up_kids() {
    let old = SigningKey::generate("old");
    let new = SigningKey::generate("new");
    let served = Arc::new(Mutex::new(jwks(&[&old])));
    let document = Arc::clone(&served);
    let idp = ScriptedUpstream::start(move |_| {
        let body = document.lock().expect("the JWKS").clone();
        Script::status_body(200, "application/json", body)
    })
    .await;
    let files = Files::new("jwks-url");
    let gateway = files.gateway(
        &jwt_config(&format!(
            "jwks_url = \"{}\"",
            idp.url("/.well-known/jwks.json")
        )),
        &[],
    );
    assert!(
        idp.requests().is_empty(),
        "fetched on first use, not before"
    );

    expect_stream(run(&gateway, "/agent", Some(&old.sign(&claims("alice")))).await).await;
    expect_stream(run(&gateway, "/agent", Some(&old.sign(&claims("alice")))).await).await;
    assert_eq!(idp.requests().len(), 1, "the keys are kept");
    assert_eq!(idp.requests()[0].path, "/.well-known/jwks.json");

    // The issuer rotates: a token with the new kid makes the gateway fetch again.
    *served.lock().expect("the JWKS") = jwks(&[&old, &new]);
    expect_stream(run(&gateway, "/agent", Some(&new.sign(&claims("carol")))).await).await;
    assert_eq!(idp.requests().len(), 2);
    gateway
        .wait_for_stderr(&format!("principal=jwt:{ISSUER}#carol"))
        .await;

    // Made-up kids right after: refused, and the issuer is not asked again.
    for i in 0..5 {
        let token = new.sign_as(&format!("random-{i}"), &claims("mallory"));
        expect_unauthorized(run(&gateway, "/agent", Some(&token)).await, true, &token).await;
    }
    assert_eq!(idp.requests().len(), 2, "unknown kids are rate-limited");
    expect_stream(run(&gateway, "/agent", Some(&old.sign(&claims("alice")))).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwks_url_over_https_is_trusted_through_its_ca_file_only() {
    let key = SigningKey::generate("tls-kid");
    let document = jwks(&[&key]);
    let idp = ScriptedUpstream::start(move |_| {
        Script::status_body(200, "application/json", document.clone())
    })
    .await;
    let pki = support::tls::Pki::new();
    let leaf = pki.server("idp", &["localhost", "127.0.0.1"]);
    let front = support::tls::TlsFront::start(&leaf, idp.addr()).await;
    let url = format!("https://localhost:{}/jwks", front.addr.port());
    let files = Files::new("jwks-https");

    let trusted = files.gateway(
        &jwt_config(&format!(
            "jwks_url = \"{url}\", ca_file = \"{}\"",
            pki.ca_file().display()
        )),
        &[],
    );
    expect_stream(run(&trusted, "/agent", Some(&key.sign(&claims("tina")))).await).await;
    assert_eq!(idp.requests().len(), 1, "fetched over TLS");
    drop(trusted);

    // Without the CA the issuer's certificate is not trusted: no keys, every token refused.
    let untrusted = files.gateway(&jwt_config(&format!("jwks_url = \"{url}\"")), &[]);
    let token = key.sign(&claims("tina"));
    expect_unauthorized(run(&untrusted, "/agent", Some(&token)).await, true, &token).await;
    assert_eq!(idp.requests().len(), 1, "no request got past the handshake");
}

// ---------------------------------------------------------------------------------------------
// Outbound credentials

fn recording_upstream_script() -> Script {
    Script::sse_json(&[
        json!({"type": "RUN_STARTED", "threadId": "t-auth", "runId": "r-auth"}),
        json!({"type": "RUN_FINISHED", "threadId": "t-auth", "runId": "r-auth"}),
    ])
}

/// Reads the run's stream to its end; the `Authorization` values of the upstream's `n`-th
/// request.
async fn upstream_saw(upstream: &ScriptedUpstream, n: usize, response: Response) -> Vec<String> {
    expect_stream(response).await;
    let request = upstream.wait_for_requests(n, PATIENCE).await;
    request
        .header_all("authorization")
        .into_iter()
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_sees_the_gateway_credential_not_the_client_one() {
    let upstream = ScriptedUpstream::with_script(recording_upstream_script()).await;
    let files = Files::new("outbound");
    let token_file = files.write("token", "file-token-1\n");
    let url = upstream.url("/agent");
    let route = |path: &str, tables: &str| {
        format!(
            "[[routes]]\npath = \"{path}\"\nclient = \"ag-ui\"\nupstream = \"{url}\"\n{tables}\n"
        )
    };
    let config = [
        route("/strip", "[routes.auth]\napi_keys = [\"k1\"]"),
        route(
            "/forward",
            "forward_authorization = true\n[routes.auth]\napi_keys = [\"k1\"]",
        ),
        route(
            "/env",
            "[routes.auth]\napi_keys = [\"k1\"]\n[routes.upstream_auth]\nbearer_env = \"DP_TEST_UPSTREAM_TOKEN\"",
        ),
        route(
            "/file",
            &format!("[routes.upstream_auth]\nbearer_file = \"{token_file}\""),
        ),
        route("/open", ""),
    ]
    .concat();
    let gateway = files.gateway(&config, &[("DP_TEST_UPSTREAM_TOKEN", "env-token")]);

    let mut runs = 0;
    for (path, credential, expected) in [
        ("/strip", "k1", None),
        ("/forward", "k1", Some("Bearer k1")),
        ("/env", "k1", Some("Bearer env-token")),
        ("/file", "client-own", Some("Bearer file-token-1")),
        ("/open", "client-own", Some("Bearer client-own")),
    ] {
        runs += 1;
        let saw = upstream_saw(&upstream, runs, run(&gateway, path, Some(credential)).await).await;
        assert_eq!(saw, Vec::from_iter(expected), "{path}");
    }

    // The token file is rotated: a later run carries the new token.
    files.write("token", "file-token-2-rotated\n");
    let deadline = Instant::now() + PATIENCE;
    loop {
        runs += 1;
        let saw = upstream_saw(&upstream, runs, run(&gateway, "/file", None).await).await;
        if saw == ["Bearer file-token-2-rotated"] {
            break;
        }
        assert_eq!(saw, ["Bearer file-token-1"]);
        assert!(
            Instant::now() < deadline,
            "the rotated token was never sent"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    gateway.wait_for_stderr("upstream token file changed").await;
    assert!(
        !gateway.stderr().contains("file-token"),
        "a token is in the log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aap_agent_gets_the_outbound_token_on_every_request() {
    let agent = AapAgent::builder()
        .require_bearer("agent-token")
        .start()
        .await;
    let files = Files::new("aap-outbound");
    let gateway = files.gateway(
        &format!(
            r#"
[[routes]]
path = "/"
client = "ag-ui"
upstream = "{}"
upstream_dialect = "aap"
[routes.auth]
api_keys = ["client-key"]
[routes.upstream_auth]
bearer_env = "DP_TEST_AGENT_TOKEN"
"#,
            agent.base_url()
        ),
        &[("DP_TEST_AGENT_TOKEN", "agent-token")],
    );
    expect_stream(run(&gateway, "/", Some("client-key")).await).await;
    let requests = agent.requests();
    assert!(
        requests.len() >= 3,
        "meta, session, turn: {}",
        requests.len()
    );
    for request in &requests {
        assert_eq!(
            request.header_all("authorization"),
            ["Bearer agent-token"],
            "{} {}",
            request.method,
            request.path
        );
    }
}
