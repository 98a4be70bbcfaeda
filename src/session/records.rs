//! What the gateway keeps per AG-UI thread in front of an AAP agent (`translation.md` §4.3):
//! the agent's session, the messages it has seen and the calls its last turn stopped on.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::dialect::aap::fingerprint::Forwarded;
use crate::dialect::aap::types::{ServerToolRef, ToolSpec};

/// A call the agent's last turn stopped on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    pub id: String,
    pub name: String,
    /// A tool the client runs; otherwise a permission request.
    pub client: bool,
    /// A permission the gateway already answered for a client that cannot be asked (A3); sent
    /// with the client's results.
    pub held: Option<(bool, Option<String>)>,
}

/// What the gateway remembers of one AG-UI thread in front of an AAP agent.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ThreadRecord {
    pub session_id: String,
    pub agent: String,
    /// Messages the agent has seen, in order.
    pub forwarded: Vec<Forwarded>,
    /// Client tools as last sent.
    pub tools: Vec<ToolSpec>,
    /// Server tools as last sent.
    pub server_tools: Vec<ServerToolRef>,
    /// Options as last sent.
    pub options: Map<String, Value>,
    pub pending: Vec<PendingCall>,
}
