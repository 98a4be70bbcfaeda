//! The cap on requests answered at once: over the whole gateway (`[limits] max_streams`) and
//! per route (`[routes.limits] max_streams`). Every authenticated request, whatever its face (an
//! AG-UI or HAI stream, any AAP endpoint), takes one permit of each before its face does
//! anything for it (`front`: CORS preflights and 401s take none, so unauthenticated clients
//! cannot hold permits); a request beyond either cap is answered at once with 503 `OVERLOADED`
//! and `Retry-After`.
//!
//! The permit is carried by the response body ([`Admitted`]), not by the handler's future: a
//! stream is open for as long as its body is, and letting go at the response headers (as
//! tower's concurrency limit does) would not bound streams at all. It is given back when the
//! body gives its last frame (before that frame is written, so a client that waits for one
//! answer before its next request never finds its own place still taken), when the answer has
//! no body, or when the body is dropped because the client went away.
//!
//! Routes sharing a path (the agents of one AAP face) share one count, bounded by the
//! smallest `max_streams` among them, since a request to the face is counted before it names
//! an agent.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Response;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::Route;
use crate::error::{ErrorCode, Failure};
use crate::http::response::ResponseBody;
use crate::telemetry::metrics::{Metrics, Rejection};

/// The stream caps of a gateway. See the module docs.
pub(super) struct Streams {
    global: Arc<Semaphore>,
    max_streams: usize,
    /// Per route path (trailing `/` trimmed), for the routes that set their own cap.
    routes: HashMap<String, (Arc<Semaphore>, usize)>,
    metrics: Arc<Metrics>,
}

impl Streams {
    pub fn new(max_streams: usize, routes: &[Route], metrics: &Arc<Metrics>) -> Streams {
        Streams {
            global: Arc::new(Semaphore::new(max_streams.min(Semaphore::MAX_PERMITS))),
            max_streams,
            routes: HashMap::new(),
            metrics: Arc::clone(metrics),
        }
        .for_routes(routes)
    }

    /// The caps of a reloaded configuration's `routes`: the global count and the count of every
    /// route whose cap is unchanged carry over, so the requests still open under the old
    /// configuration keep counting against them; a route with a new cap starts a new count.
    pub fn for_routes(&self, routes: &[Route]) -> Streams {
        let mut caps: HashMap<String, usize> = HashMap::new();
        for route in routes {
            if let Some(cap) = route.limits.max_streams {
                let slot = caps.entry(path_key(&route.path)).or_insert(cap);
                *slot = (*slot).min(cap);
            }
        }
        Streams {
            global: Arc::clone(&self.global),
            max_streams: self.max_streams,
            routes: caps
                .into_iter()
                .map(|(path, cap)| {
                    let semaphore = match self.routes.get(&path) {
                        Some((same, old_cap)) if *old_cap == cap => Arc::clone(same),
                        _ => Arc::new(Semaphore::new(cap.min(Semaphore::MAX_PERMITS))),
                    };
                    (path, (semaphore, cap))
                })
                .collect(),
            metrics: Arc::clone(&self.metrics),
        }
    }

    /// A permit for one request on `route`, or the refusal.
    pub fn admit(&self, route: &Route) -> Result<StreamPermit, Failure> {
        let route_permit = match self.routes.get(route.path.trim_end_matches('/')) {
            Some((semaphore, cap)) => match Arc::clone(semaphore).try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    self.metrics.rejected(Rejection::RouteMaxStreams);
                    return Err(Failure::new(
                        ErrorCode::Overloaded,
                        format!(
                            "{} requests are open on {} already (its max_streams); retry later",
                            cap, route.path
                        ),
                    ));
                }
            },
            None => None,
        };
        let Ok(global) = Arc::clone(&self.global).try_acquire_owned() else {
            self.metrics.rejected(Rejection::MaxStreams);
            return Err(Failure::new(
                ErrorCode::Overloaded,
                format!(
                    "the gateway has {} requests open already (max_streams); retry later",
                    self.max_streams
                ),
            ));
        };
        let gauge = self.metrics.streams_admitted(&route.path);
        gauge.inc();
        Ok(StreamPermit {
            _global: global,
            _route: route_permit,
            gauge,
        })
    }
}

/// A route path as the caps are keyed (trailing `/` trimmed); `admit` looks the trimmed `&str`
/// up without allocating.
fn path_key(path: &str) -> String {
    path.trim_end_matches('/').to_owned()
}

