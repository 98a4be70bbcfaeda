//! The HTTP/1.1 connection over an in-memory pipe and real sockets, with a service written
//! for each test and a client that speaks raw bytes.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Context;

use bytes::Bytes;
use http_body::Frame;
use http_body_util::{BodyExt, Full};
use tokio::io::{AsyncReadExt, DuplexStream};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use super::*;
use crate::server::drain::Drain;

const WAIT: Duration = Duration::from_secs(10);

fn settings() -> Settings {
    Settings {
        max_head: 8192,
        header_timeout: Duration::from_secs(5),
        max_requests: None,
    }
}

/// A response naming the request and its body, read whole.
async fn echo(request: Request<ClientBody>) -> Response<ResponseBody> {
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(body) => String::from_utf8_lossy(&body.to_bytes()).into_owned(),
        Err(error) => format!("error: {error}"),
    };
    let text = format!("{} {} [{body}]", parts.method, parts.uri.path());
    Response::new(Full::new(Bytes::from(text)).boxed_unsync())
}

/// A body whose frames come from a channel; `dropped` fires when the body is dropped.
struct Channel {
    frames: mpsc::UnboundedReceiver<Bytes>,
    _dropped: oneshot::Sender<()>,
}

impl Body for Channel {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.frames
            .poll_recv(cx)
            .map(|frame| frame.map(|data| Ok(Frame::data(data))))
    }
}

/// Serves one connection on the server end of a pipe.
fn serve_pipe<S, F, Fut>(
    server: S,
    drain: &Drain,
    service: F,
) -> tokio::task::JoinHandle<io::Result<()>>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    F: Fn(Request<ClientBody>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<ResponseBody>> + Send + 'static,
{
    let watcher = drain.watcher();
    tokio::spawn(serve(
        server,
        BytesMut::new(),
        settings(),
        watcher,
        service,
        || {},
    ))
}

/// Serves one connection whose first response streams what is sent on the returned channel
/// and whose later ones are `next`; the returned receiver fails once the stream's body has been
/// dropped.
fn serve_stream<S>(
    server: S,
    drain: &Drain,
) -> (
    mpsc::UnboundedSender<Bytes>,
    oneshot::Receiver<()>,
    tokio::task::JoinHandle<io::Result<()>>,
)
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (frames, receiver) = mpsc::unbounded_channel();
    let (dropped, on_drop) = oneshot::channel();
    let stream = Channel {
        frames: receiver,
        _dropped: dropped,
    };
    (
        frames,
        on_drop,
        serve_first_then_next(server, drain, stream),
    )
}

/// Serves one connection whose first response is `first` and whose later ones are `next`.
fn serve_first_then_next<S, B>(
    server: S,
    drain: &Drain,
    first: B,
) -> tokio::task::JoinHandle<io::Result<()>>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    B: Body<Data = Bytes, Error = Infallible> + Send + 'static,
{
    let first = std::sync::Mutex::new(Some(first));
    serve_pipe(server, drain, move |_| {
        let body = match first.lock().unwrap().take() {
            Some(stream) => stream.boxed_unsync(),
            None => Full::new(Bytes::from("next")).boxed_unsync(),
        };
        async move { Response::new(body) }
    })
}

