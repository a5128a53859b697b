use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    manager: ManagerArgs,
}

/// The flags of `manager ARGS...`.
pub(crate) fn parse(args: &[&str]) -> ManagerArgs {
    Cli::try_parse_from(std::iter::once("manager").chain(args.iter().copied()))
        .unwrap()
        .manager
}

#[test]
fn bind_addresses_parse_like_go_flags() {
    let cases = [
        ("0", Some("disabled")),
        (":8081", Some("[::]:8081")),
        ("127.0.0.1:8080", Some("127.0.0.1:8080")),
        ("[::]:8443", Some("[::]:8443")),
        (":http", None),
        ("8080", None),
        ("", None),
    ];
    for (input, expected) in cases {
        let parsed = input.parse::<BindAddress>();
        match (parsed, expected) {
            (Ok(BindAddress::Disabled), Some("disabled")) => {
                assert_eq!(BindAddress::Disabled.socket_addr(), None);
            }
            (Ok(BindAddress::Enabled(addr)), Some(want)) => {
                assert_eq!(addr.to_string(), want, "input {input:?}");
                assert_eq!(BindAddress::Enabled(addr).socket_addr(), Some(addr));
            }
            (Err(_), None) => {}
            (got, want) => panic!("input {input:?}: got {got:?}, want {want:?}"),
        }
    }
}

/// `input` parsed, or its error.
fn duration(input: &str) -> Result<Duration, String> {
    parse_duration(input)
}

#[test]
fn durations_parse_like_go_durations() {
    let cases = [
        ("15s", Duration::from_secs(15)),
        ("1m30s", Duration::from_secs(90)),
        ("500ms", Duration::from_millis(500)),
        ("1h2m3s4ms5us6ns", Duration::new(3723, 4_005_006)),
        ("0", Duration::ZERO),
        ("0s", Duration::ZERO),
    ];
    for (input, want) in cases {
        assert_eq!(duration(input), Ok(want), "input {input:?}");
    }
}

#[test]
fn every_unit_of_go_is_understood() {
    let cases = [
        ("7ns", Duration::from_nanos(7)),
        ("7us", Duration::from_micros(7)),
        // U+00B5 MICRO SIGN and U+03BC GREEK SMALL LETTER MU, as Go accepts both.
        ("7\u{b5}s", Duration::from_micros(7)),
        ("7\u{3bc}s", Duration::from_micros(7)),
        ("7ms", Duration::from_millis(7)),
        ("7s", Duration::from_secs(7)),
        ("7m", Duration::from_secs(7 * 60)),
        ("7h", Duration::from_secs(7 * 3600)),
    ];
    for (input, want) in cases {
        assert_eq!(duration(input), Ok(want), "input {input:?}");
    }
}

#[test]
fn fractions_are_exact_to_the_nanosecond() {
    let cases = [
        ("1.5h", Duration::from_secs(5400)),
        (".5s", Duration::from_millis(500)),
        ("5.s", Duration::from_secs(5)),
        ("1m30.1s", Duration::from_millis(90_100)),
        ("0.000000001s", Duration::from_nanos(1)),
        // Go truncates what is below a nanosecond.
        ("1.9ns", Duration::from_nanos(1)),
        (
            "0.1234567891234567891234567s",
            Duration::from_nanos(123_456_789),
        ),
    ];
    for (input, want) in cases {
        assert_eq!(duration(input), Ok(want), "input {input:?}");
    }
}

#[test]
fn a_sign_is_allowed_but_a_negative_duration_is_refused() {
    assert_eq!(duration("+15s"), Ok(Duration::from_secs(15)));
    assert_eq!(duration("+0"), Ok(Duration::ZERO));
    // Minus zero is zero, as in Go.
    assert_eq!(duration("-0"), Ok(Duration::ZERO));
    assert_eq!(duration("-0s"), Ok(Duration::ZERO));
    assert_eq!(
        duration("-1s"),
        Err("invalid duration `-1s`: a negative duration is not allowed here".to_owned())
    );
    assert_eq!(
        duration("-1.5h"),
        Err("invalid duration `-1.5h`: a negative duration is not allowed here".to_owned())
    );
}

