//! The contract of [`Store`], as tests every store runs: ownership, listing, turn marks, the
//! quotas and the byte budget, expiry and thread records, observed through the trait alone.
//!
//! A store's tests call [`store_conformance!`] with a function that makes a fresh, empty store
//! for some limits (and keeps alive what it needs: a directory, a server) ; the macro writes one
//! test per rule. Byte accounting is observed by where refusals start, to the byte.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map};

use super::{
    new_session_id, PendingCall, Principal, Session, SessionConfig, SessionLimits, Store,
    StoreError, ThreadRecord, TurnCommit,
};
use crate::dialect::aap::fingerprint::Forwarded;
use crate::event::{Message, MessageContent, UserMessage};

/// A store under test, and whatever must live as long as it does.
pub(crate) struct Subject {
    pub store: Arc<dyn Store>,
    /// Dropped with the subject, after the test: a directory, a server.
    #[allow(dead_code)]
    pub keep: Box<dyn std::any::Any + Send + Sync>,
}

impl Subject {
    /// A store that needs nothing else to live.
    pub fn alone(store: Arc<dyn Store>) -> Subject {
        Subject {
            store,
            keep: Box::new(()),
        }
    }
}

/// What makes a fresh, empty store for some limits.
pub(crate) type Maker = dyn Fn(SessionLimits) -> Pin<Box<dyn Future<Output = Subject> + Send>>;

/// Writes one `#[tokio::test]` per rule for the stores `$make` makes: an async function from
/// [`SessionLimits`] to a [`Subject`].
macro_rules! store_conformance {
    ($make:ident) => {
        mod conformance {
            use $crate::session::conformance as c;
            c::store_conformance!(@tests $make;
                a_session_reads_back_as_it_was_written,
                commits_append_or_rewrite_and_read_back_exactly,
                a_full_store_refuses_then_accepts_after_a_delete,
                lists_page_in_id_order_per_owner_and_face,
                one_turn_at_a_time_and_an_uncommitted_end_changes_nothing,
                idle_sessions_expire_and_give_their_place_back,
                another_principals_session_is_missing_to_every_operation,
                the_per_principal_cap_stops_one_principal_and_not_another,
                the_byte_budget_counts_histories_to_the_byte,
                a_principals_byte_share_counts_its_own_sessions_only,
                a_turns_input_is_charged_until_its_end,
                a_commit_past_the_budget_is_kept_and_stops_new_work,
                a_session_deleted_during_its_turn_stays_deleted,
                thread_records_are_locked_kept_and_counted,
                expired_thread_records_give_their_share_back
            );
        }
    };
    (@tests $make:ident; $($rule:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $rule() {
                c::$rule(&|limits| Box::pin(super::$make(limits))).await;
            }
        )*
    };
}
pub(crate) use store_conformance;

pub(crate) fn alice() -> Principal {
    Principal::new("alice")
}

pub(crate) fn bob() -> Principal {
    Principal::new("bob")
}

/// A user message of `bytes` content bytes.
pub(crate) fn message(bytes: usize) -> Message {
    Message::User(UserMessage {
        id: new_session_id(),
        content: MessageContent::Text("x".repeat(bytes)),
        name: None,
        encrypted_value: None,
        metadata: None,
        subagent_run_id: None,
        extra: Map::new(),
    })
}

pub(crate) fn config(face: &str) -> SessionConfig {
    SessionConfig {
        face: face.into(),
        agent: "a".into(),
        ..SessionConfig::default()
    }
}

/// Creates a session of `owner` on `face` holding `bytes` content bytes; its id.
pub(crate) async fn add(
    s: &dyn Store,
    owner: &Principal,
    face: &str,
    bytes: usize,
) -> Result<String, StoreError> {
    let id = new_session_id();
    let history = if bytes > 0 {
        vec![message(bytes)]
    } else {
        Vec::new()
    };
    s.create(Session {
        id: id.clone(),
        owner: owner.clone(),
        config: config(face),
        history,
        ..Session::default()
    })
    .await?;
    Ok(id)
}

/// A commit of `history` that keeps `kept` stored messages, and the session's state.
pub(crate) fn commit(session: &Session, history: Vec<Message>, kept: usize) -> TurnCommit {
    TurnCommit {
        config: session.config.clone(),
        history,
        kept,
        state: session.state.clone(),
        pending: Vec::new(),
    }
}

