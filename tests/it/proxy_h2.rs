//! HTTP/2 with prior knowledge (h2c) on the gateway's port, for meshes and multiplexing
//! clients: streams work as on HTTP/1.1, several run at once on one connection, and resetting a
//! stream cancels its upstream.

use crate::support;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use support::{run_input, Gateway, Script, ScriptedUpstream, PATIENCE};

async fn h2(addr: std::net::SocketAddr) -> SendRequest<Full<Bytes>> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .expect("h2c handshake with the gateway");
    tokio::spawn(connection);
    sender
}

fn post(body: String) -> http::Request<Full<Bytes>> {
    http::Request::post("http://gateway/")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

fn events(body: &[u8]) -> Vec<Value> {
    std::str::from_utf8(body)
        .unwrap()
        .split_terminator("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .map(|j| serde_json::from_str(j).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_over_h2c_several_at_once() {
    let gateway = Gateway::spawn(&["--upstream", "builtin:demo"]);
    let sender = h2(gateway.addr).await;
    let runs = (0..3).map(|i| {
        let mut sender = sender.clone();
        async move {
            let response = sender
                .send_request(post(run_input("t", &format!("r{i}"))))
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            assert_eq!(response.headers()["content-type"], "text/event-stream");
            let body = response.into_body().collect().await.unwrap().to_bytes();
            assert!(body.starts_with(b": ok\n\n"));
            events(&body)
        }
    });
    for (i, events) in futures_join(runs).await.into_iter().enumerate() {
        assert_eq!(events.first().unwrap()["type"], "RUN_STARTED");
        assert_eq!(events.first().unwrap()["runId"], format!("r{i}"));
        assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
    }
}

/// Runs the futures concurrently on the test runtime.
async fn futures_join<F: std::future::Future + Send + 'static>(
    futs: impl Iterator<Item = F>,
) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futs.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resetting_an_h2_stream_cancels_its_upstream() {
    let upstream = ScriptedUpstream::with_script(
        Script::sse_json(&[json!({"type":"RUN_STARTED","threadId":"t","runId":"r"})]).stall(),
    )
    .await;
    let gateway = Gateway::agui(&upstream.url("/agent"), &[]);
    let mut sender = h2(gateway.addr).await;
    let response = sender
        .send_request(post(run_input("t", "r")))
        .await
        .unwrap();
    let mut body = response.into_body();
    // Read until the upstream's first event has arrived, then drop the body (RST_STREAM).
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("RUN_STARTED") {
        let frame = tokio::time::timeout(PATIENCE, body.frame())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.extend_from_slice(&frame.into_data().unwrap());
    }
    drop(body);
    assert!(
        upstream.wait_for_cancellation(PATIENCE).await,
        "a reset h2 stream must close its upstream connection"
    );
    // The connection itself lives on for other streams.
    let response = sender.send_request(post("{}".into())).await.unwrap();
    assert_eq!(response.status(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_h2_connection_is_closed_after_request_header_timeout_and_a_busy_one_is_not() {
    let gateway = Gateway::spawn(&[
        "--upstream",
        "builtin:demo",
        "--request-header-timeout",
        "500ms",
    ]);
    let tcp = tokio::net::TcpStream::connect(gateway.addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .expect("h2c handshake with the gateway");
    let closed = tokio::spawn(connection);
    // A demo run streams for well over the timeout: an open request keeps the connection.
    let started = std::time::Instant::now();
    let response = sender
        .send_request(post(run_input("t", "r-busy")))
        .await
        .unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(started.elapsed() > std::time::Duration::from_millis(500));
    assert_eq!(events(&body).last().unwrap()["type"], "RUN_FINISHED");
    // Then nothing is open: the gateway closes the connection.
    let ended = tokio::time::timeout(PATIENCE, closed)
        .await
        .expect("the idle connection is closed");
    assert!(ended.is_ok(), "{ended:?}");
    assert!(
        sender.ready().await.is_err(),
        "no more requests on a closed connection"
    );
}

/// A run on the `h2` client's connection (hyper's client hides a GOAWAY's reason): its events.
async fn h2_run(
    sender: &mut h2::client::SendRequest<Bytes>,
    run_id: &str,
) -> Result<Vec<Value>, h2::Error> {
    let request = http::Request::post("http://gateway/")
        .header("content-type", "application/json")
        .body(())
        .unwrap();
    let mut sender = sender.clone().ready().await?;
    let (response, mut body) = sender.send_request(request, false)?;
    body.send_data(Bytes::from(run_input("t", run_id)), true)?;
    let response = response.await?;
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut all = Vec::new();
    while let Some(data) = body.data().await {
        let data = data?;
        let _ = body.flow_control().release_capacity(data.len());
        all.extend_from_slice(&data);
    }
    Ok(events(&all))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_max_requests_per_connection_the_open_streams_finish_and_goaway_sends_clients_elsewhere(
) {
    let gateway = Gateway::spawn(&[
        "--upstream",
        "builtin:demo",
        "--max-requests-per-connection",
        "2",
    ]);
    let tcp = tokio::net::TcpStream::connect(gateway.addr).await.unwrap();
    let (sender, connection) = h2::client::handshake(tcp)
        .await
        .expect("h2c handshake with the gateway");
    let closed = tokio::spawn(connection);
    // Two demo runs at once (each streams for over half a second): the second is the
    // connection's last, and both still run to their end after the GOAWAY it brings.
    let runs = (0..2).map(|i| {
        let mut sender = sender.clone();
        async move { h2_run(&mut sender, &format!("r{i}")).await.unwrap() }
    });
    for events in futures_join(runs).await {
        assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED", "{events:?}");
    }
    // A third request on that connection is refused by the GOAWAY, not by a dropped socket.
    let goaway = h2_run(&mut sender.clone(), "r2")
        .await
        .expect_err("a request after the connection's last");
    assert!(goaway.is_go_away() && goaway.is_remote(), "{goaway:?}");
    assert_eq!(goaway.reason(), Some(h2::Reason::NO_ERROR), "{goaway:?}");
    let ended = tokio::time::timeout(PATIENCE, closed)
        .await
        .expect("the connection ends once its streams have");
    assert!(matches!(ended, Ok(Ok(()))), "{ended:?}");
    // The client's next connection is served as any other.
    let response = h2(gateway.addr)
        .await
        .send_request(post(run_input("t", "r3")))
        .await
        .unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(events(&body).last().unwrap()["type"], "RUN_FINISHED");
}
