//! The request id: the `x-request-id` a request is known by in the gateway's logs, on its
//! response and at its upstream.
//!
//! A client's `x-request-id` is kept when it is one value of 1 to [`MAX_LEN`] visible ASCII
//! characters (`0x21..=0x7e`: no spaces, no controls, nothing a log line or a header could be
//! forged with); otherwise (absent, empty, too long, repeated, anything else) the gateway makes
//! one up, a UUID v4. The server puts the [`RequestId`] into the request's extensions, records
//! it in the request span, echoes it on every response, and [`super::relay::Relay`] sends it
//! upstream in place of whatever the client sent.

use http::header::{HeaderMap, HeaderName, HeaderValue};

/// The header that carries the id, both ways.
pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The longest client id kept, in bytes.
pub const MAX_LEN: usize = 200;

/// One request's id; valid as a header value by construction. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(HeaderValue);

impl RequestId {
    /// The client's id in `headers` when it is acceptable, else a new one.
    pub fn from_client(headers: &HeaderMap) -> RequestId {
        let mut values = headers.get_all(&X_REQUEST_ID).iter();
        match (values.next(), values.next()) {
            (Some(value), None) => RequestId::accept(value).unwrap_or_else(RequestId::generate),
            // Several ids: none of them names the request.
            _ => RequestId::generate(),
        }
    }

    /// `value` as an id, when it is 1..=[`MAX_LEN`] bytes of visible ASCII.
    pub fn accept(value: &HeaderValue) -> Option<RequestId> {
        let bytes = value.as_bytes();
        let valid =
            (1..=MAX_LEN).contains(&bytes.len()) && bytes.iter().all(|b| (0x21..=0x7e).contains(b));
        valid.then(|| RequestId(value.clone()))
    }

    /// A new id: a random UUID v4.
    pub fn generate() -> RequestId {
        let mut text = uuid::Uuid::encode_buffer();
        let text = uuid::Uuid::new_v4().hyphenated().encode_lower(&mut text);
        // A UUID's text is always a valid header value; the fallback is never taken.
        RequestId(HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static("-")))
    }

    pub fn as_str(&self) -> &str {
        // Visible ASCII only (checked or generated), so always text.
        self.0.to_str().unwrap_or_default()
    }

    pub fn header_value(&self) -> HeaderValue {
        self.0.clone()
    }

    /// Sets the id on `headers`, replacing any other.
    pub fn set_on(&self, headers: &mut HeaderMap) {
        headers.insert(X_REQUEST_ID, self.header_value());
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(values: &[&[u8]]) -> RequestId {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(X_REQUEST_ID, HeaderValue::from_bytes(value).unwrap());
        }
        RequestId::from_client(&headers)
    }

    fn is_uuid_v4(id: &RequestId) -> bool {
        uuid::Uuid::parse_str(id.as_str()).is_ok_and(|u| u.get_version_num() == 4)
    }

    #[test]
    fn a_visible_ascii_id_is_kept() {
        assert_eq!(from(&[b"abc-123"]).as_str(), "abc-123");
        let all_visible: Vec<u8> = (0x21..=0x7e).collect();
        assert_eq!(from(&[&all_visible]).as_str().as_bytes(), &all_visible[..]);
        let longest = vec![b'a'; MAX_LEN];
        assert_eq!(from(&[&longest]).as_str().len(), MAX_LEN);
    }

    #[test]
    fn anything_else_gets_a_new_uuid() {
        let too_long = vec![b'a'; MAX_LEN + 1];
        let cases: &[&[&[u8]]] = &[
            &[],
            &[b""],
            &[b"has space"],
            &[b"tab\there"],
            &[b"caf\xc3\xa9"],
            &[&too_long],
            &[b"one", b"two"],
        ];
        for case in cases {
            let id = from(case);
            assert!(is_uuid_v4(&id), "{case:?} gave {id}");
        }
        assert_ne!(from(&[]), from(&[]), "every generated id is new");
    }

    #[test]
    fn set_on_replaces_the_clients_copies() {
        let mut headers = HeaderMap::new();
        headers.append(X_REQUEST_ID, HeaderValue::from_static("a"));
        headers.append(X_REQUEST_ID, HeaderValue::from_static("b"));
        let id = RequestId::generate();
        id.set_on(&mut headers);
        let values: Vec<_> = headers.get_all(X_REQUEST_ID).iter().collect();
        assert_eq!(values, [&id.header_value()]);
    }
}
