//! The AAP v3 face (`specs/aap.md`, `translation.md` §4.1–4.2): the gateway as an AAP server in
//! front of AG-UI and HAI agents.
//!
//! A face is a path prefix with one or more agents (AAP routes sharing the prefix), one session
//! store for the whole gateway, and the endpoints:
//!
//! | Endpoint | Module |
//! | --- | --- |
//! | `GET /meta` | here |
//! | `GET`, `POST /sessions`; `GET`, `DELETE /sessions/:id`; `GET /sessions/:id/history` | [`sessions`] |
//! | `POST /sessions/:id/turns` | [`turn`] |
//!
//! Every error is `{"error": "<text>"}` with a 4xx naming the field, or a 5xx only for the
//! upstream's failures (`502` in `none` mode); handlers return a [`Refusal`] and the server
//! renders it. When any agent of the face has API keys, every endpoint needs
//! `Authorization: Bearer <key>` (401 otherwise).
//!
//! The face owns its state: sessions live in the store it is handed, a turn's run is a
//! pipeline it builds with the AAP writer, and the turn is written back by a committer task
//! ([`commit`]) once the stream reports its end.

mod commit;
mod sessions;
mod turn;

use std::sync::Arc;

use http::{header, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{json, Map, Value};

use crate::config::{AapAgent, Route};
use crate::dialect::aap::types::{AgentInfo, Capabilities, Meta};
use crate::dialect::aap::PROTOCOL_VERSION;
use crate::error::{ErrorCode, Failure};
use crate::http::relay::Relay;
use crate::http::request_body::BodyBudget;
use crate::http::response::{json as json_response, Refusal, ResponseBody};
use crate::session::{Principal, Settling, Store, StoreError};

/// One AAP face: the routes (agents) sharing a path prefix.
pub(crate) struct Face<'a> {
    pub(crate) prefix: &'a str,
    pub(crate) routes: Vec<&'a Route>,
    pub(crate) store: &'a Arc<dyn Store>,
    /// This process's runs whose marks are still being ended.
    pub(crate) settling: &'a Arc<Settling>,
    /// The gateway's budget of buffered request bytes, which request bodies are read within.
    pub(crate) budget: &'a BodyBudget,
}

impl<'a> Face<'a> {
    /// The face `route` belongs to, among `routes`.
    pub(crate) fn of(
        routes: &'a [Route],
        route: &'a Route,
        store: &'a Arc<dyn Store>,
        settling: &'a Arc<Settling>,
        budget: &'a BodyBudget,
    ) -> Face<'a> {
        Face {
            prefix: route.path.trim_end_matches('/'),
            routes: routes
                .iter()
                .filter(|r| r.aap.is_some() && r.path == route.path)
                .collect(),
            store,
            settling,
            budget,
        }
    }

    /// The route serving agent `name`.
    pub(crate) fn agent(&self, name: &str) -> Option<(&'a Route, &'a AapAgent)> {
        self.routes
            .iter()
            .find_map(|r| r.aap.as_ref().filter(|a| a.name == name).map(|a| (*r, a)))
    }

    /// The configuration of session `id`, when this face holds it (404 otherwise).
    pub(crate) async fn session_config(
        &self,
        id: &str,
    ) -> Result<crate::session::SessionConfig, Failure> {
        self.store
            .config(id)
            .await
            .map_err(store_failure)?
            .filter(|c| c.face == self.prefix)
            .ok_or_else(|| no_session(id))
    }

    fn keys(&self) -> impl Iterator<Item = &str> {
        self.routes
            .iter()
            .filter_map(|r| r.aap.as_ref())
            .flat_map(|a| a.api_keys.iter().map(String::as_str))
    }
}

