//! kubebuilder's manager flags, as a clap [`Args`](clap::Args) struct.
//!
//! The names and defaults follow kubebuilder's `cmd/main.go`, so the manifests and habits of a
//! kubebuilder project carry over: `--metrics-bind-address`, `--health-probe-bind-address`,
//! `--leader-elect`, `--metrics-secure`, `--enable-http2`. A project's `main.rs` flattens
//! [`ManagerArgs`] into its own parser and adds its own flags next to them:
//!
//! ```
//! use clap::Parser;
//!
//! #[derive(Parser)]
//! struct Args {
//!     #[command(flatten)]
//!     manager: rsbuilder_runtime::ManagerArgs,
//!     /// A flag of the operator's own.
//!     #[arg(long, default_value = "nginx:1.27")]
//!     default_image: String,
//! }
//!
//! let args = Args::try_parse_from(["manager", "--leader-elect"]).unwrap();
//! assert!(args.manager.leader_elect);
//! ```

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::{ArgAction, ValueEnum};

/// The manager's flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ManagerArgs {
    /// Address the metrics endpoint binds to: `:8443` for HTTPS, `:8080` for HTTP, or `0` to
    /// disable the endpoint.
    #[arg(long, default_value = "0")]
    pub metrics_bind_address: BindAddress,

    /// Address the `/healthz` and `/readyz` probe endpoints bind to.
    #[arg(long, default_value = ":8081")]
    pub health_probe_bind_address: BindAddress,

    /// Enable leader election, so that only one replica runs the controllers at a time.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true")]
    pub leader_elect: bool,

    /// Name of the Lease used for leader election [default: the project's]
    #[arg(long)]
    pub leader_election_id: Option<String>,

    /// Namespace of the leader election Lease; defaults to the namespace the pod runs in.
    #[arg(long, env = "POD_NAMESPACE")]
    pub leader_election_namespace: Option<String>,

    /// How long a leader's Lease stays valid without renewal; other replicas wait this long,
    /// on their own clocks, before they take it over.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: Duration,

    /// How long a leader keeps trying to renew its Lease before it gives up leadership and
    /// exits; shorter than the lease duration.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: Duration,

    /// How often replicas try to acquire or renew the Lease.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: Duration,

    /// Serve metrics over HTTPS and only to clients that the API server authenticates and
    /// authorizes (TokenReview and SubjectAccessReview). `--metrics-secure=false` serves plain HTTP.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = true, default_missing_value = "true")]
    pub metrics_secure: bool,

    /// Directory holding the metrics server certificate; a self-signed one is made when unset.
    #[arg(long)]
    pub metrics_cert_path: Option<PathBuf>,

    /// File name of the metrics server certificate inside `--metrics-cert-path`.
    #[arg(long, default_value = "tls.crt")]
    pub metrics_cert_name: String,

    /// File name of the metrics server key inside `--metrics-cert-path`.
    #[arg(long, default_value = "tls.key")]
    pub metrics_cert_key: String,

    /// Serve the webhooks of `rsbuilder create webhook`; `ENABLE_WEBHOOKS=false` turns them off,
    /// so that `make run` works on a laptop without a serving certificate.
    #[arg(long, env = "ENABLE_WEBHOOKS", action = ArgAction::Set, num_args = 0..=1, default_value_t = true, default_missing_value = "true")]
    pub enable_webhooks: bool,

    /// Port the HTTPS webhook server listens on, on every interface.
    #[arg(long, default_value_t = 9443)]
    pub webhook_port: u16,

    /// Directory holding the webhook server certificate (cert-manager's Secret, mounted by
    /// `config/default/manager_webhook_patch.yaml`).
    #[arg(long, default_value = "/tmp/k8s-webhook-server/serving-certs")]
    pub webhook_cert_path: PathBuf,

    /// File name of the webhook server certificate inside `--webhook-cert-path`.
    #[arg(long, default_value = "tls.crt")]
    pub webhook_cert_name: String,

    /// File name of the webhook server key inside `--webhook-cert-path`.
    #[arg(long, default_value = "tls.key")]
    pub webhook_cert_key: String,

    /// Serve HTTP/2 on the HTTPS endpoints. Off by default: HTTP/2 is exposed to the
    /// "rapid reset" (CVE-2023-44487) and "stream cancellation" attacks. When off, the servers
    /// speak HTTP/1.1 only, whatever the client offers.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true")]
    pub enable_http2: bool,

    /// Log format: `text` for people, `json` for log collectors.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log filter, in `tracing-subscriber` `EnvFilter` syntax (`info`, `my_operator=debug,kube=info`).
    #[arg(long, env = "RUST_LOG", default_value = "info")]
    pub log_level: String,

    /// Namespace to watch and manage; unset watches every namespace. Namespaced projects
    /// require it (`config/manager/manager.yaml` sets it to the pod's namespace).
    #[arg(long, env = "WATCH_NAMESPACE")]
    pub watch_namespace: Option<String>,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// A listen address in the form Go programs accept: `:8081`, `127.0.0.1:8080`, `[::]:8443`,