/// `session` reads back exactly, whole and its configuration alone, for its owner.
pub(crate) async fn assert_reads_back(s: &dyn Store, session: &Session) {
    assert_eq!(
        s.get(&session.id, &session.owner).await.unwrap().as_ref(),
        Some(session)
    );
    assert_eq!(
        s.config(&session.id, &session.owner)
            .await
            .unwrap()
            .as_ref(),
        Some(&session.config)
    );
}

pub(crate) fn limits(f: impl FnOnce(&mut SessionLimits)) -> SessionLimits {
    let mut l = SessionLimits::default();
    f(&mut l);
    l
}

/// The bytes a new session of `owner` can still hold, found by where creation starts to be
/// refused (a binary search; every probe that succeeds is deleted again).
async fn room(s: &dyn Store, owner: &Principal, upper: usize) -> usize {
    let (mut fits, mut refused) = (0usize, upper + 1);
    while refused - fits > 1 {
        let probe = fits + (refused - fits) / 2;
        match add(s, owner, "/probe", probe).await {
            Ok(id) => {
                assert!(s.delete(&id, owner).await.unwrap());
                fits = probe;
            }
            Err(StoreError::OutOfSpace { .. } | StoreError::PrincipalOutOfSpace { .. }) => {
                refused = probe;
            }
            Err(other) => panic!("probing the room left: {other}"),
        }
    }
    fits
}

