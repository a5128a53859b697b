//! Command-line flags of the `manager` binary.
//!
//! The names and defaults follow kubebuilder's `cmd/main.go`, so the manifests and habits of a
//! kubebuilder project carry over: `--metrics-bind-address`, `--health-probe-bind-address`,
//! `--leader-elect`, `--metrics-secure`, `--enable-http2`.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;

use clap::{ArgAction, Parser, ValueEnum};

/// The name of the Lease that replicas compete for when `--leader-elect` is on.
pub const LEADER_ELECTION_ID: &str = "46b0b156.example.com";

/// Runs the controllers of names-operator.
#[derive(Debug, Clone, Parser)]
#[command(name = "manager", version)]
pub struct Args {
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

    /// Name of the Lease used for leader election.
    #[arg(long, default_value = LEADER_ELECTION_ID)]
    pub leader_election_id: String,

    /// Namespace of the leader election Lease; defaults to the namespace the pod runs in.
    #[arg(long, env = "POD_NAMESPACE")]
    pub leader_election_namespace: Option<String>,

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

    /// Offer HTTP/2 on the HTTPS endpoints. Off by default: HTTP/2 is exposed to the
    /// "rapid reset" (CVE-2023-44487) and "stream cancellation" attacks.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true")]
    pub enable_http2: bool,

    /// Log format: `text` for people, `json` for log collectors.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log filter, in `tracing-subscriber` `EnvFilter` syntax (`info`, `names_operator=debug,kube=info`).
    #[arg(long, env = "RUST_LOG", default_value = "info")]
    pub log_level: String,

    /// Namespace to watch; unset watches every namespace.
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn defaults_match_kubebuilder() {
        let args = Args::try_parse_from(["manager"]).unwrap();
        assert_eq!(args.metrics_bind_address, BindAddress::Disabled);
        assert_eq!(args.health_probe_bind_address.to_string(), "0.0.0.0:8081");
        assert!(!args.leader_elect);
        assert!(args.metrics_secure);
        assert!(!args.enable_http2);
    }

    #[test]
    fn boolean_flags_take_go_style_values() {
        let args = Args::try_parse_from([
            "manager",
            "--leader-elect",
            "--metrics-secure=false",
            "--enable-http2=true",
        ])
        .unwrap();
        assert!(args.leader_elect);
        assert!(!args.metrics_secure);
        assert!(args.enable_http2);
    }
}
