use super::*;
use crate::leader::tests::{PATH, failure, grant, next, respond};
use http::{Method, StatusCode};
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::time::Instant;

fn manager_with(flags: &[&str]) -> (Manager, crate::leader::tests::ApiServer) {
    let (service, server) = tower_test::mock::pair::<
        http::Request<kube::client::Body>,
        http::Response<kube::client::Body>,
    >();
    let flags: Vec<&str> = std::iter::once("--health-probe-bind-address=0")
        .chain(flags.iter().copied())
        .collect();
    let args = crate::args::tests::parse(&flags);
    let manager = Manager::with_client(args, Client::new(service, "default"))
        .leader_election_id("my-operator")
        .identity("me");
    (manager, server)
}

fn manager() -> Manager {
    manager_with(&[]).0
}

#[tokio::test(start_paused = true)]
async fn the_controllers_requests_time_out_at_the_flags_timeout() {
    let (manager, mut server) = manager_with(&["--api-request-timeout=2s"]);
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(manager.guard().client(), "default");
    let started = Instant::now();
    let getting = tokio::spawn(async move { api.get("cm").await });
    let _unanswered = server.next_request().await.unwrap();
    let error = crate::testing::within(getting).await.unwrap().unwrap_err();
    assert_eq!(started.elapsed(), Duration::from_secs(2), "{error}");
    assert!(error.to_string().contains("within 2s"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn the_first_signal_shuts_down_and_the_second_exits_with_status_1() {
    let (signals, received) = futures::channel::mpsc::unbounded();
    let token = CancellationToken::new();
    let handling = {
        let token = token.clone();
        tokio::spawn(async move { on_termination_signals(received, &token).await })
    };
    tokio::task::yield_now().await;
    assert!(!token.is_cancelled(), "nothing before a signal");

    signals.unbounded_send("SIGTERM").unwrap();
    crate::testing::within(token.cancelled()).await;
    tokio::task::yield_now().await;
    assert!(!handling.is_finished(), "a first signal does not exit");

    signals.unbounded_send("SIGINT").unwrap();
    assert_eq!(
        crate::testing::within(handling).await.unwrap(),
        Some(FORCED_EXIT_STATUS)
    );
    assert_eq!(FORCED_EXIT_STATUS, 1, "controller-runtime's status");
}

#[tokio::test(start_paused = true)]
async fn signals_that_end_ask_for_no_exit() {
    let token = CancellationToken::new();
    let once = futures::stream::iter(["SIGTERM"]);
    assert_eq!(
        crate::testing::within(on_termination_signals(once, &token)).await,
        None
    );
    assert!(token.is_cancelled());
}

/// SIGTERM and SIGINT sent to this process come out of `termination_signals`; once it
/// listens, they no longer kill the process.
#[cfg(unix)]
#[tokio::test]
async fn controllers_run_until_shutdown() {
    let manager = manager();
    let health = manager.health();
    let shutdown = CancellationToken::new();
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let controllers = vec![Registration::new(
        "appotp",
        move |ctx: ControllerContext| async move {
            ctx.ready.ready();
            started_tx.send(()).unwrap();
            ctx.shutdown.cancelled().await;
            Ok(())
        },
    )];
    let run = tokio::spawn(manager.run_until(controllers, shutdown.clone()));
    tokio::time::timeout(Duration::from_secs(5), started)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(health.readiness().0, StatusCode::OK);
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(health.liveness().0, StatusCode::OK);
}

#[tokio::test]
async fn a_failing_controller_stops_the_manager() {
    let manager = manager();
    let health = manager.health();
    let controllers = vec![
        Registration::new("broken", |_ctx: ControllerContext| async {
            Err(anyhow!("boom"))
        }),
        Registration::new("healthy", |ctx: ControllerContext| async move {
            ctx.shutdown.cancelled().await;
            Ok(())
        }),
    ];
    let error = tokio::time::timeout(
        Duration::from_secs(5),
        manager.run_until(controllers, CancellationToken::new()),
    )
    .await
    .unwrap()
    .unwrap_err();
    assert_eq!(format!("{error:#}"), "controller broken failed: boom");
    assert_eq!(health.liveness().0, StatusCode::INTERNAL_SERVER_ERROR);
}

#[tokio::test]
async fn a_controller_that_ends_early_is_an_error() {
    let controllers = vec![Registration::new(
        "quitter",
        |_ctx: ControllerContext| async { Ok(()) },
    )];
    let error = tokio::time::timeout(
        Duration::from_secs(5),
        manager().run_until(controllers, CancellationToken::new()),
    )
    .await
    .unwrap()
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "controller quitter stopped before shutdown"
    );
}

#[tokio::test]
async fn without_controllers_it_waits_for_shutdown() {
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager().run_until(Vec::new(), shutdown.clone()));
    tokio::task::yield_now().await;
    assert!(!run.is_finished());
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_namespaced_project_needs_a_namespace() {
    let error = manager()
        .require_watch_namespace()
        .run_until(Vec::new(), CancellationToken::new())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("--watch-namespace"), "{error}");
    let (manager, _) = manager_with(&["--watch-namespace=default"]);
    let shutdown = CancellationToken::new();
    shutdown.cancel();
    manager
        .require_watch_namespace()
        .run_until(Vec::new(), shutdown)
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn bad_leader_election_timings_are_refused_before_anything_starts() {
    let (manager, _) = manager_with(&["--leader-elect", "--leader-elect-renew-deadline=20s"]);
    // Bounded, on paused time: a manager that skipped the check would wait for the Lease
    // for ever, and fails the test at once instead.
    let error = crate::testing::within(manager.run_until(Vec::new(), CancellationToken::new()))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "the leader election lease duration (15s) must be longer than the renew deadline (20s)"
    );
}

/// Answers further API requests with a 500, as an API server that fails renewals; at most
/// 100 of them, so that a leader that retried without pause fails the test, not hangs it.
fn fail_every_request(mut server: crate::leader::tests::ApiServer) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        for _ in 0..100 {
            match tokio::time::timeout(Duration::from_secs(60), server.next_request()).await {
                Ok(Some((_, send))) => respond(send, 500, &failure(500)),
                _ => return,
            }
        }
        panic!("the leader sent more than 100 requests: it retries without pause");
    })
}