pub(crate) async fn a_session_reads_back_as_it_was_written(make: &Maker) {
    let subject = make(SessionLimits::default()).await;
    let s = &*subject.store;
    let messages: Vec<Message> = serde_json::from_value(json!([
        {"id": "u1", "role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "data", "value": "AAAA", "mimeType": "image/png"}}]},
        {"id": "a1", "role": "assistant", "content": "calling", "toolCalls": [
            {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{\"q\":\"ü\"}"}}]},
        {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "ok"},
        {"id": "r1", "role": "reasoning", "content": "thinking"}
    ]))
    .unwrap();
    let pending = serde_json::from_value(json!([
        {"toolCallId": "c2", "name": "confirm", "kind": {"type": "permission"}}
    ]))
    .unwrap();
    let session = Session {
        id: new_session_id(),
        owner: alice(),
        config: SessionConfig {
            face: "/aap".into(),
            agent: "agent".into(),
            options: serde_json::from_value(json!({"model": "fast", "depth": 2})).unwrap(),
            server_tools: serde_json::from_value(json!([{"name": "fetch", "trust": true}]))
                .unwrap(),
            client_tools: serde_json::from_value(json!([
                {"name": "pick", "title": "Pick", "description": "Pick one",
                 "parameters": {"type": "object", "properties": {"x": {"type": "number"}}}}
            ]))
            .unwrap(),
            // The agent session of a face in front of an AAP agent rides with the session.
            upstream: Some(ThreadRecord {
                session_id: "sess_9".into(),
                agent: "agent".into(),
                forwarded: vec![Forwarded::new("u1".into(), "user")],
                pending: vec![PendingCall {
                    id: "c2".into(),
                    name: "fetch".into(),
                    client: false,
                    held: None,
                }],
                ..ThreadRecord::default()
            }),
        },
        history: messages,
        state: Some(json!({"n": 1, "list": [1, 2]})),
        pending,
    };
    s.create(session.clone()).await.unwrap();
    assert_reads_back(s, &session).await;
    let (listed, more) = s.list("/aap", &alice(), None, 10).await.unwrap();
    assert_eq!((listed, more), (vec![session.clone()], false));
    assert_eq!(s.begin_turn(&session.id, &alice()).await.unwrap(), session);
    s.end_turn(&session.id, None).await.unwrap();
}

pub(crate) async fn commits_append_or_rewrite_and_read_back_exactly(make: &Maker) {
    let subject = make(SessionLimits::default()).await;
    let s = &*subject.store;
    let id = add(s, &alice(), "/", 3).await.unwrap();
    // An append: everything stored is kept.
    let session = s.begin_turn(&id, &alice()).await.unwrap();
    let mut history = session.history.clone();
    history.extend([message(4), message(5)]);
    let mut appended = commit(&session, history.clone(), 1);
    appended.state = Some(json!({"turn": 1}));
    appended.pending = serde_json::from_value(
        json!([{"toolCallId": "c", "name": "n", "kind": {"type": "client_tool"}}]),
    )
    .unwrap();
    s.end_turn(&id, Some(appended.clone())).await.unwrap();
    let after = s.get(&id, &alice()).await.unwrap().unwrap();
    assert_eq!(after.history, history);
    assert_eq!(after.state, appended.state);
    assert_eq!(after.pending, appended.pending);
    // A rewrite keeping the first message: the second and third are replaced.
    let session = s.begin_turn(&id, &alice()).await.unwrap();
    let rewritten = vec![history[0].clone(), message(1)];
    s.end_turn(&id, Some(commit(&session, rewritten.clone(), 1)))
        .await
        .unwrap();
    assert_eq!(
        s.get(&id, &alice()).await.unwrap().unwrap().history,
        rewritten
    );
    // A rewrite of everything, shorter than before.
    let session = s.begin_turn(&id, &alice()).await.unwrap();
    let shorter = vec![message(2)];
    s.end_turn(&id, Some(commit(&session, shorter.clone(), 0)))
        .await
        .unwrap();
    assert_eq!(
        s.get(&id, &alice()).await.unwrap().unwrap().history,
        shorter
    );
    // And emptied.
    let session = s.begin_turn(&id, &alice()).await.unwrap();
    s.end_turn(&id, Some(commit(&session, Vec::new(), 0)))
        .await
        .unwrap();
    assert!(s
        .get(&id, &alice())
        .await
        .unwrap()
        .unwrap()
        .history
        .is_empty());
}

pub(crate) async fn a_full_store_refuses_then_accepts_after_a_delete(make: &Maker) {
    let subject = make(limits(|l| l.max_sessions = 2)).await;
    let s = &*subject.store;
    let a = add(s, &alice(), "/", 0).await.unwrap();
    add(s, &bob(), "/", 0).await.unwrap();
    assert_eq!(add(s, &bob(), "/", 0).await, Err(StoreError::Full(2)));
    assert!(s.delete(&a, &alice()).await.unwrap());
    assert!(!s.delete(&a, &alice()).await.unwrap());
    add(s, &bob(), "/", 0).await.unwrap();
    assert_eq!(s.counts().sessions, 2);
}

pub(crate) async fn lists_page_in_id_order_per_owner_and_face(make: &Maker) {
    let subject = make(SessionLimits::default()).await;
    let s = &*subject.store;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(add(s, &alice(), "/a", 0).await.unwrap());
    }
    add(s, &alice(), "/b", 0).await.unwrap();
    add(s, &bob(), "/a", 0).await.unwrap();
    ids.sort();
    let page_ids = |page: Vec<Session>| page.into_iter().map(|p| p.id).collect::<Vec<_>>();
    let (page, more) = s.list("/a", &alice(), None, 2).await.unwrap();
    assert!(more);
    assert_eq!(page_ids(page), ids[..2]);
    let (page, more) = s.list("/a", &alice(), Some(&ids[1]), 2).await.unwrap();
    assert!(more);
    assert_eq!(page_ids(page), ids[2..4]);
    let (page, more) = s.list("/a", &alice(), Some(&ids[3]), 2).await.unwrap();
    assert!(!more);
    assert_eq!(page_ids(page), ids[4..]);
    // Exactly a page left: no more.
    let (page, more) = s.list("/a", &alice(), Some(&ids[2]), 2).await.unwrap();
    assert_eq!((page.len(), more), (2, false));
    // A cursor that is not an id of the list still pages from where it sorts.
    let (page, _) = s.list("/a", &alice(), Some("sess_"), 10).await.unwrap();
    assert_eq!(page_ids(page), ids);
    // A deleted session leaves the list.
    assert!(s.delete(&ids[0], &alice()).await.unwrap());
    let (page, _) = s.list("/a", &alice(), None, 10).await.unwrap();
    assert_eq!(page_ids(page), ids[1..]);
}

