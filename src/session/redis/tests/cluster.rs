//! The store on a real Redis Cluster of three masters ([`RedisCluster`]): the shared contract,
//! and what only a cluster shows: sessions spread over the masters with each one's keys on one
//! node, a slot moved to another master mid-turn, replicas excluding each other's turns, and a
//! script sent twice by the client's retries. Outages, start-up and access:
//! [`super::cluster_outages`].

use std::sync::atomic::{AtomicUsize, Ordering};

use super::nodes::RedisCluster;
use super::*;

/// A key prefix no other test uses: tests share one cluster, each with a ledger of its own.
pub(super) fn prefix() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "dp-{}-{}:",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

pub(super) fn on_cluster(url: String, prefix: &str) -> RedisSettings {
    RedisSettings {
        cluster: true,
        key_prefix: prefix.to_owned(),
        ..settings(url)
    }
}

/// A store on the cluster at `url`, its keys under `prefix`.
pub(super) async fn connect_to(url: String, prefix: &str) -> RedisStore {
    RedisStore::connect(&on_cluster(url, prefix), SessionLimits::default(), TIMEOUT)
        .await
        .unwrap()
}

async fn cluster_store(limits: SessionLimits) -> Subject {
    let nodes = RedisCluster::shared();
    let store = RedisStore::connect(&on_cluster(nodes.url(), &prefix()), limits, TIMEOUT)
        .await
        .unwrap();
    Subject {
        store: Arc::new(Timed::new(store, TIMEOUT)),
        keep: Box::new(nodes),
    }
}

store_conformance!(cluster_store);

/// Which node (by port) holds each key under `prefix`.
pub(super) fn placement(
    nodes: &RedisCluster,
    prefix: &str,
) -> std::collections::BTreeMap<String, u16> {
    let mut at = std::collections::BTreeMap::new();
    for port in nodes.ports {
        for key in nodes.keys(port, prefix) {
            assert!(at.insert(key.clone(), port).is_none(), "{key} on two nodes");
        }
    }
    at
}

#[tokio::test]
async fn sessions_spread_over_the_masters_and_each_ones_keys_share_a_node() {
    let nodes = RedisCluster::shared();
    let prefix = prefix();
    let s = connect_to(nodes.url(), &prefix).await;
    let mut ids = Vec::new();
    for i in 0..24 {
        ids.push(
            add(&s, &alice(), vec![said(&format!("m{i}"))])
                .await
                .unwrap(),
        );
    }
    let session = s.begin_turn(&ids[0], &alice()).await.unwrap();
    s.begin_thread("k", &alice()).await.unwrap();
    s.save_thread("k", ThreadRecord::default()).await.unwrap();

    let at = placement(&nodes, &prefix);
    // The sessions are on more than one master: the store reached nodes other than its seed.
    let masters: std::collections::BTreeSet<u16> = ids
        .iter()
        .map(|id| at[&s.inner.keys.session(id)[0]])
        .collect();
    assert!(masters.len() > 1, "{at:?}");
    // A running session's meta, history and lock are on one node, and so are a thread's
    // record and lock, and the whole ledger.
    let groups = [
        s.inner.keys.session(&ids[0]).to_vec(),
        s.inner.keys.thread(&keys::digest(&["k"])).to_vec(),
        s.inner.keys.ledger()[..2].to_vec(),
    ];
    for group in groups {
        let homes: std::collections::BTreeSet<_> = group
            .iter()
            .map(|k| *at.get(k).unwrap_or_else(|| panic!("{k} missing: {at:?}")))
            .collect();
        assert_eq!(homes.len(), 1, "{group:?} in {at:?}");
    }
    // Reading across nodes: a page holds sessions of every master, in id order.
    let (page, more) = s.list("/", &alice(), None, 100).await.unwrap();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(
        page.iter().map(|s| &s.id).collect::<Vec<_>>(),
        sorted.iter().collect::<Vec<_>>()
    );
    assert!(!more);
    let mut history = session.history.clone();
    history.push(said("on its node"));
    s.end_turn(&ids[0], Some(commit(&session, history.clone(), 1)))
        .await
        .unwrap();
    assert_eq!(
        s.get(&ids[0], &alice()).await.unwrap().unwrap().history,
        history
    );
    s.end_thread("k").await.unwrap();
    assert_eq!(s.counts().sessions, 24);
}

#[tokio::test]
async fn replicas_on_a_cluster_exclude_each_others_turns_and_runs() {
    let nodes = RedisCluster::shared();
    let prefix = prefix();
    let a = connect_to(nodes.url(), &prefix).await;
    let b = connect_to(nodes.url(), &prefix).await;
    let id = replicas_take_turns(&a, &b).await;
    assert_eq!(a.begin_turn(&id, &alice()).await, Err(StoreError::Busy));
    b.end_turn(&id, None).await.unwrap();
    assert_eq!(a.begin_thread("t", &alice()).await, Ok(None));
    assert_eq!(b.begin_thread("t", &alice()).await, Err(StoreError::Busy));
    a.end_thread("t").await.unwrap();
}

