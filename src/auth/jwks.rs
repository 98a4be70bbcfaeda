//! [`KeySet`]: an issuer's public keys, kept and refreshed — the I/O side of JWT validation
//! (reading a JWKS file, fetching a JWKS URL); [`super::jwt`] does the checking.
//!
//! The keys held are used until [`REFRESH_AFTER`] has passed, then loaded again by the first
//! request that finds them stale (others go on with the keys held meanwhile). A token naming
//! a key the set lacks (`kid`) triggers a load at once, since the issuer may have rotated its
//! keys — but at most once per [`UNKNOWN_KID_COOLDOWN`], so tokens with made-up kids cannot
//! make the gateway hammer the issuer. Loads are one at a time. A failed load keeps the keys
//! held, is logged, and is retried after [`RETRY_AFTER`].

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderValue, Request, Uri};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::jwt::KeyRing;
use crate::config::{parse_jwks, Jwks};
use crate::tls::client::https_connector;

/// How long loaded keys are used before they are loaded again.
pub const REFRESH_AFTER: Duration = Duration::from_secs(600);
/// The least time between two loads caused by unknown kids.
pub const UNKNOWN_KID_COOLDOWN: Duration = Duration::from_secs(30);
/// How soon a failed load is tried again.
pub const RETRY_AFTER: Duration = Duration::from_secs(10);
/// The longest a JWKS fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The most a JWKS document may weigh.
const MAX_JWKS_BYTES: usize = 1 << 20;

/// The client that fetches a JWKS URL: `http://`, or `https://` verified against the system
/// roots and the `ca_file` of the `jwt` table.
type JwksClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// See the module docs.
pub struct KeySet {
    source: Source,
    state: Mutex<State>,
    /// Held while loading: one load at a time.
    loading: tokio::sync::Mutex<()>,
}

enum Source {
    File(std::path::PathBuf),
    Url { uri: Uri, client: Box<JwksClient> },
}

struct State {
    ring: Arc<KeyRing>,
    /// Bumped by every successful load.
    generation: u64,
    /// When the keys held are stale (or a failed load may be retried).
    due: Instant,
    /// The last load an unknown kid caused.
    last_unknown_kid_load: Option<Instant>,
}

/// The keys held, and which load they came from.
#[derive(Clone)]
pub struct Snapshot {
    pub ring: Arc<KeyRing>,
    generation: u64,
}