pub(crate) async fn one_turn_at_a_time_and_an_uncommitted_end_changes_nothing(make: &Maker) {
    let subject = make(SessionLimits::default()).await;
    let s = &*subject.store;
    let id = add(s, &alice(), "/", 2).await.unwrap();
    let before = s.begin_turn(&id, &alice()).await.unwrap();
    assert_eq!(s.begin_turn(&id, &alice()).await, Err(StoreError::Busy));
    s.end_turn(&id, None).await.unwrap();
    assert_eq!(s.get(&id, &alice()).await.unwrap(), Some(before.clone()));
    let session = s.begin_turn(&id, &alice()).await.unwrap();
    let mut next = config("/");
    next.agent = "changed".into();
    s.end_turn(
        &id,
        Some(TurnCommit {
            config: next,
            history: session.history.clone(),
            kept: session.history.len(),
            state: Some(json!({"n": 1})),
            pending: Vec::new(),
        }),
    )
    .await
    .unwrap();
    let after = s.get(&id, &alice()).await.unwrap().unwrap();
    assert_eq!(after.config.agent, "changed");
    assert_eq!(after.state, Some(json!({"n": 1})));
    assert_eq!(after.history, before.history);
    // Free again.
    s.begin_turn(&id, &alice()).await.unwrap();
    s.end_turn(&id, None).await.unwrap();
}

pub(crate) async fn idle_sessions_expire_and_give_their_place_back(make: &Maker) {
    let subject = make(limits(|l| {
        l.idle_timeout = Duration::from_millis(400);
        l.max_sessions_per_principal = 1;
        l.max_bytes_per_principal = 1024;
    }))
    .await;
    let s = &*subject.store;
    let id = add(s, &alice(), "/", 1000).await.unwrap();
    assert_eq!(
        add(s, &alice(), "/", 0).await,
        Err(StoreError::PrincipalFull(1))
    );
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(s.get(&id, &alice()).await.unwrap(), None);
    assert_eq!(s.begin_turn(&id, &alice()).await, Err(StoreError::NotFound));
    assert!(s.list("/", &alice(), None, 10).await.unwrap().0.is_empty());
    // Its place and its bytes are back.
    add(s, &alice(), "/", 1024).await.unwrap();
}

pub(crate) async fn another_principals_session_is_missing_to_every_operation(make: &Maker) {
    let subject = make(SessionLimits::default()).await;
    let s = &*subject.store;
    let mine = add(s, &alice(), "/", 3).await.unwrap();
    let theirs = add(s, &bob(), "/", 4).await.unwrap();
    let (listed, more) = s.list("/", &alice(), None, 10).await.unwrap();
    assert_eq!((listed.len(), more), (1, false));
    assert_eq!(
        (listed[0].id.as_str(), &listed[0].owner),
        (mine.as_str(), &alice())
    );
    assert_eq!(s.get(&theirs, &alice()).await.unwrap(), None);
    assert_eq!(s.config(&theirs, &alice()).await.unwrap(), None);
    assert_eq!(
        s.begin_turn(&theirs, &alice()).await,
        Err(StoreError::NotFound)
    );
    // Running or not, it is "not found", never "busy".
    s.begin_turn(&theirs, &bob()).await.unwrap();
    assert_eq!(
        s.begin_turn(&theirs, &alice()).await,
        Err(StoreError::NotFound)
    );
    s.end_turn(&theirs, None).await.unwrap();
    assert!(!s.delete(&theirs, &alice()).await.unwrap());
    assert!(s.get(&theirs, &bob()).await.unwrap().is_some());
    assert!(s.delete(&theirs, &bob()).await.unwrap());
    assert!(s.get(&mine, &alice()).await.unwrap().is_some());
}

pub(crate) async fn the_per_principal_cap_stops_one_principal_and_not_another(make: &Maker) {
    let subject = make(limits(|l| {
        l.max_sessions = 10;
        l.max_sessions_per_principal = 2;
    }))
    .await;
    let s = &*subject.store;
    let first = add(s, &alice(), "/", 1).await.unwrap();
    add(s, &alice(), "/", 1).await.unwrap();
    assert_eq!(
        add(s, &alice(), "/", 1).await,
        Err(StoreError::PrincipalFull(2))
    );
    assert_eq!(s.list("/", &alice(), None, 10).await.unwrap().0.len(), 2);
    add(s, &bob(), "/", 1).await.unwrap();
    add(s, &bob(), "/", 1).await.unwrap();
    assert!(s.delete(&first, &alice()).await.unwrap());
    add(s, &alice(), "/", 1).await.unwrap();
    assert_eq!(s.counts().sessions, 4);
}

