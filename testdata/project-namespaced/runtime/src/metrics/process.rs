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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_name_with_spaces_and_parentheses_does_not_shift_the_fields() {
        let fields = stat_fields("42 (my (odd) manager) S 1 42 42 0 -1 4194560 100 0 0 0 250 50");
        assert_eq!(fields[0], "S");
        assert_eq!(fields[11], "250");
        assert_eq!(fields[12], "50");
    }

    /// The units of proc(5): clock ticks of 1/100 s, the boot time in seconds since the epoch,
    /// memory in KiB.
    #[test]
    fn proc_files_are_read_in_their_units() {
        let sample = Sample::parse(&Proc {
            stat: Some(
                "42 (manager) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 4 0 1234 98304000 1500"
                    .into(),
            ),
            system_stat: Some("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n".into()),
            status: Some("Name:\tmanager\nVmRSS:\t    2048 kB\nThreads:\t4\n".into()),
            limits: Some(
                "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 4096                 files\n"
                    .into(),
            ),
            open_fds: Some(7),
        });
        assert_eq!(
            sample,
            Sample {
                cpu_seconds: Some(3.0),
                resident_bytes: Some(2048.0 * 1024.0),
                virtual_bytes: Some(98_304_000.0),
                start_time_seconds: Some(1_700_000_012.34),
                open_fds: Some(7.0),
                max_fds: Some(1024.0),
            }
        );
        assert_eq!(Sample::parse(&Proc::default()), Sample::default());
    }

    #[test]
    fn this_process_is_read_from_proc() {
        if !std::path::Path::new("/proc/self/stat").exists() {
            panic!("this test reads /proc, which Linux has");
        }
        let before = Sample::read();
        // Burn some CPU and memory, which the next reading shows.
        let mut sum = 0u64;
        let block = vec![1u8; 32 * 1024 * 1024];
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_millis(300) {
            sum = sum.wrapping_add(block.iter().map(|b| u64::from(*b)).sum::<u64>());
        }
        let after = Sample::read();
        assert!(sum > 0);
        assert!(after.cpu_seconds.unwrap() >= before.cpu_seconds.unwrap() + 0.1);
        assert!(after.resident_bytes.unwrap() >= 32.0 * 1024.0 * 1024.0);
        assert!(after.virtual_bytes.unwrap() >= after.resident_bytes.unwrap());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started_at = after.start_time_seconds.unwrap();
        assert!(
            started_at <= now + 1.0 && started_at > now - 24.0 * 3600.0,
            "{started_at}"
        );
        let open = after.open_fds.unwrap();
        assert!(open >= 3.0 && open < after.max_fds.unwrap());
    }
}
