//! The front of each route: what a request passes before its face sees it, built once per
//! route (per AAP face) at start-up as a tower service, outermost first:
//!
//! 1. **CORS** (`[routes.cors]`, tower-http's [`CorsLayer`]): a preflight (`OPTIONS` with
//!    `Origin` and `Access-Control-Request-Method`) is answered here, before authentication:
//!    `204` with the allow headers for a listed origin, `204` without them for any other.
//!    Every other response to a listed origin — streams and refusals alike, since they all
//!    come back through this layer — carries `Access-Control-Allow-Origin`; with a list of
//!    origins every response carries `Vary: origin` (with `"*"` there is nothing to vary).
//!    The allowed methods are those the route serves. An `OPTIONS` that is no preflight goes
//!    on to the face (405), without CORS headers.
//! 2. **Authentication** (`[routes.auth]`, [`Authenticator`]): a request without a credential
//!    the route accepts is refused with 401 and its challenge; otherwise its [`Principal`]
//!    (the anonymous one on a route without `auth`) is recorded in the request span and put
//!    in the request's extensions.
//! 3. **Admission** (`max_streams`, [`admission`]): a permit held by the response body, or 503
//!    `OVERLOADED` — inside the CORS layer, so a page can read it and its `Retry-After`.
//! 4. **The face** (`Gateway::answer`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use crate::http::client_body::ClientBody;
use http::{header, Method, Request, Response, StatusCode};
use tower::util::BoxCloneSyncService;
use tower::{Layer, ServiceExt};
use tower_http::cors::{AllowOrigin, CorsLayer};

use super::{admission, refusal, Gateway};
use crate::auth::{AuthError, Authenticator};
use crate::config::{AllowedOrigins, Cors, Route};
use crate::dialect::Dialect;
use crate::error::{ErrorCode, Failure};
use crate::http::response::ResponseBody;
use crate::session::Principal;
use crate::telemetry::metrics::Rejection;

/// One route's front, as a cloneable service.
pub(super) type Front =
    BoxCloneSyncService<Request<ClientBody>, Response<ResponseBody>, Infallible>;

/// The fronts of every route, by route path (AAP routes sharing a path share one).
pub(super) fn fronts(gateway: &Arc<Gateway>) -> HashMap<String, Front> {
    let mut fronts = HashMap::new();
    for (index, route) in gateway.config.routes.iter().enumerate() {
        fronts
            .entry(route.path.clone())
            .or_insert_with(|| front(Arc::clone(gateway), index));
    }
    fronts
}

fn front(gateway: Arc<Gateway>, index: usize) -> Front {
    let route = &gateway.config.routes[index];
    let authenticator = route.auth.as_ref().map(|a| Arc::new(Authenticator::new(a)));
    let cors = route.cors.clone();
    let methods = methods(route.client);
    let guarded = tower::service_fn(move |request: Request<ClientBody>| {
        let gateway = Arc::clone(&gateway);
        let authenticator = authenticator.clone();
        async move {
            let route = &gateway.config.routes[index];
            let response = match authenticate(authenticator.as_deref(), route, request).await {
                Ok(request) => admit_and_answer(&gateway, route, request).await,
                Err(error) => unauthorized(&gateway, route, &error),
            };
            Ok::<_, Infallible>(response)
        }
    });
    match cors {
        None => BoxCloneSyncService::new(guarded),
        Some(rules) => with_cors(&rules, methods, guarded),
    }
}

/// The methods a route serves, which preflights allow.
fn methods(client: Dialect) -> &'static [Method] {
    // A new dialect must choose here (no wildcard arm).
    match client {
        Dialect::AgUi | Dialect::Hai => &[Method::POST],
        Dialect::Aap => &[Method::GET, Method::POST, Method::DELETE],
    }
}

