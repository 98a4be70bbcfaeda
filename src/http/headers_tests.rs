use super::*;

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (k, v) in pairs {
        map.append(HeaderName::from_static(k), HeaderValue::from_static(v));
    }
    map
}

fn peer(addr: &str) -> Option<SocketAddr> {
    Some(addr.parse().unwrap())
}

fn policy<'a>(route: &'a Forwarding, peer: Option<SocketAddr>, trusted: bool) -> ForwardPolicy<'a> {
    ForwardPolicy {
        peer,
        trusted_peer: trusted,
        proto: Proto::Http,
        host: Some("gateway.example:8080"),
        route,
    }
}

fn all<'m>(map: &'m HeaderMap, name: &str) -> Vec<&'m str> {
    map.get_all(name)
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect()
}

#[test]
fn end_to_end_headers_pass_and_hop_by_hop_do_not() {
    let client = headers(&[
        ("authorization", "Bearer k"),
        ("x-trace-id", "abc"),
        ("connection", "keep-alive, x-drop-me"),
        ("x-drop-me", "1"),
        ("keep-alive", "timeout=5"),
        ("te", "trailers"),
        ("proxy-authorization", "Basic x"),
        ("host", "gateway:8080"),
        ("content-length", "12"),
        ("accept-encoding", "gzip"),
        ("expect", "100-continue"),
        ("max-forwards", "3"),
    ]);
    let route = Forwarding::default();
    let out = upstream_request_headers(&client, &policy(&route, peer("10.0.0.7:5555"), false));
    assert_eq!(out["authorization"], "Bearer k");
    assert_eq!(out["x-trace-id"], "abc");
    for gone in [
        "connection",
        "x-drop-me",
        "keep-alive",
        "te",
        "proxy-authorization",
        "host",
        "content-length",
        "expect",
        "max-forwards",
    ] {
        assert!(!out.contains_key(gone), "{gone} must not be forwarded");
    }
    assert_eq!(out["accept-encoding"], "identity");
    assert_eq!(out["accept"], "text/event-stream");
    assert_eq!(out["content-type"], "application/json");
}

/// What a client may claim about where it comes from.
fn claims() -> HeaderMap {
    headers(&[
        ("x-forwarded-for", "1.2.3.4"),
        ("x-forwarded-for", "5.6.7.8"),
        ("forwarded", "for=_hidden;by=_proxy"),
        ("x-real-ip", "1.2.3.4"),
        ("x-forwarded-proto", "https"),
        ("x-forwarded-host", "bank.example"),
        ("x-forwarded-client-cert", "Hash=abc;Subject=\"CN=admin\""),
    ])
}

#[test]
fn an_untrusted_peer_claims_nothing() {
    let route = Forwarding::default();
    let out = upstream_request_headers(&claims(), &policy(&route, peer("10.0.0.7:5555"), false));
    assert_eq!(all(&out, "x-forwarded-for"), ["10.0.0.7"]);
    assert_eq!(all(&out, "forwarded"), ["for=\"10.0.0.7:5555\";proto=http"]);
    assert_eq!(all(&out, "x-forwarded-proto"), ["http"]);
    assert_eq!(all(&out, "x-forwarded-host"), ["gateway.example:8080"]);
    assert!(!out.contains_key("x-real-ip"));
    assert!(!out.contains_key("x-forwarded-client-cert"));
}

#[test]
fn a_trusted_peer_keeps_its_claims_and_is_appended() {
    let route = Forwarding::default();
    let out = upstream_request_headers(&claims(), &policy(&route, peer("10.0.0.7:5555"), true));
    assert_eq!(all(&out, "x-forwarded-for"), ["1.2.3.4, 5.6.7.8, 10.0.0.7"]);
    assert_eq!(
        all(&out, "forwarded"),
        ["for=_hidden;by=_proxy, for=\"10.0.0.7:5555\";proto=http"]
    );
    assert_eq!(all(&out, "x-real-ip"), ["1.2.3.4"]);
    assert_eq!(all(&out, "x-forwarded-proto"), ["https"]);
    assert_eq!(all(&out, "x-forwarded-host"), ["bank.example"]);
    assert_eq!(
        all(&out, "x-forwarded-client-cert"),
        ["Hash=abc;Subject=\"CN=admin\""]
    );
}

