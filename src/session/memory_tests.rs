//! Unit tests of [`super::MemoryStore`]: limits, ownership, and the exact accounting of bytes
//! across creation, turns, deletion and expiry.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::event::Message;
use crate::session::conformance::{
    add, alice, bob, commit, config, message, store_conformance, Subject,
};

async fn memory(limits: SessionLimits) -> Subject {
    Subject::alone(Arc::new(MemoryStore::new(limits)))
}

store_conformance!(memory);

/// Creates an empty session of `face` for the anonymous principal and returns its id.
async fn add_anonymous(s: &MemoryStore, face: &str) -> Result<String, StoreError> {
    add(s, &Principal::anonymous(), face, 0).await
}

fn store_with(limits: SessionLimits) -> Arc<MemoryStore> {
    Arc::new(MemoryStore::new(limits))
}

fn store(max_sessions: usize, idle: Duration) -> Arc<MemoryStore> {
    store_with(SessionLimits {
        max_sessions,
        idle_timeout: idle,
        ..SessionLimits::default()
    })
}

/// A store whose budget is `max_total_bytes`.
fn budgeted(max_total_bytes: usize) -> Arc<MemoryStore> {
    store_with(SessionLimits {
        max_total_bytes,
        ..SessionLimits::default()
    })
}

fn commit_of(session: Session, history: Vec<Message>) -> TurnCommit {
    commit(&session, history, 0)
}

/// The bytes in use, checked against a recount of the entries: each is charged its stored
/// history and its running turn's input, and the session counts match.
fn bytes_in_use(s: &MemoryStore) -> usize {
    let mut total = Held::default();
    let mut per_owner: HashMap<Principal, Held> = HashMap::new();
    for e in s.sessions.iter() {
        assert_eq!(e.bytes, history_bytes(&e.session.history), "{}", e.key());
        for held in [
            &mut total,
            per_owner.entry(e.session.owner.clone()).or_default(),
        ] {
            held.sessions += 1;
            held.bytes += e.bytes + e.input;
        }
    }
    let usage = s.usage();
    assert_eq!(usage.total, total, "usage against the entries");
    assert_eq!(usage.per_owner, per_owner);
    usage.total.bytes
}

#[tokio::test]
async fn ids_are_url_safe_and_unique() {
    let s = store(10, Duration::from_secs(60));
    let a = add_anonymous(&s, "/").await.unwrap();
    let b = add_anonymous(&s, "/").await.unwrap();
    assert_ne!(a, b);
    assert_eq!(a.len(), 5 + 32);
    assert!(a[5..]
        .chars()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
}

#[tokio::test]
async fn full_store_refuses_then_accepts_after_delete() {
    let s = store(2, Duration::from_secs(60));
    let anyone = Principal::anonymous();
    let a = add_anonymous(&s, "/").await.unwrap();
    add_anonymous(&s, "/").await.unwrap();
    assert_eq!(add_anonymous(&s, "/").await, Err(StoreError::Full(2)));
    assert!(s.delete(&a, &anyone).await.unwrap());
    assert!(!s.delete(&a, &anyone).await.unwrap());
    assert!(add_anonymous(&s, "/").await.is_ok());
}

#[tokio::test]
async fn list_pages_in_id_order_per_face() {
    let s = store(100, Duration::from_secs(60));
    let anyone = Principal::anonymous();
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(add_anonymous(&s, "/a").await.unwrap());
    }
    add_anonymous(&s, "/b").await.unwrap();
    ids.sort();
    let (page, more) = s.list("/a", &anyone, None, 2).await.unwrap();
    assert!(more);
    assert_eq!(
        page.iter().map(|p| p.id.clone()).collect::<Vec<_>>(),
        ids[..2]
    );
    let (page, more) = s.list("/a", &anyone, Some(&ids[1]), 2).await.unwrap();
    assert!(more);
    assert_eq!(page[0].id, ids[2]);
    let (page, more) = s.list("/a", &anyone, Some(&ids[3]), 2).await.unwrap();
    assert!(!more);
    assert_eq!(page.len(), 1);
}