/// One admitted request's place under the caps; given back on drop.
#[derive(Debug)]
pub(super) struct StreamPermit {
    _global: OwnedSemaphorePermit,
    _route: Option<OwnedSemaphorePermit>,
    gauge: Gauge,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// A response body holding a guard — its request's [`StreamPermit`], or its place among the
/// connection's open requests — until the body ends or is dropped.
pub(super) struct Admitted<G> {
    /// Declared first, so dropped first: the place is free by the time the upstream sees its
    /// connection close.
    guard: Option<G>,
    inner: ResponseBody,
}

/// `response` with `guard` carried by its body.
pub(super) fn hold<G: Send + Unpin + 'static>(
    response: Response<ResponseBody>,
    guard: G,
) -> Response<ResponseBody> {
    response.map(|inner| {
        // Nothing left to send (a 204, an empty 200): the request is over already.
        let guard = (!inner.is_end_stream()).then_some(guard);
        Admitted { guard, inner }.boxed_unsync()
    })
}

impl<G: Unpin> Body for Admitted<G> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || (polled.is_ready() && self.inner.is_end_stream())
        {
            // The last frame is on its way: the place is free before the client can see it.
            self.guard = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{load, Overrides};
    use http_body_util::Full;

    fn one_route_capped_at(max_streams: u64) -> (Streams, Route, Arc<Metrics>) {
        let mut overrides = Overrides {
            upstream: Some(crate::config::BUILTIN_DEMO.into()),
            ..Overrides::default()
        };
        overrides.limits.max_streams = Some(toml::Spanned::new(0..0, max_streams));
        let config = load(None, &overrides).unwrap();
        let metrics = Metrics::new();
        let streams = Streams::new(config.admission.max_streams, &config.routes, &metrics);
        (streams, config.routes[0].clone(), metrics)
    }

    fn response() -> Response<ResponseBody> {
        Response::new(Full::new(Bytes::from_static(b"x")).boxed_unsync())
    }

    /// A body of `frames` frames, which knows when it has no more.
    struct Frames(Vec<Bytes>);

    impl Body for Frames {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Ready((!self.0.is_empty()).then(|| Ok(Frame::data(self.0.remove(0)))))
        }

        fn is_end_stream(&self) -> bool {
            self.0.is_empty()
        }
    }

    fn streamed(frames: usize) -> Response<ResponseBody> {
        let frames = vec![Bytes::from_static(b"x"); frames];
        Response::new(Frames(frames).boxed_unsync())
    }

    #[test]
    fn a_reload_keeps_the_global_count_and_the_counts_of_unchanged_route_caps() {
        let (streams, mut route, _metrics) = one_route_capped_at(2);
        route.limits.max_streams = Some(1);
        let first = streams.for_routes(std::slice::from_ref(&route));
        let held = first.admit(&route).unwrap();
        let same = first.for_routes(std::slice::from_ref(&route));
        assert!(
            same.admit(&route).is_err(),
            "the request open before the reload still counts against the unchanged cap"
        );
        route.limits.max_streams = Some(5);
        let wider = same.for_routes(std::slice::from_ref(&route));
        let second = wider
            .admit(&route)
            .expect("a changed cap starts a count of its own");
        let refused = wider.admit(&route).unwrap_err();
        assert!(
            refused.message.contains("max_streams") && refused.message.contains("the gateway"),
            "the global cap of 2 counts both generations: {refused}"
        );
        drop((held, second));
        assert!(wider.admit(&route).is_ok());
    }

    #[tokio::test]
    async fn the_permit_lives_as_long_as_the_body_and_no_longer() {
        let (streams, route, metrics) = one_route_capped_at(1);
        let held = hold(streamed(2), streams.admit(&route).unwrap());
        let refused = streams.admit(&route).unwrap_err();
        assert_eq!(refused.code, ErrorCode::Overloaded);
        assert!(refused.message.contains("1 requests open"), "{refused}");
        let mut body = held.into_body();
        assert!(body.frame().await.is_some());
        assert!(streams.admit(&route).is_err(), "still streaming");
        assert!(body.frame().await.is_some());
        let last = streams
            .admit(&route)
            .expect("released once the last frame is given, before it is written");
        drop(last);
        assert!(body.frame().await.is_none());
        let whole = hold(response(), streams.admit(&route).unwrap());
        assert!(whole.into_body().frame().await.is_some());
        drop(streams.admit(&route).expect("one frame, the last"));
        let empty = hold(streamed(0), streams.admit(&route).unwrap());
        drop(streams.admit(&route).expect("no body: free at once"));
        drop(empty);
        let again = streams.admit(&route).unwrap();
        drop(hold(response(), again));
        assert!(
            streams.admit(&route).is_ok(),
            "released when the body is dropped unread"
        );
        let text = metrics.encode();
        assert!(
            text.contains("dialect_proxy_admission_rejections_total{reason=\"max_streams\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("dialect_proxy_streams_admitted{route=\"/\"} 0"),
            "{text}"
        );
    }
}
