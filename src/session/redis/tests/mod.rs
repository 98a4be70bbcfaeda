//! Tests of [`super::RedisStore`] against a real `redis-server` per test ([`server`]): the
//! shared contract ([`store_conformance!`]), and what only a shared store has: replicas,
//! locks that expire, the history written by appends, keys that expire, Redis going away and
//! coming back, passwords and TLS.

mod server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ::redis::aio::MultiplexedConnection;
use serde_json::Map;

use super::*;
use crate::event::{Message, MessageContent, UserMessage};
use crate::session::backend::DEFAULT_KEY_PREFIX;
use crate::session::conformance::{store_conformance, Subject};
use crate::session::{new_session_id, Timed};
use server::RedisServer;

/// `store_timeout` in these tests.
const TIMEOUT: Duration = Duration::from_secs(2);
/// `lock_ttl` in these tests.
const LOCK_TTL: Duration = Duration::from_secs(1);

fn settings(url: String) -> RedisSettings {
    RedisSettings {
        url,
        password_env: None,
        key_prefix: DEFAULT_KEY_PREFIX.into(),
        lock_ttl: LOCK_TTL,
    }
}

async fn connect(server: &RedisServer, limits: SessionLimits) -> RedisStore {
    RedisStore::connect(&settings(server.url()), limits, TIMEOUT)
        .await
        .unwrap()
}

async fn redis(limits: SessionLimits) -> Subject {
    let server = RedisServer::start();
    let store = connect(&server, limits).await;
    Subject {
        store: Arc::new(Timed::new(store, TIMEOUT)),
        keep: Box::new(server),
    }
}

store_conformance!(redis);

/// A plain connection, to look at what the store wrote.
async fn raw(server: &RedisServer) -> MultiplexedConnection {
    ::redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn query<T: ::redis::FromRedisValue>(conn: &mut MultiplexedConnection, args: &[&str]) -> T {
    let mut cmd = ::redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query_async(conn).await.unwrap()
}

static ALICE: std::sync::LazyLock<Principal> = std::sync::LazyLock::new(alice);

fn alice() -> Principal {
    Principal::new("alice")
}

fn bob() -> Principal {
    Principal::new("bob")
}

/// A user message saying `text`.
fn said(text: &str) -> Message {
    Message::User(UserMessage {
        id: new_session_id(),
        content: MessageContent::Text(text.into()),
        name: None,
        encrypted_value: None,
        metadata: None,
        subagent_run_id: None,
        extra: Map::new(),
    })
}

/// A new session of `owner` on face "/" holding `history`; its id.
async fn add(
    s: &dyn Store,
    owner: &Principal,
    history: Vec<Message>,
) -> Result<String, StoreError> {
    let id = new_session_id();
    s.create(Session {
        id: id.clone(),
        owner: owner.clone(),
        config: SessionConfig {
            face: "/".into(),
            agent: "a".into(),
            ..SessionConfig::default()
        },
        history,
        ..Session::default()
    })
    .await?;
    Ok(id)
}

fn commit(session: &Session, history: Vec<Message>, kept: usize) -> TurnCommit {
    TurnCommit {
        config: session.config.clone(),
        history,
        kept,
        state: None,
        pending: Vec::new(),
    }
}

#[tokio::test]
async fn a_commit_appends_to_the_stored_history_and_a_rewrite_replaces_it() {
    let server = RedisServer::start();
    let s = connect(&server, SessionLimits::default()).await;
    let mut conn = raw(&server).await;
    let id = add(&s, &alice(), vec![said("one"), said("two")])
        .await
        .unwrap();
    let [_, history_key, _] = s.inner.keys.session(&id);
    // Mark the stored first message behind the store's back: an append leaves it alone.
    let marked = said("marked");
    let marked_json = serde_json::to_string(&marked).unwrap();
    let _: () = query(&mut conn, &["LSET", &history_key, "0", &marked_json]).await;
    let session = s.begin_turn(&id, &alice()).await.unwrap();
    assert_eq!(session.history[0], marked);
    let mut history = session.history.clone();
    history.push(said("three"));
    s.end_turn(&id, Some(commit(&session, history.clone(), 2)))
        .await
        .unwrap();
    let stored: Vec<String> = query(&mut conn, &["LRANGE", &history_key, "0", "-1"]).await;
    assert_eq!(stored.len(), 3);
    assert_eq!(stored[0], marked_json, "an append rewrote a kept message");
    assert_eq!(
        s.get(&id, &alice()).await.unwrap().unwrap().history,
        history
    );
    // A rewrite keeping one message replaces the rest.
    let session = s.begin_turn(&id, &alice()).await.unwrap();
    let rewritten = vec![history[0].clone(), said("four")];
    s.end_turn(&id, Some(commit(&session, rewritten.clone(), 1)))
        .await
        .unwrap();
    let stored: Vec<String> = query(&mut conn, &["LRANGE", &history_key, "0", "-1"]).await;
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[0], marked_json);
    assert_eq!(
        s.get(&id, &alice()).await.unwrap().unwrap().history,
        rewritten
    );
    // A commit that claims more kept messages than are stored is written whole.
    let session = s.begin_turn(&id, &alice()).await.unwrap();
    let _: () = query(&mut conn, &["RPOP", &history_key]).await;
    s.end_turn(&id, Some(commit(&session, rewritten.clone(), 2)))
        .await
        .unwrap();
    assert_eq!(
        s.get(&id, &alice()).await.unwrap().unwrap().history,
        rewritten
    );
}

