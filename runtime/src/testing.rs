use std::future::Future;
use std::time::Duration;

/// The output of `future`, which must finish within a minute of the test's clock (paused
/// time, in most tests) and within 10 s of the wall clock: a test that goes wrong fails
/// instead of hanging, well within `cargo mutants --timeout 60`, paused or not.
pub(crate) async fn within<T>(future: impl Future<Output = T>) -> T {
    let (wall, timed_out) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(10));
        let _ = wall.send(());
    });
    tokio::select! {
        output = tokio::time::timeout(Duration::from_secs(60), future) => {
            output.expect("finished within 60 s of the test's clock")
        }
        _ = timed_out => panic!("not finished within 10 s of the wall clock"),
    }
}

/// A writer into a shared buffer, for a test's log subscriber.
#[derive(Clone, Default)]
struct Logs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The log lines of this thread, at debug level and above and without colours, while it
/// lives.
pub(crate) struct Captured {
    logs: Logs,
    _guard: tracing::subscriber::DefaultGuard,
}

impl Captured {
    /// What was logged so far, a line per event.
    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.logs.0.lock().unwrap().clone()).unwrap()
    }
}

/// Captures the log of this thread (of a test's tasks, on tokio's current-thread runtime).
pub(crate) fn capture() -> Captured {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .without_time()
        .finish();
    Captured {
        logs,
        _guard: tracing::subscriber::set_default(subscriber),
    }
}

/// What `f` logs at debug level and above, a line per event, without colours.
pub(crate) fn logged(f: impl FnOnce()) -> String {
    let captured = capture();
    f();
    captured.text()
}
