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
//! Every error is `{"error": "<CODE>: <text>"}` with a 4xx naming the field, or a 5xx for the
//! upstream's failures (`502` in `none` mode) and the gateway's (`503` store unavailable, `507`
//! session storage full); handlers return a [`Refusal`] and the server renders it.
//! Authentication happens before the face (the server's front, with the face's
//! `[routes.auth]` and API keys): a request that reaches the face carries its [`Principal`] in
//! its extensions.
//!
//! Sessions belong to the [`Principal`] the request acts for (the anonymous principal on a
//! route without authentication). List, get, history, delete and turns see only the caller's
//! sessions: another principal's session is a 404 like a missing one. Quotas per principal and
//! the gateway's byte budget are the store's (`crate::session`): 429 `PRINCIPAL_SESSION_LIMIT`,
//! 429 `SESSION_LIMIT`, 507 `SESSION_STORAGE_FULL`, before anything is stored.
//!
//! The face owns its state: sessions live in the store it is handed, a turn's run is a
//! pipeline it builds with the AAP writer, and the turn is written back ([`commit`]) by a task
//! spawned once the stream reports its end.
//!
//! The agent behind a face speaks AG-UI, HAI, or AAP itself. An AAP agent is driven by the
//! gateway's AAP client ([`relayed`]): each face session maps to exactly one agent session,
//! created by its first turn, kept in the face session, deleted with it.

mod commit;
mod relayed;
mod sessions;
mod turn;

use std::sync::Arc;

use crate::http::client_body::ClientBody;
use http::{Method, Request, Response, StatusCode};
use serde_json::{json, Map, Value};

use crate::adapters::aap_client::AapClient;
use crate::config::{AapAgent, Route};
use crate::dialect::aap::types::{AgentInfo, Capabilities, Meta};
use crate::dialect::aap::PROTOCOL_VERSION;
use crate::dialect::field_error;
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
    /// Runs the turns of agents that speak AAP themselves ([`relayed`]).
    pub(crate) aap_client: &'a AapClient,
}

impl<'a> Face<'a> {
    /// The face `route` belongs to, among `routes`.
    pub(crate) fn of(
        routes: &'a [Route],
        route: &'a Route,
        store: &'a Arc<dyn Store>,
        settling: &'a Arc<Settling>,
        budget: &'a BodyBudget,
        aap_client: &'a AapClient,
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
            aap_client,
        }
    }

    /// The route serving agent `name`.
    pub(crate) fn agent(&self, name: &str) -> Option<(&'a Route, &'a AapAgent)> {
        self.routes
            .iter()
            .find_map(|r| r.aap.as_ref().filter(|a| a.name == name).map(|a| (*r, a)))
    }

    /// The configuration of session `id`, when this face holds it for `owner` (404 otherwise).
    pub(crate) async fn session_config(
        &self,
        id: &str,
        owner: &Principal,
    ) -> Result<crate::session::SessionConfig, Failure> {
        self.store
            .config(id, owner)
            .await
            .map_err(store_failure)?
            .filter(|c| c.face == self.prefix)
            .ok_or_else(|| no_session(id))
    }
}

/// Serves one request addressed to the face of `route`.
pub(crate) async fn handle(
    face: &Face<'_>,
    relay: &Relay,
    request: Request<ClientBody>,
) -> Result<Response<ResponseBody>, Refusal> {
    let owner = request
        .extensions()
        .get::<Principal>()
        .cloned()
        .unwrap_or_else(Principal::anonymous);
    let owner = &owner;
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
        (["sessions"], &Method::GET) => sessions::list(face, owner, request.uri().query()).await,
        (["sessions"], &Method::POST) => sessions::create(face, owner, request).await,
        (["sessions", id], &Method::GET) => sessions::get(face, owner, id).await,
        (["sessions", id], &Method::DELETE) => {
            let id = (*id).to_owned();
            sessions::delete(face, relay, owner, &id, request).await
        }
        (["sessions", id, "history"], &Method::GET) => {
            sessions::history(face, owner, id, request.uri().query()).await
        }
        (["sessions", id, "turns"], &Method::POST) => {
            let id = (*id).to_owned();
            turn::turn(relay, face, owner, &id, request).await
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

/// Parses a JSON body into `T`, naming the field that does not fit in the protocol's words
/// ([`field_error`]), never the Rust type it was read into.
pub(crate) fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Failure> {
    field_error::parse_object(body)
        .map_err(|message| Failure::new(ErrorCode::InvalidRequest, message))
}

/// A 400 naming `field`.
pub(crate) fn invalid(field: impl std::fmt::Display, problem: impl std::fmt::Display) -> Failure {
    Failure::new(ErrorCode::InvalidRequest, format!("{field}: {problem}"))
}

/// 404 for a session this face does not hold.
pub(crate) fn no_session(id: &str) -> Failure {
    Failure::new(ErrorCode::NotFound, format!("session {id:?} not found"))
}

/// A store failure as the client sees it: what the store's own error says of its backend
/// (addresses, causes) goes to the log only.
pub(crate) fn store_failure(error: StoreError) -> Failure {
    let code = match error {
        StoreError::NotFound => ErrorCode::NotFound,
        StoreError::Busy => ErrorCode::TurnInProgress,
        StoreError::Full(_) => ErrorCode::SessionLimit,
        StoreError::PrincipalFull(_) | StoreError::PrincipalOutOfSpace { .. } => {
            ErrorCode::PrincipalSessionLimit
        }
        StoreError::OutOfSpace { .. } => ErrorCode::SessionStorageFull,
        StoreError::Timeout(_) | StoreError::Unavailable(_) => {
            tracing::warn!(%error, "the session store failed");
            return Failure::new(
                ErrorCode::StoreUnavailable,
                "the session store is unavailable; retry later",
            );
        }
    };
    Failure::new(code, error.to_string())
}