impl KeySet {
    /// A key set over `jwks`: a file's keys are held from the start (read by the
    /// configuration); a URL is fetched on first use.
    pub fn new(jwks: &Jwks) -> KeySet {
        let now = Instant::now();
        let (source, ring, due) = match jwks {
            Jwks::File { path, keys } => (
                Source::File(path.clone()),
                KeyRing::new(keys),
                now + REFRESH_AFTER,
            ),
            Jwks::Url { uri, tls } => (
                Source::Url {
                    uri: uri.clone(),
                    client: Box::new(
                        Client::builder(TokioExecutor::new())
                            .build(https_connector(FETCH_TIMEOUT, tls.as_ref())),
                    ),
                },
                KeyRing::default(),
                now,
            ),
        };
        KeySet {
            source,
            state: Mutex::new(State {
                ring: Arc::new(ring),
                generation: 0,
                due,
                last_unknown_kid_load: None,
            }),
            loading: tokio::sync::Mutex::new(()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is a few plain fields, valid after any panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn snapshot(&self) -> (Snapshot, bool) {
        let state = self.state();
        let snapshot = Snapshot {
            ring: Arc::clone(&state.ring),
            generation: state.generation,
        };
        (snapshot, Instant::now() >= state.due)
    }

    /// The keys to verify with: those held, loaded again first when they are stale and no
    /// other load runs (or when none are held yet).
    pub async fn keys(&self) -> Snapshot {
        let (held, stale) = self.snapshot();
        if !stale {
            return held;
        }
        let _loading = if held.ring.is_empty() {
            self.loading.lock().await
        } else {
            match self.loading.try_lock() {
                Ok(guard) => guard,
                Err(_) => return held,
            }
        };
        // Another request may have loaded while this one waited.
        let (held, stale) = self.snapshot();
        if stale {
            self.load("stale").await;
            return self.snapshot().0;
        }
        held
    }

    /// Keys that may hold a kid missing from `seen`: loaded again unless a load caused by an
    /// unknown kid ran less than [`UNKNOWN_KID_COOLDOWN`] ago. `None` when nothing new can be
    /// had now.
    pub async fn keys_for_unknown_kid(&self, seen: &Snapshot) -> Option<Snapshot> {
        let _loading = self.loading.lock().await;
        {
            let mut state = self.state();
            if state.generation != seen.generation {
                // Loaded while this request waited: try those keys.
                return Some(Snapshot {
                    ring: Arc::clone(&state.ring),
                    generation: state.generation,
                });
            }
            let now = Instant::now();
            if state
                .last_unknown_kid_load
                .is_some_and(|at| now.duration_since(at) < UNKNOWN_KID_COOLDOWN)
            {
                return None;
            }
            state.last_unknown_kid_load = Some(now);
        }
        self.load("unknown kid").await.then(|| self.snapshot().0)
    }

    /// Loads the keys (the caller holds `loading`); true when new keys are held.
    async fn load(&self, why: &'static str) -> bool {
        let loaded = match &self.source {
            Source::File(path) => tokio::fs::read_to_string(path)
                .await
                .map_err(|e| format!("{}: {e}", path.display()))
                .and_then(|text| parse_jwks(&text)),
            Source::Url { uri, client } => fetch(client, uri).await,
        };
        let mut state = self.state();
        match loaded {
            Ok(set) => {
                let ring = KeyRing::new(&set);
                tracing::info!(source = %self.source, keys = ring.len(), why, "JWKS loaded");
                state.ring = Arc::new(ring);
                state.generation += 1;
                state.due = Instant::now() + REFRESH_AFTER;
                true
            }
            Err(error) => {
                tracing::warn!(source = %self.source, %error, why, "JWKS load failed; keeping the keys held");
                state.due = Instant::now() + RETRY_AFTER;
                false
            }
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::File(path) => write!(f, "{}", path.display()),
            Source::Url { uri, .. } => write!(f, "{uri}"),
        }
    }
}

/// `GET uri`, a 2xx JWKS document of at most [`MAX_JWKS_BYTES`], within [`FETCH_TIMEOUT`].
async fn fetch(client: &JwksClient, uri: &Uri) -> Result<jsonwebtoken::jwk::JwkSet, String> {
    let request = Request::get(uri.clone())
        .header(header::ACCEPT, HeaderValue::from_static("application/json"))
        .body(Empty::new())
        .map_err(|e| e.to_string())?;
    let fetched = async {
        let response = client.request(request).await.map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("answered {}", response.status()));
        }
        let body = Limited::new(response.into_body(), MAX_JWKS_BYTES)
            .collect()
            .await
            .map_err(|e| format!("reading the body: {e}"))?
            .to_bytes();
        let text = std::str::from_utf8(&body).map_err(|_| "the body is not UTF-8".to_owned())?;
        parse_jwks(text)
    };
    tokio::time::timeout(FETCH_TIMEOUT, fetched)
        .await
        .map_err(|_| format!("no answer within {FETCH_TIMEOUT:?}"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Public EC keys (RFC 7517 appendix A.1's, under two kids).
    fn jwks(kids: &[&str]) -> String {
        let keys: Vec<String> = kids
            .iter()
            .map(|kid| {
                format!(
                    r#"{{"kty":"EC","crv":"P-256","kid":"{kid}","x":"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4","y":"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"}}"#
                )
            })
            .collect();
        format!(r#"{{"keys":[{}]}}"#, keys.join(","))
    }

    #[tokio::test]
    async fn a_failed_load_keeps_the_keys_and_unknown_kids_load_at_most_once_per_cooldown() {
        let dir = std::env::temp_dir().join(format!("dp-jwks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("jwks.json");
        let keys = parse_jwks(&jwks(&["a"])).unwrap();
        let set = KeySet::new(&Jwks::File {
            path: path.clone(),
            keys,
        });
        let held = set.keys().await;
        assert_eq!(
            held.ring.len(),
            1,
            "the configuration's keys are held from the start"
        );

        // The file is broken: the load an unknown kid causes fails, the keys stay.
        std::fs::write(&path, "not json").unwrap();
        assert!(set.keys_for_unknown_kid(&held).await.is_none());
        assert_eq!(set.keys().await.ring.len(), 1);

        // Fixed, with a new key: within the cooldown no load runs, so nothing new is had.
        std::fs::write(&path, jwks(&["a", "b"])).unwrap();
        assert!(set.keys_for_unknown_kid(&held).await.is_none());
        assert_eq!(set.keys().await.ring.len(), 1);

        // Once the cooldown has passed, it is loaded.
        set.state().last_unknown_kid_load = Instant::now().checked_sub(UNKNOWN_KID_COOLDOWN);
        let fresh = set.keys_for_unknown_kid(&held).await.expect("loaded");
        assert_eq!(fresh.ring.len(), 2);
        // A request that saw the old keys gets the new ones without another load.
        std::fs::write(&path, "not json").unwrap();
        assert_eq!(
            set.keys_for_unknown_kid(&held).await.map(|s| s.ring.len()),
            Some(2)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