/// The part of `key` Redis Cluster hashes (the Cluster specification's rule).
fn hash_tag(key: &str) -> &str {
    let Some(open) = key.find('{') else {
        return key;
    };
    match key[open + 1..].find('}') {
        Some(0) | None => key,
        Some(len) => &key[open + 1..open + 1 + len],
    }
}

#[tokio::test]
async fn every_key_of_a_session_or_thread_expires_and_lives_on_its_own_slot() {
    let server = RedisServer::start();
    let s = connect(&server, SessionLimits::default()).await;
    let mut conn = raw(&server).await;
    let id = add(&s, &alice(), vec![said("hi")]).await.unwrap();
    let session = s.begin_turn(&id, &alice()).await.unwrap();
    s.begin_thread("k", &alice()).await.unwrap();
    s.save_thread("k", ThreadRecord::default()).await.unwrap();
    let keys: Vec<String> = query(&mut conn, &["KEYS", "*"]).await;
    // Keys with the same hash tag are in the same Cluster slot.
    let mut slots = std::collections::BTreeMap::<String, Vec<String>>::new();
    for key in &keys {
        slots
            .entry(hash_tag(key).to_owned())
            .or_default()
            .push(key.clone());
        if key.contains("{ledger}") {
            continue;
        }
        let ttl: i64 = query(&mut conn, &["PTTL", key]).await;
        assert!(ttl > 0, "{key} does not expire ({ttl})");
    }
    // One slot for the session (meta, history, lock), one for the thread (record, lock), one
    // for the ledger.
    assert_eq!(slots.len(), 3, "{slots:?}");
    assert!(slots
        .values()
        .any(|k| k.len() == 3 && k.iter().all(|k| k.contains(&id))));
    s.end_turn(&id, Some(commit(&session, session.history.clone(), 1)))
        .await
        .unwrap();
    s.end_thread("k").await.unwrap();
    for key in query::<Vec<String>>(&mut conn, &["KEYS", "*"]).await {
        assert!(!key.ends_with(":lock"), "{key} outlived its run");
    }
}

#[tokio::test]
async fn a_turn_begun_on_one_replica_is_busy_on_another() {
    let server = RedisServer::start();
    let a = connect(&server, SessionLimits::default()).await;
    let b = connect(&server, SessionLimits::default()).await;
    let id = add(&a, &alice(), vec![said("hi")]).await.unwrap();
    let session = a.begin_turn(&id, &alice()).await.unwrap();
    assert_eq!(b.begin_turn(&id, &alice()).await, Err(StoreError::Busy));
    // Another principal is told it does not exist, even while it runs.
    assert_eq!(b.begin_turn(&id, &bob()).await, Err(StoreError::NotFound));
    let mut history = session.history.clone();
    history.push(said("from a"));
    a.end_turn(&id, Some(commit(&session, history.clone(), 1)))
        .await
        .unwrap();
    let seen = b.begin_turn(&id, &alice()).await.unwrap();
    assert_eq!(seen.history, history);
    b.end_turn(&id, None).await.unwrap();
}

