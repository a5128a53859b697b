//! The runtime of operators scaffolded by rsbuilder: what kubebuilder projects get from
//! controller-runtime, for kube-rs.
//!
//! A generated `main.rs` parses [`ManagerArgs`] (kubebuilder's manager flags, to flatten into its
//! own clap parser), sets up logging with [`telemetry::init`], and hands its controllers to a
//! [`Manager`], which
//! - serves `/healthz` and `/readyz` ([`health`]) and `/metrics` ([`metrics`]), over HTTPS behind
//!   TokenReview and SubjectAccessReview by default, with certificates that are reloaded when they
//!   change ([`tls`]);
//! - runs the controllers only while this replica holds the leader election Lease, with
//!   client-go's semantics ([`leader`]);
//! - serves the project's admission and conversion webhooks over HTTPS ([`webhook`]) on every
//!   replica;
//! - stops everything cleanly on SIGTERM, and exits with an error when leadership is lost.
//!
//! A controller hands its `kube::runtime::Controller` and its `reconcile` to a
//! [`controller::Runner`], which checks its API, reports readiness, times and counts reconciles,
//! retries failures with a per-object [`backoff::Backoff`] and stops on shutdown; [`conditions`]
//! keeps status conditions as apimachinery does.
//!
//! Every request this crate makes to the API server has a timeout.

pub mod args;
pub mod backoff;
pub mod client;
pub mod conditions;
pub mod controller;
pub mod health;
pub mod leader;
pub mod manager;
pub mod metrics;
pub mod server;
pub mod telemetry;
pub mod tls;
pub mod webhook;

pub use args::{BindAddress, LogFormat, ManagerArgs};
pub use backoff::Backoff;
pub use controller::Runner;
pub use manager::{ControllerContext, Manager, Registration};
pub use metrics::Metrics;
pub use webhook::Webhooks;

/// This crate's version; PROJECT records it, and `rsbuilder upgrade` replaces it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
