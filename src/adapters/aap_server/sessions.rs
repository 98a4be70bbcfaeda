//! The session endpoints: create, list, get, delete, history (`aap.md` §2, §6;
//! `translation.md` §4.1). Also the checks a turn shares with creation: options, server tools
//! and client tools against the agent's declaration, and the redaction of secrets.

use crate::http::client_body::ClientBody;
use http::{Request, Response, StatusCode};
use serde_json::{json, Map, Value};

use super::{invalid, no_session, parse_body, store_failure, Face};
use crate::config::AapAgent;
use crate::dialect::aap::call_view;
use crate::dialect::aap::history::{history_from_aap, to_aap};
use crate::dialect::aap::types::{
    AgentConfig, CreateSession, OptionKind, ServerToolRef, SessionInfo, ToolSpec,
};
use crate::dialect::Dialect;
use crate::error::{ErrorCode, Failure};
use crate::event::history_bytes;
use crate::http::relay::Relay;
use crate::http::request_body::read_body;
use crate::http::response::{full, json as json_response, ResponseBody};
use crate::session::{new_session_id, Principal, Session, SessionConfig};

/// What `GET` shows instead of a secret option's value; sent back, it means "unchanged".
pub(crate) use crate::dialect::aap::REDACTED;

/// `POST /sessions` → 201 `{sessionId}`, owned by `owner`.
pub(super) async fn create(
    face: &Face<'_>,
    owner: &Principal,
    request: Request<ClientBody>,
) -> Result<Response<ResponseBody>, Failure> {
    let limit = face
        .routes
        .iter()
        .map(|r| r.limits.max_request_bytes)
        .max()
        .unwrap_or(crate::config::DEFAULT_MAX_REQUEST_BYTES);
    let body = read_body(request.into_body(), limit, face.budget).await?;
    let create: CreateSession = parse_body(&body)?;
    drop(body);
    let Some((_, agent)) = face.agent(&create.agent.name) else {
        return Err(Failure::new(
            ErrorCode::NotFound,
            format!(
                "agent.name: unknown agent {:?} (see GET /meta)",
                create.agent.name
            ),
        ));
    };
    let mut config = SessionConfig {
        face: face.prefix.to_owned(),
        agent: agent.name.clone(),
        ..SessionConfig::default()
    };
    if let Some(options) = &create.agent.options {
        merge_options(agent, &mut config.options, options, "agent.options")?;
    }
    if let Some(tools) = &create.agent.tools {
        config.server_tools = server_tools(agent, tools, "agent.tools")?;
    }
    if let Some(tools) = &create.tools {
        config.client_tools = client_tools(agent, tools, "tools")?;
    }
    let id = new_session_id();
    let mut n = 0;
    let mut new_id = || {
        n += 1;
        format!("{id}.s{}", n - 1)
    };
    let history = history_from_aap(&create.messages, "messages", agent.image, &mut new_id)
        .map_err(|e| invalid(e.field, e.problem))?;
    let max = face.store.limits().max_history_bytes;
    if history_bytes(&history) > max {
        return Err(Failure::new(
            ErrorCode::HistoryLimitExceeded,
            format!("messages: the seed history exceeds {max} bytes (max_history_bytes)"),
        ));
    }
    face.store
        .create(Session {
            id: id.clone(),
            owner: owner.clone(),
            config,
            history,
            ..Session::default()
        })
        .await
        .map_err(store_failure)?;
    tracing::info!(session_id = %id, agent = %agent.name, principal = %owner, "session created");
    Ok(json_response(
        StatusCode::CREATED,
        &json!({ "sessionId": id }),
    ))
}