#[tokio::test]
async fn a_crashed_replicas_lock_expires_by_itself() {
    let server = RedisServer::start();
    let a = connect(&server, SessionLimits::default()).await;
    let b = connect(&server, SessionLimits::default()).await;
    let id = add(&a, &alice(), Vec::new()).await.unwrap();
    a.begin_turn(&id, &alice()).await.unwrap();
    let crashed = Instant::now();
    drop(a);
    assert_eq!(b.begin_turn(&id, &alice()).await, Err(StoreError::Busy));
    let freed = loop {
        match b.begin_turn(&id, &alice()).await {
            Ok(_) => break crashed.elapsed(),
            Err(StoreError::Busy) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(other) => panic!("{other}"),
        }
        assert!(crashed.elapsed() < LOCK_TTL * 3, "the lock never expired");
    };
    assert!(freed > LOCK_TTL / 2, "freed after {freed:?}");
    b.end_turn(&id, None).await.unwrap();
}

#[tokio::test]
async fn a_renewed_lock_and_its_session_outlive_lock_ttl_and_idle_timeout() {
    let server = RedisServer::start();
    let limits = SessionLimits {
        idle_timeout: Duration::from_millis(800),
        ..SessionLimits::default()
    };
    let a = connect(&server, limits).await;
    let b = connect(&server, limits).await;
    let id = add(&a, &alice(), vec![said("hi")]).await.unwrap();
    let session = a.begin_turn(&id, &alice()).await.unwrap();
    tokio::time::sleep(LOCK_TTL * 3).await;
    assert_eq!(b.begin_turn(&id, &alice()).await, Err(StoreError::Busy));
    let mut history = session.history.clone();
    history.push(said("late"));
    a.end_turn(&id, Some(commit(&session, history.clone(), 1)))
        .await
        .unwrap();
    assert_eq!(
        b.get(&id, &alice()).await.unwrap().unwrap().history,
        history
    );
    // Once the turn is over, the idle clock runs again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(b.get(&id, &alice()).await.unwrap(), None);
}

#[tokio::test]
async fn a_commit_after_the_lock_was_lost_is_refused_and_overwrites_nothing() {
    let server = RedisServer::start();
    let a = connect(&server, SessionLimits::default()).await;
    let b = connect(&server, SessionLimits::default()).await;
    let id = add(&a, &alice(), vec![said("hi")]).await.unwrap();
    let stale = a.begin_turn(&id, &alice()).await.unwrap();
    // A stalls (its renewals stop) for longer than the lock lives; B takes the session.
    a.inner.turns.get(&id).unwrap().renewal.abort();
    tokio::time::sleep(LOCK_TTL + Duration::from_millis(300)).await;
    let fresh = b.begin_turn(&id, &alice()).await.unwrap();
    let mut history = fresh.history.clone();
    history.push(said("from b"));
    // A's commit lands while B's turn runs, and again once B's ended.
    let mut overwrite = stale.history.clone();
    overwrite.push(said("from a"));
    assert!(matches!(
        a.end_turn(&id, Some(commit(&stale, overwrite.clone(), 1)))
            .await,
        Err(StoreError::Unavailable(_))
    ));
    b.end_turn(&id, Some(commit(&fresh, history.clone(), 1)))
        .await
        .unwrap();
    assert_eq!(
        a.get(&id, &alice()).await.unwrap().unwrap().history,
        history
    );
    let stale = a.begin_turn(&id, &alice()).await.unwrap();
    a.inner.turns.get(&id).unwrap().renewal.abort();
    tokio::time::sleep(LOCK_TTL + Duration::from_millis(300)).await;
    let fresh = b.begin_turn(&id, &alice()).await.unwrap();
    b.end_turn(&id, None).await.unwrap();
    assert!(a
        .end_turn(&id, Some(commit(&stale, overwrite, 1)))
        .await
        .is_err());
    assert_eq!(fresh.history, history);
    assert_eq!(
        a.get(&id, &alice()).await.unwrap().unwrap().history,
        history
    );
}

#[tokio::test]
async fn lists_page_by_cursor_across_replicas() {
    let server = RedisServer::start();
    let a = connect(&server, SessionLimits::default()).await;
    let b = connect(&server, SessionLimits::default()).await;
    let mut ids = Vec::new();
    for i in 0..7 {
        let s: &dyn Store = if i % 2 == 0 { &a } else { &b };
        ids.push(add(s, &alice(), Vec::new()).await.unwrap());
    }
    add(&a, &bob(), Vec::new()).await.unwrap();
    ids.sort();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for round in 0.. {
        let s: &dyn Store = if round % 2 == 0 { &b } else { &a };
        let (page, more) = s.list("/", &alice(), cursor.as_deref(), 3).await.unwrap();
        assert!(page.len() <= 3);
        seen.extend(page.iter().map(|p| p.id.clone()));
        cursor = page.last().map(|p| p.id.clone());
        if !more {
            break;
        }
    }
    assert_eq!(seen, ids);
    // A session whose keys vanished behind the ledger's back is left out, and forgotten.
    let mut conn = raw(&server).await;
    let [meta, _, _] = a.inner.keys.session(&ids[0]);
    let _: () = query(&mut conn, &["DEL", &meta]).await;
    let (page, more) = b.list("/", &alice(), None, 1).await.unwrap();
    assert_eq!((page[0].id.as_str(), more), (ids[1].as_str(), true));
    assert_eq!(b.counts().sessions, 7);
}