/// A controller that records that it ran and that it was stopped.
fn watched(started: Arc<AtomicBool>, stopped: Arc<AtomicBool>) -> Registration {
    Registration::new("appotp", move |ctx: ControllerContext| async move {
        started.store(true, Ordering::SeqCst);
        ctx.shutdown.cancelled().await;
        stopped.store(true, Ordering::SeqCst);
        Ok(())
    })
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_cannot_renew_stops_its_controllers_and_fails() {
    let (manager, mut server) =
        manager_with(&["--leader-elect", "--leader-election-namespace=operators"]);
    let health = manager.health();
    let metrics = manager.metrics();
    let (started, stopped) = (Arc::default(), Arc::default());
    let run = tokio::spawn(manager.run_until(
        vec![watched(Arc::clone(&started), Arc::clone(&stopped))],
        CancellationToken::new(),
    ));
    grant(&mut server).await;
    let acquired = Instant::now();
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(
        started.load(Ordering::SeqCst),
        "the leader runs its controllers"
    );
    assert!(metrics.encode().contains("leader_election_master_status 1"));

    // The API server fails every renewal from now on.
    let mut failing = fail_every_request(server);
    // The stub fails only when the leader retried without pause.
    let error = tokio::select! {
        run = tokio::time::timeout(Duration::from_secs(60), run) => {
            run.expect("the manager stops").unwrap().unwrap_err()
        }
        Err(stub) = &mut failing => panic!("the API server stub failed: {stub:?}"),
    };
    assert_eq!(
        error.to_string(),
        "lost the leader election Lease operators/my-operator: it was not renewed within 10s"
    );
    assert!(
        stopped.load(Ordering::SeqCst),
        "the controllers were stopped"
    );
    assert_eq!(
        acquired.elapsed(),
        Duration::from_secs(10),
        "at the renew deadline"
    );
    assert_eq!(health.liveness().0, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(metrics.encode().contains("leader_election_master_status 0"));
    failing.abort();
}

#[tokio::test(start_paused = true)]
async fn a_controller_that_ignores_the_stop_is_abandoned_before_the_lease_expires() {
    let (manager, mut server) =
        manager_with(&["--leader-elect", "--leader-election-namespace=operators"]);
    let stubborn = Registration::new("stubborn", |_ctx: ControllerContext| async {
        std::future::pending::<()>().await;
        Ok(())
    });
    let run = tokio::spawn(manager.run_until(vec![stubborn], CancellationToken::new()));
    grant(&mut server).await;
    let acquired = Instant::now();
    let mut failing = fail_every_request(server);
    // The stub fails only when the leader retried without pause.
    let error = tokio::select! {
        run = tokio::time::timeout(Duration::from_secs(60), run) => {
            run.expect("the manager stops").unwrap().unwrap_err()
        }
        Err(stub) = &mut failing => panic!("the API server stub failed: {stub:?}"),
    };
    assert_eq!(
        error.to_string(),
        "lost the leader election Lease operators/my-operator: it was not renewed within 10s"
    );
    let stopped_after = acquired.elapsed();
    assert_eq!(stopped_after, Duration::from_secs(14));
    assert!(
        stopped_after < Duration::from_secs(15),
        "before the Lease expires for others"
    );
    failing.abort();
}

#[tokio::test(start_paused = true)]
async fn a_leader_releases_the_lease_on_shutdown() {
    let (manager, mut server) =
        manager_with(&["--leader-elect", "--leader-election-namespace=operators"]);
    let shutdown = CancellationToken::new();
    let (started, stopped) = (Arc::default(), Arc::default());
    let run = tokio::spawn(manager.run_until(
        vec![watched(Arc::clone(&started), Arc::clone(&stopped))],
        shutdown.clone(),
    ));
    grant(&mut server).await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    shutdown.cancel();
    let (body, send) = next(&mut server, Method::PUT, PATH).await;
    assert!(
        stopped.load(Ordering::SeqCst),
        "controllers stop before the release"
    );
    assert_eq!(body["spec"].get("holderIdentity"), None);
    respond(send, 200, &body);
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_new_leaders_controllers_may_talk_to_the_api_server_at_once() {
    let (manager, mut server) =
        manager_with(&["--leader-elect", "--leader-election-namespace=operators"]);
    let reading = Registration::new("reader", |ctx: ControllerContext| async move {
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(ctx.client.clone(), "default");
        // The answer does not matter; the request must leave the process.
        let _ = api.get("cm").await;
        ctx.shutdown.cancelled().await;
        Ok(())
    });
    let run = tokio::spawn(manager.run_until(vec![reading], CancellationToken::new()));
    grant(&mut server).await;
    let (request, _pending) = tokio::time::timeout(Duration::from_secs(1), server.next_request())
        .await
        .expect("a request within 1 s of the grant, before the first renewal")
        .unwrap();
    assert_eq!(
        request.uri().path(),
        "/api/v1/namespaces/default/configmaps/cm",
        "the fence is open a renew deadline past the acquiring renewal"
    );
    run.abort();
}

#[tokio::test(start_paused = true)]
async fn controllers_that_do_not_stop_are_abandoned_after_the_grace_period() {
    let stubborn = Registration::new("stubborn", |_ctx: ControllerContext| async {
        std::future::pending::<()>().await;
        Ok(())
    });
    let polite = Registration::new("polite", |ctx: ControllerContext| async move {
        ctx.shutdown.cancelled().await;
        Ok(())
    });
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager().run_until(vec![stubborn, polite], shutdown.clone()));
    tokio::time::sleep(Duration::from_millis(1)).await;
    let stopping = Instant::now();
    shutdown.cancel();
    let error = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "controller stubborn did not stop within 30s of shutdown"
    );
    assert_eq!(stopping.elapsed(), GRACEFUL_SHUTDOWN_TIMEOUT);
}

#[tokio::test(start_paused = true)]
async fn a_leader_renews_its_lease_while_its_controllers_finish() {
    let (manager, mut server) =
        manager_with(&["--leader-elect", "--leader-election-namespace=operators"]);
    let shutdown = CancellationToken::new();
    // A controller that needs 5 s to finish its work after shutdown begins.
    let slow = Registration::new("slow", |ctx: ControllerContext| async move {
        ctx.shutdown.cancelled().await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        Ok(())
    });
    let run = tokio::spawn(manager.run_until(vec![slow], shutdown.clone()));
    grant(&mut server).await;
    let acquired = Instant::now();
    tokio::time::sleep(Duration::from_millis(1)).await;
    shutdown.cancel();
    // Renewals go on every 2 s until the controller is done; then the Lease is released.
    let mut renewals = 0;
    loop {
        let (request, send) = tokio::time::timeout(Duration::from_secs(60), server.next_request())
            .await
            .unwrap()
            .unwrap();
        let method = request.method().clone();
        let body: serde_json::Value =
            serde_json::from_slice(&request.into_body().collect_bytes().await.unwrap())
                .unwrap_or_default();
        if method == Method::GET {
            renewals += 1;
            assert!(
                renewals <= 2,
                "more than two renewals in 5 s: the leader renews without pause"
            );
            respond(
                send,
                200,
                &crate::leader::tests::lease("me", "2026-01-01T00:00:00.000000Z", 0, "2"),
            );
        } else if body["spec"].get("holderIdentity").is_some() {
            respond(send, 200, &body);
        } else {
            assert!(
                acquired.elapsed() >= Duration::from_secs(5),
                "released after the controller"
            );
            respond(send, 200, &body);
            break;
        }
    }
    assert_eq!(renewals, 2, "renewed at 2 s and 4 s");
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// A port that was free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn a_follower_serves_webhooks_over_https() {
    use crate::webhook::tests::{https_post, webhooks};

    let dir = crate::tls::tests::tempdir();
    let cert = crate::tls::tests::write_certificate(dir.path(), "localhost");
    let port = free_port();
    let port_flag = format!("--webhook-port={port}");
    let cert_flag = format!("--webhook-cert-path={}", dir.path().display());
    let (manager, mut server) = manager_with(&[
        "--leader-elect",
        "--leader-election-namespace=operators",
        &port_flag,
        &cert_flag,
    ]);
    let manager = manager.webhooks(webhooks());
    let health = manager.health();
    let shutdown = CancellationToken::new();
    let (started, stopped) = (Arc::default(), Arc::default());
    let run = tokio::spawn(manager.run_until(
        vec![watched(Arc::clone(&started), Arc::clone(&stopped))],
        shutdown.clone(),
    ));
    // Another replica leads.
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    respond(
        send,
        200,
        &crate::leader::tests::lease("other", "2099-01-01T00:00:00.000000Z", 0, "1"),
    );
    assert!(
        health.readiness().1.contains("[+]webhook ok"),
        "{}",
        health.readiness().1
    );

    let body = serde_json::to_vec(&crate::webhook::review::create(
        &crate::webhook::tests::Application::new(
            "web",
            crate::webhook::tests::ApplicationSpec {
                replicas: 0,
                image: "nginx".into(),
            },
        ),
    ))
    .unwrap();
    let answer = https_post(port, &cert, false, "/mutate", body)
        .await
        .unwrap();
    assert_eq!(answer.status, StatusCode::OK);
    let review: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(review["response"]["allowed"], true);
    assert!(
        !started.load(Ordering::SeqCst),
        "a follower runs no controller"
    );

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// The status of `GET path` over plain HTTP/2 with prior knowledge (h2c), or the error of
/// a server that does not speak it.
async fn h2c_get(port: u16, path: &str) -> Result<StatusCode, String> {
    use http_body_util::Empty;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| e.to_string())?;
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
                .await
                .map_err(|e| e.to_string())?;
        tokio::spawn(connection);
        let request = http::Request::get(format!("http://localhost{path}"))
            .body(Empty::<axum::body::Bytes>::new())
            .unwrap();
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        Ok(response.status())
    };
    tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .map_err(|_| "no answer within 5 s".to_owned())?
}