/// `GET /sessions?after=` → `{sessions, next?}`: `owner`'s, in session id order.
pub(super) async fn list(
    face: &Face<'_>,
    owner: &Principal,
    query: Option<&str>,
) -> Result<Response<ResponseBody>, Failure> {
    let after = query_param(query, "after");
    let page = face.store.limits().page_size;
    let (sessions, more) = face
        .store
        .list(face.prefix, owner, after, page)
        .await
        .map_err(store_failure)?;
    let next = more
        .then(|| sessions.last().map(|s| s.id.clone()))
        .flatten();
    let infos: Vec<SessionInfo> = sessions.iter().map(|s| info(face, s)).collect();
    let mut body = json!({ "sessions": infos });
    if let Some(next) = next {
        body["next"] = next.into();
    }
    Ok(json_response(StatusCode::OK, &body))
}

/// `GET /sessions/:id` → `SessionInfo`, secrets redacted.
pub(super) async fn get(
    face: &Face<'_>,
    owner: &Principal,
    id: &str,
) -> Result<Response<ResponseBody>, Failure> {
    let session = find(face, owner, id).await?;
    Ok(json_response(StatusCode::OK, &info(face, &session)))
}

/// `DELETE /sessions/:id` → 204. A session running on an AAP agent takes its agent session
/// with it: the agent is asked to delete it once the face's is gone (best effort, see
/// [`crate::adapters::aap_client::AapClient::delete_session`]).
pub(super) async fn delete(
    face: &Face<'_>,
    relay: &Relay,
    owner: &Principal,
    id: &str,
    request: Request<ClientBody>,
) -> Result<Response<ResponseBody>, Failure> {
    let config = face.session_config(id, owner).await?;
    if !face.store.delete(id, owner).await.map_err(store_failure)? {
        return Err(no_session(id));
    }
    tracing::info!(session_id = %id, "session deleted");
    let agent_session = config.upstream.filter(|r| !r.session_id.is_empty());
    if let (Some(record), Some((route, _))) = (agent_session, face.agent(&config.agent)) {
        if route.upstream_dialect == Dialect::Aap {
            let (parts, _) = request.into_parts();
            let headers = relay.upstream_headers(route, &parts);
            face.aap_client
                .delete_session(relay, route, headers, &record.session_id)
                .await;
        }
    }
    Ok(full(StatusCode::NO_CONTENT, None, bytes::Bytes::new()))
}

/// `GET /sessions/:id/history?type=full|compacted`: both are the whole transcript.
pub(super) async fn history(
    face: &Face<'_>,
    owner: &Principal,
    id: &str,
    query: Option<&str>,
) -> Result<Response<ResponseBody>, Failure> {
    let session = find(face, owner, id).await?;
    let kind = match query_param(query, "type") {
        None => {
            return Err(invalid(
                "type",
                "the query parameter type=full or type=compacted is required",
            ))
        }
        Some(k @ ("full" | "compacted")) => k,
        Some(other) => {
            return Err(Failure::new(
                ErrorCode::NotFound,
                format!("history type {other:?} is not supported (full, compacted)"),
            ))
        }
    };
    let confirm = face
        .agent(&session.config.agent)
        .map_or(crate::dialect::confirm::DEFAULT_TOOL, |(_, a)| {
            a.confirm_tool.as_str()
        });
    let client: Vec<String> = session
        .config
        .client_tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    let messages = to_aap(&session.history, &|c| call_view(c, confirm, &client));
    Ok(json_response(
        StatusCode::OK,
        &json!({ "history": { kind: messages } }),
    ))
}

/// The session `id` if this face holds it for `owner`.
async fn find(face: &Face<'_>, owner: &Principal, id: &str) -> Result<Session, Failure> {
    face.store
        .get(id, owner)
        .await
        .map_err(store_failure)?
        .filter(|s| s.config.face == face.prefix)
        .ok_or_else(|| no_session(id))
}

/// A session as `GET` shows it: secret option values replaced by [`REDACTED`].
fn info(face: &Face<'_>, session: &Session) -> SessionInfo {
    let agent = face.agent(&session.config.agent).map(|(_, a)| a);
    let options: Map<String, Value> = session
        .config
        .options
        .iter()
        .map(|(k, v)| {
            let secret = agent.is_some_and(|a| {
                a.options
                    .iter()
                    .any(|o| o.name == *k && o.kind == OptionKind::Secret)
            });
            (k.clone(), if secret { REDACTED.into() } else { v.clone() })
        })
        .collect();
    let c = &session.config;
    SessionInfo {
        session_id: session.id.clone(),
        agent: AgentConfig {
            name: c.agent.clone(),
            tools: (!c.server_tools.is_empty()).then(|| c.server_tools.clone()),
            options: (!options.is_empty()).then_some(options),
        },
        tools: (!c.client_tools.is_empty()).then(|| c.client_tools.clone()),
    }
}