#[tokio::test]
async fn quotas_and_the_byte_budget_are_shared_across_replicas() {
    let server = RedisServer::start();
    let limits = SessionLimits {
        max_sessions_per_principal: 2,
        max_total_bytes: 100,
        ..SessionLimits::default()
    };
    let a = connect(&server, limits).await;
    let b = connect(&server, limits).await;
    let first = add(&a, &alice(), vec![said(&"x".repeat(30))])
        .await
        .unwrap();
    add(&b, &alice(), vec![said(&"x".repeat(30))])
        .await
        .unwrap();
    assert_eq!(
        add(&a, &alice(), Vec::new()).await,
        Err(StoreError::PrincipalFull(2))
    );
    assert_eq!(
        add(&b, &bob(), vec![said(&"x".repeat(41))]).await,
        Err(StoreError::OutOfSpace {
            needed: 41,
            limit: 100
        })
    );
    // A turn's input on one replica counts on the other.
    let id = add(&b, &bob(), vec![said(&"x".repeat(10))]).await.unwrap();
    a.begin_turn(&id, &bob()).await.unwrap();
    a.charge_input(&id, 25).await.unwrap();
    assert!(matches!(
        add(&b, &bob(), vec![said(&"x".repeat(6))]).await,
        Err(StoreError::OutOfSpace { .. })
    ));
    a.end_turn(&id, None).await.unwrap();
    add(&b, &bob(), vec![said(&"x".repeat(6))]).await.unwrap();
    assert!(b.delete(&first, &alice()).await.unwrap());
    add(&a, &alice(), Vec::new()).await.unwrap();
    assert_eq!(a.counts().sessions, 4);
    // Thread records too.
    a.begin_thread("t1", &bob()).await.unwrap();
    b.begin_thread("t2", &bob()).await.unwrap();
    assert_eq!(
        a.begin_thread("t3", &bob()).await,
        Err(StoreError::PrincipalFull(2))
    );
    assert_eq!(b.counts().thread_records, 2);
}

#[tokio::test]
async fn idle_sessions_and_threads_leave_redis_and_give_their_quota_back() {
    let server = RedisServer::start();
    let limits = SessionLimits {
        idle_timeout: Duration::from_millis(500),
        max_sessions_per_principal: 1,
        ..SessionLimits::default()
    };
    let s = connect(&server, limits).await;
    let mut conn = raw(&server).await;
    add(&s, &alice(), vec![said("hi")]).await.unwrap();
    s.begin_thread("k", &alice()).await.unwrap();
    s.save_thread("k", ThreadRecord::default()).await.unwrap();
    s.end_thread("k").await.unwrap();
    assert_eq!(
        add(&s, &alice(), Vec::new()).await,
        Err(StoreError::PrincipalFull(1))
    );
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let left: Vec<String> = query(&mut conn, &["KEYS", "*"]).await;
    assert!(left.iter().all(|k| k.contains("{ledger}")), "{left:?}");
    add(&s, &alice(), Vec::new()).await.unwrap();
    assert_eq!(s.begin_thread("k2", &alice()).await, Ok(None));
    assert_eq!(
        s.counts(),
        StoreCounts {
            sessions: 1,
            thread_records: 1
        }
    );
}

#[tokio::test]
async fn a_place_held_by_an_expired_session_is_never_refused_however_many_expired() {
    let server = RedisServer::start();
    let s = connect(
        &server,
        SessionLimits {
            idle_timeout: Duration::from_millis(600),
            max_bytes_per_principal: 10,
            ..SessionLimits::default()
        },
    )
    .await;
    // More expired sessions than one purge batch, all older than alice's.
    for i in 0..ledger::PURGE_BATCH + 5 {
        add(&s, &Principal::new(format!("p{}", i % 3)), Vec::new())
            .await
            .unwrap();
    }
    add(&s, &alice(), vec![said(&"x".repeat(10))])
        .await
        .unwrap();
    assert!(matches!(
        add(&s, &alice(), vec![said("x")]).await,
        Err(StoreError::PrincipalOutOfSpace { .. })
    ));
    tokio::time::sleep(Duration::from_millis(1200)).await;
    add(&s, &alice(), vec![said(&"x".repeat(10))])
        .await
        .unwrap();
    assert_eq!(s.counts().sessions, 1);
}

