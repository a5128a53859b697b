//! The `process_*` metrics of Prometheus' client libraries, read from `/proc/self` at each
//! scrape, as client_golang's process collector does for controller-runtime. Elsewhere than on
//! Linux, or when `/proc` cannot be read, they are left out rather than reported as zero.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Clock ticks per second of `/proc/<pid>/stat`: `USER_HZ`, 100 on every Linux architecture
/// (the kernel converts to it for user space).
const USER_HZ: f64 = 100.0;

/// What one scrape reads of the process.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Sample {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<f64>,
    pub virtual_bytes: Option<f64>,
    pub start_time_seconds: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
}

/// The files of `/proc` a sample is read from, as text.
#[derive(Debug, Default)]
struct Proc {
    /// `/proc/self/stat`.
    stat: Option<String>,
    /// `/proc/stat`, for the boot time.
    system_stat: Option<String>,
    /// `/proc/self/status`.
    status: Option<String>,
    /// `/proc/self/limits`.
    limits: Option<String>,
    /// The entries of `/proc/self/fd`.
    open_fds: Option<usize>,
}

impl Sample {
    /// This process, now.
    pub(crate) fn read() -> Self {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        Self::parse(&Proc {
            stat: read("/proc/self/stat"),
            system_stat: read("/proc/stat"),
            status: read("/proc/self/status"),
            limits: read("/proc/self/limits"),
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|entries| entries.count()),
        })
    }

    fn parse(proc: &Proc) -> Self {
        let stat = proc.stat.as_deref().map(stat_fields).unwrap_or_default();
        let field = |index: usize| stat.get(index).and_then(|v| v.parse::<f64>().ok());
        // The fields after the command's name, from the state (field 3 of proc(5)) on.
        let (utime, stime, start_ticks, vsize) = (field(11), field(12), field(19), field(20));
        let boot_time = proc.system_stat.as_deref().and_then(|stat| {
            stat.lines()
                .find_map(|line| line.strip_prefix("btime "))
                .and_then(|v| v.trim().parse::<f64>().ok())
        });
        Self {
            cpu_seconds: utime.zip(stime).map(|(u, s)| (u + s) / USER_HZ),
            resident_bytes: proc.status.as_deref().and_then(|status| {
                status
                    .lines()
                    .find_map(|line| line.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
                    .map(|kib| kib * 1024.0)
            }),
            virtual_bytes: vsize,
            start_time_seconds: boot_time
                .zip(start_ticks)
                .map(|(boot, ticks)| boot + ticks / USER_HZ),
            open_fds: proc.open_fds.map(|count| count as f64),
            max_fds: proc.limits.as_deref().and_then(|limits| {
                limits
                    .lines()
                    .find_map(|line| line.strip_prefix("Max open files"))
                    .and_then(|rest| rest.split_whitespace().next())
                    .and_then(|soft| soft.parse::<f64>().ok())
            }),
        }
    }
}

/// The fields of `/proc/<pid>/stat` after the command's name, which is in parentheses and may
/// itself hold spaces and parentheses.
fn stat_fields(stat: &str) -> Vec<String> {
    stat.rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Reports [`Sample::read`] at each scrape.
#[derive(Debug, Default)]
pub(crate) struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sample = Sample::read();
        if let Some(seconds) = sample.cpu_seconds {
            let counter = ConstCounter::new(seconds);
            counter.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                counter.metric_type(),
            )?)?;
        }
        for (name, help, value) in [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                sample.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                sample.virtual_bytes,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                sample.start_time_seconds,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors.",
                sample.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                sample.max_fds,
            ),
        ] {
            if let Some(value) = value {
                let gauge = ConstGauge::new(value);
                gauge.encode(encoder.encode_descriptor(
                    name,
                    help,
                    None,
                    gauge.metric_type(),
                )?)?;
            }
        }
        Ok(())
    }
}
