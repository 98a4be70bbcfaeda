//! A client that stops reading must not hold an upstream stream forever (`streaming.md` §6,
//! "downstream stall"). hyper polls a response body only when its writes drain, so once a client
//! stops reading no body timer can fire. [`StallGuard`] wraps the client connection and fails a
//! write that stays blocked longer than the stall timeout; hyper then closes the connection and
//! drops the body, which closes the upstream connection.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// See the module docs.
#[derive(Debug)]
pub struct StallGuard<T> {
    inner: T,
    timeout: Duration,
    /// Running while a write is blocked; cleared by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> StallGuard<T> {
    pub fn new(inner: T, timeout: Duration) -> StallGuard<T> {
        StallGuard {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// After the inner write returned `Pending`: keeps waiting, or gives up past the timeout.
    fn blocked<R>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        let timeout = self.timeout;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {} s", timeout.as_secs_f64()),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progress<R>(
        &mut self,
        result: Poll<io::Result<R>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<R>> {
        match result {
            Poll::Pending => self.blocked(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for StallGuard<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StallGuard<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.progress(result, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.progress(result, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let result = Pin::new(&mut this.inner).poll_flush(cx);
        this.progress(result, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test(start_paused = true)]
    async fn a_write_blocked_past_the_timeout_fails_and_progress_resets_it() {
        // A pipe with room for 8 bytes that nobody reads.
        let (near, _far) = tokio::io::duplex(8);
        let mut guard = StallGuard::new(near, Duration::from_secs(5));
        guard.write_all(b"12345678").await.unwrap();
        let err = guard.write_all(b"more").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_that_keeps_reading_is_not_cut() {
        use tokio::io::AsyncReadExt;
        let (near, mut far) = tokio::io::duplex(8);
        let reader = tokio::spawn(async move {
            let mut total = 0;
            let mut buf = [0u8; 4];
            loop {
                tokio::time::sleep(Duration::from_secs(3)).await;
                match far.read(&mut buf).await {
                    Ok(0) | Err(_) => return total,
                    Ok(n) => total += n,
                }
            }
        });
        let mut guard = StallGuard::new(near, Duration::from_secs(5));
        guard.write_all(&[7u8; 64]).await.unwrap();
        drop(guard);
        assert_eq!(reader.await.unwrap(), 64);
    }
}