/// or `0` for "do not listen".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindAddress {
    /// The endpoint is off.
    Disabled,
    /// The endpoint listens here.
    Enabled(SocketAddr),
}

impl BindAddress {
    /// The socket address, unless the endpoint is disabled.
    pub fn socket_addr(self) -> Option<SocketAddr> {
        match self {
            Self::Disabled => None,
            Self::Enabled(addr) => Some(addr),
        }
    }
}

impl FromStr for BindAddress {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        if value == "0" {
            return Ok(Self::Disabled);
        }
        if let Some(port) = value.strip_prefix(':') {
            let port = port
                .parse::<u16>()
                .map_err(|_| format!("invalid port in `{value}`"))?;
            return Ok(Self::Enabled(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                port,
            )));
        }
        value
            .parse::<SocketAddr>()
            .map(Self::Enabled)
            .map_err(|_| format!("invalid address `{value}`: expected `:PORT`, `HOST:PORT` or `0`"))
    }
}

impl fmt::Display for BindAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Disabled => f.write_str("0"),
            Self::Enabled(addr) => addr.fmt(f),
        }
    }
}

/// Parses a duration as Go's `time.ParseDuration` does: `15s`, `1m30s`, `500ms`, `1.5h`.
pub fn parse_duration(value: &str) -> Result<Duration, String> {
    let invalid = || {
        format!(
            "invalid duration `{value}`: expected a number and a unit, as in `15s`, `1m30s` or `500ms`"
        )
    };
    if value == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = value;
    let mut total = 0f64;
    if rest.is_empty() {
        return Err(invalid());
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(invalid)?;
        let number: f64 = rest[..number_len].parse().map_err(|_| invalid())?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(invalid()),
        };
        total += number * seconds;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| invalid())
}

#[cfg(test)]
pub(crate) mod tests {
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
            (":8081", Some("0.0.0.0:8081")),
            ("127.0.0.1:8080", Some("127.0.0.1:8080")),
            ("[::]:8443", Some("[::]:8443")),
            (":http", None),
            ("8080", None),
            ("", None),
        ];
        for (input, expected) in cases {
            let parsed = input.parse::<BindAddress>();
            match (parsed, expected) {
                (Ok(BindAddress::Disabled), Some("disabled")) => {}
                (Ok(BindAddress::Enabled(addr)), Some(want)) => {
                    assert_eq!(addr.to_string(), want, "input {input:?}")
                }
                (Err(_), None) => {}
                (got, want) => panic!("input {input:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn durations_parse_like_go_durations() {
        let cases = [
            ("15s", Some(Duration::from_secs(15))),
            ("1m30s", Some(Duration::from_secs(90))),
            ("500ms", Some(Duration::from_millis(500))),
            ("1.5h", Some(Duration::from_secs(5400))),
            ("0", Some(Duration::ZERO)),
            ("15", None),
            ("s", None),
            ("", None),
            ("-1s", None),
            ("10 s", None),
        ];
        for (input, want) in cases {
            assert_eq!(parse_duration(input).ok(), want, "input {input:?}");
        }
    }

    #[test]
    fn defaults_match_kubebuilder_and_client_go() {
        let args = parse(&[]);
        assert_eq!(args.metrics_bind_address, BindAddress::Disabled);
        assert_eq!(args.health_probe_bind_address.to_string(), "0.0.0.0:8081");
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
    fn webhooks_are_on_unless_turned_off() {
        assert!(parse(&[]).enable_webhooks);
        assert!(!parse(&["--enable-webhooks=false"]).enable_webhooks);
    }
}
