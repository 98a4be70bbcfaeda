//! The fault matrix, as one table: each of the nine client × upstream pairs (AG-UI, HAI and AAP
//! in `delta` mode on the client side; AG-UI, HAI and AAP agents upstream) meets each of twelve
//! faults, through the real gateway binary over real TCP.
//!
//! For every cell the test checks, in this order:
//! - what the client receives: for a failure before the stream, an AG-UI or HAI client of an
//!   AG-UI or HAI agent gets a status and a JSON error with its code; in front of an AAP agent
//!   (whose run begins with `/meta` and a session, the client's stream already open) and for an
//!   AAP turn, the failure is the stream's terminal error. For one during the stream: what the
//!   upstream had sent so far, then one terminal error, last (`RUN_ERROR` with the code, AAP
//!   `turn_stop error`). AAP has no error code on the wire: the code is checked in the log;
//! - that the gateway lets the upstream go: no upstream answer is left running, and when the
//!   client leaves, the upstream connection is closed within 100 ms of it;
//! - that the gateway is healthy afterwards: `/live` answers, no stream is still admitted, and a
//!   normal run on the same route ends well.
//!
//! One gateway per pair, with three routes: `/run` in front of the scripted upstream, `/refused`
//! in front of a port that refuses connections, and `/bounded` with `max_stream_duration`. The
//! upstream picks its answer from a marker in the user's message, which every translation
//! carries through to it.

use crate::support;

use std::{
    fmt,
    net::SocketAddr,
    sync::{atomic::AtomicUsize, Arc},
    time::{Duration, Instant},
};

use dialect_proxy::dialect::Dialect;
use serde_json::{json, Value};
use support::{
    pairs::{self, Answer},
    scrape::{metric, metrics, wait_for_metric},
    send, ConfigFile, Conn, Gateway, RecordedRequest, Request, Script, ScriptedUpstream, PATIENCE,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// The upstream's port refuses the connection.
    Refused,
    /// `503` with a JSON body.
    Http5xx,
    /// `200 text/html`: a login page or a web app on the wrong port.
    Html,
    /// The request is read, the connection dropped without an answer.
    DropBeforeHeaders,
    /// Some text, then the connection dropped without a terminal event.
    DropMidStream,
    /// The request is read and never answered (`headers_timeout`).
    StallBeforeHeaders,
    /// Some text, then silence (`idle_timeout`).
    StallMidStream,
    /// Some text, then a `data:` line of bytes that are neither UTF-8 nor JSON.
    Garbage,
    /// Some text, then one event over `max_event_bytes`.
    Oversize,
    /// Some text, then a small event every 10 ms for 20 s (`max_stream_duration`).
    Endless,
    /// Some text, then the client reads no more and closes its connection while the upstream
    /// still writes every 20 ms.
    ClientDisconnect,
    /// The client sends its request and never reads, while the upstream writes 48 MB
    /// (`stall_timeout`).
    ClientStopsReading,
}

const FAULTS: [Fault; 12] = [
    Fault::Refused,
    Fault::Http5xx,
    Fault::Html,
    Fault::DropBeforeHeaders,
    Fault::DropMidStream,
    Fault::StallBeforeHeaders,
    Fault::StallMidStream,
    Fault::Garbage,
    Fault::Oversize,
    Fault::Endless,
    Fault::ClientDisconnect,
    Fault::ClientStopsReading,
];

