//! Gateway state that outlives a request (`translation.md` §1):
//!
//! - sessions of the AAP face (§4.1): the agent configuration a session was created with (as
//!   changed by later turns), its history as canonical messages, the last AG-UI state, and the
//!   calls its last turn left pending;
//! - thread records of AAP upstreams (§4.3): per route and AG-UI thread, the AAP session and what
//!   the agent has seen ([`ThreadRecord`]).
//!
//! [`Store`] is the seam for other backends: async and fallible, so a networked store (Redis)
//! or a durable one can implement it; [`MemoryStore`] (dashmap) is the default. A store hands
//! out whole values (a session is read at the start of a turn and written back at its end), so
//! it can be implemented with one read and one write per turn. At most one turn runs per
//! session: [`Store::begin_turn`] marks it and [`Store::end_turn`] ends the mark, writing the
//! turn back when it has one. Thread records work the same way. Both count against
//! `max_sessions` and expire after `idle_timeout`. [`Timed`] bounds every operation of a store.
//!
//! Nothing ends a mark from `Drop`: whoever begins a turn hands its end to a task
//! (`adapters::aap_server::commit`, `adapters::aap_client`), which awaits the stream's report
//! over a channel and then writes the store; a closed channel ends the mark unchanged.

mod memory;
mod principal;
mod records;
mod settling;
mod timed;

pub use memory::MemoryStore;
pub use principal::{Principal, ANONYMOUS};
pub use records::{PendingCall, ThreadRecord};
pub use settling::{Ending, Settling, UnderWay};
pub use timed::{Timed, DEFAULT_STORE_TIMEOUT};

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::dialect::aap::types::{ServerToolRef, ToolSpec};
use crate::dialect::aap::Pending;
use crate::event::Message;

/// Defaults of the `[sessions]` table.
pub const DEFAULT_MAX_SESSIONS: usize = 10_000;
pub const DEFAULT_MAX_HISTORY_BYTES: usize = 8 << 20;
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
pub const DEFAULT_PAGE_SIZE: usize = 100;

/// Bounds of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Sessions held at once; creating one more is refused.
    pub max_sessions: usize,
    /// Bytes of content one session's history may hold.
    pub max_history_bytes: usize,
    /// A session unused this long is dropped.
    pub idle_timeout: Duration,
    /// Sessions per page of `GET /sessions`.
    pub page_size: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_history_bytes: DEFAULT_MAX_HISTORY_BYTES,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }
}

/// How a session's agent is configured (`aap.md` §6.3).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionConfig {
    /// The path prefix of the AAP face that created it (sessions are listed per face).
    pub face: String,
    pub agent: String,
    /// Options set by the client, merged by key over the session's life; secrets included.
    pub options: Map<String, Value>,
    /// Server tools enabled, with their trust.
    pub server_tools: Vec<ServerToolRef>,
    /// Client tools, replaced as a whole by a turn that sends them.
    pub client_tools: Vec<ToolSpec>,
}

/// One session.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Session {
    pub id: String,
    pub config: SessionConfig,
    pub history: Vec<Message>,
    pub state: Option<Value>,
    /// Calls the last turn stopped on; the next turn must answer all of them.
    pub pending: Vec<Pending>,
}

/// What a finished turn writes back.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnCommit {
    pub config: SessionConfig,
    pub history: Vec<Message>,
    pub state: Option<Value>,
    pub pending: Vec<Pending>,
}

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("session not found")]
    NotFound,
    #[error("a turn is already running on this session")]
    Busy,
    #[error(
        "the gateway holds its maximum of {0} sessions (max_sessions); delete one or retry later"
    )]
    Full(usize),
    /// The store did not answer within its bound ([`Timed`]).
    #[error("the session store did not answer within {0:?}")]
    Timeout(Duration),
    /// The store cannot be reached or failed (a networked or durable store).
    #[error("the session store is unavailable: {0}")]
    Unavailable(String),
}

/// A session store; see the module docs.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    fn limits(&self) -> SessionLimits;
    /// Stores a new session (its id from [`new_session_id`]).
    async fn create(&self, session: Session) -> Result<(), StoreError>;
    /// The whole session.
    async fn get(&self, id: &str) -> Result<Option<Session>, StoreError>;
    /// A session's configuration alone (no history).
    async fn config(&self, id: &str) -> Result<Option<SessionConfig>, StoreError>;
    /// Sessions of `face` with an id after `after`, in id order; at most `limit`, and whether
    /// more follow.
    async fn list(
        &self,
        face: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Session>, bool), StoreError>;
    /// Whether the session existed.
    async fn delete(&self, id: &str) -> Result<bool, StoreError>;
    /// Marks a turn running and returns the session as it stands.
    async fn begin_turn(&self, id: &str) -> Result<Session, StoreError>;
    /// Ends the running turn, writing `commit` back when given.
    async fn end_turn(&self, id: &str, commit: Option<TurnCommit>) -> Result<(), StoreError>;
    /// Marks a run of thread `key` running and returns its record, if it has one.
    async fn begin_thread(&self, key: &str) -> Result<Option<ThreadRecord>, StoreError>;
    /// Writes a running thread's record.
    async fn save_thread(&self, key: &str, record: ThreadRecord) -> Result<(), StoreError>;
    /// Ends the running thread's run.
    async fn end_thread(&self, key: &str) -> Result<(), StoreError>;
}

/// A new session id: `sess_` + 32 lowercase hex (URL-safe, `translation.md` §2.1).
pub fn new_session_id() -> String {
    format!("sess_{}", uuid::Uuid::new_v4().simple())
}