/// Moves `slot` from the node on `from` to the node on `to`, keys and all, as a resharding
/// does; every node learns the new owner.
fn move_slot(nodes: &RedisCluster, slot: &str, from: u16, to: u16) {
    let id = |port| nodes.cli(port, &["CLUSTER", "MYID"]).trim().to_owned();
    let (from_id, to_id) = (id(from), id(to));
    let ok = |port, args: &[&str]| {
        let answer = nodes.cli(port, args);
        assert!(answer.trim() == "OK", "{args:?} on {port}: {answer}");
    };
    ok(to, &["CLUSTER", "SETSLOT", slot, "IMPORTING", &from_id]);
    ok(from, &["CLUSTER", "SETSLOT", slot, "MIGRATING", &to_id]);
    loop {
        let keys = nodes.cli(from, &["--raw", "CLUSTER", "GETKEYSINSLOT", slot, "100"]);
        let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
        if keys.is_empty() {
            break;
        }
        let port = to.to_string();
        let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
        args.extend(keys);
        ok(from, &args);
    }
    for port in [to, from] {
        ok(port, &["CLUSTER", "SETSLOT", slot, "NODE", &to_id]);
    }
    let third = nodes.ports.into_iter().find(|p| ![from, to].contains(p));
    if let Some(port) = third {
        ok(port, &["CLUSTER", "SETSLOT", slot, "NODE", &to_id]);
    }
}

#[tokio::test]
async fn a_session_whose_slot_moves_mid_turn_is_followed_to_its_new_master() {
    let nodes = RedisCluster::start();
    let prefix = prefix();
    let s = connect_to(nodes.url(), &prefix).await;
    // A session whose slot is not the ledger's, so that only the session moves.
    let ledger_home = {
        add(&s, &bob(), Vec::new()).await.unwrap();
        placement(&nodes, &prefix)[&s.inner.keys.ledger()[0]]
    };
    let (id, from) = loop {
        let id = add(&s, &alice(), vec![said("hi")]).await.unwrap();
        let home = placement(&nodes, &prefix)[&s.inner.keys.session(&id)[0]];
        if home != ledger_home {
            break (id, home);
        }
    };
    let [meta, _, _] = s.inner.keys.session(&id);
    let slot = nodes
        .cli(from, &["CLUSTER", "KEYSLOT", &meta])
        .trim()
        .to_owned();
    let to = nodes.ports.into_iter().find(|p| *p != from).unwrap();
    let session = s.begin_turn(&id, &alice()).await.unwrap();
    move_slot(&nodes, &slot, from, to);
    // The store still sends to the old master, which redirects (MOVED) to the new one.
    let mut history = session.history.clone();
    history.push(said("after the move"));
    s.end_turn(&id, Some(commit(&session, history.clone(), 1)))
        .await
        .unwrap();
    let at = placement(&nodes, &prefix);
    assert_eq!(at[&meta], to, "{at:?}");
    assert_eq!(
        s.get(&id, &alice()).await.unwrap().unwrap().history,
        history
    );
    assert!(s
        .list("/", &alice(), None, 100)
        .await
        .unwrap()
        .0
        .iter()
        .any(|s| s.id == id));
}
#[tokio::test]
async fn a_lock_script_sent_twice_answers_as_it_did_the_first_time() {
    // The cluster client sends a command again when its connection dropped before the
    // answer: the second run of a turn's start or end must not turn a success into a refusal.
    let nodes = RedisCluster::shared();
    let s = connect_to(nodes.url(), &prefix()).await;
    let id = add(&s, &alice(), vec![said("hi")]).await.unwrap();
    let keys = s.inner.keys.session(&id);
    let scripts = &s.inner.scripts;
    let begin = |token: &str| {
        let mut i = scripts.begin_turn.prepare_invoke();
        i.key(&keys).arg("alice").arg(token).arg(60_000).arg(60_000);
        i
    };
    let status = |reply: Value| codec::text(codec::array(reply, "x").unwrap().remove(0), "x");
    for _ in 0..2 {
        let reply = s.inner.run(&begin("t1")).await.unwrap();
        assert_eq!(status(reply), Ok(Some("ok".into())));
    }
    let reply = s.inner.run(&begin("t2")).await.unwrap();
    assert_eq!(status(reply), Ok(Some("busy".into())));
    let fields = codec::Fields::of(&SessionConfig::default(), None, &[]).unwrap();
    let end = |token: &str| {
        let mut i = scripts.end_turn.prepare_invoke();
        i.key(&keys)
            .arg(token)
            .arg(60_000)
            .arg("commit")
            .arg(1)
            .arg(&fields.config)
            .arg(&fields.state)
            .arg(&fields.pending)
            .arg(serde_json::to_string(&said("once")).unwrap());
        i
    };
    for _ in 0..2 {
        let reply = s.inner.run(&end("t1")).await.unwrap();
        assert_eq!(codec::text(reply, "x"), Ok(Some("ok".into())));
    }
    let reply = s.inner.run(&end("t2")).await.unwrap();
    assert_eq!(codec::text(reply, "x"), Ok(Some("lost".into())));
    // Written once.
    let history = s.get(&id, &alice()).await.unwrap().unwrap().history;
    assert_eq!(history.len(), 2, "{history:?}");
}
