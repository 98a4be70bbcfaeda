//! Unit tests of [`super::FileStore`] on real files: what is written reads back exactly, a
//! commit writes what it did not keep, everything (quota usage included) survives a reopen,
//! deletion and expiry empty the tables, a directory is held by one store, rows that do not
//! read are skipped, a call dropped by its caller leaves no mark, and the accounting of bytes
//! matches the memory store's. The contract every store keeps is the conformance suite's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::*;
use crate::dialect::aap::types::{ServerToolRef, ToolSpec};
use crate::dialect::aap::{Pending, PendingKind};
use crate::event::{history_bytes, Message};
use crate::session::conformance::{
    add, alice, assert_reads_back, bob, commit, message as message_of, store_conformance, Subject,
};
use crate::session::usage::Held;
use crate::session::{new_session_id, PendingCall};

/// A fresh directory under the system's temporary one, removed with everything in it on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "dp-file-store-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        TempDir(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A file store in a directory of its own, removed after the test.
async fn file_store(limits: SessionLimits) -> Subject {
    let dir = TempDir::new();
    let store = FileStore::open(dir.path(), limits).await.unwrap();
    Subject {
        store: Arc::new(store),
        keep: Box::new(dir),
    }
}

store_conformance!(file_store);

async fn open(dir: &TempDir, limits: SessionLimits) -> FileStore {
    FileStore::open(dir.path(), limits).await.unwrap()
}

fn message(value: Value) -> Message {
    serde_json::from_value(value).unwrap()
}

fn text(id: &str, role: &str, content: &str) -> Message {
    message(json!({"role": role, "id": id, "content": content}))
}

/// A session using every part of the model: options, both kinds of tools, a history with a
/// user message in parts, an assistant's tool calls and their results, state and pending calls.
fn full_session(owner: Principal) -> Session {
    let mut options = Map::new();
    options.insert("model".into(), json!("fast"));
    options.insert("api_key".into(), json!("s3cret"));
    options.insert("nested".into(), json!({"a": [1, 2.5, null, "ü"]}));
    let history = vec![
        message(json!({"role": "system", "id": "m0", "content": "be brief"})),
        message(json!({"role": "user", "id": "m1", "content": [
            {"type": "text", "text": "weather in Zürich? 🌦"}
        ]})),
        message(
            json!({"role": "assistant", "id": "m2", "content": "checking",
            "toolCalls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Zürich\"}"}},
                {"id": "c2", "type": "function",
                 "function": {"name": "confirm", "arguments": "{not json"}}
            ]}),
        ),
        message(json!({"role": "tool", "id": "m3", "toolCallId": "c1", "content": "rain"})),
    ];
    assert!(
        matches!(&history[2], Message::Assistant(a) if a.tool_calls.as_ref().is_some_and(|c| c.len() == 2)),
        "the fixture holds an assistant's tool calls"
    );
    Session {
        id: new_session_id(),
        owner,
        config: SessionConfig {
            face: "/v1".into(),
            agent: "support".into(),
            options,
            server_tools: vec![ServerToolRef {
                name: "web_fetch".into(),
                trust: true,
            }],
            client_tools: vec![ToolSpec {
                name: "pick_color".into(),
                title: Some("Pick".into()),
                description: "Pick a colour".into(),
                parameters: json!({"type": "object", "properties": {"c": {"type": "string"}}}),
            }],
            upstream: None,
        },
        history,
        state: Some(json!({"count": 3, "items": ["a", {"b": true}]})),
        pending: vec![
            Pending {
                tool_call_id: "c2".into(),
                name: "confirm".into(),
                kind: PendingKind::Permission,
            },
            Pending {
                tool_call_id: "c3".into(),
                name: "interrupt".into(),
                kind: PendingKind::Interrupt {
                    interrupt_id: "i1".into(),
                    synthetic: true,
                },
            },
        ],
    }
}

fn record(session_id: &str) -> ThreadRecord {
    ThreadRecord {
        session_id: session_id.into(),
        agent: "remote".into(),
        pending: vec![PendingCall {
            id: "c9".into(),
            name: "pick".into(),
            client: true,
            held: Some((false, Some("no".into()))),
        }],
        ..ThreadRecord::default()
    }
}