/// Step 2: the request with its principal, or why it has none.
async fn authenticate(
    authenticator: Option<&Authenticator>,
    route: &Route,
    mut request: Request<ClientBody>,
) -> Result<Request<ClientBody>, AuthError> {
    let principal = match authenticator {
        Some(authenticator) => authenticator.authenticate(request.headers()).await?,
        None => Principal::anonymous(),
    };
    tracing::Span::current().record("principal", tracing::field::display(&principal));
    tracing::trace!(route = %route.path, "authenticated");
    request.extensions_mut().insert(principal);
    Ok(request)
}

/// Step 3: a permit under `max_streams` (only authenticated requests take one, so a flood of
/// unauthenticated ones cannot hold them), carried by the response body; then the face.
async fn admit_and_answer(
    gateway: &Gateway,
    route: &Route,
    request: Request<ClientBody>,
) -> Response<ResponseBody> {
    match gateway.streams.admit(route) {
        Ok(permit) => admission::hold(gateway.answer(route, request).await, permit),
        Err(failure) => {
            gateway.metrics.refused(&route.path, failure.code.label());
            refusal::refused(route.client, failure.into())
        }
    }
}

/// The 401 of a request that is not authenticated, in the client's dialect.
fn unauthorized(gateway: &Gateway, route: &Route, error: &AuthError) -> Response<ResponseBody> {
    gateway.metrics.rejected(Rejection::Unauthenticated);
    gateway
        .metrics
        .refused(&route.path, ErrorCode::Unauthorized.label());
    let failure = Failure::new(ErrorCode::Unauthorized, error.to_string());
    let mut response = refusal::refused(route.client, failure.into());
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, error.challenge());
    response
}

/// Step 1 around `inner`.
fn with_cors<S>(rules: &Cors, methods: &[Method], inner: S) -> Front
where
    S: tower::Service<
            Request<ClientBody>,
            Response = Response<ResponseBody>,
            Error = Infallible,
            Future: Send + 'static,
        > + Clone
        + Send
        + Sync
        + 'static,
{
    let mut layer = CorsLayer::new()
        .allow_origin(match &rules.allow_origins {
            AllowedOrigins::Any => AllowOrigin::any(),
            AllowedOrigins::List(origins) => AllowOrigin::list(origins.iter().cloned()),
        })
        .allow_methods(methods.to_vec())
        .allow_credentials(rules.allow_credentials);
    if !rules.allow_headers.is_empty() {
        layer = layer.allow_headers(rules.allow_headers.clone());
    }
    if !rules.expose_headers.is_empty() {
        layer = layer.expose_headers(rules.expose_headers.clone());
    }
    if let Some(max_age) = rules.max_age {
        layer = layer.max_age(max_age);
    }
    let cors = layer.layer(inner.clone());
    BoxCloneSyncService::new(tower::service_fn(move |request: Request<ClientBody>| {
        let preflight = is_preflight(&request);
        let plain_options = request.method() == Method::OPTIONS && !preflight;
        let (cors, inner) = (cors.clone(), inner.clone());
        async move {
            // tower-http takes every OPTIONS for a preflight; one that is not goes on.
            if plain_options {
                return inner.oneshot(request).await;
            }
            let mut response = cors.oneshot(request).await?;
            if preflight {
                *response.status_mut() = StatusCode::NO_CONTENT;
            }
            if !response
                .headers()
                .contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN)
            {
                // An origin that is not listed learns nothing of what would be allowed.
                let headers = response.headers_mut();
                for name in [
                    header::ACCESS_CONTROL_ALLOW_METHODS,
                    header::ACCESS_CONTROL_ALLOW_HEADERS,
                    header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                    header::ACCESS_CONTROL_EXPOSE_HEADERS,
                    header::ACCESS_CONTROL_MAX_AGE,
                ] {
                    headers.remove(name);
                }
            }
            Ok(response)
        }
    }))
}

/// A CORS preflight: `OPTIONS` with `Origin` and `Access-Control-Request-Method`.
fn is_preflight<B>(request: &Request<B>) -> bool {
    request.method() == Method::OPTIONS
        && request.headers().contains_key(header::ORIGIN)
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}
