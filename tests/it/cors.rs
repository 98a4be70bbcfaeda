//! CORS per route (`[routes.cors]`), over real sockets against the real binary: preflights
//! answered before authentication, the allow headers only for a listed origin, and
//! `Access-Control-Allow-Origin` plus `Vary: Origin` on every response to a listed origin —
//! streams and refusals alike — while routes without CORS and paths without a route are as
//! before.

use crate::support;

use support::{run_input, send, Gateway, Request, Response};

const APP: &str = "https://app.example";
const EVIL: &str = "https://evil.example";

/// An AG-UI route and an AAP face, both with keys and CORS, and a route without CORS.
const CONFIG: &str = r#"
[[routes]]
path = "/agent"
client = "ag-ui"
upstream = "builtin:demo"
[routes.limits]
max_request_bytes = 1024
[routes.auth]
api_keys = ["k1"]
[routes.cors]
allow_origins = ["https://app.example", "http://localhost:3000"]
expose_headers = ["retry-after"]
max_age = "10m"

[[routes]]
path = "/aap"
client = "aap"
upstream = "builtin:demo"
[routes.aap]
name = "demo"
api_keys = ["k1"]
[routes.cors]
allow_origins = ["https://app.example"]
allow_credentials = true

[[routes]]
path = "/plain"
client = "ag-ui"
upstream = "builtin:demo"
"#;

fn gateway() -> Gateway {
    static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "dp-it-cors-{}-{}.toml",
        std::process::id(),
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::write(&path, CONFIG).expect("write the config");
    let gateway = Gateway::spawn(&["--config", &path.display().to_string()]);
    let _ = std::fs::remove_file(&path);
    gateway
}

fn preflight(path: &str, origin: &str, method: &str) -> Request {
    Request::new("OPTIONS", path)
        .header("origin", origin)
        .header("access-control-request-method", method)
        .header(
            "access-control-request-headers",
            "authorization, content-type",
        )
}

/// The comma-separated values of `name`, lowercased.
fn list(response: &Response, name: &str) -> Vec<String> {
    response
        .header_all(name)
        .iter()
        .flat_map(|v| v.split(','))
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|v| !v.is_empty())
        .collect()
}

/// `Access-Control-Allow-Origin: <origin>` and `Vary` naming `origin`.
fn assert_cors(response: &Response, origin: &str, what: &str) {
    assert_eq!(
        response.header("access-control-allow-origin"),
        Some(origin),
        "{what}: {:?}",
        response.headers
    );
    assert!(
        list(response, "vary").contains(&"origin".to_owned()),
        "{what}: {:?}",
        response.headers
    );
}

