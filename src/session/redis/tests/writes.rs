//! What the store writes: histories appended, every key expiring, one slot per group, and
//! expired entries giving their places back.

use super::*;

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
