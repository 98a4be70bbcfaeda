//! What the stored sessions use of the limits: sessions and content bytes, in total and per
//! owner, the figures the quotas and the byte budget are checked against (see the module docs of
//! `session`). Kept by every store that counts in this process.

use std::collections::HashMap;

use super::{Principal, SessionLimits, StoreError};

/// Sessions and bytes held, by the gateway or by one owner.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Held {
    pub(super) sessions: usize,
    pub(super) bytes: usize,
}

/// What the stored sessions use of the limits.
#[derive(Debug, Default)]
pub(super) struct Usage {
    pub(super) total: Held,
    /// Owners without sessions are not kept.
    pub(super) per_owner: HashMap<Principal, Held>,
}

impl Usage {
    pub(super) fn of(&self, owner: &Principal) -> Held {
        self.per_owner.get(owner).copied().unwrap_or_default()
    }

    /// Whether `bytes` more fit `owner`'s share and the gateway's budget.
    pub(super) fn room_for(
        &self,
        owner: &Principal,
        bytes: usize,
        limits: &SessionLimits,
    ) -> Result<(), StoreError> {
        if self.of(owner).bytes.saturating_add(bytes) > limits.max_bytes_per_principal {
            return Err(StoreError::PrincipalOutOfSpace {
                needed: bytes,
                limit: limits.max_bytes_per_principal,
            });
        }
        if self.total.bytes.saturating_add(bytes) > limits.max_total_bytes {
            return Err(StoreError::OutOfSpace {
                needed: bytes,
                limit: limits.max_total_bytes,
            });
        }
        Ok(())
    }

    /// Adds `add` and takes away `sub`, for `owner` and in total.
    pub(super) fn update(&mut self, owner: &Principal, add: Held, sub: Held) {
        let held = self.per_owner.entry(owner.clone()).or_default();
        for h in [held, &mut self.total] {
            debug_assert!(
                h.sessions >= sub.sessions && h.bytes >= sub.bytes,
                "usage underflow"
            );
            h.sessions = h.sessions.saturating_sub(sub.sessions) + add.sessions;
            h.bytes = h.bytes.saturating_sub(sub.bytes) + add.bytes;
        }
        if self.of(owner) == Held::default() {
            self.per_owner.remove(owner);
        }
    }
}