#[test]
fn malformed_durations_are_refused_with_the_value() {
    let expected = |input: &str| {
        format!(
            "invalid duration `{input}`: expected a number and a unit, as in `15s`, `1m30s` or `500ms`"
        )
    };
    for input in [
        "", "15", "s", ".", ".s", "+", "-", "+-1s", "1s5", " 1s", "1..5s", "1s.",
    ] {
        assert_eq!(duration(input), Err(expected(input)), "input {input:?}");
    }
    let unknown = |input: &str, unit: &str| {
        format!(
            "invalid duration `{input}`: unknown unit `{unit}`, expected ns, us, µs, ms, s, m or h"
        )
    };
    for (input, unit) in [("1x", "x"), ("1S", "S"), ("10 s", " s"), ("1sec", "sec")] {
        assert_eq!(
            duration(input),
            Err(unknown(input, unit)),
            "input {input:?}"
        );
    }
}

#[test]
fn durations_longer_than_gos_are_refused() {
    assert_eq!(
        duration("2562047h47m16.854775807s"),
        Ok(Duration::from_nanos(i64::MAX as u64))
    );
    let too_long = "invalid duration `2562047h47m16.854775808s`: longer than Go's longest duration, 2562047h47m16.854775807s";
    assert_eq!(
        duration("2562047h47m16.854775808s"),
        Err(too_long.to_owned())
    );
    assert!(duration("99999999999999999999999999999999999999999h").is_err());
}

#[test]
fn duration_flags_take_go_durations() {
    let args = parse(&[
        "--leader-elect-lease-duration=+1m",
        "--leader-elect-renew-deadline=.5m",
        "--leader-elect-retry-period=1500ms",
    ]);
    assert_eq!(args.leader_elect_lease_duration, Duration::from_secs(60));
    assert_eq!(args.leader_elect_renew_deadline, Duration::from_secs(30));
    assert_eq!(args.leader_elect_retry_period, Duration::from_millis(1500));
}

#[test]
fn defaults_match_kubebuilder_and_client_go() {
    let args = parse(&[]);
    assert_eq!(args.metrics_bind_address, BindAddress::Disabled);
    assert_eq!(args.health_probe_bind_address.to_string(), "[::]:8081");
    assert!(!args.leader_elect);
    assert!(args.metrics_secure);
    assert!(!args.enable_http2);
    assert_eq!(args.leader_elect_lease_duration, Duration::from_secs(15));
    assert_eq!(args.leader_elect_renew_deadline, Duration::from_secs(10));
    assert_eq!(args.leader_elect_retry_period, Duration::from_secs(2));
    assert_eq!(args.webhook_port, 9443);
    assert_eq!(
        args.webhook_cert_path,
        PathBuf::from("/tmp/k8s-webhook-server/serving-certs")
    );
}

#[test]
fn boolean_flags_take_go_style_values() {
    let args = parse(&[
        "--leader-elect",
        "--metrics-secure=false",
        "--enable-http2=true",
    ]);
    assert!(args.leader_elect);
    assert!(!args.metrics_secure);
    assert!(args.enable_http2);
}

#[test]
fn self_managed_webhook_certificates_need_the_service_and_its_namespace() {
    let args = parse(&[
        "--webhook-cert-secret=webhook-server-cert",
        "--webhook-service-name=my-operator-webhook-service",
        "--webhook-service-namespace=operators",
    ]);
    assert_eq!(
        args.webhook_cert_secret.as_deref(),
        Some("webhook-server-cert")
    );
    assert_eq!(args.webhook_cert_check_interval, Duration::from_secs(60));
    assert!(parse(&[]).webhook_cert_secret.is_none());
    for (flag, interval) in [("500ms", 500), ("100ms", 100)] {
        assert_eq!(
            parse(&[&format!("--webhook-cert-check-interval={flag}")]).webhook_cert_check_interval,
            Duration::from_millis(interval),
            "the shortest interval, 100ms, is taken"
        );
    }
    for short in ["0", "99ms"] {
        let arg = format!("--webhook-cert-check-interval={short}");
        assert!(
            Cli::try_parse_from(["manager", arg.as_str()]).is_err(),
            "{short} was taken"
        );
    }
    for missing in [
        "--webhook-service-name=my-operator-webhook-service",
        "--webhook-service-namespace=operators",
    ] {
        let Err(error) = Cli::try_parse_from([
            "manager",
            "--webhook-cert-secret=webhook-server-cert",
            missing,
        ]) else {
            panic!("--webhook-cert-secret with only {missing} was taken");
        };
        assert_eq!(
            error.kind(),
            clap::error::ErrorKind::MissingRequiredArgument
        );
    }
}

#[test]
fn webhooks_are_on_unless_turned_off() {
    assert!(parse(&[]).enable_webhooks);
    assert!(!parse(&["--enable-webhooks=false"]).enable_webhooks);
}