#[tokio::test]
async fn one_turn_at_a_time_and_an_uncommitted_end_changes_nothing() {
    let s = store(10, Duration::from_secs(60));
    let anyone = Principal::anonymous();
    let id = add_anonymous(&s, "/").await.unwrap();
    s.begin_turn(&id, &anyone).await.unwrap();
    assert_eq!(
        s.begin_turn(&id, &anyone).await.err(),
        Some(StoreError::Busy)
    );
    s.end_turn(&id, None).await.unwrap();
    let session = s.begin_turn(&id, &anyone).await.unwrap();
    let mut next = config("/");
    next.agent = "changed".into();
    s.end_turn(
        &id,
        Some(TurnCommit {
            config: next,
            history: session.history,
            kept: 0,
            state: Some(serde_json::json!({"n": 1})),
            pending: Vec::new(),
        }),
    )
    .await
    .unwrap();
    let after = s.get(&id, &anyone).await.unwrap().unwrap();
    assert_eq!(after.config.agent, "changed");
    assert_eq!(after.state, Some(serde_json::json!({"n": 1})));
}

#[tokio::test]
async fn idle_sessions_expire() {
    let s = store(10, Duration::from_millis(1));
    let anyone = Principal::anonymous();
    let id = add_anonymous(&s, "/").await.unwrap();
    std::thread::sleep(Duration::from_millis(5));
    assert!(s.get(&id, &anyone).await.unwrap().is_none());
    assert_eq!(
        s.begin_turn(&id, &anyone).await.err(),
        Some(StoreError::NotFound)
    );
}

#[tokio::test]
async fn another_principals_session_is_missing_to_every_operation() {
    let s = store(10, Duration::from_secs(60));
    let mine = add(&*s, &alice(), "/", 3).await.unwrap();
    let theirs = add(&*s, &bob(), "/", 4).await.unwrap();
    let (listed, more) = s.list("/", &alice(), None, 10).await.unwrap();
    assert_eq!((listed.len(), more), (1, false));
    assert_eq!(listed[0].id, mine);
    assert_eq!(listed[0].owner, alice());
    assert!(s.get(&theirs, &alice()).await.unwrap().is_none());
    assert!(s.config(&theirs, &alice()).await.unwrap().is_none());
    assert_eq!(
        s.begin_turn(&theirs, &alice()).await.err(),
        Some(StoreError::NotFound)
    );
    // Running or not, it is "not found", never "busy".
    s.begin_turn(&theirs, &bob()).await.unwrap();
    assert_eq!(
        s.begin_turn(&theirs, &alice()).await.err(),
        Some(StoreError::NotFound)
    );
    s.end_turn(&theirs, None).await.unwrap();
    assert!(!s.delete(&theirs, &alice()).await.unwrap());
    // Nothing of bob's changed.
    assert!(s.get(&theirs, &bob()).await.unwrap().is_some());
    assert!(s.config(&theirs, &bob()).await.unwrap().is_some());
    assert!(s.delete(&theirs, &bob()).await.unwrap());
    assert!(s.get(&mine, &alice()).await.unwrap().is_some());
    assert_eq!(bytes_in_use(&s), 3);
}

#[tokio::test]
async fn the_per_principal_cap_stops_one_principal_and_not_another() {
    let s = store_with(SessionLimits {
        max_sessions: 10,
        max_sessions_per_principal: 2,
        ..SessionLimits::default()
    });
    let first = add(&*s, &alice(), "/", 1).await.unwrap();
    add(&*s, &alice(), "/", 1).await.unwrap();
    assert_eq!(
        add(&*s, &alice(), "/", 1).await,
        Err(StoreError::PrincipalFull(2))
    );
    // Nothing was stored by the refusal.
    assert_eq!(s.list("/", &alice(), None, 10).await.unwrap().0.len(), 2);
    assert_eq!(bytes_in_use(&s), 2);
    add(&*s, &bob(), "/", 1).await.unwrap();
    add(&*s, &bob(), "/", 1).await.unwrap();
    assert!(s.delete(&first, &alice()).await.unwrap());
    add(&*s, &alice(), "/", 1).await.unwrap();
    assert_eq!(bytes_in_use(&s), 4);
}