/// Merges `given` into `options` by key (`aap.md` §6.3), checking each against the agent's
/// declaration; a secret sent back as [`REDACTED`] leaves the stored value alone.
pub(super) fn merge_options(
    agent: &AapAgent,
    options: &mut Map<String, Value>,
    given: &Map<String, Value>,
    field: &str,
) -> Result<(), Failure> {
    for (key, value) in given {
        let at = format!("{field}.{key}");
        let Some(declared) = agent.options.iter().find(|o| o.name == *key) else {
            let known: Vec<&str> = agent.options.iter().map(|o| o.name.as_str()).collect();
            return Err(invalid(
                at,
                format!("unknown option (declared: {})", list_or_none(&known)),
            ));
        };
        let Some(text) = value.as_str() else {
            return Err(invalid(at, "option values are strings"));
        };
        match declared.kind {
            OptionKind::Secret if text == REDACTED => continue,
            OptionKind::Select => {
                let allowed = declared.options.as_deref().unwrap_or_default();
                if !allowed.iter().any(|a| a == text) {
                    return Err(invalid(
                        at,
                        format!("{text:?} is not one of {}", allowed.join(", ")),
                    ));
                }
            }
            _ => {}
        }
        options.insert(key.clone(), value.clone());
    }
    Ok(())
}

/// Server tools to enable: each one the agent exposes, named once.
pub(super) fn server_tools(
    agent: &AapAgent,
    given: &[ServerToolRef],
    field: &str,
) -> Result<Vec<ServerToolRef>, Failure> {
    for (i, tool) in given.iter().enumerate() {
        if !agent.tools.iter().any(|t| t.name == tool.name) {
            let known: Vec<&str> = agent.tools.iter().map(|t| t.name.as_str()).collect();
            return Err(invalid(
                format!("{field}[{i}].name"),
                format!(
                    "unknown server tool {:?} (exposed: {})",
                    tool.name,
                    list_or_none(&known)
                ),
            ));
        }
        if given[..i].iter().any(|t| t.name == tool.name) {
            return Err(invalid(
                format!("{field}[{i}].name"),
                format!("{:?} is listed twice", tool.name),
            ));
        }
    }
    Ok(given.to_vec())
}

/// Client tools: named, described, named once, not named like a server tool, with an object
/// schema.
pub(super) fn client_tools(
    agent: &AapAgent,
    given: &[ToolSpec],
    field: &str,
) -> Result<Vec<ToolSpec>, Failure> {
    for (i, tool) in given.iter().enumerate() {
        let at = format!("{field}[{i}]");
        if tool.name.trim().is_empty() {
            return Err(invalid(format!("{at}.name"), "must not be empty"));
        }
        if given[..i].iter().any(|t| t.name == tool.name) {
            return Err(invalid(
                format!("{at}.name"),
                format!("{:?} is declared twice", tool.name),
            ));
        }
        if agent.tools.iter().any(|t| t.name == tool.name) {
            return Err(invalid(
                format!("{at}.name"),
                format!(
                    "{:?} is a server tool of this agent; tool names are unique",
                    tool.name
                ),
            ));
        }
        if !tool.parameters.is_object() {
            return Err(invalid(
                format!("{at}.parameters"),
                "must be a JSON Schema object",
            ));
        }
    }
    Ok(given.to_vec())
}

fn list_or_none(names: &[&str]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// One query parameter, undecoded (ids and words are URL-safe).
pub(super) fn query_param<'a>(query: Option<&'a str>, name: &str) -> Option<&'a str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}
