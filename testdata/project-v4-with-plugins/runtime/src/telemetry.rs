//! Logging: `tracing` events written as text or JSON, filtered by `--log-level` or `RUST_LOG`.

use anyhow::Context as _;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::args::LogFormat;

/// Installs the global subscriber. Call once, first thing in `main`.
pub fn init(format: LogFormat, filter: &str) -> anyhow::Result<()> {
    let filter =
        EnvFilter::try_new(filter).with_context(|| format!("invalid log filter `{filter}`"))?;
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Text => registry.with(tracing_subscriber::fmt::layer()).try_init(),
        LogFormat::Json => registry
            .with(tracing_subscriber::fmt::layer().json().flatten_event(true))
            .try_init(),
    }
    .context("failed to install the log subscriber")
}
