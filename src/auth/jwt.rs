//! Token validation, without I/O: a [`KeyRing`] (the usable public keys of one JWKS, built
//! from a key set someone else loaded) and [`verify`], which checks a token against it with
//! `jsonwebtoken`: the signature, `exp` and `nbf` (with [`LEEWAY`]), `iss`, `aud`, and that
//! `sub` is there.
//!
//! Only asymmetric algorithms are accepted (RS*, PS*, ES*, EdDSA): `alg: none` is no algorithm
//! `jsonwebtoken` knows, so its header does not even parse, and HS* is refused before any key
//! is looked at — a public key is public, so it must never serve as an HMAC secret. A key is
//! used only for its own family and, when the JWKS names one, its own algorithm; symmetric
//! (`oct`) and encryption (`use: enc`) keys of a JWKS are left out of the ring.

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Header, Validation};
use serde::Deserialize;

/// How far `exp` and `nbf` may be off, for clocks that disagree a little.
pub const LEEWAY_SECS: u64 = 30;

/// The algorithms a token may be signed with.
const ASYMMETRIC: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Why a token was refused. The messages name the reason, never the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("not a JWT, or its header names no accepted algorithm")]
    Malformed,
    #[error("algorithm {0:?} is not accepted (only RS*, PS*, ES* and EdDSA)")]
    Algorithm(Algorithm),
    #[error("signed with a key the issuer does not list (kid {0:?})")]
    UnknownKey(String),
    #[error("the issuer's key for it is for another algorithm")]
    KeyMismatch,
    #[error("expired")]
    Expired,
    #[error("not valid yet (nbf)")]
    NotYetValid,
    #[error("wrong issuer")]
    Issuer,
    #[error("wrong audience")]
    Audience,
    #[error("bad signature")]
    Signature,
    #[error("claim {0:?} missing")]
    MissingClaim(String),
    #[error("rejected ({0})")]
    Invalid(&'static str),
}

/// What a verified token says about its holder.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Claims {
    pub iss: String,
    pub sub: String,
}

/// What a token must say: who issued it and for whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    pub issuer: String,
    pub audience: String,
}

/// The usable public keys of one JWKS.
#[derive(Default)]
pub struct KeyRing {
    keys: Vec<RingKey>,
}

struct RingKey {
    kid: Option<String>,
    /// The algorithm the JWKS pins the key to, if any.
    alg: Option<KeyAlgorithm>,
    key: DecodingKey,
}