#[tokio::test]
async fn threads_run_on_one_replica_at_a_time() {
    let server = RedisServer::start();
    let a = connect(&server, SessionLimits::default()).await;
    let b = connect(&server, SessionLimits::default()).await;
    let record = ThreadRecord {
        session_id: "sess_1".into(),
        ..ThreadRecord::default()
    };
    assert_eq!(a.begin_thread("k", &alice()).await, Ok(None));
    assert_eq!(b.begin_thread("k", &alice()).await, Err(StoreError::Busy));
    a.save_thread("k", record.clone()).await.unwrap();
    a.end_thread("k").await.unwrap();
    assert_eq!(b.begin_thread("k", &alice()).await, Ok(Some(record)));
    // A replica that dies mid-run frees the thread after lock_ttl.
    drop(b);
    let started = Instant::now();
    loop {
        match a.begin_thread("k", &alice()).await {
            Ok(_) => break,
            Err(StoreError::Busy) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(other) => panic!("{other}"),
        }
        assert!(started.elapsed() < LOCK_TTL * 3);
    }
    a.end_thread("k").await.unwrap();
}

/// Every log line written while the guard lives, on this thread (the tests' runtime runs the
/// store's tasks on it too).
#[derive(Clone, Default)]
struct Logs(Arc<std::sync::Mutex<Vec<u8>>>);

