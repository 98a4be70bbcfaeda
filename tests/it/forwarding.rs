//! What the upstream learns about the client: `X-Forwarded-For` and `Forwarded` name the
//! connection's peer, and a client's own claims survive only when its address is one of
//! `trusted_proxies`; `Cookie` only with `forward_cookies = true`; `Expect` and `Max-Forwards`
//! never; a route's `forward_headers` list is the only way in. Real binary, real TCP, and a
//! scripted upstream that records what it was sent.

use crate::support;

use serde_json::json;
use support::aap::{spawn_with_config, user_turn, AapClient};
use support::{
    run_input, send, Gateway, RecordedRequest, Request, Script, ScriptedUpstream, PATIENCE,
};

/// An upstream answering every run with a short AG-UI run.
async fn recording_upstream() -> ScriptedUpstream {
    ScriptedUpstream::start(|_| {
        Script::sse_json(&[
            json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}),
        ])
    })
    .await
}

/// Three AG-UI routes in front of `upstream`: `/` with the defaults, `/cookies` forwarding
/// cookies, `/strict` forwarding `x-tenant` alone; `top` goes at the top of the file.
fn config(upstream: &str, top: &str) -> String {
    format!(
        r#"{top}
[[routes]]
path = "/"
client = "ag-ui"
upstream = "{upstream}"

[[routes]]
path = "/cookies"
client = "ag-ui"
upstream = "{upstream}"
forward_cookies = true

[[routes]]
path = "/strict"
client = "ag-ui"
upstream = "{upstream}"
forward_headers = ["X-Tenant"]
"#
    )
}

/// A run posted to `path` with what a client (or a proxy before it) may claim.
fn claiming(path: &str) -> Request {
    Request::post_json(path, run_input("t", "r"))
        .header("x-forwarded-for", "203.0.113.9")
        .header("forwarded", "for=_hidden;proto=https")
        .header("x-real-ip", "203.0.113.9")
        .header("x-forwarded-proto", "https")
        .header("authorization", "Bearer k")
        .header("cookie", "session=s1")
        .header("x-tenant", "acme")
        .header("x-trace-id", "trace-1")
        // Not `100-continue`, which the gateway itself answers: any expectation is its own.
        .header("expect", "x-test-expectation")
        .header("max-forwards", "5")
}

/// Sends `request` through `gateway` and returns the upstream's `n`-th request.
async fn relayed(
    gateway: &Gateway,
    upstream: &ScriptedUpstream,
    request: &Request,
    n: usize,
) -> RecordedRequest {
    let mut response = send(gateway.addr, request).await;
    let status = response.status;
    let text = response.text().await;
    assert_eq!(status, 200, "{text}");
    upstream.wait_for_requests(n, PATIENCE).await
}

