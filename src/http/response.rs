//! What every response of the gateway is made of: the body type ([`ResponseBody`]), the
//! success shapes faces answer with (an event stream, a JSON document), and [`Refusal`], the
//! error a handler returns before any body byte. Refusals become responses in one place,
//! `server::refusal`, which knows each client dialect's error shape.

use std::convert::Infallible;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body::Body;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use serde::Serialize;

use super::headers;
use crate::error::Failure;

/// Any response body the gateway sends: a translating stream or a whole document.
pub type ResponseBody = UnsyncBoxBody<Bytes, Infallible>;

/// A request refused before the response started: the failure, and for `405` the methods the
/// resource allows.
#[derive(Debug)]
pub struct Refusal {
    pub failure: Failure,
    pub allow: Option<&'static str>,
}

impl From<Failure> for Refusal {
    fn from(failure: Failure) -> Refusal {
        Refusal {
            failure,
            allow: None,
        }
    }
}

/// A `200` event stream over `body`, with the SSE headers (`streaming.md` §4).
pub fn event_stream<B>(body: B) -> Response<ResponseBody>
where
    B: Body<Data = Bytes, Error = Infallible> + Send + 'static,
{
    let mut response = Response::new(body.boxed_unsync());
    headers::sse_response_headers(response.headers_mut());
    response
}

/// A whole body with `status` and, when given, its content type.
pub fn full(
    status: StatusCode,
    content_type: Option<&'static str>,
    bytes: Bytes,
) -> Response<ResponseBody> {
    let mut response = Response::new(Full::new(bytes).boxed_unsync());
    *response.status_mut() = status;
    if let Some(content_type) = content_type {
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    response
}

/// A JSON document with `status`.
pub fn json<T: Serialize + ?Sized>(status: StatusCode, body: &T) -> Response<ResponseBody> {
    // The gateway's own response types always serialise.
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    full(status, Some("application/json"), Bytes::from(bytes))
}
