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