/// A manager without leader election whose probes, metrics (over HTTPS) and webhooks
/// listen on ports of their own, with `flags` added; the ports and the certificate.
fn serving_manager(flags: &[&str]) -> (Manager, [u16; 3], Vec<u8>, crate::tls::tests::TempDir) {
    let dir = crate::tls::tests::tempdir();
    let cert = crate::tls::tests::write_certificate(dir.path(), "localhost");
    let ports = [free_port(), free_port(), free_port()];
    let mut owned = vec![
        format!("--health-probe-bind-address=127.0.0.1:{}", ports[0]),
        format!("--metrics-bind-address=127.0.0.1:{}", ports[1]),
        format!("--metrics-cert-path={}", dir.path().display()),
        format!("--webhook-port={}", ports[2]),
        format!("--webhook-cert-path={}", dir.path().display()),
    ];
    owned.extend(flags.iter().map(|flag| flag.to_string()));
    let flags: Vec<&str> = owned.iter().map(String::as_str).collect();
    let (service, _) = tower_test::mock::pair::<
        http::Request<kube::client::Body>,
        http::Response<kube::client::Body>,
    >();
    let args = crate::args::tests::parse(&flags);
    let manager = Manager::with_client(args, Client::new(service, "default"))
        .identity("me")
        .webhooks(crate::webhook::tests::webhooks());
    (manager, ports, cert, dir)
}

