//! [`ClientBody`]: a client request's body, whichever connection it came on (HTTP/1.1 served by
//! the gateway's own connection, HTTP/2 by hyper's). Handlers read it through
//! [`crate::http::request_body::read_body`].

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use super::h1::inbound::{BodyError, H1Body};

/// A request body.
#[derive(Debug)]
pub enum ClientBody {
    /// No body (an HTTP/1.1 request without a length, or one of length 0).
    Empty,
    /// From an HTTP/1.1 connection.
    H1(H1Body),
    /// From an HTTP/2 connection.
    H2(Incoming),
}

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ClientBodyError {
    #[error(transparent)]
    H1(#[from] BodyError),
    #[error(transparent)]
    H2(#[from] hyper::Error),
}

impl From<Incoming> for ClientBody {
    fn from(body: Incoming) -> ClientBody {
        ClientBody::H2(body)
    }
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = ClientBodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ClientBodyError>>> {
        match self.get_mut() {
            ClientBody::Empty => Poll::Ready(None),
            ClientBody::H1(body) => Pin::new(body).poll_frame(cx).map_err(Into::into),
            ClientBody::H2(body) => Pin::new(body).poll_frame(cx).map_err(Into::into),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ClientBody::Empty => true,
            ClientBody::H1(body) => body.is_end_stream(),
            ClientBody::H2(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ClientBody::Empty => SizeHint::with_exact(0),
            ClientBody::H1(body) => body.size_hint(),
            ClientBody::H2(body) => body.size_hint(),
        }
    }
}
