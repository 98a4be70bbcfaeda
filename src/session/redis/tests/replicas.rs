//! Two stores on one Redis, as two replicas: locks, listing and quotas are shared.

use super::*;

#[tokio::test]
async fn a_turn_begun_on_one_replica_is_busy_on_another() {
    let server = RedisServer::start();
    let a = connect(&server, SessionLimits::default()).await;
    let b = connect(&server, SessionLimits::default()).await;
    let id = replicas_take_turns(&a, &b).await;
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
