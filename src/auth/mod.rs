//! Who may call a route, and what the gateway says of itself upstream: inbound
//! authentication ([`Authenticator`]: API keys and JWTs, `[routes.auth]`) and outbound
//! credentials ([`outbound`]: `[routes.upstream_auth]`, `forward_authorization`).
//!
//! It sits below `http` (the relay applies the outbound rules to every upstream request) and
//! `server` (which authenticates each request before its face sees it), and above `config`,
//! whose resolved tables it is built from. JWT checking is split in two: [`jwt`] validates a
//! token against keys it is handed and does no I/O; [`jwks`] reads and fetches those keys.
//!
//! A request passes with any credential its route accepts, always as
//! `Authorization: Bearer <credential>`:
//! - an API key: compared in full with every key (constant time), it stands for
//!   `Principal::for_api_key` (`key-` and a digest, never the key);
//! - a JWT from a configured issuer: it stands for `jwt:<iss>#<sub>`, a name no key id can
//!   take.
//!
//! A request without one is refused with 401 and `WWW-Authenticate: Bearer
//! realm="dialect-proxy"`, plus `error="invalid_token"` when it gave a credential that was
//! rejected ([`AuthError::challenge`]). Nothing here logs or echoes a credential.

pub mod jwks;
pub mod jwt;
pub mod outbound;

use http::{header, HeaderMap, HeaderValue};

use crate::config::{Auth, Secret};
use crate::session::Principal;
use jwks::KeySet;
use jwt::{Rules, TokenError};

/// The realm every challenge names.
pub const REALM: &str = "dialect-proxy";

/// Why a request is not authenticated; the text is safe to send to the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing credentials (Authorization: Bearer <API key or token>)")]
    Missing,
    #[error("the Bearer credential is not a valid API key")]
    UnknownKey,
    #[error("invalid token: {0}")]
    Token(#[from] TokenError),
}

impl AuthError {
    /// The `WWW-Authenticate` value of the 401 (RFC 6750 §3).
    pub fn challenge(&self) -> HeaderValue {
        match self {
            AuthError::Missing => HeaderValue::from_static("Bearer realm=\"dialect-proxy\""),
            AuthError::UnknownKey | AuthError::Token(_) => {
                HeaderValue::from_static("Bearer realm=\"dialect-proxy\", error=\"invalid_token\"")
            }
        }
    }
}

/// The inbound credentials of one route (or AAP face), ready to check requests with.
pub struct Authenticator {
    api_keys: Vec<Secret>,
    issuers: Vec<Issuer>,
}

struct Issuer {
    rules: Rules,
    keys: KeySet,
}

impl Authenticator {
    pub fn new(auth: &Auth) -> Authenticator {
        Authenticator {
            api_keys: auth.api_keys.clone(),
            issuers: auth
                .jwt
                .iter()
                .map(|jwt| Issuer {
                    rules: Rules {
                        issuer: jwt.issuer.clone(),
                        audience: jwt.audience.clone(),
                    },
                    keys: KeySet::new(&jwt.jwks),
                })
                .collect(),
        }
    }

    /// The principal of the request's credential.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, AuthError> {
        let given = bearer(headers).ok_or(AuthError::Missing)?;
        // Every key is compared in full, so the time taken does not tell which one nearly
        // matched.
        let matched = self.api_keys.iter().fold(false, |found, key| {
            constant_time_eq(key.expose(), given) | found
        });
        if matched {
            return Ok(Principal::for_api_key(given));
        }
        if self.issuers.is_empty() {
            return Err(AuthError::UnknownKey);
        }
        let header = match jwt::inspect(given) {
            Ok(header) => header,
            // Not a token at all: on a route that also takes keys, it was a wrong key.
            Err(TokenError::Malformed) if !self.api_keys.is_empty() => {
                return Err(AuthError::UnknownKey)
            }
            Err(e) => return Err(e.into()),
        };
        let mut refused = TokenError::Malformed;
        for issuer in &self.issuers {
            match issuer.verify(given, &header).await {
                Ok(claims) => {
                    return Ok(Principal::new(format!("jwt:{}#{}", claims.iss, claims.sub)))
                }
                Err(e) => refused = e,
            }
        }
        Err(refused.into())
    }
}

impl Issuer {
    async fn verify(
        &self,
        token: &str,
        header: &jsonwebtoken::Header,
    ) -> Result<jwt::Claims, TokenError> {
        let held = self.keys.keys().await;
        match jwt::verify(token, header, &held.ring, &self.rules) {
            Err(TokenError::UnknownKey(kid)) => match self.keys.keys_for_unknown_kid(&held).await {
                Some(fresh) => jwt::verify(token, header, &fresh.ring, &self.rules),
                None => Err(TokenError::UnknownKey(kid)),
            },
            verified => verified,
        }
    }
}

/// The credential of `Authorization: Bearer <credential>`, if the request has one.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, credential) = value.trim().split_once(' ')?;
    let credential = credential.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !credential.is_empty()).then_some(credential)
}

fn constant_time_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut diff = a.len() ^ b.len();
    for (i, x) in a.iter().enumerate() {
        diff |= usize::from(x ^ b.get(i).copied().unwrap_or(0));
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;

    fn headers(authorization: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(authorization).unwrap(),
        );
        h
    }

    #[tokio::test]
    async fn keys_pass_and_everything_else_is_refused_with_its_challenge() {
        let auth = Authenticator::new(&Auth {
            api_keys: vec![Secret::new("k1"), Secret::new("k2")],
            jwt: Vec::new(),
        });
        for key in ["k1", "k2"] {
            let p = auth.authenticate(&headers(&format!("Bearer {key}"))).await;
            assert_eq!(p, Ok(Principal::for_api_key(key)));
        }
        assert_eq!(
            auth.authenticate(&headers("bearer  k1 ")).await,
            Ok(Principal::for_api_key("k1"))
        );
        for (value, error) in [
            ("Bearer k3", AuthError::UnknownKey),
            ("Bearer k1,k2", AuthError::UnknownKey),
            ("Bearer ", AuthError::Missing),
            ("Basic azE6", AuthError::Missing),
            ("k1", AuthError::Missing),
        ] {
            assert_eq!(auth.authenticate(&headers(value)).await, Err(error.clone()));
            let challenge = error.challenge();
            let challenge = challenge.to_str().unwrap();
            assert!(challenge.starts_with("Bearer realm=\"dialect-proxy\""));
            assert_eq!(
                challenge.contains("error=\"invalid_token\""),
                error != AuthError::Missing
            );
        }
        assert_eq!(
            auth.authenticate(&HeaderMap::new()).await,
            Err(AuthError::Missing)
        );
    }
}
