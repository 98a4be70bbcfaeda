//! JWTs for the tests: an EC P-256 signing key generated in the test, its public JWK, the
//! JWKS document a gateway reads, and tokens signed with it.

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::Value;

/// An EC P-256 signing key generated for the test, and its public JWK under `kid`.
pub struct SigningKey {
    pub kid: String,
    pub encoding: EncodingKey,
    pub public_pem: String,
    pub jwk: Jwk,
}

impl SigningKey {
    pub fn generate(kid: &str) -> SigningKey {
        let pair = rcgen::KeyPair::generate().expect("generate a P-256 key");
        let encoding =
            EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes()).expect("a PKCS#8 EC key");
        let mut jwk = Jwk::from_encoding_key(&encoding, Algorithm::ES256).expect("its JWK");
        jwk.common.key_id = Some(kid.to_owned());
        SigningKey {
            kid: kid.to_owned(),
            encoding,
            public_pem: pair.public_key_pem(),
            jwk,
        }
    }

    /// A token over `claims`, signed with this key, its header naming `kid`.
    pub fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.to_owned());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("sign")
    }

    pub fn sign(&self, claims: &Value) -> String {
        self.sign_as(&self.kid, claims)
    }
}

pub fn jwks(keys: &[&SigningKey]) -> String {
    serde_json::to_string(&JwkSet {
        keys: keys.iter().map(|k| k.jwk.clone()).collect(),
    })
    .expect("a JWKS document")
}