/// A connection whose one request (`GET /s`) is answered by [`serve_stream`].
async fn stream_requested() -> (
    DuplexStream,
    Drain,
    mpsc::UnboundedSender<Bytes>,
    oneshot::Receiver<()>,
    tokio::task::JoinHandle<io::Result<()>>,
) {
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    let drain = Drain::new();
    let (frames, on_drop, served) = serve_stream(server, &drain);
    client
        .write_all(b"GET /s HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    (client, drain, frames, on_drop, served)
}

/// Reads until `needle` has been seen, returning everything read.
async fn read_until<R: AsyncRead + Unpin>(reader: &mut R, seen: &mut Vec<u8>, needle: &str) {
    let read = async {
        while !String::from_utf8_lossy(seen).contains(needle) {
            let mut buf = [0u8; 4096];
            let n = reader.read(&mut buf).await.unwrap();
            assert!(
                n > 0,
                "closed before {needle:?}: {}",
                String::from_utf8_lossy(seen)
            );
            seen.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(WAIT, read)
        .await
        .unwrap_or_else(|_| panic!("no {needle:?} in {}", String::from_utf8_lossy(seen)));
}

async fn read_to_end<R: AsyncRead + Unpin>(reader: &mut R) -> String {
    let mut all = Vec::new();
    tokio::time::timeout(WAIT, reader.read_to_end(&mut all))
        .await
        .expect("the connection was not closed")
        .unwrap();
    String::from_utf8_lossy(&all).into_owned()
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order_on_one_connection_until_close() {
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    let drain = Drain::new();
    let served = serve_pipe(server, &drain, echo);
    client
        .write_all(
            b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n\
              POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
              3\r\nhel\r\n2;ext=1\r\nlo\r\n0\r\ntrailer: t\r\n\r\n\
              POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody",
        )
        .await
        .unwrap();
    let all = read_to_end(&mut client).await;
    let a = all.find("GET /a []").expect(&all);
    let b = all.find("POST /b [hello]").expect(&all);
    let c = all.find("POST /c [body]").expect(&all);
    assert!(a < b && b < c, "{all}");
    assert_eq!(all.matches("HTTP/1.1 200 OK\r\n").count(), 3, "{all}");
    assert_eq!(all.matches("content-length: ").count(), 3, "{all}");
    assert_eq!(all.matches("connection: close\r\n").count(), 1, "{all}");
    served.await.unwrap().unwrap();
}

#[tokio::test]
async fn the_last_request_a_connection_may_carry_is_answered_with_close() {
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    let drain = Drain::new();
    let settings = Settings {
        max_requests: NonZeroU64::new(2),
        ..settings()
    };
    let served = tokio::spawn(serve(
        server,
        BytesMut::new(),
        settings,
        drain.watcher(),
        echo,
        || {},
    ));
    client
        .write_all(
            b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n\
              GET /b HTTP/1.1\r\nHost: x\r\n\r\n\
              GET /c HTTP/1.1\r\nHost: x\r\n\r\n",
        )
        .await
        .unwrap();
    let all = read_to_end(&mut client).await;
    let (a, b) = (all.find("GET /a []"), all.find("GET /b []"));
    assert!(a.is_some() && b > a, "{all}");
    assert!(
        !all.contains("GET /c"),
        "a third request was answered: {all}"
    );
    assert_eq!(all.matches("HTTP/1.1 200 OK\r\n").count(), 2, "{all}");
    // Only the second response says so.
    let close = all.find("connection: close\r\n").expect(&all);
    assert!(close > all.find("GET /a []").unwrap_or(0), "{all}");
    assert_eq!(all.matches("connection: close\r\n").count(), 1, "{all}");
    served.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_head_and_body_read_one_byte_at_a_time_make_the_same_request() {
    // A pipe one byte wide: every read the connection makes brings a single byte.
    let (mut client, server) = tokio::io::duplex(1);
    let drain = Drain::new();
    let _served = serve_pipe(server, &drain, echo);
    let request = b"POST /slow HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
                    5\r\nabcde\r\n0\r\n\r\n";
    let writer = tokio::spawn(async move {
        client.write_all(request).await.unwrap();
        client
    });
    let mut client = writer.await.unwrap();
    let mut seen = Vec::new();
    read_until(&mut client, &mut seen, "POST /slow [abcde]").await;
}

#[tokio::test]
async fn bad_heads_are_answered_and_the_connection_closed() {
    for (request, status) in [
        (
            "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc",
            "400 Bad Request",
        ),
        ("NOT HTTP AT ALL\r\n\r\n", "400 Bad Request"),
        (
            "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
            "400 Bad Request",
        ),
        (
            &format!(
                "GET / HTTP/1.1\r\nHost: x\r\nx-long: {}\r\n\r\n",
                "a".repeat(9000)
            ),
            "431 Request Header Fields Too Large",
        ),
    ] {
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let drain = Drain::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&calls);
        let served = serve_pipe(server, &drain, move |request| {
            counted.fetch_add(1, Ordering::SeqCst);
            echo(request)
        });
        client.write_all(request.as_bytes()).await.unwrap();
        let all = read_to_end(&mut client).await;
        assert!(all.starts_with(&format!("HTTP/1.1 {status}\r\n")), "{all}");
        assert!(all.contains("connection: close\r\n"), "{all}");
        assert_eq!(
            calls.load(Ordering::SeqCst),
            0,
            "the service saw a bad head"
        );
        served.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn a_client_expecting_100_continue_is_told_to_send_its_body() {
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    let drain = Drain::new();
    let _served = serve_pipe(server, &drain, echo);
    client
        .write_all(
            b"POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n",
        )
        .await
        .unwrap();
    let mut seen = Vec::new();
    read_until(&mut client, &mut seen, "HTTP/1.1 100 Continue\r\n\r\n").await;
    client.write_all(b"ok").await.unwrap();
    read_until(&mut client, &mut seen, "POST /e [ok]").await;
}

#[tokio::test]
async fn a_streamed_body_is_written_chunk_by_chunk_as_it_comes_then_ended() {
    let (mut client, _drain, frames, _on_drop, _served) = stream_requested().await;
    let mut seen = Vec::new();
    // The head goes before any event exists.
    read_until(&mut client, &mut seen, "transfer-encoding: chunked\r\n\r\n").await;
    frames.send(Bytes::from("data: one\n\n")).unwrap();
    read_until(&mut client, &mut seen, "b\r\ndata: one\n\n\r\n").await;
    frames.send(Bytes::from(vec![b'x'; 300])).unwrap();
    read_until(
        &mut client,
        &mut seen,
        &format!("12c\r\n{}\r\n", "x".repeat(300)),
    )
    .await;
    drop(frames);
    read_until(&mut client, &mut seen, "\r\n0\r\n\r\n").await;
}

/// A body whose one frame comes from `frame`, after which it says it has ended.
struct Finale {
    frame: oneshot::Receiver<Bytes>,
    done: bool,
}

impl Body for Finale {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let frame = std::task::ready!(Pin::new(&mut self.frame).poll(cx));
        self.done = true;
        Poll::Ready(frame.ok().map(|data| Ok(Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}

/// A pipe whose server end is [`Counted`]: the client end, the server end, and its counts of
/// writes and of reads.
fn counted_pipe() -> (DuplexStream, Counted, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let (client, server) = tokio::io::duplex(64 * 1024);
    let (writes, reads) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let server = Counted {
        io: server,
        writes: writes.clone(),
        reads: reads.clone(),
    };
    (client, server, writes, reads)
}

/// Sends `GET /s` on `client` and reads its response head: what was read.
async fn ask_stream(client: &mut DuplexStream) -> Vec<u8> {
    client
        .write_all(b"GET /s HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut seen = Vec::new();
    read_until(client, &mut seen, "transfer-encoding: chunked\r\n\r\n").await;
    seen
}

/// The server end of a pipe, counting the writes that wrote something and the reads tried.
struct Counted {
    io: DuplexStream,
    writes: Arc<AtomicUsize>,
    reads: Arc<AtomicUsize>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.writes.fetch_add(1, Ordering::SeqCst);
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[tokio::test]
async fn the_last_chunk_and_the_end_of_a_stream_leave_in_one_write() {
    let (mut client, server, writes, _) = counted_pipe();
    let (send, frame) = oneshot::channel();
    let drain = Drain::new();
    let _served = serve_first_then_next(server, &drain, Finale { frame, done: false });
    let mut seen = ask_stream(&mut client).await;
    let before = writes.load(Ordering::SeqCst);
    send.send(Bytes::from("data: last\n\n")).unwrap();
    read_until(&mut client, &mut seen, "c\r\ndata: last\n\n\r\n0\r\n\r\n").await;
    assert_eq!(
        writes.load(Ordering::SeqCst) - before,
        1,
        "one write for both"
    );
    // The connection is kept for the next request.
    client
        .write_all(b"GET /t HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let rest = read_to_end(&mut client).await;
    assert!(
        rest.starts_with("HTTP/1.1 200") && rest.ends_with("next"),
        "{rest}"
    );
}

#[tokio::test]
async fn while_a_response_streams_the_client_socket_is_read_only_when_it_has_news() {
    let drain = Drain::new();
    let (mut client, server, _, reads) = counted_pipe();
    let (frames, on_drop, served) = serve_stream(server, &drain);
    let mut seen = ask_stream(&mut client).await;
    let before = reads.load(Ordering::SeqCst);
    for i in 0..50 {
        frames.send(Bytes::from(format!("data: {i}\n\n"))).unwrap();
        read_until(&mut client, &mut seen, &format!("data: {i}\n\n\r\n")).await;
    }
    let polled = reads.load(Ordering::SeqCst) - before;
    assert!(
        polled <= 2,
        "50 events woke the connection; its socket was polled {polled} times"
    );

    // A pipelined request sent mid-stream wakes it: it is kept, and answered after the stream.
    client
        .write_all(b"GET /t HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    tokio::time::timeout(WAIT, async {
        while reads.load(Ordering::SeqCst) - before <= polled {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the pipelined bytes were not read while the stream went on");
    frames.send(Bytes::from("data: last\n\n")).unwrap();
    drop(frames);
    let rest = read_to_end(&mut client).await;
    assert!(
        rest.contains("data: last")
            && rest.contains("0\r\n\r\nHTTP/1.1 200")
            && rest.ends_with("next"),
        "{rest}"
    );
    served.await.unwrap().unwrap();
    drop(on_drop);

    // The client leaving after events have flowed drops the stream.
    let (mut client, server, _, _) = counted_pipe();
    let (frames, on_drop, served) = serve_stream(server, &drain);
    let mut seen = ask_stream(&mut client).await;
    for i in 0..5 {
        frames.send(Bytes::from(format!("data: {i}\n\n"))).unwrap();
        read_until(&mut client, &mut seen, &format!("data: {i}\n\n\r\n")).await;
    }
    drop(client);
    tokio::time::timeout(WAIT, on_drop)
        .await
        .expect("the stream outlived its client")
        .unwrap_err();
    served.await.unwrap().unwrap();
    drop(frames);
}

#[tokio::test]
async fn the_client_leaving_drops_the_response_whether_streaming_or_awaited() {
    // Streaming: the body is dropped once the client closes.
    let (mut client, drain, frames, on_drop, served) = stream_requested().await;
    let mut seen = Vec::new();
    read_until(&mut client, &mut seen, "\r\n\r\n").await;
    drop(client);
    tokio::time::timeout(WAIT, on_drop)
        .await
        .unwrap()
        .unwrap_err();
    served.await.unwrap().unwrap();
    drop(frames);

    // Awaited: the handler's future is dropped before it answers.
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    let (dropped, on_drop) = oneshot::channel::<()>();
    let guard = std::sync::Mutex::new(Some(dropped));
    let served = serve_pipe(server, &drain, move |_| {
        let guard = guard.lock().unwrap().take();
        async move {
            let _guard = guard;
            std::future::pending::<Response<ResponseBody>>().await
        }
    });
    client
        .write_all(b"GET /w HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::task::yield_now().await;
    drop(client);
    tokio::time::timeout(WAIT, on_drop)
        .await
        .unwrap()
        .unwrap_err();
    served.await.unwrap().unwrap();
}

#[tokio::test]
async fn an_unread_body_head_requests_and_http10_clients_get_the_framing_they_need() {
    // A body the handler did not read: the connection closes after the answer.
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    let drain = Drain::new();
    let served = serve_pipe(server, &drain, |_| async {
        Response::new(Full::new(Bytes::from("ignored")).boxed_unsync())
    });
    client
        .write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\npartial")
        .await
        .unwrap();
    let all = read_to_end(&mut client).await;
    assert!(
        all.contains("connection: close\r\n") && all.ends_with("ignored"),
        "{all}"
    );
    served.await.unwrap().unwrap();

    // HEAD: the length, no body, and the connection stays for the next request.
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    let _served = serve_pipe(server, &drain, echo);
    client
        .write_all(b"HEAD /h HTTP/1.1\r\nHost: x\r\n\r\nGET /g HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut seen = Vec::new();
    read_until(&mut client, &mut seen, "GET /g []").await;
    let text = String::from_utf8_lossy(&seen);
    assert!(
        !text.contains("HEAD /h"),
        "a HEAD answer carried a body: {text}"
    );
    assert!(text.contains("content-length: 9\r\n"), "{text}");

    // HTTP/1.0 with a stream: no chunked coding, the close ends the body.
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    let (frames, _on_drop, served) = serve_stream(server, &drain);
    client
        .write_all(b"GET /old HTTP/1.0\r\n\r\n")
        .await
        .unwrap();
    frames.send(Bytes::from("data: 1\n\n")).unwrap();
    drop(frames);
    let all = read_to_end(&mut client).await;
    assert!(!all.contains("transfer-encoding"), "{all}");
    assert!(
        all.contains("connection: close\r\n") && all.ends_with("\r\n\r\ndata: 1\n\n"),
        "{all}"
    );
    served.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_drain_closes_idle_connections_and_lets_the_request_in_flight_finish() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let drain = Drain::new();
    let (answer, answered) = oneshot::channel::<()>();
    let answered = Arc::new(tokio::sync::Mutex::new(Some(answered)));
    let mut tasks = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..2 {
        clients.push(TcpStream::connect(addr).await.unwrap());
        let (socket, _) = listener.accept().await.unwrap();
        let answered = Arc::clone(&answered);
        tasks.push(tokio::spawn(serve(
            socket,
            BytesMut::new(),
            settings(),
            drain.watcher(),
            move |request| {
                let answered = Arc::clone(&answered);
                async move {
                    if request.uri().path() == "/slow" {
                        let wait = answered.lock().await.take();
                        if let Some(wait) = wait {
                            let _ = wait.await;
                        }
                    }
                    echo(request).await
                }
            },
            || {},
        )));
    }
    let (mut idle, mut busy) = (clients.remove(0), clients.remove(0));
    idle.write_all(b"GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut seen = Vec::new();
    read_until(&mut idle, &mut seen, "GET /first []").await;
    busy.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    while answered.lock().await.is_some() {
        tokio::task::yield_now().await;
    }
    let shutdown = tokio::spawn(drain.shutdown());
    // The idle keep-alive connection is closed at once.
    assert_eq!(read_to_end(&mut idle).await, "");
    // The request in flight is answered, told the connection closes, and closed.
    answer.send(()).unwrap();
    let all = read_to_end(&mut busy).await;
    assert!(
        all.contains("connection: close\r\n") && all.ends_with("GET /slow []"),
        "{all}"
    );
    tokio::time::timeout(WAIT, shutdown).await.unwrap().unwrap();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_keep_alive_connection_without_a_next_head_is_closed_after_the_header_timeout() {
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    let drain = Drain::new();
    let timeouts = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&timeouts);
    let served = tokio::spawn(serve(
        server,
        BytesMut::new(),
        settings(),
        drain.watcher(),
        echo,
        move || {
            counted.fetch_add(1, Ordering::SeqCst);
        },
    ));
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /")
        .await
        .unwrap();
    let mut seen = Vec::new();
    read_until(&mut client, &mut seen, "GET / []").await;
    // Half a head, then nothing.
    tokio::time::advance(settings().header_timeout + Duration::from_millis(1)).await;
    served.await.unwrap().unwrap();
    assert_eq!(timeouts.load(Ordering::SeqCst), 1);
}

#[test]
fn size_lines_are_lowercase_hex() {
    let mut buf = [0u8; 20];
    assert_eq!(size_line(&mut buf, 0), b"0\r\n");
    assert_eq!(size_line(&mut buf, 10), b"a\r\n");
    assert_eq!(size_line(&mut buf, 300), b"12c\r\n");
    assert_eq!(size_line(&mut buf, 65536), b"10000\r\n");
    assert_eq!(size_line(&mut buf, usize::MAX), b"ffffffffffffffff\r\n");
}
