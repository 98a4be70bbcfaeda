//! Where everything lives in Redis: the names of a session's keys, a thread's keys and the
//! ledger's, each group under one hash tag so that every script touches one Cluster slot.

use sha2::{Digest, Sha256};

/// The ledger's keys, always handed to its scripts in this order (`KEYS[1]` … `KEYS[9]`).
pub(super) const LEDGER: [&str; 9] = [
    // Session id -> when it expires (ms, Redis clock).
    "exp",
    // Session id -> its charge, JSON `{o: owner, l: list, b: history bytes, i: input bytes}`.
    "sessions",
    // `<list>:<id>` at score 0, read BYLEX: one range per (owner, face).
    "list",
    // Owner -> sessions held.
    "owner_sessions",
    // Owner -> bytes held.
    "owner_bytes",
    // `bytes` -> bytes held by all sessions.
    "total",
    // Thread digest -> when it expires.
    "thread_exp",
    // Thread digest -> owner.
    "threads",
    // Owner -> thread records held.
    "owner_threads",
];

/// Key names under one prefix.
pub(super) struct Keys {
    prefix: String,
    ledger: Vec<String>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl Keys {
    pub(super) fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.to_owned(),
            ledger: LEDGER
                .iter()
                .map(|name| format!("{prefix}{{ledger}}:{name}"))
                .collect(),
        }
    }

    /// The ledger's keys, in [`LEDGER`] order.
    pub(super) fn ledger(&self) -> &[String] {
        &self.ledger
    }

    /// Session `id`'s meta hash, history list and turn lock, in that order.
    pub(super) fn session(&self, id: &str) -> [String; 3] {
        let base = format!("{}s:{{{id}}}", self.prefix);
        [base.clone(), format!("{base}:h"), format!("{base}:lock")]
    }

    /// A thread's record hash and run lock, by its [`digest`].
    pub(super) fn thread(&self, digest: &str) -> [String; 2] {
        let base = format!("{}t:{{{digest}}}", self.prefix);
        [base.clone(), format!("{base}:lock")]
    }
}

/// Whether `id` can name a session: a brace would move its keys' hash tag (and an empty tag
/// hashes the whole key), so the keys of one session could land in different slots. Ids the
/// gateway makes are hex; anything else a client sends is simply not found.
pub(super) fn usable_id(id: &str) -> bool {
    !id.is_empty() && !id.contains(['{', '}'])
}

/// SHA-256 hex of `parts`, each length-prefixed so no two lists of parts collide: the name of
/// a thread (its key may hold anything) and of an (owner, face) list.
pub(super) fn digest(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    let mut hex = String::with_capacity(64);
    for byte in hasher.finalize() {
        hex.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        hex.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The part of a key Redis Cluster hashes.
    fn tag(key: &str) -> &str {
        let Some(open) = key.find('{') else {
            return key;
        };
        match key[open + 1..].find('}') {
            Some(0) | None => key,
            Some(len) => &key[open + 1..open + 1 + len],
        }
    }

    #[test]
    fn each_group_of_keys_shares_one_hash_tag() {
        let keys = Keys::new("dp:");
        let session = keys.session("sess_0a");
        assert!(session.iter().all(|k| tag(k) == "sess_0a"), "{session:?}");
        assert_eq!(session[0], "dp:s:{sess_0a}");
        let thread = keys.thread(&digest(&["/r", "alice", "t{1}"]));
        assert!(thread.iter().all(|k| tag(k) == tag(&thread[0])));
        assert_eq!(tag(&thread[0]).len(), 64);
        assert!(keys.ledger().iter().all(|k| tag(k) == "ledger"));
        assert!(!usable_id("a{b") && !usable_id("") && usable_id("sess_1"));
    }

    #[test]
    fn digests_do_not_collide_across_part_boundaries() {
        assert_ne!(digest(&["ab", "c"]), digest(&["a", "bc"]));
        assert_eq!(digest(&["x"]), digest(&["x"]));
    }
}