impl Logs {
    fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let sink = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(move || sink.clone())
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Tries `op` until it succeeds, for at most `bound`.
async fn eventually<T, F, Fut>(bound: Duration, mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let started = Instant::now();
    loop {
        match op().await {
            Ok(value) => return value,
            Err(error) => {
                assert!(started.elapsed() < bound, "still failing: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Whether `error` is how a store that cannot be reached fails.
fn unreachable(error: &StoreError) -> bool {
    matches!(error, StoreError::Unavailable(_) | StoreError::Timeout(_))
}

#[tokio::test]
async fn redis_going_away_fails_requests_in_time_and_its_return_heals_the_store() {
    let (logs, _guard) = Logs::capture();
    let mut server = RedisServer::start();
    let s = Timed::new(connect(&server, SessionLimits::default()).await, TIMEOUT);
    let id = add(&s, &alice(), Vec::new()).await.unwrap();
    server.stop();
    for _ in 0..3 {
        let started = Instant::now();
        let error = s.get(&id, &alice()).await.unwrap_err();
        assert!(unreachable(&error), "{error}");
        assert!(started.elapsed() <= TIMEOUT + Duration::from_millis(500));
        let error = add(&s, &alice(), Vec::new()).await.unwrap_err();
        assert!(unreachable(&error), "{error}");
    }
    server.restart();
    // The same store, without anything done to it, serves again.
    let id = eventually(Duration::from_secs(10), || add(&s, &ALICE, Vec::new())).await;
    assert!(s.get(&id, &alice()).await.unwrap().is_some());
    // The loss is logged once, and the return.
    let log = logs.text();
    assert_eq!(log.matches("lost the connection").count(), 1, "{log}");
    let lost = log.find("lost the connection").unwrap();
    assert!(
        log[lost..].contains("connected to the Redis session store"),
        "{log}"
    );
}

#[tokio::test]
async fn a_redis_that_hangs_fails_requests_within_the_timeout() {
    let server = RedisServer::start();
    let timeout = Duration::from_millis(600);
    let s = Timed::new(
        RedisStore::connect(&settings(server.url()), SessionLimits::default(), timeout)
            .await
            .unwrap(),
        timeout,
    );
    let id = add(&s, &alice(), Vec::new()).await.unwrap();
    server.freeze(true);
    let started = Instant::now();
    let error = s.begin_turn(&id, &alice()).await.unwrap_err();
    assert!(unreachable(&error), "{error}");
    assert!(started.elapsed() < timeout + Duration::from_millis(400));
    // Seen as down: the next request does not wait.
    let started = Instant::now();
    let error = s.get(&id, &alice()).await.unwrap_err();
    assert!(unreachable(&error), "{error}");
    assert!(started.elapsed() < Duration::from_millis(100), "{error}");
    server.freeze(false);
    eventually(Duration::from_secs(10), || s.get(&id, &ALICE)).await;
}

#[tokio::test]
async fn a_redis_not_there_at_start_does_not_stop_the_gateway() {
    let port = server::free_port();
    let s = RedisStore::connect(
        &settings(format!("redis://127.0.0.1:{port}")),
        SessionLimits::default(),
        TIMEOUT,
    )
    .await
    .expect("starts without Redis");
    let started = Instant::now();
    match add(&s, &alice(), Vec::new()).await {
        Err(StoreError::Unavailable(reason)) => {
            assert!(reason.contains("not connected"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_millis(100), "fails fast");
    let _server = RedisServer::on(port, &[]);
    eventually(Duration::from_secs(10), || add(&s, &ALICE, Vec::new())).await;
}

#[tokio::test]
async fn a_password_comes_from_password_env_and_is_never_shown() {
    let (logs, _guard) = Logs::capture();
    let server = RedisServer::start_with(&["--requirepass", "s3cret-pw"]);
    let var = format!("DP_TEST_REDIS_PASSWORD_{}", server.port);
    let mut with_env = settings(server.url());
    with_env.password_env = Some(var.clone());
    // Unset: refused at start, naming the variable.
    let error = RedisStore::connect(&with_env, SessionLimits::default(), TIMEOUT)
        .await
        .unwrap_err();
    assert!(error.to_string().contains(&var), "{error}");
    std::env::set_var(&var, "s3cret-pw");
    let s = RedisStore::connect(&with_env, SessionLimits::default(), TIMEOUT)
        .await
        .unwrap();
    let id = add(&s, &alice(), Vec::new()).await.unwrap();
    assert!(s.get(&id, &alice()).await.unwrap().is_some());
    // A password in the URL is used as is.
    let in_url = settings(format!("redis://:s3cret-pw@127.0.0.1:{}", server.port));
    let t = RedisStore::connect(&in_url, SessionLimits::default(), TIMEOUT)
        .await
        .unwrap();
    assert!(t.get(&id, &alice()).await.unwrap().is_some());
    // Refused credentials stop the start, and no message holds the password.
    for url in [
        format!("redis://:wrong-pw@127.0.0.1:{}", server.port),
        server.url(),
    ] {
        let error = RedisStore::connect(&settings(url), SessionLimits::default(), TIMEOUT)
            .await
            .unwrap_err();
        assert!(error.to_string().contains("credentials"), "{error}");
        assert!(!error.to_string().contains("wrong-pw"), "{error}");
    }
    let error = RedisStore::connect(
        &settings("redis://:s3cret-pw@127.0.0.1:notaport".into()),
        SessionLimits::default(),
        TIMEOUT,
    )
    .await
    .unwrap_err();
    assert!(!error.to_string().contains("s3cret"), "{error}");
    std::env::remove_var(&var);
    // Nor a log line, nor the store's debug form.
    let log = logs.text();
    assert!(
        !log.contains("s3cret") && !log.contains("wrong-pw"),
        "{log}"
    );
    assert!(!format!("{s:?}{t:?}").contains("s3cret"));
}

#[tokio::test]
async fn rediss_connects_with_the_gateways_tls_provider() {
    let dir = server::scratch_dir("pki");
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let path = |name: &str| dir.join(name).display().to_string();
    std::fs::write(path("ca.pem"), ca.pem()).unwrap();
    std::fs::write(path("cert.pem"), cert.pem()).unwrap();
    std::fs::write(path("key.pem"), key.serialize_pem()).unwrap();
    let server = RedisServer::tls(&path("cert.pem"), &path("key.pem"), &path("ca.pem"));
    // The system's trust roots, as the client reads them, are this test's CA.
    std::env::set_var("SSL_CERT_FILE", path("ca.pem"));
    let s = RedisStore::connect(
        &settings(format!("rediss://localhost:{}", server.port)),
        SessionLimits::default(),
        TIMEOUT,
    )
    .await
    .unwrap();
    let id = eventually(Duration::from_secs(5), || add(&s, &ALICE, Vec::new())).await;
    std::env::remove_var("SSL_CERT_FILE");
    assert!(s.get(&id, &alice()).await.unwrap().is_some());
    let _ = std::fs::remove_dir_all(&dir);
}
