//! Sending encoded span batches without ever holding up a run: a bounded queue the run's
//! thread only offers to, one background thread that POSTs each batch with a timeout, and a
//! warning (once per outage, not once per run) when the collector does not take them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::config::TelemetryConfig;

/// Runs' batches waiting to be sent; a run finding the queue full drops its spans.
pub const QUEUE_RUNS: usize = 64;

/// The sending side, shared by every run.
pub struct Exporter {
    queue: SyncSender<Vec<u8>>,
    state: Arc<State>,
}

/// What the sender thread and the runs share.
struct State {
    /// Batches queued or being sent, and the condition [`Exporter::flush`] waits on.
    pending: Mutex<usize>,
    drained: Condvar,
    /// The last export failed (its warning was given; the next is given after a success).
    failing: AtomicBool,
    /// The queue was found full (warned once until it drains).
    overflowing: AtomicBool,
}

impl Exporter {
    /// Starts the sender thread.
    pub fn start(config: &TelemetryConfig) -> std::io::Result<Self> {
        let (queue, batches) = sync_channel(QUEUE_RUNS);
        let state = Arc::new(State {
            pending: Mutex::new(0),
            drained: Condvar::new(),
            failing: AtomicBool::new(false),
            overflowing: AtomicBool::new(false),
        });
        let sender = Sender {
            endpoint: config.endpoint.clone(),
            headers: config.headers.clone(),
            timeout: config.timeout,
            state: Arc::clone(&state),
        };
        std::thread::Builder::new()
            .name("ragtrail-otlp".into())
            .spawn(move || sender.run(batches))?;
        Ok(Self { queue, state })
    }

    /// Queues one batch; never waits.
    pub fn offer(&self, batch: Vec<u8>) {
        let mut pending = lock(&self.state.pending);
        match self.queue.try_send(batch) {
            Ok(()) => *pending += 1,
            Err(TrySendError::Full(_)) => {
                if !self.state.overflowing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "OpenTelemetry export is falling behind: {QUEUE_RUNS} runs wait to be sent; the spans of newer runs are dropped (their JSONL traces are kept)"
                    );
                }
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Waits until every queued batch was sent or given up, at most `wait`; whether they were.
    pub fn flush(&self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        let mut pending = lock(&self.state.pending);
        while *pending > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            pending = match self.state.drained.wait_timeout(pending, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        true
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The background thread's side.
struct Sender {
    endpoint: String,
    headers: Vec<(String, String)>,
    timeout: Duration,
    state: Arc<State>,
}

impl Sender {
    fn run(self, batches: Receiver<Vec<u8>>) {
        // Built here, off any async runtime a server runs runs on.
        let client = crate::http::client_builder()
            .timeout(self.timeout)
            .connect_timeout(self.timeout)
            .build();
        for batch in batches {
            let result = match &client {
                Ok(client) => self.send(client, batch),
                Err(e) => Err(format!("no HTTP client: {e}")),
            };
            match result {
                Ok(()) => {
                    if self.state.failing.swap(false, Ordering::Relaxed) {
                        tracing::warn!(endpoint = %self.endpoint, "OpenTelemetry export works again");
                    }
                }
                Err(why) => {
                    if !self.state.failing.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            endpoint = %self.endpoint,
                            "OpenTelemetry export failed: {why}; spans are dropped until the collector answers (the JSONL traces are kept)"
                        );
                    } else {
                        tracing::debug!(endpoint = %self.endpoint, "OpenTelemetry export failed: {why}");
                    }
                }
            }
            let mut pending = lock(&self.state.pending);
            *pending = pending.saturating_sub(1);
            if *pending == 0 {
                self.state.overflowing.store(false, Ordering::Relaxed);
                self.state.drained.notify_all();
            }
        }
    }

    fn send(&self, client: &reqwest::blocking::Client, batch: Vec<u8>) -> Result<(), String> {
        let mut request = client
            .post(&self.endpoint)
            .header("content-type", "application/x-protobuf")
            .body(batch);
        for (k, v) in &self.headers {
            request = request.header(k.as_str(), v.as_str());
        }
        // The error names the endpoint and the cause, never a header value.
        let response = request.send().map_err(|e| with_causes(&e.without_url()))?;
        let status = response.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("the collector answered {status}"))
        }
    }
}

/// An error and its causes, `error sending request: … Connection refused`, so the warning
/// says what actually went wrong.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A collector that takes connections and never answers: the queue fills, further runs'
    /// batches are dropped instead of waited for, and a bounded flush gives up.
    #[test]
    fn a_full_queue_drops_instead_of_waiting_and_flush_is_bounded() {
        let hung = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let config = TelemetryConfig {
            endpoint: format!("http://{}/v1/traces", hung.local_addr().expect("addr")),
            headers: Vec::new(),
            timeout: Duration::from_secs(30),
            resource: Vec::new(),
            capture_content: false,
        };
        let exporter = Exporter::start(&config).expect("start");
        for _ in 0..QUEUE_RUNS * 3 {
            exporter.offer(vec![0u8; 16]);
        }
        // At most the queue and the one batch being sent are pending: the rest were dropped.
        let pending = *lock(&exporter.state.pending);
        assert!(pending <= QUEUE_RUNS + 1, "{pending} pending");
        assert!(exporter.state.overflowing.load(Ordering::Relaxed));
        assert!(!exporter.flush(Duration::from_millis(50)));
    }
}