/// `Forwarded`'s element for the test client: `for="127.0.0.1:<its port>";proto=http`.
fn assert_local_element(element: &str) {
    let port = element
        .strip_prefix("for=\"127.0.0.1:")
        .and_then(|rest| rest.strip_suffix("\";proto=http"))
        .and_then(|port| port.parse::<u16>().ok());
    assert!(port.is_some(), "{element:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_clients_claims_are_replaced_by_its_address() {
    let upstream = recording_upstream().await;
    let gateway = spawn_with_config(&config(&upstream.url("/agent"), ""));
    let got = relayed(&gateway, &upstream, &claiming("/"), 1).await;

    assert_eq!(got.header_all("x-forwarded-for"), ["127.0.0.1"]);
    let forwarded = got.header_all("forwarded");
    assert_eq!(forwarded.len(), 1, "{forwarded:?}");
    assert_local_element(forwarded[0]);
    assert!(!got.has_header("x-real-ip"));
    assert_eq!(got.header_all("x-forwarded-proto"), ["http"]);
    assert_eq!(
        got.header_all("x-forwarded-host"),
        [gateway.addr.to_string().as_str()]
    );
    assert!(
        !got.has_header("cookie"),
        "cookies stay unless the route says so"
    );
    assert!(!got.has_header("expect"));
    assert!(!got.has_header("max-forwards"));
    assert_eq!(got.header_all("authorization"), ["Bearer k"]);
    assert_eq!(got.header_all("x-tenant"), ["acme"]);
    assert_eq!(got.header_all("x-trace-id"), ["trace-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_proxys_claims_are_kept_and_appended_to() {
    let upstream = recording_upstream().await;
    let gateway = spawn_with_config(&config(
        &upstream.url("/agent"),
        r#"trusted_proxies = ["127.0.0.1/32"]"#,
    ));
    let got = relayed(&gateway, &upstream, &claiming("/"), 1).await;

    assert_eq!(
        got.header_all("x-forwarded-for"),
        ["203.0.113.9, 127.0.0.1"]
    );
    let forwarded = got.header_all("forwarded");
    assert_eq!(forwarded.len(), 1, "{forwarded:?}");
    let (theirs, ours) = forwarded[0]
        .split_once(", ")
        .unwrap_or_else(|| panic!("{forwarded:?}"));
    assert_eq!(
        theirs, "for=_hidden;proto=https",
        "an obfuscated node is left alone"
    );
    assert_local_element(ours);
    assert_eq!(got.header_all("x-real-ip"), ["203.0.113.9"]);
    assert_eq!(got.header_all("x-forwarded-proto"), ["https"]);
    assert!(!got.has_header("cookie"));
    assert!(!got.has_header("expect"));
    assert!(!got.has_header("max-forwards"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookies_and_the_allowlist_follow_the_route() {
    let upstream = recording_upstream().await;
    let gateway = spawn_with_config(&config(&upstream.url("/agent"), ""));

    let got = relayed(&gateway, &upstream, &claiming("/cookies"), 1).await;
    assert_eq!(got.header_all("cookie"), ["session=s1"]);
    assert_eq!(got.header_all("authorization"), ["Bearer k"]);

    let got = relayed(&gateway, &upstream, &claiming("/strict"), 2).await;
    assert_eq!(got.header_all("x-tenant"), ["acme"]);
    for gone in [
        "authorization",
        "x-trace-id",
        "cookie",
        "x-real-ip",
        "expect",
    ] {
        assert!(
            !got.has_header(gone),
            "{gone} is not listed: {:?}",
            got.headers
        );
    }
    // The gateway's own headers are set whatever the list says.
    assert_eq!(got.header_all("content-type"), ["application/json"]);
    assert_eq!(got.header_all("accept"), ["text/event-stream"]);
    assert_eq!(got.header_all("x-forwarded-for"), ["127.0.0.1"]);
    assert_local_element(got.header_all("forwarded")[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aap_faces_turns_are_forwarded_alike() {
    let upstream = recording_upstream().await;
    let gateway = Gateway::spawn(&[
        "--client",
        "aap",
        "--upstream",
        &upstream.url("/agent"),
        "--agent-name",
        "a",
    ]);
    let aap = AapClient::new(gateway.addr, "", None);
    let sid = aap.new_session(json!({"agent": {"name": "a"}})).await;
    let request = aap
        .turn_request(&sid, &user_turn("none", "hi"))
        .header("x-forwarded-for", "203.0.113.9")
        .header("cookie", "session=s1")
        .header("max-forwards", "5");
    let mut response = send(gateway.addr, &request).await;
    let status = response.status;
    let text = response.text().await;
    assert_eq!(status, 200, "{text}");
    let got = upstream.wait_for_request(PATIENCE).await;
    assert_eq!(got.header_all("x-forwarded-for"), ["127.0.0.1"]);
    assert_local_element(got.header_all("forwarded")[0]);
    assert!(!got.has_header("cookie"));
    assert!(!got.has_header("max-forwards"));
}