/// Waits until every one of `ports` takes connections.
async fn wait_listening(ports: &[u16]) {
    crate::testing::within(async {
        for port in ports {
            while tokio::net::TcpStream::connect(("127.0.0.1", *port))
                .await
                .is_err()
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    })
    .await;
}

#[tokio::test]
async fn with_http2_enabled_every_endpoint_speaks_it_and_metrics_are_https() {
    let (manager, [probe, metrics, webhook], cert, _dir) =
        serving_manager(&["--enable-http2=true"]);
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(Vec::new(), shutdown.clone()));
    wait_listening(&[probe, metrics, webhook]).await;
    assert_eq!(h2c_get(probe, "/healthz").await, Ok(StatusCode::OK));
    // Unauthenticated, over HTTP/2 and TLS: a 401 proves both.
    let answer = crate::webhook::tests::https_post(metrics, &cert, true, "/metrics", Vec::new())
        .await
        .expect("metrics over HTTPS and HTTP/2");
    assert_ne!(answer.status, StatusCode::OK, "no metrics without a token");
    let answer = crate::webhook::tests::https_post(webhook, &cert, true, "/mutate", Vec::new())
        .await
        .expect("webhooks over HTTP/2");
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "an empty review");
    shutdown.cancel();
    crate::testing::within(run).await.unwrap().unwrap();
}

