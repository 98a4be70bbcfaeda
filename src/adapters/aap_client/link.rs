//! The requests of one route toward its AAP agent: `GET /meta` (cached per base URL in the
//! [`Directory`]), `POST /sessions`, `POST /sessions/:id/turns` and `DELETE /sessions/:id`,
//! each with the route's outbound credential (`auth::outbound`). Failures carry safe sentences;
//! the agent's URL, answers and session ids are logged, never told to the client.

use std::sync::Arc;

use dashmap::DashMap;
use http::{header, HeaderMap, HeaderName, HeaderValue, Method, Uri};
use http_body_util::BodyExt;
use serde_json::Value;

use crate::auth::outbound::Outbound;
use crate::dialect::aap::types::{CreateSession, TurnRequest};
use crate::dialect::aap::{ext, PROTOCOL_VERSION};
use crate::error::{ErrorCode, Failure};
use crate::http::body::UpstreamBody;
use crate::http::upstream::{read_json, refuse_untranslatable, UpstreamClient};
use crate::sse::Framing;

use super::planner::ImageCaps;

/// The most a `/meta` or `POST /sessions` response may weigh.
const JSON_LIMIT: usize = 1 << 20;

/// What an AAP agent declares that the gateway needs.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentEntry {
    pub name: String,
    pub delta: bool,
    pub message: bool,
    pub images: ImageCaps,
}

/// `GET /meta` answers, per base URL.
#[derive(Debug, Default)]
pub struct Directory {
    agents: DashMap<String, Arc<Vec<AgentEntry>>>,
}

/// Reads a `/meta` answer; refuses any version but 3.
fn agents_of(meta: &Value) -> Result<Vec<AgentEntry>, Failure> {
    let version = meta.get("version").and_then(Value::as_u64);
    if version != Some(u64::from(PROTOCOL_VERSION)) {
        let seen = meta
            .get("version")
            .map_or_else(|| "no version".to_owned(), Value::to_string);
        tracing::warn!(version = %seen, "the AAP upstream speaks another protocol version");
        return Err(Failure::new(
            ErrorCode::AapVersionUnsupported,
            format!("the AAP upstream speaks another protocol version; this gateway speaks version {PROTOCOL_VERSION} only"),
        ));
    }
    let flag = |v: &Value, group: &str, key: &str| {
        v.get("capabilities")
            .and_then(|c| c.get(group))
            .and_then(|g| g.get(key))
            .is_some()
    };
    Ok(meta
        .get("agents")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|a| {
            Some(AgentEntry {
                name: a.get("name")?.as_str()?.to_owned(),
                delta: flag(a, "stream", "delta"),
                message: flag(a, "stream", "message"),
                images: ImageCaps {
                    http: flag(a, "image", "http"),
                    data: flag(a, "image", "data"),
                },
            })
        })
        .collect())
}

/// The requests of one route toward its AAP agent.
#[derive(Clone)]
pub(super) struct Link {
    pub(super) client: UpstreamClient,
    pub(super) base: String,
    /// The client's end-to-end headers, its credential already removed where it must not
    /// travel, and `[routes.aap_upstream] api_key`.
    pub(super) headers: HeaderMap,
    /// The route's outbound token, looked up for every request (a token file may change).
    pub(super) outbound: Outbound,
    pub(super) headers_timeout: std::time::Duration,
    pub(super) directory: Arc<Directory>,
}

impl Link {
    fn uri(&self, path: &str) -> Result<Uri, Failure> {
        format!("{}{path}", self.base).parse().map_err(|error| {
            tracing::warn!(upstream.url = %self.base, path, %error, "not a valid upstream URL");
            Failure::new(
                ErrorCode::UpstreamUnavailable,
                "the gateway could not address the AAP upstream",
            )
        })
    }

    /// The headers of one request to the agent.
    async fn headers(&self) -> HeaderMap {
        let mut headers = self.headers.clone();
        if let Some(bearer) = self.outbound.bearer().await {
            headers.insert(header::AUTHORIZATION, bearer);
        }
        headers
    }

    async fn json(&self, method: Method, path: &str, body: Vec<u8>) -> Result<Value, Failure> {
        let mut headers = self.headers().await;
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        let response = self
            .client
            .send(
                method,
                &self.uri(path)?,
                headers,
                body,
                self.headers_timeout,
            )
            .await?;
        read_json(response.into_body(), JSON_LIMIT, self.headers_timeout, path).await
    }

    /// The agents the upstream lists; fetched on first use, and again when `wanted` is not
    /// among them.
    pub(super) async fn agents(
        &self,
        wanted: Option<&str>,
    ) -> Result<Arc<Vec<AgentEntry>>, Failure> {
        if let Some(known) = self.directory.agents.get(&self.base) {
            if wanted.is_none_or(|w| known.iter().any(|a| a.name == w)) {
                return Ok(Arc::clone(&known));
            }
        }
        let meta = self.json(Method::GET, "/meta", Vec::new()).await?;
        let agents = Arc::new(agents_of(&meta)?);
        tracing::debug!(agents = agents.len(), "AAP upstream described itself");
        self.directory
            .agents
            .insert(self.base.clone(), Arc::clone(&agents));
        Ok(agents)
    }

    pub(super) async fn create_session(&self, create: &CreateSession) -> Result<String, Failure> {
        let body = serde_json::to_vec(create).unwrap_or_default();
        let answer = self.json(Method::POST, "/sessions", body).await?;
        answer
            .get("sessionId")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| {
                Failure::new(
                    ErrorCode::UpstreamMalformed,
                    "the AAP upstream created a session without a sessionId",
                )
            })
    }

    /// `DELETE /sessions/:id`: the agent forgets a session the gateway is done with. Best
    /// effort: a session the agent no longer knows is gone already; any other failure is
    /// logged, never told to a client.
    pub(super) async fn delete_session(&self, session_id: &str) {
        let uri = match self.uri(&format!("/sessions/{session_id}")) {
            Ok(uri) => uri,
            Err(_) => return,
        };
        let headers = self.headers().await;
        match self
            .client
            .send(
                Method::DELETE,
                &uri,
                headers,
                Vec::new(),
                self.headers_timeout,
            )
            .await
        {
            Ok(_) => tracing::info!(agent_session_id = %session_id, "AAP agent session deleted"),
            Err(f) if f.code == ErrorCode::UpstreamHttp(404) => {
                tracing::debug!(agent_session_id = %session_id, "the AAP agent had already forgotten the session");
            }
            Err(f) => tracing::warn!(
                agent_session_id = %session_id,
                code = %f.code,
                detail = %f.message,
                "could not delete the AAP agent's session; the agent's own retention decides"
            ),
        }
    }

    pub(super) async fn turn(
        &self,
        session_id: &str,
        turn: &TurnRequest,
    ) -> Result<(UpstreamBody, Framing), Failure> {
        let mut headers = self.headers().await;
        // Ask for what an AG-UI run holds beyond AAP; a plain agent ignores the header.
        headers.insert(
            HeaderName::from_static(ext::REQUEST_HEADER),
            HeaderValue::from_static(ext::NAME),
        );
        if turn.stream.as_deref() == Some("none") {
            headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        }
        let uri = self.uri(&format!("/sessions/{session_id}/turns"))?;
        let body = serde_json::to_vec(turn).unwrap_or_default();
        let response = self
            .client
            .send(Method::POST, &uri, headers, body, self.headers_timeout)
            .await?;
        refuse_untranslatable(response.headers())?;
        let json = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().starts_with("application/json"));
        let body = response.into_body().boxed_unsync();
        Ok((body, if json { Framing::Json } else { Framing::Sse }))
    }
}