/// Serves one request addressed to the face of `route`.
pub(crate) async fn handle(
    face: &Face<'_>,
    relay: &Relay,
    mut request: Request<Incoming>,
) -> Result<Response<ResponseBody>, Refusal> {
    if let Some(principal) = authorize(face, request.headers())? {
        request.extensions_mut().insert(principal);
    }
    let path = request.uri().path();
    let rest = path
        .strip_prefix(face.prefix)
        .unwrap_or(path)
        .trim_end_matches('/')
        .to_owned();
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let method = request.method().clone();
    let allowed = match segments.as_slice() {
        ["meta"] => "GET",
        ["sessions"] => "GET, POST",
        ["sessions", _] => "GET, DELETE",
        ["sessions", _, "history"] => "GET",
        ["sessions", _, "turns"] => "POST",
        _ => {
            return Err(
                Failure::new(ErrorCode::NotFound, format!("no AAP endpoint at {path}")).into(),
            )
        }
    };
    let answered = match (segments.as_slice(), &method) {
        (["meta"], &Method::GET) => Ok(json_response(StatusCode::OK, &meta(face))),
        (["sessions"], &Method::GET) => sessions::list(face, request.uri().query()).await,
        (["sessions"], &Method::POST) => sessions::create(face, request).await,
        (["sessions", id], &Method::GET) => sessions::get(face, id).await,
        (["sessions", id], &Method::DELETE) => sessions::delete(face, id).await,
        (["sessions", id, "history"], &Method::GET) => {
            sessions::history(face, id, request.uri().query()).await
        }
        (["sessions", id, "turns"], &Method::POST) => {
            let id = (*id).to_owned();
            turn::turn(relay, face, &id, request).await
        }
        _ => {
            return Err(Refusal {
                failure: Failure::new(
                    ErrorCode::MethodNotAllowed,
                    format!("{method} is not allowed on {path} (allowed: {allowed})"),
                ),
                allow: Some(allowed),
            })
        }
    };
    Ok(answered?)
}

/// 401 unless the face has no keys or the request carries one of them; the principal of the
/// key that matched.
fn authorize(face: &Face<'_>, headers: &http::HeaderMap) -> Result<Option<Principal>, Failure> {
    let mut keys = face.keys().peekable();
    if keys.peek().is_none() {
        return Ok(None);
    }
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, key) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| key.trim())
        })
        .unwrap_or("");
    // Every key is compared in full, so the time taken does not tell which one nearly matched.
    let matched = keys.fold(false, |found, key| constant_time_eq(key, given) | found);
    if matched && !given.is_empty() {
        Ok(Some(Principal::for_api_key(given)))
    } else {
        Err(Failure::new(
            ErrorCode::Unauthorized,
            "missing or invalid API key (Authorization: Bearer <key>)",
        ))
    }
}

fn constant_time_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut diff = a.len() ^ b.len();
    for (i, x) in a.iter().enumerate() {
        diff |= usize::from(x ^ b.get(i).copied().unwrap_or(0));
    }
    diff == 0
}

/// `GET /meta` (`translation.md` §4.1): the face's agents as configured, with the capabilities
/// the gateway honours.
fn meta(face: &Face<'_>) -> Meta {
    let flags = |names: &[&str]| -> Map<String, Value> {
        names.iter().map(|n| ((*n).to_owned(), json!({}))).collect()
    };
    let agents = face
        .routes
        .iter()
        .filter_map(|r| r.aap.as_ref())
        .map(|a| AgentInfo {
            name: a.name.clone(),
            title: a.title.clone(),
            version: a.version.clone(),
            description: a.description.clone(),
            tools: a.tools.clone(),
            options: a.options.clone(),
            capabilities: Capabilities {
                history: Some(flags(&["compacted", "full"])),
                stream: Some(flags(&["delta", "message", "none"])),
                application: Some(flags(&["tools"])),
                image: a.image.then(|| flags(&["http", "data"])),
            },
        })
        .collect();
    Meta {
        version: PROTOCOL_VERSION,
        agents,
    }
}

/// Parses a JSON body into `T`, naming the field that does not fit.
pub(crate) fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Failure> {
    let mut de = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let message = if inner.is_syntax() || inner.is_eof() {
            format!("the body is not valid JSON: {inner}")
        } else if path == "." {
            inner.to_string()
        } else {
            format!("{path}: {inner}")
        };
        Failure::new(ErrorCode::InvalidRequest, message)
    })
}

/// A 400 naming `field`.
pub(crate) fn invalid(field: impl std::fmt::Display, problem: impl std::fmt::Display) -> Failure {
    Failure::new(ErrorCode::InvalidRequest, format!("{field}: {problem}"))
}

/// 404 for a session this face does not hold.
pub(crate) fn no_session(id: &str) -> Failure {
    Failure::new(ErrorCode::NotFound, format!("session {id:?} not found"))
}

/// A store failure as the client sees it.
pub(crate) fn store_failure(error: StoreError) -> Failure {
    let code = match error {
        StoreError::NotFound => ErrorCode::NotFound,
        StoreError::Busy => ErrorCode::TurnInProgress,
        StoreError::Full(_) => ErrorCode::SessionLimit,
        StoreError::Timeout(_) | StoreError::Unavailable(_) => ErrorCode::StoreUnavailable,
    };
    Failure::new(code, error.to_string())
}