#[tokio::test]
async fn plain_http_metrics_speak_http2_only_when_it_is_enabled() {
    for (flag, speaks) in [
        ("--enable-http2=true", true),
        ("--enable-http2=false", false),
    ] {
        let (manager, [_, metrics, _], _, _dir) =
            serving_manager(&[flag, "--metrics-secure=false"]);
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(manager.run_until(Vec::new(), shutdown.clone()));
        wait_listening(&[metrics]).await;
        let answer = h2c_get(metrics, "/metrics").await;
        if speaks {
            assert_eq!(answer, Ok(StatusCode::OK), "{flag}");
        } else {
            assert!(answer.is_err(), "{flag}: {answer:?}");
        }
        shutdown.cancel();
        crate::testing::within(run).await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn without_http2_no_endpoint_speaks_it() {
    let (manager, [probe, metrics, webhook], cert, _dir) = serving_manager(&[]);
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(Vec::new(), shutdown.clone()));
    wait_listening(&[probe, metrics, webhook]).await;
    assert!(h2c_get(probe, "/healthz").await.is_err());
    for port in [metrics, webhook] {
        let http2 =
            crate::webhook::tests::https_post(port, &cert, true, "/mutate", Vec::new()).await;
        assert!(
            http2.is_err(),
            "port {port} spoke HTTP/2: {:?}",
            http2.map(|a| a.status)
        );
        let http1 =
            crate::webhook::tests::https_post(port, &cert, false, "/mutate", Vec::new()).await;
        assert!(http1.is_ok(), "port {port}: {:?}", http1.err());
    }
    shutdown.cancel();
    crate::testing::within(run).await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn controllers_get_the_managers_own_metrics_and_their_name() {
    let manager = manager();
    let metrics = manager.metrics();
    let seen: Arc<std::sync::Mutex<Option<Arc<Metrics>>>> = Arc::default();
    let registration = {
        let seen = seen.clone();
        Registration::new("appotp", move |ctx: ControllerContext| async move {
            *seen.lock().unwrap() = Some(ctx.metrics.clone());
            ctx.shutdown.cancelled().await;
            Ok(())
        })
    };
    assert_eq!(registration.name(), "appotp");
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(vec![registration], shutdown.clone()));
    crate::testing::within(async {
        while seen.lock().unwrap().is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let given = seen.lock().unwrap().clone().unwrap();
    assert!(
        Arc::ptr_eq(&metrics, &given),
        "Manager::metrics is what the controllers count in"
    );
    shutdown.cancel();
    crate::testing::within(run).await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn self_managed_certificates_are_set_up_before_webhooks_are_served() {
    let dir = crate::tls::tests::tempdir();
    let port_flag = format!("--webhook-port={}", free_port());
    let cert_flag = format!("--webhook-cert-path={}", dir.path().display());
    let (manager, mut server) = manager_with(&[
        &port_flag,
        &cert_flag,
        "--webhook-cert-secret=webhook-server-cert",
        "--webhook-service-name=my-operator-webhook-service",
        "--webhook-service-namespace=operators",
    ]);
    let health = manager.health();
    let run = tokio::spawn(
        manager
            .webhooks(crate::webhook::tests::webhooks())
            .run_until(Vec::new(), CancellationToken::new()),
    );
    let (request, _pending) = tokio::time::timeout(Duration::from_secs(5), server.next_request())
        .await
        .expect("a request within 5 s")
        .unwrap();
    assert_eq!(request.method(), Method::GET);
    assert_eq!(
        request.uri().path(),
        "/api/v1/namespaces/operators/secrets/webhook-server-cert"
    );
    assert!(
        !health.readiness().1.contains("[+]webhook ok"),
        "no webhook is served before its certificate"
    );
    run.abort();
}

/// Run as a process of its own by `sigterm_stops_a_running_manager_cleanly`: a manager
/// whose controller says when it starts and stops.
#[test]
#[ignore = "a child process of sigterm_stops_a_running_manager_cleanly"]
fn manager_process() {
    if std::env::var_os("RSBUILDER_MANAGER_PROCESS").is_none() {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let controller = Registration::new("appotp", |ctx: ControllerContext| async move {
            println!("controller started");
            ctx.shutdown.cancelled().await;
            println!("controller stopped");
            Ok(())
        });
        manager().run(vec![controller]).await.unwrap();
        println!("manager returned");
    });
}

#[test]
fn sigterm_stops_a_running_manager_cleanly() {
    use std::io::BufRead as _;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "manager::tests::manager_process", "--ignored"])
        .args(["--nocapture", "--test-threads=1"])
        .env("RSBUILDER_MANAGER_PROCESS", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines.send(line);
        }
    });
    let wait_for = |wanted: &str| loop {
        match received.recv_timeout(Duration::from_secs(10)) {
            // libtest writes `test manager::tests::manager_process ... ` before the first.
            Ok(line) if line.ends_with(wanted) => return,
            Ok(_) => {}
            Err(error) => panic!("no `{wanted}` from the manager: {error}"),
        }
    };
    wait_for("controller started");
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    wait_for("controller stopped");
    wait_for("manager returned");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("the manager did not exit within 10 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn webhooks_without_a_certificate_stop_the_manager_with_a_way_out() {
    let port_flag = format!("--webhook-port={}", free_port());
    let (manager, _) = manager_with(&[&port_flag, "--webhook-cert-path=/nonexistent"]);
    let error = tokio::time::timeout(
        Duration::from_secs(5),
        manager
            .webhooks(crate::webhook::tests::webhooks())
            .run_until(Vec::new(), CancellationToken::new()),
    )
    .await
    .unwrap()
    .unwrap_err();
    let message = format!("{error:#}");
    assert!(
            message.starts_with("the webhook server has no certificate: pass --webhook-cert-path, or run without webhooks with ENABLE_WEBHOOKS=false: failed to read certificate `/nonexistent/tls.crt`"),
            "{message}"
        );
}

