//! Redis away, hanging, late, behind a password or TLS.

use super::*;

/// Every log line written while the guard lives, on this thread (the tests' runtime runs the
/// store's tasks on it too).
#[derive(Clone, Default)]
struct Logs(Arc<std::sync::Mutex<Vec<u8>>>);

impl Logs {
    fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let sink = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(move || sink.clone())
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Tries `op` until it succeeds, for at most `bound`.
async fn eventually<T, F, Fut>(bound: Duration, mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let started = Instant::now();
    loop {
        match op().await {
            Ok(value) => return value,
            Err(error) => {
                assert!(started.elapsed() < bound, "still failing: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Whether `error` is how a store that cannot be reached fails.
fn unreachable(error: &StoreError) -> bool {
    matches!(error, StoreError::Unavailable(_) | StoreError::Timeout(_))
}

#[tokio::test]
async fn redis_going_away_fails_requests_in_time_and_its_return_heals_the_store() {
    let (logs, _guard) = Logs::capture();
    let mut server = RedisServer::start();
    let s = Timed::new(connect(&server, SessionLimits::default()).await, TIMEOUT);
    let id = add(&s, &alice(), Vec::new()).await.unwrap();
    server.stop();
    for _ in 0..3 {
        let started = Instant::now();
        let error = s.get(&id, &alice()).await.unwrap_err();
        assert!(unreachable(&error), "{error}");
        assert!(started.elapsed() <= TIMEOUT + Duration::from_millis(500));
        let error = add(&s, &alice(), Vec::new()).await.unwrap_err();
        assert!(unreachable(&error), "{error}");
    }
    server.restart();
    // The same store, without anything done to it, serves again.
    let id = eventually(Duration::from_secs(10), || add(&s, &ALICE, Vec::new())).await;
    assert!(s.get(&id, &alice()).await.unwrap().is_some());
    // The loss is logged once, and the return.
    let log = logs.text();
    assert_eq!(log.matches("lost the connection").count(), 1, "{log}");
    let lost = log.find("lost the connection").unwrap();
    assert!(
        log[lost..].contains("connected to the Redis session store"),
        "{log}"
    );
}

#[tokio::test]
async fn a_redis_that_hangs_fails_requests_within_the_timeout() {
    let server = RedisServer::start();
    let timeout = Duration::from_secs(1);
    let s = Timed::new(
        RedisStore::connect(&settings(server.url()), SessionLimits::default(), timeout)
            .await
            .unwrap(),
        timeout,
    );
    let id = add(&s, &alice(), Vec::new()).await.unwrap();
    server.freeze(true);
    let started = Instant::now();
    let error = s.begin_turn(&id, &alice()).await.unwrap_err();
    assert!(unreachable(&error), "{error}");
    assert!(started.elapsed() < timeout + Duration::from_millis(400));
    // Seen as down: the next request does not wait.
    let started = Instant::now();
    let error = s.get(&id, &alice()).await.unwrap_err();
    assert!(unreachable(&error), "{error}");
    assert!(started.elapsed() < Duration::from_millis(100), "{error}");
    server.freeze(false);
    eventually(Duration::from_secs(10), || s.get(&id, &ALICE)).await;
}

#[tokio::test]
async fn a_redis_not_there_at_start_does_not_stop_the_gateway() {
    let port = server::free_port();
    let s = RedisStore::connect(
        &settings(format!("redis://127.0.0.1:{port}")),
        SessionLimits::default(),
        TIMEOUT,
    )
    .await
    .expect("starts without Redis");
    let started = Instant::now();
    match add(&s, &alice(), Vec::new()).await {
        Err(StoreError::Unavailable(reason)) => {
            assert!(reason.contains("not connected"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_millis(100), "fails fast");
    let _server = RedisServer::on(port, &[]);
    eventually(Duration::from_secs(10), || add(&s, &ALICE, Vec::new())).await;
}

#[tokio::test]
async fn a_password_comes_from_password_env_and_is_never_shown() {
    let (logs, _guard) = Logs::capture();
    let server = RedisServer::start_with(&["--requirepass", "s3cret-pw"]);
    let var = format!("DP_TEST_REDIS_PASSWORD_{}", server.port);
    let mut with_env = settings(server.url());
    with_env.password_env = Some(var.clone());
    // Unset: refused at start, naming the variable.
    let error = RedisStore::connect(&with_env, SessionLimits::default(), TIMEOUT)
        .await
        .unwrap_err();
    assert!(error.to_string().contains(&var), "{error}");
    std::env::set_var(&var, "s3cret-pw");
    let s = RedisStore::connect(&with_env, SessionLimits::default(), TIMEOUT)
        .await
        .unwrap();
    let id = add(&s, &alice(), Vec::new()).await.unwrap();
    assert!(s.get(&id, &alice()).await.unwrap().is_some());
    // A password in the URL is used as is.
    let in_url = settings(format!("redis://:s3cret-pw@127.0.0.1:{}", server.port));
    let t = RedisStore::connect(&in_url, SessionLimits::default(), TIMEOUT)
        .await
        .unwrap();
    assert!(t.get(&id, &alice()).await.unwrap().is_some());
    // Refused credentials stop the start, and no message holds the password.
    for url in [
        format!("redis://:wrong-pw@127.0.0.1:{}", server.port),
        server.url(),
    ] {
        let error = RedisStore::connect(&settings(url), SessionLimits::default(), TIMEOUT)
            .await
            .unwrap_err();
        assert!(error.to_string().contains("credentials"), "{error}");
        assert!(!error.to_string().contains("wrong-pw"), "{error}");
    }
    let error = RedisStore::connect(
        &settings("redis://:s3cret-pw@127.0.0.1:notaport".into()),
        SessionLimits::default(),
        TIMEOUT,
    )
    .await
    .unwrap_err();
    assert!(!error.to_string().contains("s3cret"), "{error}");
    std::env::remove_var(&var);
    // Nor a log line, nor the store's debug form.
    let log = logs.text();
    assert!(
        !log.contains("s3cret") && !log.contains("wrong-pw"),
        "{log}"
    );
    assert!(!format!("{s:?}{t:?}").contains("s3cret"));
}

#[tokio::test]
async fn rediss_connects_with_the_gateways_tls_provider() {
    let _roots = TLS_ROOTS.lock().await;
    let dir = pki("pki", "localhost");
    let path = |name: &str| dir.join(name).display().to_string();
    let server = RedisServer::tls(&path("cert.pem"), &path("key.pem"), &path("ca.pem"));
    // The system's trust roots, as the client reads them, are this test's CA.
    std::env::set_var("SSL_CERT_FILE", path("ca.pem"));
    let s = RedisStore::connect(
        &settings(format!("rediss://localhost:{}", server.port)),
        SessionLimits::default(),
        TIMEOUT,
    )
    .await
    .unwrap();
    let id = eventually(Duration::from_secs(5), || add(&s, &ALICE, Vec::new())).await;
    std::env::remove_var("SSL_CERT_FILE");
    assert!(s.get(&id, &alice()).await.unwrap().is_some());
    let _ = std::fs::remove_dir_all(&dir);
}