/// What the client of a cell sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Refused before the stream, with this status (AG-UI, HAI) and code.
    Refused(u16, &'static str),
    /// The stream began, and ends with this code.
    Ends(&'static str),
    /// The client leaves: the upstream must be let go.
    ClientLeaves,
}

impl Fault {
    /// The text of the user's message that makes the upstream answer with this fault.
    fn marker(self) -> String {
        format!("fault:{self:?};")
    }

    fn route(self) -> &'static str {
        match self {
            Fault::Refused => "/refused",
            Fault::Endless => "/bounded",
            _ => "/run",
        }
    }

    fn expected(self) -> Expect {
        match self {
            Fault::Refused | Fault::DropBeforeHeaders => {
                Expect::Refused(502, "UPSTREAM_UNAVAILABLE")
            }
            Fault::Http5xx => Expect::Refused(502, "UPSTREAM_HTTP_503"),
            Fault::Html => Expect::Refused(502, "UPSTREAM_MALFORMED"),
            Fault::StallBeforeHeaders => Expect::Refused(504, "UPSTREAM_HEADERS_TIMEOUT"),
            Fault::DropMidStream => Expect::Ends("UPSTREAM_TRUNCATED"),
            Fault::StallMidStream => Expect::Ends("UPSTREAM_IDLE_TIMEOUT"),
            Fault::Garbage => Expect::Ends("UPSTREAM_MALFORMED"),
            Fault::Oversize => Expect::Ends("UPSTREAM_EVENT_TOO_LARGE"),
            Fault::Endless => Expect::Ends("STREAM_DURATION_EXCEEDED"),
            Fault::ClientDisconnect | Fault::ClientStopsReading => Expect::ClientLeaves,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The upstream, in each dialect

/// The text every faulty stream sends before its fault.
const PARTIAL: &str = "partial answer";
/// The text of a normal run.
const FINE: &str = "all is well";

/// One text event of `upstream`'s dialect, framed.
fn text_frame(upstream: Dialect, text: &str) -> Vec<u8> {
    match upstream {
        Dialect::AgUi => {
            frame(&json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": text}))
        }
        Dialect::Hai => {
            frame(&json!({"type": "BUSINESS_DATA_CONTENT", "messageId": "m1", "delta": text}))
        }
        Dialect::Aap => aap_frame("text_delta", &json!({"delta": text})),
    }
}

/// A run's start and a message's start, then `text`.
fn opening(upstream: Dialect, text: &str) -> Script {
    let mut script = Script::sse_headers();
    let events = match upstream {
        Dialect::AgUi => vec![
            frame(&json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})),
            frame(&json!({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"})),
        ],
        Dialect::Hai => vec![
            frame(&json!({"type": "RUN_STARTED", "messageId": "run", "role": "assistant"})),
            frame(&json!({"type": "BUSINESS_DATA_START", "messageId": "m1", "role": "assistant"})),
        ],
        Dialect::Aap => vec![aap_frame("turn_start", &json!({}))],
    };
    for event in events {
        script = script.bytes(event);
    }
    script.bytes(text_frame(upstream, text))
}

/// The message's end and the run's end.
fn closing(upstream: Dialect, script: Script) -> Script {
    let events = match upstream {
        Dialect::AgUi => vec![
            frame(&json!({"type": "TEXT_MESSAGE_END", "messageId": "m1"})),
            frame(&json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})),
        ],
        Dialect::Hai => vec![
            frame(&json!({"type": "BUSINESS_DATA_END", "messageId": "m1"})),
            frame(&json!({"type": "RUN_FINISHED", "messageId": "run", "role": "assistant"})),
        ],
        Dialect::Aap => vec![aap_frame("turn_stop", &json!({"stopReason": "end_turn"}))],
    };
    events.into_iter().fold(script, Script::bytes)
}

fn frame(event: &Value) -> Vec<u8> {
    format!("data: {event}\n\n").into_bytes()
}

fn aap_frame(name: &str, data: &Value) -> Vec<u8> {
    format!("event: {name}\ndata: {data}\n\n").into_bytes()
}

/// `upstream`'s answer to a run whose user message carries `fault`'s marker (a normal run when
/// none).
fn fault_script(upstream: Dialect, fault: Option<Fault>) -> Script {
    let Some(fault) = fault else {
        return closing(upstream, opening(upstream, FINE));
    };
    match fault {
        // Never reaches this upstream: the route's port refuses.
        Fault::Refused => Script::status_body(500, "text/plain", "unexpected"),
        Fault::Http5xx => Script::status_body(503, "application/json", r#"{"error":"overloaded"}"#),
        Fault::Html => Script::status_body(
            200,
            "text/html; charset=utf-8",
            "<!doctype html><html><body><form action=/login></form></body></html>",
        ),
        Fault::DropBeforeHeaders => Script::drop_before_headers(),
        Fault::DropMidStream => opening(upstream, PARTIAL).close(),
        Fault::StallBeforeHeaders => Script::no_headers(),
        Fault::StallMidStream => opening(upstream, PARTIAL).stall(),
        Fault::Garbage => {
            let garbage: &[u8] = match upstream {
                Dialect::Aap => b"event: text_delta\ndata: \xff\xfe{not json\n\n",
                _ => b"data: \xff\xfe{not json\n\n",
            };
            closing(upstream, opening(upstream, PARTIAL).bytes(garbage))
        }
        Fault::Oversize => closing(
            upstream,
            opening(upstream, PARTIAL).bytes(text_frame(upstream, &"x".repeat(100_000))),
        ),
        Fault::Endless => (0..2000).fold(opening(upstream, PARTIAL), |s, _| {
            s.bytes(text_frame(upstream, "tick ")).sleep_ms(10)
        }),
        Fault::ClientDisconnect => {
            let script = (0..500).fold(opening(upstream, PARTIAL), |s, i| {
                s.bytes(text_frame(upstream, &format!("{i} "))).sleep_ms(20)
            });
            closing(upstream, script)
        }
        Fault::ClientStopsReading => {
            let chunk = text_frame(upstream, &"y".repeat(16 * 1024));
            let script = (0..3000).fold(opening(upstream, PARTIAL), |s, _| s.bytes(&chunk));
            closing(upstream, script)
        }
    }
}

/// The scripted upstream of `dialect`; an AAP agent also serves `/meta` and `POST /sessions`.
async fn start_upstream(dialect: Dialect) -> ScriptedUpstream {
    let sessions = AtomicUsize::new(0);
    ScriptedUpstream::start(move |request: &RecordedRequest| {
        if dialect == Dialect::Aap {
            if let Some(answer) = pairs::aap_agent_besides_turns(request, &sessions) {
                return answer;
            }
        }
        let body = String::from_utf8_lossy(&request.body);
        let fault = FAULTS.into_iter().find(|f| body.contains(&f.marker()));
        fault_script(dialect, fault)
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// The gateway of one pair

struct Pair {
    client: Dialect,
    upstream: Dialect,
}

impl fmt::Display for Pair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (c, u) = (self.client.as_str(), self.upstream.as_str());
        write!(f, "{c} → {u}")
    }
}

fn config(pair: &Pair, upstream: &ScriptedUpstream, refusing: SocketAddr) -> String {
    let path = pairs::upstream_path(pair.upstream);
    let url = upstream.url(path);
    let refused = format!("http://{refusing}{path}");
    let route = |path: &str, url: &str, limits: &str| {
        pairs::route(pair.client, pair.upstream, path, url, limits)
    };
    format!(
        "stall_timeout = \"300ms\"\n\n[limits]\nheaders_timeout = \"300ms\"\n\
         idle_timeout = \"300ms\"\nmax_event_bytes = 65536\n\n{}\n{}\n{}",
        route("/run", &url, ""),
        route("/refused", &refused, ""),
        route("/bounded", &url, "max_stream_duration = \"500ms\""),
    )
}

/// How a client's stream ended.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// A JSON error before the stream.
    Refused(u16, String),
    /// A stream: whether it carried [`PARTIAL`] (or [`FINE`]), and its terminal: the code of a
    /// `RUN_ERROR` or AAP's `error` stop as `Some`, a success as `None`.
    Stream { text: String, error: Option<String> },
}

/// Runs `request` to its end and reads what `dialect`'s client got.
async fn outcome(dialect: Dialect, gateway: &Gateway, request: &Request) -> Outcome {
    let answer = Answer::of(gateway, request).await;
    if answer.status != 200 {
        let code = answer.error_code().unwrap_or_else(|| {
            panic!(
                "a {} that is not a JSON error: {}",
                answer.status,
                answer.text()
            )
        });
        return Outcome::Refused(answer.status, code);
    }
    let (text, error) = answer.streamed(dialect);
    Outcome::Stream { text, error }
}

/// How many times `code` is in the gateway's log.
fn logged(gateway: &Gateway, code: &str) -> usize {
    gateway.stderr().matches(code).count()
}

/// Waits until `code` has been logged more than `before` times.
async fn wait_logged(gateway: &Gateway, code: &str, before: usize, cell: &str) {
    let deadline = Instant::now() + PATIENCE;
    while logged(gateway, code) <= before {
        assert!(
            Instant::now() < deadline,
            "{cell}: {code} never logged:\n{}",
            gateway.stderr()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One cell: `pair` meets `fault`.
async fn cell(pair: &Pair, fault: Fault, gateway: &Gateway, upstream: &ScriptedUpstream) {
    let at = format!("{pair} × {fault:?}");
    let request = pairs::run_request(
        pair.client,
        gateway,
        fault.route(),
        &fault.marker(),
        "delta",
    )
    .await;
    let cancelled = upstream.cancellations();
    match fault.expected() {
        Expect::Refused(status, code) => {
            let before = logged(gateway, code);
            let got = outcome(pair.client, gateway, &request).await;
            let expected = match (pair.client, pair.upstream) {
                // An AAP turn, or a run in front of an AAP agent (meta, session, then turn), has
                // begun its stream when the upstream fails: the failure is its terminal.
                (Dialect::Aap, _) => Outcome::Stream {
                    text: String::new(),
                    error: Some("error".into()),
                },
                (_, Dialect::Aap) => Outcome::Stream {
                    text: String::new(),
                    error: Some(code.into()),
                },
                _ => Outcome::Refused(status, code.to_owned()),
            };
            assert_eq!(got, expected, "{at}");
            wait_logged(gateway, code, before, &at).await;
        }
        Expect::Ends(code) => {
            let before = logged(gateway, code);
            let got = outcome(pair.client, gateway, &request).await;
            let expected_code = match pair.client {
                Dialect::Aap => "error",
                _ => code,
            };
            match &got {
                Outcome::Stream {
                    text,
                    error: Some(error),
                } => {
                    assert!(
                        text.starts_with(PARTIAL),
                        "{at}: what came before the fault: {text:?}"
                    );
                    assert_eq!(error, expected_code, "{at}");
                }
                other => panic!("{at}: expected a stream ended by {code}, got {other:?}"),
            }
            wait_logged(gateway, code, before, &at).await;
        }
        Expect::ClientLeaves if fault == Fault::ClientDisconnect => {
            let mut response = send(gateway.addr, &request).await;
            assert_eq!(response.status, 200, "{at}");
            while !String::from_utf8_lossy(response.raw_body()).contains(PARTIAL) {
                assert!(response.read_more().await, "{at}: the stream ended early");
            }
            let left = Instant::now();
            response.disconnect();
            let closed = upstream
                .wait_for_cancellation_at(cancelled + 1, PATIENCE)
                .await
                .unwrap_or_else(|| panic!("{at}: the upstream connection stayed open"));
            let after = closed.saturating_duration_since(left);
            assert!(
                after <= Duration::from_millis(100),
                "{at}: the upstream was closed {after:?} after the client left"
            );
        }
        Expect::ClientLeaves => {
            let mut conn = Conn::open(gateway.addr).await;
            conn.send(&request).await;
            // Never read: once the client's socket is full, the gateway's writes block, and
            // after `stall_timeout` it gives the client up and lets the upstream go.
            assert!(
                upstream
                    .wait_for_cancellation_at(cancelled + 1, PATIENCE)
                    .await
                    .is_some(),
                "{at}: the upstream stayed open behind a client that stopped reading"
            );
            drop(conn);
        }
    }
    assert!(
        upstream.wait_until_idle(PATIENCE).await,
        "{at}: an upstream answer is still running"
    );
    healthy(pair, gateway, &at).await;
}

/// `/live` answers, no stream is admitted any more on any route, and a normal run ends well.
async fn healthy(pair: &Pair, gateway: &Gateway, at: &str) {
    let admin = gateway.admin_addr();
    let live = send(admin, &Request::get("/live")).await;
    assert_eq!(live.status, 200, "{at}: /live");
    for route in ["/run", "/refused", "/bounded"] {
        let series = format!("dialect_proxy_streams_admitted{{route=\"{route}\"}}");
        if metric(&metrics(admin).await, &series).is_some() {
            wait_for_metric(admin, &series, 0.0).await;
        }
    }
    let request = pairs::run_request(pair.client, gateway, "/run", "hello", "delta").await;
    let got = outcome(pair.client, gateway, &request).await;
    assert_eq!(
        got,
        Outcome::Stream {
            text: FINE.to_owned(),
            error: None
        },
        "{at}: the run after it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pair_meets_every_fault_and_ends_well() {
    let mut failed = Vec::new();
    for &client in Dialect::ALL {
        for &upstream_dialect in Dialect::ALL {
            let pair = Arc::new(Pair {
                client,
                upstream: upstream_dialect,
            });
            let upstream = Arc::new(start_upstream(upstream_dialect).await);
            let (_refusing, refusing) = support::refusing_port();
            let file = ConfigFile::new("faults", &config(&pair, &upstream, refusing));
            let gateway = Arc::new(Gateway::spawn(&[
                "--config",
                file.arg(),
                "--admin-listen",
                "127.0.0.1:0",
            ]));
            for fault in FAULTS {
                // Each cell in a task of its own, so that one failing cell reports and the
                // others still run.
                let (pair, gateway, upstream) = (pair.clone(), gateway.clone(), upstream.clone());
                let run =
                    tokio::spawn(async move { cell(&pair, fault, &gateway, &upstream).await });
                if let Err(e) = run.await {
                    let panic = e.into_panic();
                    let message = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    failed.push(message);
                }
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} of 108 cells failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}
