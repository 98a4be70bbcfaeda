//! Telling HTTP/2 with prior knowledge from HTTP/1.1 by a connection's first bytes
//! ([`sniff`]), and [`Rewind`], which gives those bytes back to hyper's HTTP/2 server.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// What every HTTP/2 connection starts with (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What a connection's first bytes say.
#[derive(Debug)]
pub enum Sniffed {
    /// The HTTP/2 preface, whole, and whatever came with it.
    H2(BytesMut),
    /// Anything else: HTTP/1.1 (or nothing at all), with the bytes read.
    H1(BytesMut),
}

/// Reads until the first bytes either are the HTTP/2 preface or cannot be. Most requests tell
/// at their first byte; nothing is read past what the first reads bring.
pub async fn sniff<S: AsyncRead + Unpin>(io: &mut S) -> io::Result<Sniffed> {
    let mut read = BytesMut::new();
    loop {
        let seen = read.len().min(PREFACE.len());
        if read[..seen] != PREFACE[..seen] {
            return Ok(Sniffed::H1(read));
        }
        if seen == PREFACE.len() {
            return Ok(Sniffed::H2(read));
        }
        read.reserve(1024);
        if io.read_buf(&mut read).await? == 0 {
            return Ok(Sniffed::H1(read));
        }
    }
}

/// `io` with `prefix` read again first.
#[derive(Debug)]
pub struct Rewind<S> {
    prefix: BytesMut,
    io: S,
}

impl<S> Rewind<S> {
    pub fn new(prefix: BytesMut, io: S) -> Rewind<S> {
        Rewind { prefix, io }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            if self.prefix.is_empty() {
                self.prefix = BytesMut::new();
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn the_preface_is_told_from_http1_at_the_first_differing_byte_and_given_back() {
        let (mut client, mut server) = tokio::io::duplex(1024);
        client.write_all(b"POST / HTTP/1.1\r\n").await.unwrap();
        let Sniffed::H1(read) = sniff(&mut server).await.unwrap() else {
            panic!("HTTP/1.1 taken for HTTP/2");
        };
        assert_eq!(&read[..], b"POST / HTTP/1.1\r\n");

        let (mut client, mut server) = tokio::io::duplex(1024);
        // The preface in two pieces, then a frame.
        client.write_all(&PREFACE[..5]).await.unwrap();
        let writer = tokio::spawn(async move {
            tokio::task::yield_now().await;
            client.write_all(&PREFACE[5..]).await.unwrap();
            client.write_all(b"frame").await.unwrap();
            client
        });
        let Sniffed::H2(read) = sniff(&mut server).await.unwrap() else {
            panic!("HTTP/2 taken for HTTP/1.1");
        };
        let _client = writer.await.unwrap();
        let mut rewound = Rewind::new(read, server);
        let mut again = vec![0; PREFACE.len() + 5];
        rewound.read_exact(&mut again).await.unwrap();
        assert_eq!(&again[..PREFACE.len()], PREFACE);
        assert_eq!(&again[PREFACE.len()..], b"frame");

        let (client, mut server) = tokio::io::duplex(1024);
        drop(client);
        assert!(matches!(sniff(&mut server).await.unwrap(), Sniffed::H1(read) if read.is_empty()));
    }
}
