//! Replicas sharing one Redis (`[sessions] store = "redis"`): two real gateway processes, a real
//! `redis-server` of the test's own (`support::redis`), real AAP and AG-UI clients over TCP.
//!
//! Covered: alternate turns of one session on both replicas agree on its history; two turns
//! at once on both replicas give one 200 and one 409; a replica killed mid-turn frees the
//! session once its lock expires; an AG-UI thread in front of an AAP agent continues on the
//! other replica without the agent seeing a message twice; Redis stopped mid-test (503 with a
//! JSON error, running streams finish) and started again (the gateways reconnect).

use crate::support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::aap::{
    assistant_text, content_text, face_config, spawn_with_config, user_turn, wait_for_event,
    AapClient, Reply,
};
use support::aap_agent::AapAgent;
use support::agui_script::{agui_text_script, last_user_text};
use support::agui_thread::Thread;
use support::redis::RedisServer;
use support::{Gateway, ScriptedUpstream, PATIENCE};

/// How long a dead replica's turn lock lives in these tests.
const LOCK_TTL: Duration = Duration::from_secs(2);

/// An AAP face at `/v1` in front of the AG-UI agent at `upstream`, keeping its sessions in the
/// Redis at `redis`.
fn aap_face(upstream: &str, redis: &RedisServer) -> Gateway {
    let sessions = format!(
        "store = \"redis\"\nurl = \"{}\"\nkey_prefix = \"dp-test:\"\nlock_ttl = \"{}ms\"\nstore_timeout = \"1s\"",
        redis.url(),
        LOCK_TTL.as_millis()
    );
    spawn_with_config(&face_config(upstream, &sessions))
}

/// An AG-UI agent answering `ack: <what the user said>`; "slow…" turns pause 3 s between their
/// two deltas, "stuck" turns for a minute.
async fn agent() -> ScriptedUpstream {
    ScriptedUpstream::start(|request| {
        let said = last_user_text(&request.json());
        let pause = match said.as_str() {
            s if s.starts_with("slow") => Some(Duration::from_secs(3)),
            "stuck" => Some(Duration::from_secs(60)),
            _ => None,
        };
        match pause {
            Some(pause) => agui_text_script(request, &["working", " done"], Some(pause)),
            None => agui_text_script(request, &[&format!("ack: {said}")], None),
        }
    })
    .await
}

/// The texts of the user messages of a history.
fn users(history: &[Value]) -> Vec<String> {
    history
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| content_text(&m["content"]))
        .collect()
}

/// A turn in `stream: "none"` mode that must end `end_turn`; its assistant text.
async fn turn(aap: &AapClient, session: &str, text: &str) -> String {
    let reply = aap.turn(session, user_turn("none", text)).await;
    let (stop, messages) = reply.turn_messages();
    assert_eq!(stop, "end_turn", "{}", reply.text);
    assistant_text(&messages)
}

