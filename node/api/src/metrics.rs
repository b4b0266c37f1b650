//! The API's Prometheus metrics, served at `GET /metrics` (loopback callers only).
//!
//! One recorder per [`Api`](crate::server::Api), not the process-global one, so that several APIs
//! (tests) can live in one process. Names: `rtgs_<thing>_<unit>[_total]`.
//!
//! * `rtgs_ingress_requests_total{endpoint, status}` — every request, by route and HTTP status;
//! * `rtgs_ingress_latency_seconds{endpoint}` — request latency, a real histogram;
//! * `rtgs_finality_total{status}` — ACCC / RJCT notices of this center's entries, per batch;
//! * `rtgs_refusals_total{kind}` — the sequencer's `duplicate` / `conflict` answers;
//! * `rtgs_divergence_total` — finality halted (never expected);
//! * `rtgs_read_model_seq_applied`, `rtgs_tracked_entries` — gauges, set when scraped.

use metrics::{Key, Label, Level, Metadata, Recorder};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use std::time::Duration;

/// Latency buckets (seconds): the target is p99 ≤ 20 ms; the long tail shows engine waits.
const LATENCY_BUCKETS_S: [f64; 14] =
    [0.000_5, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0];

const METADATA: Metadata<'static> = Metadata::new("rtgs_api", Level::INFO, Some(module_path!()));

pub struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    /// The handles of each (endpoint, status) seen: a request then costs one read-locked lookup,
    /// not the key's strings and the registry's hashing (routes and statuses are few).
    per_request: std::sync::RwLock<std::collections::HashMap<String, Vec<(u16, RequestHandles)>>>,
    last_upkeep: std::sync::Mutex<std::time::Instant>,
}

#[derive(Clone)]
struct RequestHandles {
    count: metrics::Counter,
    latency: metrics::Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        let builder = PrometheusBuilder::new();
        // `set_buckets` refuses only an empty list.
        let builder = match builder.set_buckets(&LATENCY_BUCKETS_S) {
            Ok(b) => b,
            Err(_) => unreachable!("the bucket list is not empty"),
        };
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        let metrics = Metrics {
            recorder,
            handle,
            per_request: Default::default(),
            last_upkeep: std::sync::Mutex::new(std::time::Instant::now()),
        };
        // Every counter exists from the start at 0: `increase()`/`rate()` and the alert rules
        // then see the first event as an increase, and dashboards show 0 instead of nothing.
        metrics.finals(0, 0);
        metrics.refusals(0, 0);
        metrics.recorder.register_counter(&key("rtgs_divergence_total", &[]), &METADATA).increment(0);
        metrics
    }
}

fn key(name: &'static str, labels: &[(&'static str, String)]) -> Key {
    Key::from_parts(name, labels.iter().map(|(k, v)| Label::new(*k, v.clone())).collect::<Vec<_>>())
}

impl Metrics {
    pub fn request(&self, endpoint: &str, status: u16, latency: Duration) {
        let cached = {
            let map = self.per_request.read().unwrap_or_else(|e| e.into_inner());
            map.get(endpoint).and_then(|v| v.iter().find(|(s, _)| *s == status).map(|(_, h)| h.clone()))
        };
        let handles = match cached {
            Some(h) => h,
            None => {
                let labels = [("endpoint", endpoint.to_string()), ("status", status.to_string())];
                let count =
                    self.recorder.register_counter(&key("rtgs_ingress_requests_total", &labels), &METADATA);
                let latency_key = key("rtgs_ingress_latency_seconds", &[("endpoint", endpoint.to_string())]);
                let latency = self.recorder.register_histogram(&latency_key, &METADATA);
                let h = RequestHandles { count, latency };
                let mut map = self.per_request.write().unwrap_or_else(|e| e.into_inner());
                map.entry(endpoint.to_string()).or_default().push((status, h.clone()));
                h
            }
        };
        handles.count.increment(1);
        handles.latency.record(latency.as_secs_f64());
    }

    /// One batch of final notices.
    pub fn finals(&self, accepted: u64, rejected: u64) {
        for (status, n) in [("ACCC", accepted), ("RJCT", rejected)] {
            let k = key("rtgs_finality_total", &[("status", status.to_string())]);
            self.recorder.register_counter(&k, &METADATA).increment(n);
        }
    }

    /// One batch of refusals.
    pub fn refusals(&self, duplicates: u64, conflicts: u64) {
        for (kind, n) in [("duplicate", duplicates), ("conflict", conflicts)] {
            let k = key("rtgs_refusals_total", &[("kind", kind.to_string())]);
            self.recorder.register_counter(&k, &METADATA).increment(n);
        }
    }

    pub fn divergence(&self) {
        self.recorder.register_counter(&key("rtgs_divergence_total", &[]), &METADATA).increment(1);
    }

    /// Folds the histograms' pending samples in, at most every [`crate::limits::METRICS_UPKEEP`].
    pub fn upkeep_if_due(&self) {
        let mut last = self.last_upkeep.lock().unwrap_or_else(|e| e.into_inner());
        if last.elapsed() >= crate::limits::METRICS_UPKEEP {
            self.handle.run_upkeep();
            *last = std::time::Instant::now();
        }
    }

    /// The text exposition, with the gauges set to the given values first.
    pub fn render(&self, read_model_seq_applied: u64, tracked_entries: usize) -> String {
        let gauges = [
            ("rtgs_read_model_seq_applied", read_model_seq_applied as f64),
            ("rtgs_tracked_entries", tracked_entries as f64),
        ];
        for (name, value) in gauges {
            self.recorder.register_gauge(&key(name, &[]), &METADATA).set(value);
        }
        self.handle.render()
    }
}
