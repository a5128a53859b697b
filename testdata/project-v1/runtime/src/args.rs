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
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
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

    /// Make and rotate the webhook serving certificate without cert-manager, kept in this
    /// Secret of the manager's namespace, and set its CA in the webhook configurations and
    /// converted CRDs that call `--webhook-service-name` (`config/webhook-self-certs`).
    #[arg(long, env = "WEBHOOK_CERT_SECRET", requires_all = ["webhook_service_name", "webhook_service_namespace"])]
    pub webhook_cert_secret: Option<String>,

    /// How often the manager checks the certificate of `--webhook-cert-secret` and the CA
    /// bundles it set: it renews the certificate 90 days before expiry, and sets a bundle
    /// someone edited away again.
    #[arg(long, default_value = "1m", value_parser = parse_check_interval)]
    pub webhook_cert_check_interval: Duration,

    /// The webhook Service's name, for `--webhook-cert-secret`.
    #[arg(long, env = "WEBHOOK_SERVICE_NAME")]
    pub webhook_service_name: Option<String>,

    /// The webhook Service's namespace, and the Secret's, for `--webhook-cert-secret`: the
    /// manager's own.
    #[arg(long, env = "POD_NAMESPACE")]
    pub webhook_service_namespace: Option<String>,

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

    /// How many reconciles each controller runs at once (controller-runtime's
    /// `MaxConcurrentReconciles`); further objects wait their turn. A controller's `Runner`
    /// may set its own.
    #[arg(long, default_value_t = DEFAULT_MAX_CONCURRENT_RECONCILES, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_concurrent_reconciles: u16,

    /// How long a controller's cache may take to sync, at start and after a relist, before the
    /// controller fails and the manager exits (controller-runtime's `CacheSyncTimeout`).
    #[arg(long, default_value = "2m", value_parser = parse_positive_duration)]
    pub cache_sync_timeout: Duration,

    /// How long the controllers get to finish after SIGTERM; the servers and the Lease are
    /// kept meanwhile. Controllers still running then are abandoned, and the Lease is left to
    /// expire rather than released.
    #[arg(long, default_value = "30s", value_parser = parse_positive_duration)]
    pub graceful_shutdown_timeout: Duration,

    /// How long a controller's request to the API server may take, to the answer's last byte
    /// (to its headers for a watch); a request without an answer by then fails.
    #[arg(long, default_value = "30s", value_parser = parse_positive_duration)]
    pub api_request_timeout: Duration,
}

/// The default of `--max-concurrent-reconciles`: with 10,000 objects pending, the manager stays
/// well within the 128 MiB that `config/manager/manager.yaml` gives it (the cache grows with the
/// objects; the reconciles in flight, each with its connection, with this number), and a slow
/// API server still sees a few requests at once rather than one.
pub const DEFAULT_MAX_CONCURRENT_RECONCILES: u16 = 10;

/// A Go duration above zero.
fn parse_positive_duration(value: &str) -> Result<Duration, String> {
    let duration = parse_duration(value)?;
    if duration.is_zero() {
        return Err(format!("{value} must be longer than zero"));
    }
    Ok(duration)
}

/// `--webhook-cert-check-interval`: a Go duration of at least 100 ms, so that a typo such as `0`
/// cannot make every replica query the API server without pause.
fn parse_check_interval(value: &str) -> Result<Duration, String> {
    let interval = parse_duration(value)?;
    if interval < Duration::from_millis(100) {
        return Err(format!(
            "{value} is shorter than the shortest interval, 100ms"
        ));
    }
    Ok(interval)
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
            // Every address, IPv6 and IPv4, as Go listens on `:PORT`.
            return Ok(Self::Enabled(SocketAddr::new(
                IpAddr::V6(Ipv6Addr::UNSPECIFIED),
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

/// Parses a duration as Go's `time.ParseDuration` does: numbers, each with a unit (`ns`, `us`,
/// `µs`, `μs`, `ms`, `s`, `m`, `h`) and maybe a fraction (`1.5h`, `.5s`, `5.s`), as in `15s`,
/// `1m30s` or `500ms`, after an optional sign; `0` needs no unit. A negative duration is
/// refused, since no flag takes one; so is one longer than Go's (about 292 years).
pub fn parse_duration(value: &str) -> Result<Duration, String> {
    let invalid = || {
        format!(
            "invalid duration `{value}`: expected a number and a unit, as in `15s`, `1m30s` or `500ms`"
        )
    };
    let (negative, unsigned) = match value.as_bytes().first() {
        Some(b'-') => (true, &value[1..]),
        Some(b'+') => (false, &value[1..]),
        _ => (false, value),
    };
    if unsigned == "0" {
        return Ok(Duration::ZERO);
    }
    if unsigned.is_empty() {
        return Err(invalid());
    }
    let mut rest = unsigned;
    let mut nanos: u128 = 0;
    while !rest.is_empty() {
        let whole_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let whole = &rest[..whole_len];
        rest = &rest[whole_len..];
        let fraction = match rest.strip_prefix('.') {
            Some(after) => {
                let fraction_len = after
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(after.len());
                rest = &after[fraction_len..];
                &after[..fraction_len]
            }
            None => "",
        };
        // A number needs a digit, before or after its point.
        if whole.is_empty() && fraction.is_empty() {
            return Err(invalid());
        }
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit: u128 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(invalid()),
            unknown => {
                return Err(format!(
                    "invalid duration `{value}`: unknown unit `{unknown}`, expected ns, us, µs, ms, s, m or h"
                ));
            }
        };
        rest = &rest[unit_len..];
        nanos = nanos.saturating_add(whole_nanos(whole, unit));
        nanos = nanos.saturating_add(fraction_nanos(fraction, unit));
    }
    // Go's durations are nanoseconds in an i64.
    if nanos > i64::MAX as u128 {
        return Err(format!(
            "invalid duration `{value}`: longer than Go's longest duration, 2562047h47m16.854775807s"
        ));
    }
    if negative && nanos > 0 {
        return Err(format!(
            "invalid duration `{value}`: a negative duration is not allowed here"
        ));
    }
    Ok(Duration::from_nanos(nanos as u64))
}

/// The nanoseconds of `digits` (decimal, maybe empty) times `unit` nanoseconds, saturating.
fn whole_nanos(digits: &str, unit: u128) -> u128 {
    digits
        .bytes()
        .fold(0u128, |number, digit| {
            number
                .saturating_mul(10)
                .saturating_add(u128::from(digit - b'0'))
        })
        .saturating_mul(unit)
}

/// The whole nanoseconds of the fraction `0.digits` times `unit` nanoseconds. Digits past the
/// 20th cannot add a nanosecond to a unit of at most an hour, and are ignored.
fn fraction_nanos(digits: &str, unit: u128) -> u128 {
    let digits = &digits[..digits.len().min(20)];
    let scale = 10u128.pow(digits.len() as u32);
    whole_nanos(digits, 1) * unit / scale
}