pub(crate) async fn the_byte_budget_counts_histories_to_the_byte(make: &Maker) {
    let subject = make(limits(|l| l.max_total_bytes = 100)).await;
    let s = &*subject.store;
    let a = add(s, &alice(), "/", 60).await.unwrap();
    assert_eq!(
        add(s, &bob(), "/", 41).await,
        Err(StoreError::OutOfSpace {
            needed: 41,
            limit: 100
        })
    );
    assert!(s.list("/", &bob(), None, 10).await.unwrap().0.is_empty());
    assert_eq!(room(s, &bob(), 100).await, 40);
    // Exactly at the budget is within it.
    add(s, &bob(), "/", 40).await.unwrap();
    assert_eq!(room(s, &bob(), 100).await, 0);
    assert!(s.delete(&a, &alice()).await.unwrap());
    assert_eq!(room(s, &alice(), 100).await, 60);
}

pub(crate) async fn a_principals_byte_share_counts_its_own_sessions_only(make: &Maker) {
    let subject = make(limits(|l| {
        l.max_total_bytes = 1000;
        l.max_bytes_per_principal = 100;
    }))
    .await;
    let s = &*subject.store;
    let a = add(s, &alice(), "/", 70).await.unwrap();
    assert_eq!(
        add(s, &alice(), "/", 31).await,
        Err(StoreError::PrincipalOutOfSpace {
            needed: 31,
            limit: 100
        })
    );
    let session = s.begin_turn(&a, &alice()).await.unwrap();
    assert!(matches!(
        s.charge_input(&a, 31).await,
        Err(StoreError::PrincipalOutOfSpace { .. })
    ));
    s.charge_input(&a, 30).await.unwrap();
    // Bob's share is his own.
    add(s, &bob(), "/", 100).await.unwrap();
    s.end_turn(&a, Some(commit(&session, vec![message(20)], 0)))
        .await
        .unwrap();
    assert_eq!(room(s, &alice(), 100).await, 80);
}

pub(crate) async fn a_turns_input_is_charged_until_its_end(make: &Maker) {
    let subject = make(limits(|l| l.max_total_bytes = 100)).await;
    let s = &*subject.store;
    let id = add(s, &alice(), "/", 30).await.unwrap();
    s.begin_turn(&id, &alice()).await.unwrap();
    s.charge_input(&id, 20).await.unwrap();
    assert_eq!(room(s, &bob(), 100).await, 50);
    // The input of a turn ending without a commit is given back.
    s.end_turn(&id, None).await.unwrap();
    assert_eq!(room(s, &bob(), 100).await, 70);
    // A committed turn is charged its new history, input and output.
    let session = s.begin_turn(&id, &alice()).await.unwrap();
    s.charge_input(&id, 20).await.unwrap();
    let mut history = session.history.clone();
    history.extend([message(20), message(25)]);
    s.end_turn(&id, Some(commit(&session, history, 1)))
        .await
        .unwrap();
    assert_eq!(room(s, &bob(), 100).await, 25);
    // A rewrite is charged what it left.
    let session = s.begin_turn(&id, &alice()).await.unwrap();
    s.charge_input(&id, 5).await.unwrap();
    s.end_turn(&id, Some(commit(&session, vec![message(10)], 0)))
        .await
        .unwrap();
    assert_eq!(room(s, &bob(), 100).await, 90);
}

pub(crate) async fn a_commit_past_the_budget_is_kept_and_stops_new_work(make: &Maker) {
    let subject = make(limits(|l| l.max_total_bytes = 100)).await;
    let s = &*subject.store;
    let a = add(s, &alice(), "/", 50).await.unwrap();
    let b = add(s, &bob(), "/", 40).await.unwrap();
    let session = s.begin_turn(&a, &alice()).await.unwrap();
    assert_eq!(
        s.charge_input(&a, 11).await,
        Err(StoreError::OutOfSpace {
            needed: 11,
            limit: 100
        })
    );
    s.charge_input(&a, 10).await.unwrap();
    // The output is written back even past the budget: the client has it ...
    let mut history = session.history.clone();
    history.extend([message(10), message(30)]);
    s.end_turn(&a, Some(commit(&session, history.clone(), 1)))
        .await
        .unwrap();
    assert_eq!(s.get(&a, &alice()).await.unwrap().unwrap().history, history);
    // ... and while the budget is passed nothing new gets in.
    assert!(matches!(
        add(s, &bob(), "/", 0).await,
        Err(StoreError::OutOfSpace { .. })
    ));
    s.begin_turn(&b, &bob()).await.unwrap();
    assert!(matches!(
        s.charge_input(&b, 0).await,
        Err(StoreError::OutOfSpace { .. })
    ));
    s.end_turn(&b, None).await.unwrap();
    // Deleting brings it back under.
    assert!(s.delete(&a, &alice()).await.unwrap());
    assert_eq!(room(s, &alice(), 100).await, 60);
}

