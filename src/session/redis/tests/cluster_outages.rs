//! A Redis Cluster away, in part or whole, and what a cluster needs to be reached: settings
//! that cannot work refused at start, a password and TLS on every node.

use super::cluster::{connect_to, on_cluster, placement, prefix};
use super::nodes::{RedisCluster, Tls};
use super::*;

/// A read of `id` while its node is away fails as unavailable (or timed out), within the
/// store's timeout.
async fn read_fails_in_time(s: &impl Store, id: &str) {
    let started = Instant::now();
    let error = s.get(id, &alice()).await.unwrap_err();
    assert!(
        matches!(error, StoreError::Unavailable(_) | StoreError::Timeout(_)),
        "{error}"
    );
    assert!(started.elapsed() <= TIMEOUT + Duration::from_millis(500));
}

#[tokio::test]
async fn a_cluster_going_away_fails_requests_in_time_and_its_return_heals_the_store() {
    let mut nodes = RedisCluster::start();
    let s = Timed::new(connect_to(nodes.url(), &prefix()).await, TIMEOUT);
    let id = add(&s, &alice(), Vec::new()).await.unwrap();
    nodes.stop();
    read_fails_in_time(&s, &id).await;
    // Seen as down: the requests after do not wait.
    for _ in 0..3 {
        let started = Instant::now();
        let error = add(&s, &alice(), Vec::new()).await.unwrap_err();
        assert!(matches!(error, StoreError::Unavailable(_)), "{error}");
        assert!(started.elapsed() < Duration::from_millis(100), "{error}");
    }
    nodes.restart();
    // The same store, without anything done to it, serves again.
    let started = Instant::now();
    let id = loop {
        match add(&s, &alice(), Vec::new()).await {
            Ok(id) => break id,
            Err(error) => {
                assert!(started.elapsed() < Duration::from_secs(15), "{error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert!(s.get(&id, &alice()).await.unwrap().is_some());
}

#[tokio::test]
async fn a_master_away_fails_its_sessions_in_time_and_its_return_heals_them() {
    let mut nodes = RedisCluster::start();
    let prefix = prefix();
    let s = Timed::new(connect_to(nodes.url(), &prefix).await, TIMEOUT);
    let home = |nodes: &RedisCluster, id: &str| {
        let meta = Keys::new(&prefix).session(id)[0].clone();
        placement(nodes, &prefix).get(&meta).copied()
    };
    add(&s, &bob(), Vec::new()).await.unwrap();
    let ledger_home = placement(&nodes, &prefix)[&Keys::new(&prefix).ledger()[0]];
    // A master that is neither the seed nor the ledger's, and a session on it.
    let away = nodes.ports[1..]
        .iter()
        .copied()
        .find(|p| *p != ledger_home)
        .unwrap();
    let id = loop {
        let id = add(&s, &alice(), Vec::new()).await.unwrap();
        if home(&nodes, &id) == Some(away) {
            break id;
        }
    };
    let node = nodes.ports.iter().position(|p| *p == away).unwrap();
    nodes.stop_node(node);
    for _ in 0..3 {
        read_fails_in_time(&s, &id).await;
    }
    nodes.restart();
    // Its sessions are gone with it (no persistence), but its slots serve new ones again.
    let started = Instant::now();
    loop {
        if let Ok(id) = add(&s, &alice(), Vec::new()).await {
            if home(&nodes, &id) == Some(away) {
                assert!(s.get(&id, &alice()).await.unwrap().is_some());
                break;
            }
        }
        assert!(started.elapsed() < Duration::from_secs(20), "not healed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn settings_that_cannot_work_on_a_cluster_are_refused_at_start() {
    let nodes = RedisCluster::shared();
    let single = RedisServer::start();
    let limits = SessionLimits::default();
    let cases = [
        (on_cluster(format!("{}/1", nodes.url()), "p:"), "database 0"),
        (on_cluster(single.url(), "p:"), "not a Redis Cluster node"),
        (settings(nodes.url()), "set cluster = true"),
    ];
    for (settings, needle) in cases {
        let error = RedisStore::connect(&settings, limits, TIMEOUT)
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains(needle), "{settings:?}: {error}");
    }
}

#[tokio::test]
async fn a_password_from_password_env_reaches_every_node() {
    let nodes = RedisCluster::start_with(Some("cl-s3cret"), None);
    let var = format!("DP_TEST_REDIS_CLUSTER_PASSWORD_{}", nodes.ports[0]);
    let mut with_env = on_cluster(nodes.url(), &prefix());
    with_env.password_env = Some(var.clone());
    std::env::set_var(&var, "cl-s3cret");
    let s = RedisStore::connect(&with_env, SessionLimits::default(), TIMEOUT)
        .await
        .unwrap();
    std::env::remove_var(&var);
    for _ in 0..12 {
        let id = add(&s, &alice(), Vec::new()).await.unwrap();
        assert!(s.get(&id, &alice()).await.unwrap().is_some());
    }
    let homes: std::collections::BTreeSet<u16> = nodes
        .ports
        .into_iter()
        .filter(|p| !nodes.keys(*p, &with_env.key_prefix).is_empty())
        .collect();
    assert!(homes.len() > 1, "{homes:?}");
    for url in [
        format!("redis://:wrong-pw@127.0.0.1:{}", nodes.ports[0]),
        nodes.url(),
    ] {
        let error = RedisStore::connect(&on_cluster(url, "p:"), SessionLimits::default(), TIMEOUT)
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("credentials"), "{error}");
        assert!(!error.contains("wrong-pw"), "{error}");
    }
}

#[tokio::test]
async fn rediss_reaches_every_node_of_a_tls_cluster() {
    let _roots = TLS_ROOTS.lock().await;
    // The nodes announce themselves by address: the certificate names it.
    let dir = pki("cluster-pki", "127.0.0.1");
    let path = |name: &str| dir.join(name).display().to_string();
    let nodes = RedisCluster::start_with(
        None,
        Some(Tls {
            cert: path("cert.pem"),
            key: path("key.pem"),
            ca: path("ca.pem"),
        }),
    );
    std::env::set_var("SSL_CERT_FILE", path("ca.pem"));
    let prefix = prefix();
    let s = connect_to(nodes.url(), &prefix).await;
    let mut ids = Vec::new();
    for _ in 0..12 {
        ids.push(add(&s, &alice(), Vec::new()).await.unwrap());
    }
    for id in &ids {
        assert!(s.get(id, &alice()).await.unwrap().is_some());
    }
    std::env::remove_var("SSL_CERT_FILE");
    let homes: std::collections::BTreeSet<u16> = nodes
        .ports
        .into_iter()
        .filter(|p| !nodes.keys(*p, &prefix).is_empty())
        .collect();
    assert!(homes.len() > 1, "{homes:?}");
    drop(nodes);
    let _ = std::fs::remove_dir_all(&dir);
}
