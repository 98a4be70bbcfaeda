//! Reading the admin listener's `/metrics` in tests: the text, one series' value, and waiting
//! for a series to reach a value (metrics are recorded a moment after the response).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;

use super::{send, Request, PATIENCE};

/// The admin listener's `/metrics` text.
pub async fn metrics(admin: SocketAddr) -> String {
    let mut response = send(admin, &Request::get("/metrics")).await;
    assert_eq!(response.status, 200);
    response.text().await
}

/// The value of one series (`name{labels}`, as exposed), if present.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Waits until `series` reads `value` and returns the text that showed it; panics with the
/// last reading after [`PATIENCE`].
pub async fn wait_for_metric(admin: SocketAddr, series: &str, value: f64) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = metrics(admin).await;
        if metric(&text, series) == Some(value) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{series} never read {value}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