pub(crate) async fn a_session_deleted_during_its_turn_stays_deleted(make: &Maker) {
    let subject = make(limits(|l| l.max_total_bytes = 100)).await;
    let s = &*subject.store;
    let id = add(s, &alice(), "/", 30).await.unwrap();
    let session = s.begin_turn(&id, &alice()).await.unwrap();
    s.charge_input(&id, 20).await.unwrap();
    assert!(s.delete(&id, &alice()).await.unwrap());
    assert_eq!(room(s, &bob(), 100).await, 100);
    // The turn's end finds nothing, writes nothing and charges nothing.
    s.end_turn(&id, Some(commit(&session, vec![message(70)], 0)))
        .await
        .unwrap();
    assert_eq!(s.get(&id, &alice()).await.unwrap(), None);
    assert_eq!(room(s, &bob(), 100).await, 100);
    assert_eq!(s.charge_input(&id, 1).await, Err(StoreError::NotFound));
}

pub(crate) async fn thread_records_are_locked_kept_and_counted(make: &Maker) {
    let subject = make(limits(|l| l.max_sessions_per_principal = 2)).await;
    let s = &*subject.store;
    let record: ThreadRecord = ThreadRecord {
        session_id: "sess_x".into(),
        agent: "agent".into(),
        forwarded: Vec::new(),
        tools: Vec::new(),
        server_tools: Vec::new(),
        options: serde_json::from_value(json!({"k": "v"})).unwrap(),
        pending: serde_json::from_value(json!([
            {"id": "c1", "name": "pick", "client": true, "held": [true, "ok"]}
        ]))
        .unwrap(),
    };
    for key in ["a1", "a2"] {
        assert_eq!(s.begin_thread(key, &alice()).await, Ok(None));
        // One run of a thread at a time.
        assert_eq!(s.begin_thread(key, &alice()).await, Err(StoreError::Busy));
        s.save_thread(key, record.clone()).await.unwrap();
        s.end_thread(key).await.unwrap();
    }
    assert_eq!(s.counts().thread_records, 2);
    assert_eq!(
        s.begin_thread("a3", &alice()).await,
        Err(StoreError::PrincipalFull(2))
    );
    assert_eq!(s.begin_thread("b1", &bob()).await, Ok(None));
    s.end_thread("b1").await.unwrap();
    assert_eq!(s.begin_thread("a1", &alice()).await, Ok(Some(record)));
    s.end_thread("a1").await.unwrap();
    // A run that never reached the agent leaves nothing and gives its place back.
    assert_eq!(s.begin_thread("b2", &bob()).await, Ok(None));
    s.end_thread("b2").await.unwrap();
    assert_eq!(s.begin_thread("b3", &bob()).await, Ok(None));
    assert_eq!(s.begin_thread("b4", &bob()).await, Ok(None));
    assert_eq!(
        s.begin_thread("b5", &bob()).await,
        Err(StoreError::PrincipalFull(2))
    );
}

pub(crate) async fn expired_thread_records_give_their_share_back(make: &Maker) {
    let subject = make(limits(|l| {
        l.max_sessions_per_principal = 1;
        l.idle_timeout = Duration::from_millis(400);
    }))
    .await;
    let s = &*subject.store;
    s.begin_thread("a1", &alice()).await.unwrap();
    s.save_thread("a1", ThreadRecord::default()).await.unwrap();
    s.end_thread("a1").await.unwrap();
    assert_eq!(
        s.begin_thread("a2", &alice()).await,
        Err(StoreError::PrincipalFull(1))
    );
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(s.begin_thread("a2", &alice()).await, Ok(None));
    s.end_thread("a2").await.unwrap();
    // The expired record is gone for good.
    assert_eq!(s.begin_thread("a1", &alice()).await, Ok(None));
}