/// The bytes in use, checked against a recount of the index's entries: each is charged its
/// stored history and its running turn's input, and the session counts match.
fn bytes_in_use(s: &FileStore) -> usize {
    let index = s.inner.index();
    let mut total = Held::default();
    let mut per_owner: HashMap<Principal, Held> = HashMap::new();
    for e in index.sessions.values() {
        for held in [&mut total, per_owner.entry(e.owner.clone()).or_default()] {
            held.sessions += 1;
            held.bytes += e.bytes + e.input;
        }
    }
    assert_eq!(index.usage.total, total, "usage against the entries");
    assert_eq!(index.usage.per_owner, per_owner);
    total.bytes
}

/// Waits until `done` holds (a blocking call finishing after its caller left).
async fn eventually(mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "never happened");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_full_session_reads_back_as_it_was_stored_before_and_after_a_reopen() {
    let dir = TempDir::new();
    let session = full_session(alice());
    {
        let s = open(&dir, SessionLimits::default()).await;
        s.create(session.clone()).await.unwrap();
        assert_reads_back(&s, &session).await;
        assert_eq!(s.rows(), (1, 4, 0));
    }
    let s = open(&dir, SessionLimits::default()).await;
    assert_reads_back(&s, &session).await;
    let (listed, more) = s.list("/v1", &alice(), None, 10).await.unwrap();
    assert_eq!((listed, more), (vec![session.clone()], false));
    assert_eq!(s.begin_turn(&session.id, &alice()).await.unwrap(), session);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "the directory is the gateway's alone");
        let file = std::fs::metadata(dir.path().join(DATABASE_FILE)).unwrap();
        assert_eq!(file.permissions().mode() & 0o777, 0o600, "so is the file");
    }
}

#[tokio::test]
async fn a_commit_writes_what_it_did_not_keep_and_reads_back_exactly() {
    let dir = TempDir::new();
    let s = open(&dir, SessionLimits::default()).await;
    let mut session = full_session(alice());
    session.history.truncate(2);
    s.create(session.clone()).await.unwrap();
    let id = session.id.clone();

    // Appending: the two stored messages kept, two more written.
    let begun = s.begin_turn(&id, &alice()).await.unwrap();
    let mut appended = begun.history.clone();
    appended.extend([text("m2", "assistant", "one"), text("m3", "user", "two")]);
    s.end_turn(&id, Some(commit(&begun, appended.clone(), 2)))
        .await
        .unwrap();
    assert_eq!(
        s.get(&id, &alice()).await.unwrap().unwrap().history,
        appended
    );
    assert_eq!(s.rows(), (1, 4, 0));

    // Rewriting from the second message on: a shorter history, rows past it gone.
    let begun = s.begin_turn(&id, &alice()).await.unwrap();
    let rewritten = vec![appended[0].clone(), text("r1", "assistant", "snapshot")];
    s.end_turn(&id, Some(commit(&begun, rewritten.clone(), 1)))
        .await
        .unwrap();
    assert_eq!(
        s.get(&id, &alice()).await.unwrap().unwrap().history,
        rewritten
    );
    assert_eq!(s.rows(), (1, 2, 0));

    // Kept 0 rewrites it all; a longer history than before grows it.
    let begun = s.begin_turn(&id, &alice()).await.unwrap();
    let all_new: Vec<Message> = (0..5)
        .map(|i| text(&format!("n{i}"), "user", &"y".repeat(i)))
        .collect();
    let mut c = commit(&begun, all_new.clone(), 0);
    c.state = Some(json!({"after": "rewrite"}));
    c.pending = vec![Pending {
        tool_call_id: "p".into(),
        name: "pick".into(),
        kind: PendingKind::ClientTool,
    }];
    s.end_turn(&id, Some(c.clone())).await.unwrap();
    let after = s.get(&id, &alice()).await.unwrap().unwrap();
    assert_eq!(after.history, all_new);
    assert_eq!((after.state, after.pending), (c.state, c.pending));
    assert_eq!(s.rows(), (1, 5, 0));
    assert_eq!(bytes_in_use(&s), history_bytes(&all_new));

    // A `kept` past the stored history (never sent) cannot leave a gap.
    let begun = s.begin_turn(&id, &alice()).await.unwrap();
    let mut longer = all_new.clone();
    longer.push(text("n5", "assistant", "more"));
    s.end_turn(&id, Some(commit(&begun, longer.clone(), 99)))
        .await
        .unwrap();
    assert_eq!(s.get(&id, &alice()).await.unwrap().unwrap().history, longer);
    drop(s);
    let s = open(&dir, SessionLimits::default()).await;
    assert_eq!(s.get(&id, &alice()).await.unwrap().unwrap().history, longer);
    assert_eq!(bytes_in_use(&s), history_bytes(&longer));
}

