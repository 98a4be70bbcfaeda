//! Tests of [`super::RedisStore`] against a real `redis-server` per test ([`server`]): the
//! shared contract ([`store_conformance!`]), and what only a shared store has: replicas,
//! locks that expire, the history written by appends, keys that expire, Redis going away and
//! coming back, passwords and TLS. On a real Redis Cluster ([`nodes`]): the shared contract
//! again, and what a cluster adds ([`cluster`], [`cluster_outages`]).

mod cluster;
mod cluster_outages;
mod nodes;
mod outages;
mod replicas;
mod server;
mod writes;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ::redis::aio::MultiplexedConnection;
use serde_json::Map;

use super::*;
use crate::event::{Message, MessageContent, UserMessage};
use crate::session::backend::DEFAULT_KEY_PREFIX;
use crate::session::conformance::{alice, bob, store_conformance, Subject};
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
        cluster: false,
    }
}

/// Held by a test that points `SSL_CERT_FILE` at its own CA: the variable is the process's, and
/// the client reads it at every connection.
static TLS_ROOTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A CA, and a certificate for `name` it signed, in a fresh scratch directory as `ca.pem`,
/// `cert.pem` and `key.pem`; the directory. The certificate's subject differs from the CA's,
/// or Redis (OpenSSL) takes it for self-signed when cluster nodes check each other.
fn pki(what: &str, name: &str) -> std::path::PathBuf {
    let dir = server::scratch_dir(what);
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "a redis server");
    let cert = params.signed_by(&key, &issuer).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
    dir
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

/// Two replicas, `a` and `b`, on one session: a turn begun on `a` is busy on `b` (and missing
/// to another principal even while it runs); once `a` commits, `b` takes the next turn and
/// sees what `a` wrote. Returns the session, its turn still running on `b`.
async fn replicas_take_turns(a: &RedisStore, b: &RedisStore) -> String {
    let id = add(a, &alice(), vec![said("hi")]).await.unwrap();
    let session = a.begin_turn(&id, &alice()).await.unwrap();
    assert_eq!(b.begin_turn(&id, &alice()).await, Err(StoreError::Busy));
    assert_eq!(b.begin_turn(&id, &bob()).await, Err(StoreError::NotFound));
    let mut history = session.history.clone();
    history.push(said("from a"));
    a.end_turn(&id, Some(commit(&session, history.clone(), 1)))
        .await
        .unwrap();
    assert_eq!(b.begin_turn(&id, &alice()).await.unwrap().history, history);
    id
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
        config: crate::session::conformance::config("/"),
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
