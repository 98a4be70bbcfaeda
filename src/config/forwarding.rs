//! Forwarding: whose forwarding headers the gateway believes, and which client headers a route
//! passes on to its upstream (`http::headers` applies both).
//!
//! - `trusted_proxies` (top level; IP addresses or CIDR ranges, default none): a connection
//!   from one of them keeps its `X-Forwarded-For`, `Forwarded`, `X-Real-IP` and other
//!   `X-Forwarded-*` headers, and the gateway appends its peer to them; from anyone else they
//!   are dropped and the gateway's own replace them.
//! - `forward_cookies` (route, default `false`): `Cookie` reaches the upstream only when true.
//! - `forward_headers` (route, header names, default: not set, every end-to-end header passes):
//!   when set, only the listed client headers pass. The gateway's own `Content-Type`, `Accept`,
//!   `Accept-Encoding` and forwarding headers are set whatever the list says; `Cookie` is
//!   governed by `forward_cookies` alone.

use std::net::IpAddr;

use http::HeaderName;
use ipnet::IpNet;
use toml::Spanned;

use super::problems::Problems;

/// The peers whose forwarding headers are believed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub fn new(ranges: Vec<IpNet>) -> TrustedProxies {
        TrustedProxies(ranges)
    }

    /// True when `peer` is in one of the ranges (an IPv4 peer seen as `::ffff:a.b.c.d` on a
    /// dual-stack listener counts as its IPv4 address).
    pub fn contains(&self, peer: IpAddr) -> bool {
        let peer = peer.to_canonical();
        self.0.iter().any(|range| range.contains(&peer))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Which of a client's headers a route forwards.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Forwarding {
    /// `Cookie` is forwarded.
    pub forward_cookies: bool,
    /// When set, the only client headers forwarded (names in lower case).
    pub forward_headers: Option<Vec<HeaderName>>,
}

/// `trusted_proxies`, checked: every entry an IP address or a CIDR range.
pub(super) fn trusted_proxies(
    p: &mut Problems,
    key: &str,
    raw: &Option<Vec<Spanned<String>>>,
) -> TrustedProxies {
    let ranges = raw
        .iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, entry)| {
            let text = entry.get_ref().trim();
            let parsed = text
                .parse::<IpNet>()
                .map(|net| net.trunc())
                .or_else(|_| text.parse::<IpAddr>().map(IpNet::from));
            parsed
                .map_err(|_| {
                    p.at(
                        entry.span(),
                        &format!("{key}[{i}]"),
                        format!("{text:?} is not an IP address or a CIDR range like 10.0.0.0/8"),
                    )
                })
                .ok()
        })
        .collect();
    TrustedProxies(ranges)
}

/// A route's `forward_cookies` and `forward_headers`, checked: every name a valid header name,
/// and `cookie` left to `forward_cookies`.
pub(super) fn forwarding(
    p: &mut Problems,
    key: &str,
    forward_cookies: bool,
    forward_headers: &Option<Vec<Spanned<String>>>,
) -> Forwarding {
    let forward_headers = forward_headers.as_ref().map(|names| {
        names
            .iter()
            .enumerate()
            .filter_map(|(i, name)| {
                let text = name.get_ref().trim();
                let at = format!("{key}[{i}]");
                match HeaderName::from_bytes(text.as_bytes()) {
                    Ok(header) if header == http::header::COOKIE => {
                        p.at(
                            name.span(),
                            &at,
                            "cookies are forwarded by forward_cookies = true, not by this list"
                                .into(),
                        );
                        None
                    }
                    Ok(header) => Some(header),
                    Err(_) => {
                        p.at(name.span(), &at, format!("{text:?} is not a header name"));
                        None
                    }
                }
            })
            .collect()
    });
    Forwarding {
        forward_cookies,
        forward_headers,
    }
}
