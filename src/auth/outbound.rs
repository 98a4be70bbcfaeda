//! What a route's upstream requests carry as `Authorization` — applied after the forwarding
//! rules of `http::headers` built the request's headers, as a step of its own:
//!
//! 1. On a route with `[routes.auth]` the client's `Authorization` is the gateway's own
//!    credential and is removed, unless the route says `forward_authorization = true`. On a
//!    route without `[routes.auth]` it passes as any end-to-end header does.
//! 2. With `[routes.upstream_auth]`, `Authorization: Bearer <token>` is set on every upstream
//!    request of the route (replacing whatever step 1 left): the token of `bearer_env`, or
//!    the content of `bearer_file`, whose modification time and size are looked at no more
//!    than once per [`FILE_CHECK_INTERVAL`] and which is read again when either changed, so a
//!    rotated service-account token is picked up. A file that cannot be read keeps the token
//!    read before (logged).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use http::{header, HeaderMap, HeaderValue};

use crate::config::{Route, UpstreamBearer};

/// How often a token file is looked at, at most.
pub const FILE_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// The outbound credentials of every route: the token files, each watched once however many
/// routes use it.
#[derive(Default)]
pub struct Credentials {
    files: HashMap<PathBuf, Arc<BearerFile>>,
}

impl Credentials {
    pub fn new(routes: &[Route]) -> Credentials {
        let files = routes
            .iter()
            .filter_map(|r| match &r.upstream_auth {
                Some(UpstreamBearer::File(path)) => Some(path.clone()),
                _ => None,
            })
            .map(|path| {
                let file = Arc::new(BearerFile::new(&path));
                (path, file)
            })
            .collect();
        Credentials { files }
    }

    /// The rules for `route`'s upstream requests.
    pub fn outbound(&self, route: &Route) -> Outbound {
        let bearer = match &route.upstream_auth {
            None => None,
            Some(UpstreamBearer::Token(token)) => {
                // The configuration checked that the token makes a header value.
                bearer_value(token.expose()).map(Bearer::Token)
            }
            Some(UpstreamBearer::File(path)) => self.files.get(path).cloned().map(Bearer::File),
        };
        Outbound {
            strip_client: route.auth.is_some() && !route.forward_authorization,
            bearer,
        }
    }
}

/// The `Authorization` rules of one route's upstream requests (see the module docs). Cheap to
/// clone.
#[derive(Clone, Default)]
pub struct Outbound {
    strip_client: bool,
    bearer: Option<Bearer>,
}

#[derive(Clone)]
enum Bearer {
    Token(HeaderValue),
    File(Arc<BearerFile>),
}

impl Outbound {
    /// Step 1: removes the client's credential where it must not travel.
    pub fn strip_client_credential(&self, headers: &mut HeaderMap) {
        if self.strip_client {
            headers.remove(header::AUTHORIZATION);
        }
    }

    /// Step 2's header value, when the route has an outbound token.
    pub async fn bearer(&self) -> Option<HeaderValue> {
        match &self.bearer {
            None => None,
            Some(Bearer::Token(value)) => Some(value.clone()),
            Some(Bearer::File(file)) => file.current().await,
        }
    }

    /// Both steps, on the headers of one upstream request.
    pub async fn apply(&self, headers: &mut HeaderMap) {
        self.strip_client_credential(headers);
        if let Some(value) = self.bearer().await {
            headers.insert(header::AUTHORIZATION, value);
        }
    }
}

/// `Bearer <token>` as a sensitive header value; `None` when the token cannot be one.
fn bearer_value(token: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(&format!("Bearer {}", token.trim())).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// A token file and what was last read from it.
pub struct BearerFile {
    path: PathBuf,
    state: Mutex<FileState>,
}

#[derive(Default)]
struct FileState {
    value: Option<HeaderValue>,
    /// Modification time and size when `value` was read.
    seen: Option<(Option<SystemTime>, u64)>,
    checked: Option<Instant>,
}

impl BearerFile {
    fn new(path: &Path) -> BearerFile {
        BearerFile {
            path: path.to_path_buf(),
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, FileState> {
        // Plain fields, valid after any panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The header value of the token in the file, read again if the file changed.
    async fn current(&self) -> Option<HeaderValue> {
        let seen = {
            let mut state = self.state();
            let now = Instant::now();
            if state
                .checked
                .is_some_and(|at| now.duration_since(at) < FILE_CHECK_INTERVAL)
            {
                return state.value.clone();
            }
            // Claimed: concurrent requests use the value held until this check is done.
            state.checked = Some(now);
            state.seen
        };
        let stamp = match tokio::fs::metadata(&self.path).await {
            Ok(meta) => (meta.modified().ok(), meta.len()),
            Err(error) => {
                tracing::warn!(path = %self.path.display(), %error, "upstream token file unreadable; keeping the token held");
                return self.state().value.clone();
            }
        };
        if seen == Some(stamp) {
            return self.state().value.clone();
        }
        let read = tokio::fs::read_to_string(&self.path).await;
        let mut state = self.state();
        match read.as_deref().map(str::trim) {
            Ok(token) if !token.is_empty() => match bearer_value(token) {
                Some(value) => {
                    if state.seen.is_some() {
                        tracing::info!(path = %self.path.display(), "upstream token file changed; using its new token");
                    }
                    state.value = Some(value);
                    state.seen = Some(stamp);
                }
                None => {
                    tracing::warn!(path = %self.path.display(), "upstream token file holds no valid token; keeping the token held")
                }
            },
            Ok(_) => {
                tracing::warn!(path = %self.path.display(), "upstream token file is empty; keeping the token held")
            }
            Err(error) => {
                tracing::warn!(path = %self.path.display(), %error, "upstream token file unreadable; keeping the token held")
            }
        }
        state.value.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_token_file_is_read_again_when_it_changes() {
        let dir = std::env::temp_dir().join(format!("dp-bearer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, "first\n").unwrap();
        let file = BearerFile::new(&path);
        assert_eq!(file.current().await.unwrap(), "Bearer first");
        // A different size is a change even where modification times are coarse.
        std::fs::write(&path, "second-token").unwrap();
        // Within the interval the held value stands; after it, the new one is read.
        assert_eq!(file.current().await.unwrap(), "Bearer first");
        file.state().checked = None;
        assert_eq!(file.current().await.unwrap(), "Bearer second-token");
        // A file that went away keeps the last token.
        std::fs::remove_file(&path).unwrap();
        file.state().checked = None;
        assert_eq!(file.current().await.unwrap(), "Bearer second-token");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
