//! Who a request acts for: the principal that authentication establishes, that owns AAP sessions
//! and thread records, and that quotas count against.
//!
//! It lives here, below the server, because the store keys ownership and quotas by it; the
//! server's authentication makes one and attaches it to the request (an extension), and faces
//! read it from there.

use std::fmt;

/// An authenticated caller, or the anonymous one of a route without authentication.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct Principal(String);

/// The principal of requests on routes without authentication.
pub const ANONYMOUS: &str = "anonymous";

impl Principal {
    /// A principal named `id` (a key id, or a token's `sub`).
    pub fn new(id: impl Into<String>) -> Principal {
        Principal(id.into())
    }

    /// The caller on a route without authentication.
    pub fn anonymous() -> Principal {
        Principal(ANONYMOUS.to_owned())
    }

    /// The principal an API key stands for: `key-` and the first 16 hex digits of the key's
    /// SHA-256, so logs and stores name the key without holding it.
    pub fn for_api_key(key: &str) -> Principal {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(key.as_bytes());
        let mut id = String::from("key-");
        for byte in &digest[..8] {
            id.push_str(&format!("{byte:02x}"));
        }
        Principal(id)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The anonymous principal: what a request without authentication acts for.
impl Default for Principal {
    fn default() -> Self {
        Principal::anonymous()
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_named_by_its_digest_never_by_itself() {
        let p = Principal::for_api_key("s3cret-key");
        assert!(p.as_str().starts_with("key-"));
        assert_eq!(p.as_str().len(), 4 + 16);
        assert!(!p.as_str().contains("s3cret"));
        assert_eq!(p, Principal::for_api_key("s3cret-key"));
        assert_ne!(p, Principal::for_api_key("s3cret-kez"));
    }
}