/// Sends `text` to `session` until it is not refused as busy; fails after [`PATIENCE`].
async fn turn_once_free(aap: &AapClient, session: &str, text: &str) -> Reply {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let reply = aap.turn(session, user_turn("none", text)).await;
        if reply.status != 409 && reply.status != 503 {
            return reply;
        }
        assert!(
            Instant::now() < deadline,
            "still {} after {PATIENCE:?}: {}",
            reply.status,
            reply.text
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Two AAP faces on one Redis, in front of one agent.
struct Replicas {
    redis: RedisServer,
    upstream: ScriptedUpstream,
    gateways: [Gateway; 2],
}

impl Replicas {
    async fn start() -> Replicas {
        let redis = RedisServer::start().await;
        let upstream = agent().await;
        let url = upstream.url("/agent");
        let gateways = [aap_face(&url, &redis), aap_face(&url, &redis)];
        Replicas {
            redis,
            upstream,
            gateways,
        }
    }

    /// An AAP client of replica `i`.
    fn client(&self, i: usize) -> AapClient {
        AapClient::new(self.gateways[i].addr(), "/v1", None)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_serve_alternate_turns_and_agree_on_the_history() {
    let r = Replicas::start().await;
    let (a, b) = (r.client(0), r.client(1));
    let session = a.new_session(json!({"agent": {"name": "support"}})).await;
    // Created on one, seen by both, listed by both.
    b.get_session(&session).await.expect(200);
    for client in [&a, &b] {
        let listed = client.list_sessions(None).await;
        let ids: Vec<&str> = listed.expect_json(200)["sessions"]
            .as_array()
            .expect("sessions")
            .iter()
            .filter_map(|s| s["sessionId"].as_str())
            .collect();
        assert_eq!(ids, [session.as_str()]);
    }
    assert_eq!(turn(&b, &session, "one").await, "ack: one");
    assert_eq!(turn(&a, &session, "two").await, "ack: two");
    assert_eq!(turn(&b, &session, "three").await, "ack: three");
    let (history_a, history_b) = (
        a.full_history(&session).await,
        b.full_history(&session).await,
    );
    assert_eq!(history_a, history_b);
    assert_eq!(users(&history_a), ["one", "two", "three"]);
    // The agent was given the whole conversation each time, whichever replica ran the turn.
    let last = r.upstream.requests().last().expect("turns").json();
    let texts: Vec<String> = support::aap::agui_texts(&last["messages"])
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(texts, ["one", "ack: one", "two", "ack: two", "three"]);
    // Deleted on one, gone from both.
    a.delete_session(&session).await.expect(204);
    b.get_session(&session).await.expect(404);
    assert!(
        r.redis.keys("dp-test:s*").await.is_empty(),
        "a deleted session leaves no keys"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_turns_on_both_replicas_give_one_200_and_one_409() {
    let r = Replicas::start().await;
    let (a, b) = (r.client(0), r.client(1));
    let session = a.new_session(json!({"agent": {"name": "support"}})).await;
    let (first, second) = tokio::join!(
        a.turn(&session, user_turn("none", "slow a")),
        b.turn(&session, user_turn("none", "slow b")),
    );
    let mut statuses = [first.status, second.status];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409], "{}\n{}", first.text, second.text);
    let refused = if first.status == 409 { &first } else { &second };
    refused.expect_error(409);
    // Only the turn that ran is in the history, on both replicas.
    let ran = if first.status == 200 {
        "slow a"
    } else {
        "slow b"
    };
    assert_eq!(users(&a.full_history(&session).await), [ran]);
    assert_eq!(users(&b.full_history(&session).await), [ran]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_turn_frees_the_session_after_the_lock_expires() {
    let redis = RedisServer::start().await;
    let upstream = agent().await;
    let mut one = aap_face(&upstream.url("/agent"), &redis);
    let two = aap_face(&upstream.url("/agent"), &redis);
    let (a, b) = (
        AapClient::new(one.addr(), "/v1", None),
        AapClient::new(two.addr(), "/v1", None),
    );
    let session = a.new_session(json!({"agent": {"name": "support"}})).await;
    assert_eq!(turn(&a, &session, "before").await, "ack: before");
    let mut running = a.open_turn(&session, &user_turn("delta", "stuck")).await;
    assert_eq!(running.status, 200);
    wait_for_event(&mut running, "text_delta").await;
    one.kill();
    let killed = Instant::now();
    // The dead replica's lock still holds the session ...
    b.turn(&session, user_turn("none", "too early"))
        .await
        .expect_error(409);
    // ... until it expires by itself; then the other replica runs the next turn.
    let after = turn_once_free(&b, &session, "after").await;
    assert_eq!(after.turn_messages().0, "end_turn", "{}", after.text);
    assert!(
        killed.elapsed() >= LOCK_TTL.saturating_sub(Duration::from_millis(500)),
        "the lock must hold until it expires, not be broken early ({:?})",
        killed.elapsed()
    );
    // Nothing of the interrupted turn was committed.
    assert_eq!(users(&b.full_history(&session).await), ["before", "after"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agui_thread_continues_on_the_other_replica_in_front_of_an_aap_agent() {
    let redis = RedisServer::start().await;
    let agent = AapAgent::start().await;
    let config = |redis: &RedisServer| {
        format!(
            r#"[[routes]]
path = "/"
client = "ag-ui"
upstream = "{}"
upstream_dialect = "aap"

[sessions]
store = "redis"
url = "{}"
lock_ttl = "2s"
"#,
            agent.base_url(),
            redis.url()
        )
    };
    let one = spawn_with_config(&config(&redis));
    let two = spawn_with_config(&config(&redis));
    let mut thread = Thread::new("t-replicas");
    assert_eq!(thread.say(&one, "hello").await, "You said: hello");
    assert_eq!(thread.say(&two, "again").await, "You said: again");
    assert_eq!(thread.say(&one, "and back").await, "You said: and back");
    // One AAP session for the thread; each turn carried only what the agent had not seen.
    agent.assert_one_session_saw_each_once(&["hello", "again", "and back"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stopped_mid_test_is_a_503_and_the_gateway_reconnects_when_it_returns() {
    let mut redis = RedisServer::start().await;
    let upstream = agent().await;
    let gateway = aap_face(&upstream.url("/agent"), &redis);
    let aap = AapClient::new(gateway.addr(), "/v1", None);
    let session = aap.new_session(json!({"agent": {"name": "support"}})).await;
    assert_eq!(turn(&aap, &session, "first").await, "ack: first");

    // A turn already streaming when Redis goes away still reaches its end.
    let mut running = aap.open_turn(&session, &user_turn("delta", "slow")).await;
    assert_eq!(running.status, 200);
    wait_for_event(&mut running, "text_delta").await;
    redis.stop();
    let finished = Reply::read(running).await;
    let (stop, messages) = finished.turn_messages();
    assert_eq!(
        (stop.as_str(), assistant_text(&messages).as_str()),
        ("end_turn", "working done")
    );

    // Requests that need the store fail fast, with a JSON error naming the store.
    let started = Instant::now();
    let refused = aap.turn(&session, user_turn("none", "while down")).await;
    refused.expect_error_naming(503, "session store");
    let created = aap
        .create_session(json!({"agent": {"name": "support"}}))
        .await;
    created.expect_error(503);
    assert!(
        started.elapsed() < PATIENCE,
        "a store that is down must not hold requests ({:?})",
        started.elapsed()
    );
    // The agent's stateless route is not the store's business: /meta still answers.
    aap.meta().await.expect(200);

    // Redis returns with its data; the gateway reconnects by itself.
    redis.restart().await;
    let after = turn_once_free(&aap, &session, "after").await;
    assert_eq!(after.turn_messages().0, "end_turn", "{}", after.text);
    let history = aap.full_history(&session).await;
    assert_eq!(users(&history)[0], "first");
    assert_eq!(users(&history).last().map(String::as_str), Some("after"));
    assert!(
        !users(&history).iter().any(|u| u == "while down"),
        "a refused turn leaves no trace"
    );
}
