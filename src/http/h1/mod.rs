//! HTTP/1.1 as the gateway speaks it itself: message-body framing ([`framing`]), shared by the
//! upstream client and the server's connections, and a client connection's read side with the
//! request body it yields ([`inbound`]).

pub mod framing;
pub mod inbound;
