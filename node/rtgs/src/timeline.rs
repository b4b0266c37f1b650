//! `--latency-timeline FILE`: submit → final latency per 100 ms of wall time, as CSV.
//!
//! One row per 100 ms slice of the run, by the time a payment became final (as the client saw
//! the notice): `t_s,finalized,p50_us,p99_us,max_us`. A slice in which nothing became final is
//! a row with `finalized` 0 and empty latencies — a stall shows as a run of such rows followed
//! by a slice whose `max_us` is the stall's length. Notices arrive in time order, so one
//! histogram is reused slice after slice: the timeline costs a few kilobytes whatever the run's
//! length. `bench/plot-timeline.py` turns two such files into the before/after plot in
//! `bench/README.md`.

use hdrhistogram::Histogram;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// The width of one row.
pub const SLICE_US: u64 = 100_000;

pub struct Timeline {
    out: BufWriter<File>,
    start_us: u64,
    /// The slice being filled (index from the start).
    slice: u64,
    latency: Histogram<u64>,
}

impl Timeline {
    pub fn create(path: &Path, start_us: u64) -> anyhow::Result<Timeline> {
        let file =
            File::create(path).map_err(|e| anyhow::anyhow!("--latency-timeline {}: {e}", path.display()))?;
        let mut out = BufWriter::new(file);
        writeln!(out, "t_s,finalized,p50_us,p99_us,max_us")?;
        Ok(Timeline { out, start_us, slice: 0, latency: Histogram::new_with_bounds(1, 60_000_000, 2)? })
    }

    /// A payment became final at `now_us` (the cluster's clock), `latency_us` after it was due.
    pub fn record(&mut self, now_us: u64, latency_us: u64) -> anyhow::Result<()> {
        let slice = now_us.saturating_sub(self.start_us) / SLICE_US;
        while self.slice < slice {
            self.flush_slice()?;
        }
        self.latency.saturating_record(latency_us.max(1));
        Ok(())
    }

    /// Writes the last slice and the file.
    pub fn finish(mut self) -> anyhow::Result<()> {
        self.flush_slice()?;
        self.out.flush()?;
        Ok(())
    }

    fn flush_slice(&mut self) -> anyhow::Result<()> {
        let t = (self.slice + 1) as f64 * SLICE_US as f64 / 1e6;
        let h = &self.latency;
        if h.is_empty() {
            writeln!(self.out, "{t:.1},0,,,")?;
        } else {
            let (p50, p99) = (h.value_at_quantile(0.5), h.value_at_quantile(0.99));
            writeln!(self.out, "{t:.1},{},{p50},{p99},{}", h.len(), h.max())?;
        }
        self.latency.reset();
        self.slice += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_per_slice_and_empty_slices_show() {
        let path = std::env::temp_dir().join(format!("rtgs-timeline-{}.csv", std::process::id()));
        let mut t = Timeline::create(&path, 1_000_000).unwrap_or_else(|e| panic!("{e}"));
        for (now, lat) in [(1_000_010, 100), (1_050_000, 300), (1_350_000, 250_000)] {
            t.record(now, lat).unwrap_or_else(|e| panic!("{e}"));
        }
        t.finish().unwrap_or_else(|e| panic!("{e}"));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let _ = std::fs::remove_file(&path);
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows[0], "t_s,finalized,p50_us,p99_us,max_us");
        assert!(rows[1].starts_with("0.1,2,"), "{text}");
        assert_eq!(&rows[2..4], &["0.2,0,,,", "0.3,0,,,"], "{text}");
        let last: Vec<&str> = rows[4].split(',').collect();
        assert_eq!(&last[..2], &["0.4", "1"], "{text}");
        let max: u64 = last[4].parse().unwrap_or(0);
        assert!(max.abs_diff(250_000) <= 2_500, "the stall's length within 1 %: {text}");
        assert_eq!(rows.len(), 5, "{text}");
    }
}