fn assert_no_allow_headers(response: &Response, what: &str) {
    for name in [
        "access-control-allow-origin",
        "access-control-allow-methods",
        "access-control-allow-headers",
        "access-control-allow-credentials",
        "access-control-max-age",
        "access-control-expose-headers",
    ] {
        assert!(
            response.header(name).is_none(),
            "{what}: {name} in {:?}",
            response.headers
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preflight_from_a_listed_origin_is_answered_before_authentication() {
    let gateway = gateway();

    let response = send(gateway.addr, &preflight("/agent", APP, "POST")).await;
    assert_eq!(response.status, 204, "{:?}", response.headers);
    assert_cors(&response, APP, "AG-UI preflight");
    assert_eq!(list(&response, "access-control-allow-methods"), ["post"]);
    let headers = list(&response, "access-control-allow-headers");
    for name in ["authorization", "content-type"] {
        assert!(headers.contains(&name.to_owned()), "{headers:?}");
    }
    assert_eq!(response.header("access-control-max-age"), Some("600"));
    assert!(response.header("www-authenticate").is_none());
    let response = send(
        gateway.addr,
        &preflight("/agent", "http://localhost:3000", "POST"),
    )
    .await;
    assert_eq!(response.status, 204);
    assert_cors(&response, "http://localhost:3000", "second origin");

    // An AAP face with keys: the preflight is not a 401.
    let response = send(gateway.addr, &preflight("/aap/sessions", APP, "POST")).await;
    assert_eq!(response.status, 204, "{:?}", response.headers);
    assert_cors(&response, APP, "AAP preflight");
    let methods = list(&response, "access-control-allow-methods");
    for method in ["get", "post", "delete"] {
        assert!(methods.contains(&method.to_owned()), "{methods:?}");
    }
    assert_eq!(
        response.header("access-control-allow-credentials"),
        Some("true")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preflight_from_another_origin_learns_nothing() {
    let gateway = gateway();
    for (path, origin) in [
        ("/agent", EVIL),
        ("/aap/meta", EVIL),
        ("/agent", "https://app.example.evil"),
    ] {
        let response = send(gateway.addr, &preflight(path, origin, "POST")).await;
        assert_eq!(response.status, 204, "{path} {origin}");
        assert_no_allow_headers(&response, &format!("{path} {origin}"));
        assert!(list(&response, "vary").contains(&"origin".to_owned()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_to_a_listed_origin_carries_the_cors_headers() {
    let gateway = gateway();
    let run = |origin: &str, key: Option<&str>| {
        let mut request =
            Request::post_json("/agent", run_input("t-cors", "r-cors")).header("origin", origin);
        if let Some(key) = key {
            request = request.header("authorization", &format!("Bearer {key}"));
        }
        request
    };

    // A stream.
    let mut response = send(gateway.addr, &run(APP, Some("k1"))).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert_cors(&response, APP, "stream");
    assert_eq!(
        list(&response, "access-control-expose-headers"),
        ["retry-after"]
    );
    let events = response.events_to_end().await;
    assert_eq!(
        events.last().map(|e| e["type"].clone()),
        Some("RUN_FINISHED".into())
    );

    // Refusals: 401, 405, 413 on the AG-UI route.
    let response = send(gateway.addr, &run(APP, None)).await;
    assert_eq!(response.status, 401);
    assert_cors(&response, APP, "401");
    let response = send(
        gateway.addr,
        &Request::get("/agent")
            .header("origin", APP)
            .header("authorization", "Bearer k1"),
    )
    .await;
    assert_eq!(response.status, 405);
    assert_cors(&response, APP, "405");
    let response = send(
        gateway.addr,
        &Request::post_json("/agent", vec![b' '; 4096])
            .header("origin", APP)
            .header("authorization", "Bearer k1"),
    )
    .await;
    assert_eq!(response.status, 413);
    assert_cors(&response, APP, "413");

    // The AAP face: a document, a 404 of the face, a 401; with credentials allowed.
    for (path, key, status) in [
        ("/aap/meta", Some("k1"), 200),
        ("/aap/nowhere", Some("k1"), 404),
        ("/aap/sessions", None, 401),
    ] {
        let mut request = Request::get(path).header("origin", APP);
        if let Some(key) = key {
            request = request.header("authorization", &format!("Bearer {key}"));
        }
        let response = send(gateway.addr, &request).await;
        assert_eq!(response.status, status, "{path}");
        assert_cors(&response, APP, path);
        assert_eq!(
            response.header("access-control-allow-credentials"),
            Some("true")
        );
    }

    // Another origin gets the answer (CORS is the browser's check) without the headers.
    let mut response = send(gateway.addr, &run(EVIL, Some("k1"))).await;
    assert_eq!(response.status, 200);
    assert_no_allow_headers(&response, "another origin");
    response.events_to_end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_without_cors_and_paths_without_a_route_are_unchanged() {
    let gateway = gateway();
    let response = send(gateway.addr, &preflight("/plain", APP, "POST")).await;
    assert_eq!(response.status, 405);
    assert_no_allow_headers(&response, "route without CORS");
    let response = send(gateway.addr, &preflight("/nowhere", APP, "POST")).await;
    assert_eq!(response.status, 404);
    assert_no_allow_headers(&response, "no route");
    // An OPTIONS that is no preflight is refused like any method the route does not serve.
    let options = Request::new("OPTIONS", "/agent")
        .header("origin", APP)
        .header("authorization", "Bearer k1");
    let response = send(gateway.addr, &options).await;
    assert_eq!(response.status, 405);
}