#[test]
fn ipv6_peers_are_quoted_in_forwarded() {
    let route = Forwarding::default();
    let mut p = policy(&route, peer("[2001:db8:cafe::17]:4711"), false);
    p.proto = Proto::Https;
    let out = upstream_request_headers(&HeaderMap::new(), &p);
    assert_eq!(all(&out, "x-forwarded-for"), ["2001:db8:cafe::17"]);
    assert_eq!(
        all(&out, "forwarded"),
        ["for=\"[2001:db8:cafe::17]:4711\";proto=https"]
    );
    assert_eq!(all(&out, "x-forwarded-proto"), ["https"]);
    // An IPv4 client on a dual-stack listener is named by its IPv4 address.
    let out = upstream_request_headers(
        &HeaderMap::new(),
        &policy(&route, peer("[::ffff:192.0.2.9]:80"), false),
    );
    assert_eq!(all(&out, "x-forwarded-for"), ["192.0.2.9"]);
    assert_eq!(all(&out, "forwarded"), ["for=\"192.0.2.9:80\";proto=http"]);
}

#[test]
fn without_a_peer_nothing_is_appended() {
    let route = Forwarding::default();
    let out = upstream_request_headers(&claims(), &policy(&route, None, false));
    assert!(!out.contains_key("x-forwarded-for"));
    assert!(!out.contains_key("forwarded"));
    assert_eq!(all(&out, "x-forwarded-proto"), ["http"]);
}

#[test]
fn cookies_pass_only_when_the_route_says_so() {
    let client = headers(&[("cookie", "session=s1"), ("cookie", "theme=dark")]);
    let off = Forwarding::default();
    let out = upstream_request_headers(&client, &policy(&off, None, false));
    assert!(!out.contains_key("cookie"));
    let on = Forwarding {
        forward_cookies: true,
        forward_headers: None,
    };
    let out = upstream_request_headers(&client, &policy(&on, None, false));
    assert_eq!(all(&out, "cookie"), ["session=s1", "theme=dark"]);
}

#[test]
fn an_allowlist_passes_only_what_it_names() {
    let client = headers(&[
        ("authorization", "Bearer k"),
        ("x-trace-id", "abc"),
        ("x-tenant", "t1"),
        ("cookie", "session=s1"),
        ("content-type", "text/plain"),
        ("x-forwarded-for", "1.2.3.4"),
    ]);
    let route = Forwarding {
        forward_cookies: true,
        forward_headers: Some(vec![
            HeaderName::from_static("x-tenant"),
            HeaderName::from_static("content-type"),
        ]),
    };
    let out = upstream_request_headers(&client, &policy(&route, peer("10.0.0.7:1"), true));
    assert_eq!(all(&out, "x-tenant"), ["t1"]);
    assert!(!out.contains_key("authorization"), "not listed");
    assert!(!out.contains_key("x-trace-id"), "not listed");
    assert_eq!(
        all(&out, "cookie"),
        ["session=s1"],
        "forward_cookies decides"
    );
    assert_eq!(all(&out, "content-type"), ["application/json"]);
    assert_eq!(all(&out, "x-forwarded-for"), ["1.2.3.4, 10.0.0.7"]);
    let listed = Forwarding {
        forward_cookies: false,
        forward_headers: Some(vec![header::AUTHORIZATION]),
    };
    let out = upstream_request_headers(&client, &policy(&listed, None, false));
    assert_eq!(all(&out, "authorization"), ["Bearer k"]);
    assert!(!out.contains_key("cookie"));
    assert!(!out.contains_key("x-tenant"));
}

/// The hand-written IPv4 path writes what `Display` writes, at every octet width.
#[test]
fn addresses_are_written_as_display_writes_them() {
    let samples = [
        "0.0.0.0",
        "255.255.255.255",
        "10.0.0.7",
        "192.168.100.9",
        "1.20.255.0",
        "::1",
        "2001:db8::ff00:42:8329",
    ];
    for sample in samples {
        let ip: IpAddr = sample.parse().unwrap();
        let mut out = String::new();
        push_ip(&mut out, ip);
        assert_eq!(out, ip.to_string(), "{sample}");
    }
    for octet in 0..=255u8 {
        let ip = IpAddr::from([octet, 255 - octet, octet / 3, 9]);
        let mut out = String::new();
        push_ip(&mut out, ip);
        assert_eq!(out, ip.to_string());
    }
}