#[tokio::test]
async fn sessions_records_and_quota_usage_survive_a_reopen_and_no_turn_runs_after_it() {
    let dir = TempDir::new();
    let limits = SessionLimits {
        max_sessions_per_principal: 2,
        max_bytes_per_principal: 100,
        ..SessionLimits::default()
    };
    let (first, second, theirs) = {
        let s = open(&dir, limits).await;
        let first = add(&s, &alice(), "/", 30).await.unwrap();
        let second = add(&s, &alice(), "/", 40).await.unwrap();
        let theirs = add(&s, &bob(), "/", 10).await.unwrap();
        assert_eq!(
            add(&s, &alice(), "/", 1).await,
            Err(StoreError::PrincipalFull(2))
        );
        s.begin_thread("t1", &alice()).await.unwrap();
        s.save_thread("t1", record(&first)).await.unwrap();
        s.end_thread("t1").await.unwrap();
        // A thread whose run never saved leaves nothing.
        s.begin_thread("t2", &alice()).await.unwrap();
        s.end_thread("t2").await.unwrap();
        // A turn under way, with its input charged, when the process goes.
        s.begin_turn(&second, &alice()).await.unwrap();
        s.charge_input(&second, 25).await.unwrap();
        assert_eq!(bytes_in_use(&s), 105);
        (first, second, theirs)
    };
    let s = open(&dir, limits).await;
    assert_eq!(
        s.counts(),
        StoreCounts {
            sessions: 3,
            thread_records: 1
        }
    );
    assert_eq!(bytes_in_use(&s), 80, "the interrupted turn's input is gone");
    assert_eq!(
        add(&s, &alice(), "/", 1).await,
        Err(StoreError::PrincipalFull(2)),
        "alice is still at her cap"
    );
    assert_eq!(
        s.begin_thread("t1", &alice()).await,
        Ok(Some(record(&first)))
    );
    s.end_thread("t1").await.unwrap();
    // Free: the turn the restart interrupted runs no more, and charges what it did.
    let session = s.begin_turn(&second, &alice()).await.unwrap();
    assert_eq!(history_bytes(&session.history), 40);
    assert!(matches!(
        s.charge_input(&second, 31).await,
        Err(StoreError::PrincipalOutOfSpace { .. })
    ));
    s.charge_input(&second, 30).await.unwrap();
    s.end_turn(&second, None).await.unwrap();
    // Ownership is kept too.
    assert!(s.get(&theirs, &alice()).await.unwrap().is_none());
    assert!(s.get(&theirs, &bob()).await.unwrap().is_some());
    assert!(s.delete(&first, &alice()).await.unwrap());
    add(&s, &alice(), "/", 30).await.unwrap();
}

#[tokio::test]
async fn deletion_and_expiry_empty_the_tables() {
    let dir = TempDir::new();
    let s = open(
        &dir,
        SessionLimits {
            idle_timeout: Duration::from_millis(300),
            ..SessionLimits::default()
        },
    )
    .await;
    let deleted = add(&s, &alice(), "/", 10).await.unwrap();
    let read = add(&s, &alice(), "/", 10).await.unwrap();
    let listed = add(&s, &alice(), "/", 10).await.unwrap();
    let mut many = full_session(bob());
    many.history
        .extend((0..20).map(|i| text(&format!("x{i}"), "user", "x")));
    s.create(many).await.unwrap();
    s.begin_thread("t1", &alice()).await.unwrap();
    s.save_thread("t1", record(&read)).await.unwrap();
    s.end_thread("t1").await.unwrap();
    assert_eq!(s.rows(), (4, 27, 1));

    assert!(!s.delete(&deleted, &bob()).await.unwrap(), "not bob's");
    assert!(s.delete(&deleted, &alice()).await.unwrap());
    assert!(!s.delete(&deleted, &alice()).await.unwrap());
    assert_eq!(s.rows(), (3, 26, 1));

    tokio::time::sleep(Duration::from_millis(500)).await;
    // Found idle by a read ...
    assert!(s.get(&read, &alice()).await.unwrap().is_none());
    assert_eq!(s.rows(), (2, 25, 1));
    // ... or swept by a listing, thread records included.
    assert!(s.list("/", &alice(), None, 10).await.unwrap().0.is_empty());
    assert_eq!(s.rows(), (0, 0, 0));
    assert!(s.get(&listed, &alice()).await.unwrap().is_none());
    assert_eq!(s.counts(), StoreCounts::default());
    assert_eq!(bytes_in_use(&s), 0);
    // An expired thread starts anew.
    assert_eq!(s.begin_thread("t1", &alice()).await, Ok(None));
    s.end_thread("t1").await.unwrap();
    assert_eq!(s.counts(), StoreCounts::default());
}

