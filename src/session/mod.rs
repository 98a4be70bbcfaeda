//! Gateway state that outlives a request (`translation.md` §1):
//!
//! - sessions of the AAP face (§4.1): the agent configuration a session was created with (as
//!   changed by later turns), its history as canonical messages, the last AG-UI state, and the
//!   calls its last turn left pending;
//! - thread records of AAP upstreams (§4.3): per route, principal and AG-UI thread, the AAP
//!   session and what the agent has seen ([`ThreadRecord`]). An AAP face in front of an AAP
//!   agent keeps the same record inside its session instead ([`SessionConfig::upstream`]), so
//!   the pair lives, persists, expires and is deleted as one.
//!
//! [`Store`] is the seam between the gateway and where sessions are kept ([`backend`]):
//! [`MemoryStore`] (dashmap, the default), [`FileStore`] (durable, one process) and
//! [`RedisStore`] (shared by replicas). A store hands
//! out whole values (a session is read at the start of a turn and written back at its end), so
//! it can be implemented with one read and one write per turn. At most one turn runs per
//! session: [`Store::begin_turn`] marks it and [`Store::end_turn`] ends the mark, writing the
//! turn back when it has one. Thread records work the same way. Both count against
//! `max_sessions` and their owner's `max_sessions_per_principal` (each kind on its own), and
//! expire after `idle_timeout`. [`Timed`] bounds every operation of a store.
//!
//! Nothing ends a mark from `Drop`: whoever begins a turn hands its end to a task
//! (`adapters::aap_server::commit`, `adapters::aap_client`), which awaits the stream's report
//! over a channel and then writes the store; a closed channel ends the mark unchanged.
//!
//! # Owners
//!
//! A session belongs to the [`Principal`] that created it ([`Session::owner`]). Every operation
//! a client reaches by id takes the caller's principal, and a session of another principal is
//! answered exactly like a missing one (`None`, [`StoreError::NotFound`]), so ids do not leak
//! across callers. Thread records are keyed by their principal by the AAP client.
//!
//! # Quotas and the byte budget
//!
//! Checked by the store when something would be stored, before it is, so a refused request
//! leaves nothing behind:
//! - `max_sessions_per_principal`: sessions one principal holds ([`StoreError::PrincipalFull`]);
//! - `max_sessions`: sessions the gateway holds ([`StoreError::Full`]);
//! - `max_bytes_per_principal`: content bytes ([`crate::event::history_bytes`], the measure of
//!   `max_history_bytes`) of one principal's session histories
//!   ([`StoreError::PrincipalOutOfSpace`]);
//! - `max_total_bytes`: content bytes of all session histories together, the budget
//!   ([`StoreError::OutOfSpace`]).
//!
//! The per-principal bounds stop one caller's flood before it takes what others need: with
//! the defaults a principal holds at most 100 sessions and a quarter of the budget. They
//! count principals, not clients: every client of a route without authentication is the one
//! anonymous principal.
//!
//! Where bytes are counted (to the owner's share and to the budget alike):
//! 1. [`Store::create`] charges the seed history; refused when the bytes in use plus the seed
//!    pass the share or the budget.
//! 2. A turn's input (its answers and user messages) is charged by [`Store::charge_input`]
//!    once the turn holds its session and before its run starts; refused when the bytes in use
//!    plus the input pass the share or the budget (the session's history is already counted).
//! 3. [`Store::end_turn`] sets the session's charge to the bytes of the history it writes back
//!    (the turn's output, or a history a `MESSAGES_SNAPSHOT` rewrote or a failure truncated),
//!    and lets go of the input charged in step 2. A commit is never refused, even past the
//!    budget: the client already has the turn. Its output is bounded by what `max_history_bytes`
//!    left the session (the transcript's budget), so a share or the budget is passed at most by
//!    the output of the turns running at once, each at most `max_history_bytes`; while it is
//!    passed, nothing new is admitted there (steps 1 and 2), until deletions and expiry bring
//!    it back.
//! 4. Deleting or expiring a session returns its charge, and the input of a turn it was running.
//!
//! Thread records hold ids and fingerprints, not content, and are not charged.

pub mod backend;
#[cfg(test)]
pub(crate) mod conformance;
mod file;
mod memory;
mod principal;
mod records;
mod redis;
mod settling;
mod timed;
mod usage;

pub use backend::{open, Backend, OpenError, RedisSettings, StoreSettings};
pub use file::FileStore;
pub use memory::MemoryStore;
pub use principal::{Principal, ANONYMOUS};
pub use records::{PendingCall, ThreadRecord};
pub use redis::RedisStore;
pub use settling::{Ending, Settling, UnderWay};
pub use timed::{StoreObserver, Timed, DEFAULT_STORE_TIMEOUT};

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
pub const DEFAULT_MAX_SESSIONS_PER_PRINCIPAL: usize = 100;
pub const DEFAULT_MAX_TOTAL_BYTES: usize = 256 << 20;
pub const DEFAULT_MAX_BYTES_PER_PRINCIPAL: usize = 64 << 20;

