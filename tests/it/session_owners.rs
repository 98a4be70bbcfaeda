//! Sessions of the AAP face belong to their principal, and what one principal may store is
//! bounded (`src/session/mod.rs`, `[sessions]` in the README), against the real gateway over
//! real TCP:
//!
//! - ownership: two API keys each list only their own sessions, and get, history, delete and
//!   turns on the other's session answer exactly what a missing session answers (404);
//! - `max_sessions_per_principal`, `max_bytes_per_principal`: one key at its cap gets 429 while
//!   another still creates;
//! - `max_total_bytes`: a session or a turn's input past the budget gets 507 with a JSON error,
//!   and nothing is stored;
//! - memory goes back to the system: the resident size falls well below its peak once a flood
//!   of large sessions is deleted (the binary's allocator, `src/main.rs`).

use crate::support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::aap::{spawn_with_config, user_turn, AapClient, Reply};

/// One AAP agent `demo` (the built-in demo agent) at `/v1`, guarded by the keys `k1` and `k2`,
/// with `sessions` as the `[sessions]` table.
fn two_key_gateway(sessions: &str) -> (support::Gateway, AapClient, AapClient) {
    let gateway = spawn_with_config(&format!(
        r#"[[routes]]
path = "/v1"
client = "aap"
upstream = "builtin:demo"

[routes.aap]
name = "demo"
api_keys = ["k1", "k2"]

[sessions]
{sessions}
"#
    ));
    let one = AapClient::new(gateway.addr, "/v1", Some("k1"));
    let two = one.with_key(Some("k2"));
    (gateway, one, two)
}

fn create() -> Value {
    json!({"agent": {"name": "demo"}})
}

/// A create request whose seed history holds `bytes` content bytes (one user message).
fn create_with_history(bytes: usize) -> Value {
    json!({"agent": {"name": "demo"}, "messages": [{"role": "user", "content": "x".repeat(bytes)}]})
}

/// The ids of the sessions `client` lists (first page).
async fn listed(client: &AapClient) -> Vec<String> {
    let reply = client.list_sessions(None).await;
    let mut ids: Vec<String> = reply.expect_json(200)["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("no sessions array: {}", reply.text))
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap_or_default().to_owned())
        .collect();
    ids.sort();
    ids
}

