//! Unit tests of [`super::MemoryStore`]: the contract every store keeps (the conformance
//! suite), and that its usage always matches a recount of its entries across creation, turns,
//! deletion and expiry.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::event::Message;
use crate::session::conformance::{add, alice, bob, commit, message, store_conformance, Subject};

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