#[tokio::test]
async fn disabled_webhooks_are_not_served() {
    let port = free_port();
    let port_flag = format!("--webhook-port={port}");
    let (manager, _) = manager_with(&[
        &port_flag,
        "--webhook-cert-path=/nonexistent",
        "--enable-webhooks=false",
    ]);
    let manager = manager.webhooks(crate::webhook::tests::webhooks());
    let health = manager.health();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(Vec::new(), shutdown.clone()));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!run.is_finished());
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
    );
    assert!(!health.readiness().1.contains("webhook"));
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_follower_runs_no_controller_and_stops_on_shutdown() {
    let (manager, mut server) =
        manager_with(&["--leader-elect", "--leader-election-namespace=operators"]);
    let shutdown = CancellationToken::new();
    let (started, stopped) = (Arc::default(), Arc::default());
    let run = tokio::spawn(manager.run_until(
        vec![watched(Arc::clone(&started), Arc::clone(&stopped))],
        shutdown.clone(),
    ));
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    respond(
        send,
        200,
        &crate::leader::tests::lease("other", "2026-01-01T00:00:00.000000Z", 0, "1"),
    );
    tokio::time::sleep(Duration::from_millis(1)).await;
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(!started.load(Ordering::SeqCst));
}

async fn http1_get(port: u16, path: &str) -> Result<StatusCode, String> {
    use http_body_util::Empty;
    use hyper_util::rt::TokioIo;
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| e.to_string())?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(connection);
        let request = http::Request::get(format!("http://localhost{path}"))
            .body(Empty::<axum::body::Bytes>::new())
            .unwrap();
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        Ok(response.status())
    };
    tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .map_err(|_| "no answer within 5 s".to_owned())?
}

