use super::*;

#[test]
fn the_lock_holder_is_the_flock_line_of_the_folder() {
    // dev 0xfd01 (major 0xfd, minor 1); dev 0x801 (major 8, minor 1) is another device.
    let locks = "1: POSIX  ADVISORY  WRITE 11 fd:01:99 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 22 08:01:1234 0 EOF\n\
                     3: FLOCK  ADVISORY  WRITE 33 fd:01:12345 0 EOF\n\
                     3: -> FLOCK  ADVISORY  WRITE 44 fd:01:1234 0 EOF\n\
                     4: FLOCK  ADVISORY  WRITE 55 fd:01:1234 0 EOF\n";
    assert_eq!(lock_owner(locks, 0xfd01, 1234), Some(55));
    assert_eq!(lock_owner(locks, 0x801, 1234), Some(22));
    assert_eq!(lock_owner(locks, 0xfd01, 99), None);
    assert_eq!(lock_owner(locks, 0xfd01, 7), None);
    // A large device number: major 259, minor 300 (dev_t's split encoding).
    let dev = (300 & 0xff) | ((259 & 0xfff) << 8) | ((300 & !0xff) << 12);
    assert_eq!(
        lock_owner("1: FLOCK  ADVISORY  WRITE 66 103:12c:5 0 EOF\n", dev, 5),
        Some(66)
    );
}

#[test]
fn a_command_line_reads_as_typed() {
    assert_eq!(
        command_line(b"/usr/local/bin/rsbuilder\0create\0api\0--kind\0Bar\0").as_deref(),
        Some("rsbuilder create api --kind Bar")
    );
    assert_eq!(
        command_line(b"rsbuilder\0\0edit\0").as_deref(),
        Some("rsbuilder edit")
    );
    assert_eq!(command_line(b""), None);
}

/// A command waiting for the lock names the process holding it.
#[test]
fn the_waiting_message_names_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let first = lock(dir.path()).unwrap();
    let message = waiting_message(dir.path());
    drop(first);
    assert!(
        message.contains(&format!(": process {} (`", std::process::id())),
        "{message}"
    );
    assert!(message.ends_with("answer it in its terminal"), "{message}");
    // A folder nobody locked. (The one above may stay locked a moment after the drop: a
    // process another test forks holds a copy of the descriptor until it execs.)
    let unlocked = tempfile::tempdir().unwrap();
    assert_eq!(
        waiting_message(unlocked.path()),
        "waiting for another rsbuilder command in this project to finish; if it asks a question, answer it in its terminal"
    );
}

/// Pins the project lock: a second command waits for the first.
#[test]
fn a_second_command_waits_for_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let first = lock(&root).unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    let waiting = std::thread::spawn(move || {
        let second = lock(&root).unwrap();
        sender.send(()).unwrap();
        drop(second);
    });
    assert!(
        receiver
            .recv_timeout(std::time::Duration::from_millis(300))
            .is_err(),
        "the second lock was taken while the first was held"
    );
    drop(first);
    receiver
        .recv_timeout(std::time::Duration::from_secs(5))
        .expect("the second lock once the first was released");
    waiting.join().unwrap();
}
