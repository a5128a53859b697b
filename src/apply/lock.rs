//! The project lock: one rsbuilder command at a time plans and writes a project.

use std::fs;
use std::path::Path;

use anyhow::Context as _;

use crate::ui;

use super::journal::recover;

/// The exclusive lock of one project: one rsbuilder command at a time plans and writes it.
/// Released when dropped, or when the process ends however it ends.
#[derive(Debug)]
pub struct ProjectLock {
    _dir: fs::File,
}

/// Takes the lock of the project in `root`, waiting while another rsbuilder command holds it,
/// then undoes what an interrupted command left half written (its journal). Take it before
/// reading anything the plan depends on, and hold it to the end of the command.
pub fn lock(root: &Path) -> anyhow::Result<ProjectLock> {
    let dir = fs::File::open(root)
        .with_context(|| format!("failed to open `{}` to lock it", root.display()))?;
    match dir.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            ui::note(&waiting_message(root));
            dir.lock()
                .with_context(|| format!("failed to lock `{}`", root.display()))?;
        }
        Err(fs::TryLockError::Error(error)) => {
            return Err(error).with_context(|| format!("failed to lock `{}`", root.display()));
        }
    }
    recover(root)?;
    super::swap::recover(root)?;
    Ok(ProjectLock { _dir: dir })
}

/// What a command says while it waits for the lock: which process holds it, when
/// `/proc/locks` tells, and that the holder may be waiting at a prompt.
pub(super) fn waiting_message(root: &Path) -> String {
    let holder = lock_holder(root)
        .map(|(pid, command)| format!(": process {pid} (`{command}`) holds its lock"))
        .unwrap_or_default();
    format!(
        "waiting for another rsbuilder command in this project to finish{holder}; if it asks a question, answer it in its terminal"
    )
}

/// The process holding the lock of the folder `root`, and its command line.
pub(super) fn lock_holder(root: &Path) -> Option<(u32, String)> {
    use std::os::unix::fs::MetadataExt as _;
    let folder = fs::metadata(root).ok()?;
    let pid = lock_owner(
        &fs::read_to_string("/proc/locks").ok()?,
        folder.dev(),
        folder.ino(),
    )?;
    let command = command_line(&fs::read(format!("/proc/{pid}/cmdline")).ok()?)?;
    Some((pid, command))
}

/// A process's command line as `/proc/<pid>/cmdline` holds it (arguments ended by NUL
/// bytes), for a person: the program's file name and its arguments, separated by spaces.
pub(super) fn command_line(cmdline: &[u8]) -> Option<String> {
    let mut args = cmdline
        .split(|byte| *byte == 0)
        .filter(|arg| !arg.is_empty())
        .map(String::from_utf8_lossy);
    let program = args.next()?;
    let program = program.rsplit('/').next().unwrap_or_default().to_owned();
    Some(
        std::iter::once(program)
            .chain(args.map(|arg| arg.into_owned()))
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// The pid that holds a `flock` on the file `dev`/`ino` in the text of `/proc/locks`, whose
/// lines read `1: FLOCK  ADVISORY  WRITE 4321 fd:01:1234 0 EOF` (a waiter's line has `->`
/// after the number, and is not a holder).
pub(super) fn lock_owner(locks: &str, dev: u64, ino: u64) -> Option<u32> {
    // The kernel's 12-bit major and 20-bit minor in the 32 bits it gives `st_dev`: the minor's
    // low byte, the major, then the rest of the minor.
    let major = (dev >> 8) & 0xfff;
    let minor = (dev & 0xff) + ((dev >> 12) & !0xff);
    let file = format!("{major:02x}:{minor:02x}:{ino}");
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [_, "FLOCK", _, _, pid, id, ..] if *id == file => pid.parse().ok(),
            _ => None,
        }
    })
}