/// Bounds of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Sessions held at once; creating one more is refused.
    pub max_sessions: usize,
    /// Sessions one principal holds at once; creating one more is refused.
    pub max_sessions_per_principal: usize,
    /// Content bytes of all session histories together (see the module docs).
    pub max_total_bytes: usize,
    /// Content bytes of the session histories of one principal.
    pub max_bytes_per_principal: usize,
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
            max_sessions_per_principal: DEFAULT_MAX_SESSIONS_PER_PRINCIPAL,
            max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
            max_bytes_per_principal: DEFAULT_MAX_BYTES_PER_PRINCIPAL,
            max_history_bytes: DEFAULT_MAX_HISTORY_BYTES,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }
}

/// How a session's agent is configured (`aap.md` §6.3).
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
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
    /// The AAP agent session this session runs on, when its route's upstream speaks AAP
    /// (`adapters::aap_server`): created by the session's first turn, written back with each
    /// turn, and gone with the session. Absent for every other upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<ThreadRecord>,
}

/// One session.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Session {
    pub id: String,
    /// Who created it: the only principal that sees it.
    pub owner: Principal,
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
    /// The whole history as the turn leaves it.
    pub history: Vec<Message>,
    /// How many leading messages of `history` are the stored history's, unchanged: a store may
    /// keep those and write only the rest (a turn appends; a snapshot or a truncation may
    /// rewrite). Never more than the stored history holds; 0 is always correct.
    pub kept: usize,
    pub state: Option<Value>,
    pub pending: Vec<Pending>,
}

/// What a store holds now ([`Store::counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreCounts {
    /// Sessions of the AAP faces, idle ones not yet expired included.
    pub sessions: usize,
    /// Thread records of the AAP clients, idle ones not yet expired included.
    pub thread_records: usize,
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
    #[error("this caller holds its maximum of {0} sessions (max_sessions_per_principal); delete one or retry later")]
    PrincipalFull(usize),
    /// Storing `needed` more bytes would pass the caller's share of `limit`.
    #[error("this caller's sessions hold their share of the gateway's session storage: {needed} more bytes would pass {limit} bytes (max_bytes_per_principal); delete sessions or retry later")]
    PrincipalOutOfSpace { needed: usize, limit: usize },
    /// Storing `needed` more bytes would pass the gateway's budget of `limit`.
    #[error("the gateway's session storage is full: {needed} more bytes would pass its budget of {limit} bytes (max_total_bytes); delete sessions or retry later")]
    OutOfSpace { needed: usize, limit: usize },
    /// The store did not answer within its bound ([`Timed`]).
    #[error("the session store did not answer within {0:?}")]
    Timeout(Duration),
    /// The store cannot be reached or failed (a networked or durable store).
    #[error("the session store is unavailable: {0}")]
    Unavailable(String),
}

/// A session store; see the module docs. Operations on a session by id take the caller's
/// principal and treat another principal's session as missing.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    fn limits(&self) -> SessionLimits;
    /// What the store holds now, read at every metrics scrape: it must be cheap and must not
    /// wait. Counting belongs to the store, whatever its backend: only it sees entries expire.
    /// A networked store answers from counts it keeps up to date itself.
    fn counts(&self) -> StoreCounts;
    /// Stores a new session (its id from [`new_session_id`]) for [`Session::owner`], charging
    /// its history; refused, with nothing stored, past a quota or the byte budget.
    async fn create(&self, session: Session) -> Result<(), StoreError>;
    /// The whole session.
    async fn get(&self, id: &str, owner: &Principal) -> Result<Option<Session>, StoreError>;
    /// A session's configuration alone (no history).
    async fn config(
        &self,
        id: &str,
        owner: &Principal,
    ) -> Result<Option<SessionConfig>, StoreError>;
    /// Sessions of `owner` on `face` with an id after `after`, in id order; at most `limit`, and
    /// whether more follow.
    async fn list(
        &self,
        face: &str,
        owner: &Principal,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Session>, bool), StoreError>;
    /// Whether the session existed (for `owner`).
    async fn delete(&self, id: &str, owner: &Principal) -> Result<bool, StoreError>;
    /// Marks a turn running and returns the session as it stands.
    async fn begin_turn(&self, id: &str, owner: &Principal) -> Result<Session, StoreError>;
    /// Charges `bytes` of input to the turn running on `id`, against `max_total_bytes`; refused
    /// with [`StoreError::OutOfSpace`] (nothing charged) when the bytes in use plus `bytes`
    /// pass it. The charge lasts until [`Store::end_turn`].
    async fn charge_input(&self, id: &str, bytes: usize) -> Result<(), StoreError>;
    /// Ends the running turn, writing `commit` back when given (the session is then charged the
    /// bytes of its new history), and lets go of its input charge.
    async fn end_turn(&self, id: &str, commit: Option<TurnCommit>) -> Result<(), StoreError>;
    /// Marks a run of thread `key`, which belongs to `owner`, running and returns its record,
    /// if it has one. A new thread counts against `max_sessions` and, for its owner,
    /// `max_sessions_per_principal` ([`StoreError::PrincipalFull`]).
    async fn begin_thread(
        &self,
        key: &str,
        owner: &Principal,
    ) -> Result<Option<ThreadRecord>, StoreError>;
    /// Writes a running thread's record.
    async fn save_thread(&self, key: &str, record: ThreadRecord) -> Result<(), StoreError>;
    /// Ends the running thread's run.
    async fn end_thread(&self, key: &str) -> Result<(), StoreError>;
}

/// A new session id: `sess_` + 32 lowercase hex (URL-safe, `translation.md` §2.1).
pub fn new_session_id() -> String {
    format!("sess_{}", uuid::Uuid::new_v4().simple())
}