#[tokio::test]
async fn the_probes_answer_until_the_controllers_have_stopped() {
    let port = free_port();
    let probes = format!("--health-probe-bind-address=127.0.0.1:{port}");
    let (service, _server) = tower_test::mock::pair::<
        http::Request<kube::client::Body>,
        http::Response<kube::client::Body>,
    >();
    let args = crate::args::tests::parse(&[&probes]);
    let manager = Manager::with_client(args, Client::new(service, "default")).identity("me");
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let slow = Registration::new("slow", |ctx: ControllerContext| async move {
        ctx.ready.ready();
        ctx.shutdown.cancelled().await;
        // A reconcile that takes a while to finish after SIGTERM.
        let _ = released.await;
        Ok(())
    });
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(vec![slow], shutdown.clone()));
    wait_listening(&[port]).await;
    shutdown.cancel();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        http1_get(port, "/healthz").await,
        Ok(StatusCode::OK),
        "liveness during the grace"
    );
    assert_eq!(
        http1_get(port, "/readyz").await,
        Ok(StatusCode::OK),
        "readiness during the grace"
    );
    release.send(()).unwrap();
    crate::testing::within(run).await.unwrap().unwrap();
    assert!(
        http1_get(port, "/healthz").await.is_err(),
        "the probes stop last"
    );
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_controllers_were_abandoned_keeps_the_lease_to_expire() {
    let (manager, mut server) =
        manager_with(&["--leader-elect", "--leader-election-namespace=operators"]);
    let stubborn = Registration::new("stubborn", |_ctx: ControllerContext| async {
        std::future::pending::<()>().await;
        Ok(())
    });
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(vec![stubborn], shutdown.clone()));
    grant(&mut server).await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    shutdown.cancel();
    // Renewals go on during the grace period; no release follows it.
    let answering = tokio::spawn(async move {
        while let Ok(Some((request, send))) =
            tokio::time::timeout(Duration::from_secs(3600), server.next_request()).await
        {
            let method = request.method().clone();
            let body = request.into_body().collect_bytes().await.unwrap();
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            if method == Method::GET {
                let lease =
                    crate::leader::tests::lease("me", "2026-01-01T00:00:00.000000Z", 0, "2");
                respond(send, 200, &lease);
                continue;
            }
            assert_eq!(
                body["spec"]["holderIdentity"], "me",
                "the Lease was released while a controller may still write"
            );
            respond(send, 200, &body);
        }
    });
    let error = crate::testing::within(run).await.unwrap().unwrap_err();
    assert_eq!(
        error.to_string(),
        "controller stubborn did not stop within 30s of shutdown"
    );
    answering.abort();
    if let Err(error) = answering.await
        && error.is_panic()
    {
        std::panic::resume_unwind(error.into_panic());
    }
}