#[tokio::test]
async fn a_creation_past_the_byte_budget_is_refused_and_stores_nothing() {
    let s = budgeted(100);
    let a = add(&*s, &alice(), "/", 60).await.unwrap();
    assert_eq!(
        add(&*s, &bob(), "/", 41).await,
        Err(StoreError::OutOfSpace {
            needed: 41,
            limit: 100
        })
    );
    assert!(s.list("/", &bob(), None, 10).await.unwrap().0.is_empty());
    assert_eq!(bytes_in_use(&s), 60);
    // Exactly at the budget is still within it.
    add(&*s, &bob(), "/", 40).await.unwrap();
    assert_eq!(bytes_in_use(&s), 100);
    assert!(s.delete(&a, &alice()).await.unwrap());
    assert_eq!(bytes_in_use(&s), 40);
    add(&*s, &bob(), "/", 41).await.unwrap();
    assert_eq!(bytes_in_use(&s), 81);
}

#[tokio::test]
async fn a_principal_at_its_byte_share_is_refused_while_another_still_stores() {
    let s = store_with(SessionLimits {
        max_total_bytes: 1000,
        max_bytes_per_principal: 100,
        ..SessionLimits::default()
    });
    let a = add(&*s, &alice(), "/", 70).await.unwrap();
    assert_eq!(
        add(&*s, &alice(), "/", 31).await,
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
    add(&*s, &bob(), "/", 100).await.unwrap();
    assert_eq!(bytes_in_use(&s), 200);
    s.end_turn(&a, Some(commit_of(session, vec![message(20)])))
        .await
        .unwrap();
    add(&*s, &alice(), "/", 80).await.unwrap();
    assert_eq!(bytes_in_use(&s), 200);
}

#[tokio::test]
async fn a_turns_input_is_charged_until_its_end_then_its_history_is() {
    let s = budgeted(100);
    let id = add(&*s, &alice(), "/", 30).await.unwrap();
    let session = s.begin_turn(&id, &alice()).await.unwrap();
    s.charge_input(&id, 20).await.unwrap();
    assert_eq!(bytes_in_use(&s), 50);
    // The input of a turn that ends without a commit is given back.
    s.end_turn(&id, None).await.unwrap();
    assert_eq!(bytes_in_use(&s), 30);

    // A committed turn: the session is charged its new history, input and output.
    let session = {
        drop(session);
        s.begin_turn(&id, &alice()).await.unwrap()
    };
    s.charge_input(&id, 20).await.unwrap();
    let mut history = session.history.clone();
    history.extend([message(20), message(25)]);
    s.end_turn(&id, Some(commit_of(session, history)))
        .await
        .unwrap();
    assert_eq!(bytes_in_use(&s), 75);

    // A turn that rewrites the history (a snapshot, a truncation) is charged what it left.
    let session = s.begin_turn(&id, &alice()).await.unwrap();
    s.charge_input(&id, 5).await.unwrap();
    s.end_turn(&id, Some(commit_of(session, vec![message(10)])))
        .await
        .unwrap();
    assert_eq!(bytes_in_use(&s), 10);
}

#[tokio::test]
async fn an_input_past_the_budget_is_refused_and_a_commit_past_it_stops_new_work() {
    let s = budgeted(100);
    let a = add(&*s, &alice(), "/", 50).await.unwrap();
    let b = add(&*s, &bob(), "/", 40).await.unwrap();
    let session = s.begin_turn(&a, &alice()).await.unwrap();
    assert_eq!(
        s.charge_input(&a, 11).await,
        Err(StoreError::OutOfSpace {
            needed: 11,
            limit: 100
        })
    );
    assert_eq!(bytes_in_use(&s), 90, "a refused input charges nothing");
    s.charge_input(&a, 10).await.unwrap();
    // The run's output is written back even past the budget (the client has it) ...
    let mut history = session.history.clone();
    history.extend([message(10), message(30)]);
    s.end_turn(&a, Some(commit_of(session, history)))
        .await
        .unwrap();
    assert_eq!(bytes_in_use(&s), 130);
    // ... and while it is passed, nothing new gets in: no session, however small, no input.
    assert!(matches!(
        add(&*s, &bob(), "/", 0).await,
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
    assert_eq!(bytes_in_use(&s), 40);
    add(&*s, &alice(), "/", 60).await.unwrap();
}

#[tokio::test]
async fn a_session_deleted_during_its_turn_returns_its_input_too() {
    let s = budgeted(100);
    let id = add(&*s, &alice(), "/", 30).await.unwrap();
    let session = s.begin_turn(&id, &alice()).await.unwrap();
    s.charge_input(&id, 20).await.unwrap();
    assert!(s.delete(&id, &alice()).await.unwrap());
    assert_eq!(bytes_in_use(&s), 0);
    // The turn's end finds nothing and charges nothing.
    s.end_turn(&id, Some(commit_of(session, vec![message(70)])))
        .await
        .unwrap();
    assert_eq!(bytes_in_use(&s), 0);
    assert_eq!(
        s.charge_input(&id, 1).await,
        Err(StoreError::NotFound),
        "no turn runs on a missing session"
    );
}

#[tokio::test]
async fn expiry_returns_the_charge_whoever_finds_the_session_idle() {
    let s = store_with(SessionLimits {
        max_total_bytes: 100,
        max_sessions_per_principal: 2,
        idle_timeout: Duration::from_millis(20),
        ..SessionLimits::default()
    });
    let lazy = add(&*s, &alice(), "/", 40).await.unwrap();
    add(&*s, &alice(), "/", 50).await.unwrap();
    assert_eq!(bytes_in_use(&s), 90);
    std::thread::sleep(Duration::from_millis(40));
    // Found idle by a read ...
    assert!(s.get(&lazy, &alice()).await.unwrap().is_none());
    assert_eq!(bytes_in_use(&s), 50);
    // ... or swept by a creation the quota or the budget would refuse.
    add(&*s, &alice(), "/", 60).await.unwrap();
    add(&*s, &alice(), "/", 40).await.unwrap();
    assert_eq!(bytes_in_use(&s), 100);
}

#[tokio::test]
async fn thread_records_count_against_their_principals_share_and_are_given_back() {
    let s = store_with(SessionLimits {
        max_sessions_per_principal: 2,
        ..SessionLimits::default()
    });
    let record = ThreadRecord::default();
    // Two threads of alice that reached the agent (a record saved) are kept.
    for key in ["a1", "a2"] {
        assert_eq!(s.begin_thread(key, &alice()).await, Ok(None));
        s.save_thread(key, record.clone()).await.unwrap();
        s.end_thread(key).await.unwrap();
    }
    // A third of hers is refused; bob still has his share; her old ones run again.
    assert_eq!(
        s.begin_thread("a3", &alice()).await,
        Err(StoreError::PrincipalFull(2))
    );
    assert_eq!(s.begin_thread("b1", &bob()).await, Ok(None));
    s.end_thread("b1").await.unwrap();
    assert_eq!(s.begin_thread("a1", &alice()).await, Ok(Some(record)));
    s.end_thread("a1").await.unwrap();
    // A run that never reached the agent leaves nothing, and gives its place back.
    assert_eq!(s.begin_thread("b2", &bob()).await, Ok(None));
    s.end_thread("b2").await.unwrap();
    assert_eq!(s.begin_thread("b3", &bob()).await, Ok(None));
    assert_eq!(s.begin_thread("b4", &bob()).await, Ok(None));
    assert_eq!(
        s.begin_thread("b5", &bob()).await,
        Err(StoreError::PrincipalFull(2))
    );
}

#[tokio::test]
async fn expired_thread_records_give_their_principals_share_back() {
    let s = store_with(SessionLimits {
        max_sessions_per_principal: 1,
        idle_timeout: Duration::from_millis(20),
        ..SessionLimits::default()
    });
    s.begin_thread("a1", &alice()).await.unwrap();
    s.save_thread("a1", ThreadRecord::default()).await.unwrap();
    s.end_thread("a1").await.unwrap();
    assert_eq!(
        s.begin_thread("a2", &alice()).await,
        Err(StoreError::PrincipalFull(1))
    );
    tokio::time::sleep(Duration::from_millis(40)).await;
    assert_eq!(s.begin_thread("a2", &alice()).await, Ok(None));
}