/// Every endpoint that names a session, on `id`, as `client`: `(what, reply)`.
async fn every_endpoint(client: &AapClient, id: &str) -> Vec<(&'static str, Reply)> {
    vec![
        ("get", client.get_session(id).await),
        ("history", client.history(id, Some("full")).await),
        ("turn", client.turn(id, user_turn("none", "hi")).await),
        (
            "streamed turn",
            client
                .request(
                    "POST",
                    &format!("/sessions/{id}/turns"),
                    user_turn("delta", "hi").to_string().as_bytes(),
                )
                .await,
        ),
        ("delete", client.delete_session(id).await),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_key_sees_and_touches_only_its_own_sessions() {
    let (_gateway, one, two) = two_key_gateway("");
    let mut ones = vec![
        one.new_session(create()).await,
        one.new_session(create()).await,
    ];
    ones.sort();
    let twos = vec![two.new_session(create()).await];
    one.turn(&ones[0], user_turn("none", "mine"))
        .await
        .expect(200);
    let history_before = one.full_history(&ones[0]).await;

    assert_eq!(listed(&one).await, ones);
    assert_eq!(listed(&two).await, twos);

    // Another principal's session answers exactly like one that does not exist.
    let missing = "sess_0123456789abcdef0123456789abcdef";
    let (theirs, absent) = (
        every_endpoint(&two, &ones[0]).await,
        every_endpoint(&two, missing).await,
    );
    for ((what, reply), (_, nothing)) in theirs.iter().zip(&absent) {
        let text = reply.expect_error(404);
        let expected = nothing.expect_error(404).replace(missing, &ones[0]);
        assert_eq!(text, expected, "{what} on another key's session");
    }
    for (what, reply) in every_endpoint(&one, &twos[0]).await {
        assert_eq!(
            reply.status, 404,
            "{what} on k2's session as k1: {}",
            reply.text
        );
    }

    // Nothing the other key tried changed anything.
    assert_eq!(listed(&one).await, ones);
    assert_eq!(listed(&two).await, twos);
    assert_eq!(one.full_history(&ones[0]).await, history_before);
    two.get_session(&twos[0]).await.expect(200);
    for id in &ones {
        one.delete_session(id).await.expect(204);
    }
    assert!(listed(&one).await.is_empty());
    assert_eq!(listed(&two).await, twos);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_at_its_session_cap_is_refused_while_another_still_creates() {
    let (_gateway, one, two) = two_key_gateway(
        "max_sessions_per_principal = 3\nmax_sessions = 100\nmax_bytes_per_principal = 4096",
    );
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(one.new_session(create()).await);
    }
    let refused = one.create_session(create()).await;
    refused.expect_error_naming(429, "max_sessions_per_principal");
    assert_eq!(listed(&one).await.len(), 3, "the refusal stored nothing");

    // The other key is not starved.
    for _ in 0..3 {
        two.new_session(create()).await;
    }
    two.create_session(create())
        .await
        .expect_error_naming(429, "max_sessions_per_principal");

    // A deletion makes room for its own principal again.
    one.delete_session(&ids[0]).await.expect(204);
    one.new_session(create()).await;
    one.create_session(create()).await.expect_error(429);

    // Bytes too: a key at its share is refused, the other key is not.
    one.delete_session(&ids[1]).await.expect(204);
    one.delete_session(&ids[2]).await.expect(204);
    let big = one.new_session(create_with_history(3000)).await;
    one.create_session(create_with_history(1100))
        .await
        .expect_error_naming(429, "max_bytes_per_principal");
    one.turn(&big, user_turn("none", &"z".repeat(1100)))
        .await
        .expect_error_naming(429, "max_bytes_per_principal");
    two.delete_session(&listed(&two).await[0]).await.expect(204);
    two.new_session(create_with_history(3000)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_byte_budget_a_session_or_an_input_is_refused_with_507_and_nothing_is_stored() {
    const KIB: usize = 1024;
    let (_gateway, one, two) = two_key_gateway("max_total_bytes = 1048576");
    let first = one.new_session(create_with_history(600 * KIB)).await;

    // A second large seed, from either key: 507, a JSON error naming the budget, nothing stored.
    for client in [&one, &two] {
        let refused = client.create_session(create_with_history(600 * KIB)).await;
        let text = refused.expect_error_naming(507, "max_total_bytes");
        assert!(text.contains("storage"), "{text}");
    }
    assert_eq!(listed(&one).await, vec![first.clone()]);
    assert!(listed(&two).await.is_empty());

    // A turn whose input would pass the budget is refused before it runs: history unchanged.
    let before = one.full_history(&first).await;
    for mode in ["none", "delta"] {
        let big = user_turn(mode, &"y".repeat(600 * KIB));
        one.turn(&first, big)
            .await
            .expect_error_naming(507, "max_total_bytes");
    }
    assert_eq!(one.full_history(&first).await, before);
    // A small one still runs, and small sessions still fit.
    one.turn(&first, user_turn("none", "small"))
        .await
        .expect(200);
    assert!(one.full_history(&first).await.len() > before.len());
    two.new_session(create()).await;

    // Deleting gives the bytes back.
    one.delete_session(&first).await.expect(204);
    two.new_session(create_with_history(600 * KIB)).await;
}

/// The resident size of process `pid`, in KiB (`VmRSS` of `/proc/<pid>/status`).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("cannot read /proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in /proc/{pid}/status:\n{status}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_goes_back_to_the_system_after_a_flood_of_sessions_is_deleted() {
    const SESSIONS: usize = 30;
    const BYTES: usize = 4 << 20;
    // One anonymous principal floods: its byte share is raised to hold the whole flood.
    let gateway = spawn_with_config(
        r#"[[routes]]
path = "/"
client = "aap"
upstream = "builtin:demo"

[routes.aap]
name = "demo"

[sessions]
max_bytes_per_principal = 268435456
"#,
    );
    let aap = AapClient::new(gateway.addr, "", None);
    let pid = gateway.pid();
    let before = rss_kib(pid);
    let body = create_with_history(BYTES);
    let mut ids = Vec::new();
    for _ in 0..SESSIONS {
        ids.push(aap.new_session(body.clone()).await);
    }
    let peak = rss_kib(pid);
    let stored = (SESSIONS * BYTES / 1024) as u64;
    assert!(
        peak >= before + stored / 2,
        "the flood should show in the resident size: {before} KiB before, {peak} KiB after \
         storing {stored} KiB"
    );
    for id in &ids {
        aap.delete_session(id).await.expect(204);
    }
    assert!(listed(&aap).await.is_empty());
    // Freed pages are purged about a second after they are freed; allow a loaded machine more.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut after = rss_kib(pid);
    while after >= peak / 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        after = rss_kib(pid);
    }
    eprintln!("VmRSS: {before} KiB before, {peak} KiB at the peak, {after} KiB after deleting");
    assert!(
        after < peak / 2,
        "the resident size should fall below half its peak once the sessions are deleted: \
         {before} KiB before, {peak} KiB at the peak, {after} KiB after deleting"
    );
}