impl KeyRing {
    /// The asymmetric signing keys of `set`; the others are left out.
    pub fn new(set: &JwkSet) -> KeyRing {
        let keys = set
            .keys
            .iter()
            .filter(|jwk| jwk.common.public_key_use != Some(PublicKeyUse::Encryption))
            .filter(|jwk| {
                matches!(
                    jwk.algorithm,
                    AlgorithmParameters::RSA(_)
                        | AlgorithmParameters::EllipticCurve(_)
                        | AlgorithmParameters::OctetKeyPair(_)
                )
            })
            .filter_map(|jwk| {
                Some(RingKey {
                    kid: jwk.common.key_id.clone(),
                    alg: jwk.common.key_algorithm,
                    key: DecodingKey::from_jwk(jwk).ok()?,
                })
            })
            .collect();
        KeyRing { keys }
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key named `kid`; without a kid, the only key of the algorithm's family.
    fn find(&self, kid: Option<&str>, alg: Algorithm) -> Option<&RingKey> {
        match kid {
            Some(kid) => self.keys.iter().find(|k| k.kid.as_deref() == Some(kid)),
            None => {
                let mut same_family = self.keys.iter().filter(|k| k.key.family() == alg.family());
                let only = same_family.next()?;
                same_family.next().is_none().then_some(only)
            }
        }
    }
}

/// Reads a token's header: it must parse and name an accepted algorithm.
pub fn inspect(token: &str) -> Result<Header, TokenError> {
    let header = jsonwebtoken::decode_header(token).map_err(|_| TokenError::Malformed)?;
    if !ASYMMETRIC.contains(&header.alg) {
        return Err(TokenError::Algorithm(header.alg));
    }
    Ok(header)
}

/// Checks `token` (whose header [`inspect`] returned) against the keys of `ring` and `rules`.
pub fn verify(
    token: &str,
    header: &Header,
    ring: &KeyRing,
    rules: &Rules,
) -> Result<Claims, TokenError> {
    let kid = header.kid.as_deref();
    let Some(key) = ring.find(kid, header.alg) else {
        return Err(TokenError::UnknownKey(kid.unwrap_or("").to_owned()));
    };
    if key.key.family() != header.alg.family()
        || key.alg.is_some_and(|a| a != KeyAlgorithm::from(header.alg))
    {
        return Err(TokenError::KeyMismatch);
    }
    let mut validation = Validation::new(header.alg);
    validation.leeway = LEEWAY_SECS;
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation.validate_aud = true;
    validation.set_issuer(&[rules.issuer.as_str()]);
    validation.set_audience(&[rules.audience.as_str()]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    jsonwebtoken::decode::<Claims>(token, &key.key, &validation)
        .map(|data| data.claims)
        .map_err(|e| match e.kind() {
            ErrorKind::ExpiredSignature => TokenError::Expired,
            ErrorKind::ImmatureSignature => TokenError::NotYetValid,
            ErrorKind::InvalidIssuer => TokenError::Issuer,
            ErrorKind::InvalidAudience => TokenError::Audience,
            ErrorKind::InvalidSignature => TokenError::Signature,
            ErrorKind::InvalidAlgorithm => TokenError::KeyMismatch,
            ErrorKind::MissingRequiredClaim(claim) => TokenError::MissingClaim(claim.clone()),
            ErrorKind::InvalidToken | ErrorKind::Base64(_) | ErrorKind::Utf8(_) => {
                TokenError::Malformed
            }
            ErrorKind::Json(_) => TokenError::Invalid("a claim has the wrong type"),
            _ => TokenError::Invalid("the token cannot be verified"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(kid: &str, alg: &str) -> KeyRing {
        let set: JwkSet = serde_json::from_str(&format!(
            r#"{{"keys":[
              {{"kty":"EC","crv":"P-256","kid":"{kid}","alg":"{alg}","x":"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4","y":"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"}},
              {{"kty":"oct","kid":"hmac","k":"c2VjcmV0"}},
              {{"kty":"EC","crv":"P-256","kid":"enc","use":"enc","x":"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4","y":"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"}}
            ]}}"#
        ))
        .unwrap();
        KeyRing::new(&set)
    }

    fn token(header: &str) -> String {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!(
            "{}.{}.c2ln",
            b64.encode(header),
            b64.encode(r#"{"sub":"x"}"#)
        )
    }

    #[test]
    fn only_asymmetric_signing_keys_enter_the_ring() {
        assert_eq!(ring("a", "ES256").len(), 1);
    }

    #[test]
    fn headers_naming_no_asymmetric_algorithm_are_refused_before_any_key() {
        assert_eq!(
            inspect(&token(r#"{"alg":"none"}"#)).unwrap_err(),
            TokenError::Malformed
        );
        assert_eq!(
            inspect(&token(r#"{"alg":"HS256","kid":"hmac"}"#)).unwrap_err(),
            TokenError::Algorithm(Algorithm::HS256)
        );
        assert_eq!(inspect("not a token").unwrap_err(), TokenError::Malformed);
        assert!(inspect(&token(r#"{"alg":"ES256","kid":"a"}"#)).is_ok());
    }

    #[test]
    fn a_key_serves_only_its_own_algorithm() {
        let rules = Rules {
            issuer: "i".into(),
            audience: "a".into(),
        };
        let ring = ring("a", "ES256");
        let es384 = token(r#"{"alg":"ES384","kid":"a"}"#);
        let header = inspect(&es384).unwrap();
        assert_eq!(
            verify(&es384, &header, &ring, &rules).unwrap_err(),
            TokenError::KeyMismatch
        );
        let rs256 = token(r#"{"alg":"RS256","kid":"a"}"#);
        let header = inspect(&rs256).unwrap();
        assert_eq!(
            verify(&rs256, &header, &ring, &rules).unwrap_err(),
            TokenError::KeyMismatch
        );
        let unknown = token(r#"{"alg":"ES256","kid":"enc"}"#);
        let header = inspect(&unknown).unwrap();
        assert_eq!(
            verify(&unknown, &header, &ring, &rules).unwrap_err(),
            TokenError::UnknownKey("enc".into())
        );
        // A forged signature over the right key is a bad signature, not a pass.
        let forged = token(r#"{"alg":"ES256","kid":"a"}"#);
        let header = inspect(&forged).unwrap();
        assert!(verify(&forged, &header, &ring, &rules).is_err());
    }
}