#[tokio::test]
async fn what_expired_while_the_gateway_was_down_is_deleted_at_open() {
    let dir = TempDir::new();
    let limits = SessionLimits {
        idle_timeout: Duration::from_millis(300),
        ..SessionLimits::default()
    };
    {
        let s = open(&dir, limits).await;
        add(&s, &alice(), "/", 10).await.unwrap();
        s.begin_thread("t1", &alice()).await.unwrap();
        s.save_thread("t1", record("x")).await.unwrap();
        s.end_thread("t1").await.unwrap();
        assert_eq!(s.rows(), (1, 1, 1));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let s = open(&dir, limits).await;
    assert_eq!(s.rows(), (0, 0, 0));
    assert_eq!(s.counts(), StoreCounts::default());
}

#[tokio::test]
async fn a_directory_in_use_is_refused_with_a_clear_error() {
    let dir = TempDir::new();
    let s = open(&dir, SessionLimits::default()).await;
    let second = FileStore::open(dir.path(), SessionLimits::default()).await;
    match second {
        Err(e @ OpenError::Locked { .. }) => {
            let message = e.to_string();
            assert!(message.contains("one gateway per directory"), "{message}");
            assert!(
                message.contains(&dir.path().display().to_string()),
                "{message}"
            );
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    drop(s);
    open(&dir, SessionLimits::default()).await;
}

#[tokio::test]
async fn a_path_that_cannot_be_a_directory_is_a_clear_error() {
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.path()).unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let err = FileStore::open(&file, SessionLimits::default())
        .await
        .unwrap_err();
    assert!(matches!(err, OpenError::File { .. }), "{err:?}");
    assert!(err.to_string().contains("plain-file"), "{err}");
}

#[tokio::test]
async fn rows_that_do_not_read_are_skipped_at_open_and_another_format_is_refused() {
    let dir = TempDir::new();
    let good = {
        let s = open(&dir, SessionLimits::default()).await;
        add(&s, &alice(), "/", 5).await.unwrap()
    };
    let file = dir.path().join(DATABASE_FILE);
    {
        let db = redb::Database::create(&file).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut sessions = txn
                .open_table(redb::TableDefinition::<&str, &[u8]>::new("sessions"))
                .unwrap();
            sessions
                .insert("sess_garbage", b"{not json".as_slice())
                .unwrap();
            let mut threads = txn
                .open_table(redb::TableDefinition::<&str, &[u8]>::new("threads"))
                .unwrap();
            threads.insert("t-garbage", b"[1,2]".as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    {
        let s = open(&dir, SessionLimits::default()).await;
        assert_eq!(s.counts().sessions, 1);
        assert_eq!(s.counts().thread_records, 0);
        assert!(s.get(&good, &alice()).await.unwrap().is_some());
        assert_eq!(bytes_in_use(&s), 5);
    }
    {
        let db = redb::Database::create(&file).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(redb::TableDefinition::<&str, u64>::new("format"))
            .unwrap()
            .insert("version", 99)
            .unwrap();
        txn.commit().unwrap();
    }
    let err = FileStore::open(dir.path(), SessionLimits::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("format 99"), "{err}");
}

#[tokio::test]
// Holding the index across the call is the point: its blocking part waits while the caller
// gives up. The call's own future takes no lock before its first await.
#[allow(clippy::await_holding_lock)]
async fn a_call_its_caller_dropped_leaves_no_mark_and_finishes_its_write() {
    let dir = TempDir::new();
    let s = open(&dir, SessionLimits::default()).await;
    let id = add(&s, &alice(), "/", 10).await.unwrap();

    // The blocking part waits for the index; the caller gives up meanwhile.
    let held = s.inner.index();
    let dropped =
        tokio::time::timeout(Duration::from_millis(20), s.begin_turn(&id, &alice())).await;
    assert!(dropped.is_err(), "the call was still waiting");
    drop(held);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let session = s.begin_turn(&id, &alice()).await.expect("no mark was left");

    // A commit whose caller left is written, and the mark ended, all the same.
    let mut history = session.history.clone();
    history.push(message_of(7));
    let held = s.inner.index();
    let dropped = tokio::time::timeout(
        Duration::from_millis(20),
        s.end_turn(&id, Some(commit(&session, history.clone(), 1))),
    )
    .await;
    assert!(dropped.is_err());
    drop(held);
    eventually(|| {
        s.inner
            .index()
            .sessions
            .get(&id)
            .is_some_and(|e| !e.running)
    })
    .await;
    assert_eq!(
        s.get(&id, &alice()).await.unwrap().unwrap().history,
        history
    );
    assert_eq!(bytes_in_use(&s), 17);
    s.begin_turn(&id, &alice()).await.unwrap();
}

#[tokio::test]
async fn bytes_are_charged_as_in_the_memory_store() {
    let dir = TempDir::new();
    let s = open(
        &dir,
        SessionLimits {
            max_total_bytes: 100,
            ..SessionLimits::default()
        },
    )
    .await;
    let a = add(&s, &alice(), "/", 50).await.unwrap();
    let b = add(&s, &bob(), "/", 40).await.unwrap();
    assert_eq!(
        add(&s, &bob(), "/", 11).await,
        Err(StoreError::OutOfSpace {
            needed: 11,
            limit: 100
        })
    );
    assert_eq!(s.rows().0, 2, "a refused creation stores nothing");
    let session = s.begin_turn(&a, &alice()).await.unwrap();
    assert!(matches!(
        s.charge_input(&a, 11).await,
        Err(StoreError::OutOfSpace { .. })
    ));
    s.charge_input(&a, 10).await.unwrap();
    assert_eq!(bytes_in_use(&s), 100);
    // Written back even past the budget ...
    let mut history = session.history.clone();
    history.extend([message_of(10), message_of(30)]);
    s.end_turn(&a, Some(commit(&session, history, 1)))
        .await
        .unwrap();
    assert_eq!(bytes_in_use(&s), 130);
    // ... and then nothing new gets in until a deletion.
    assert!(matches!(
        add(&s, &bob(), "/", 0).await,
        Err(StoreError::OutOfSpace { .. })
    ));
    // A session deleted during its turn returns its input too, and its turn writes nothing.
    let session = s.begin_turn(&b, &bob()).await.unwrap();
    assert!(s.delete(&a, &alice()).await.unwrap());
    s.charge_input(&b, 20).await.unwrap();
    assert!(s.delete(&b, &bob()).await.unwrap());
    assert_eq!(bytes_in_use(&s), 0);
    s.end_turn(&b, Some(commit(&session, vec![message_of(70)], 0)))
        .await
        .unwrap();
    assert_eq!(bytes_in_use(&s), 0);
    assert_eq!(s.rows(), (0, 0, 0), "the late commit did not bring it back");
    assert_eq!(s.charge_input(&b, 1).await, Err(StoreError::NotFound));
}

#[tokio::test]
async fn thread_records_count_against_their_principals_share_and_expire() {
    let dir = TempDir::new();
    let s = open(
        &dir,
        SessionLimits {
            max_sessions_per_principal: 2,
            idle_timeout: Duration::from_millis(300),
            ..SessionLimits::default()
        },
    )
    .await;
    for key in ["a1", "a2"] {
        assert_eq!(s.begin_thread(key, &alice()).await, Ok(None));
        s.save_thread(key, record(key)).await.unwrap();
        s.end_thread(key).await.unwrap();
    }
    assert_eq!(
        s.begin_thread("a3", &alice()).await,
        Err(StoreError::PrincipalFull(2))
    );
    assert_eq!(s.begin_thread("b1", &bob()).await, Ok(None));
    assert_eq!(s.begin_thread("b1", &bob()).await, Err(StoreError::Busy));
    s.end_thread("b1").await.unwrap();
    assert_eq!(s.begin_thread("a1", &alice()).await, Ok(Some(record("a1"))));
    // A save overwrites the record.
    s.save_thread("a1", record("a1-next")).await.unwrap();
    s.end_thread("a1").await.unwrap();
    assert_eq!(
        s.begin_thread("a1", &alice()).await,
        Ok(Some(record("a1-next")))
    );
    s.end_thread("a1").await.unwrap();
    assert_eq!(
        s.save_thread("zz", record("zz")).await,
        Err(StoreError::NotFound)
    );
    // Expired, they give their share back.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(s.begin_thread("a3", &alice()).await, Ok(None));
    s.end_thread("a3").await.unwrap();
    assert_eq!(s.rows().2, 0);
}
