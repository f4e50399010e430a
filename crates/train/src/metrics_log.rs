//! `metrics.jsonl`: one JSON object per line, each with `event` and `step`
//! (docs/architecture.md, The run directory). A resumed run first cuts the file back to its
//! checkpoint's step, dropping a partial last line that a SIGKILL may have left, then appends.
//! Every event's numbers also go to TensorBoard's events file beside it ([`crate::tfevents`]),
//! cut back the same way.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The log of one run.
pub struct MetricsLog {
    path: PathBuf,
    events: PathBuf,
}

impl MetricsLog {
    pub fn new(path: PathBuf) -> Self {
        let events = path.with_file_name(crate::tfevents::FILE_NAME);
        MetricsLog { path, events }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one event (a JSON object) as a line.
    pub fn append(&self, event: &Value) -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&self.path)?;
        let mut line = event.to_string();
        line.push('\n');
        file.write_all(line.as_bytes())?;
        crate::tfevents::append(&self.events, event)
    }

    /// Whether the log ends with a whole `summary` line (the run finished and said so).
    pub fn has_summary(&self) -> bool {
        let Ok(text) = std::fs::read_to_string(&self.path) else { return false };
        text.ends_with('\n')
            && text
                .lines()
                .last()
                .and_then(|l| serde_json::from_str::<Value>(l).ok())
                .is_some_and(|v| v["event"] == "summary")
    }

    /// Keeps the complete lines whose `step` is at most `step` (and no `summary` or
    /// `valid-averaged` evaluation: the end of a run is redone whole), dropping everything
    /// after; rewrites the file whole (synced, then renamed over it: [`crate::whole_file`]). A partial last line (the process died writing it)
    /// is dropped; a complete line that is not an event with a step is an error naming it, and
    /// the file is left as it was.
    pub fn cut_to_step(&self, step: u64) -> std::io::Result<()> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return crate::tfevents::cut_to_step(&self.events, step)
            }
            Err(e) => return Err(e),
        };
        let mut kept = String::new();
        for (number, line) in text.split_inclusive('\n').enumerate() {
            if !line.ends_with('\n') {
                break; // a partial line: the process died while writing it
            }
            let v = serde_json::from_str::<Value>(line).ok();
            let Some((v, line_step)) = v.and_then(|v| v["step"].as_u64().map(|s| (v, s))) else {
                let message =
                    format!("line {}: not an event with a step; the log is damaged (nothing was cut)", number + 1);
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, message));
            };
            if line_step > step || v["event"] == "summary" || v["split"] == "valid-averaged" {
                break;
            }
            kept.push_str(line);
        }
        crate::tfevents::cut_to_step(&self.events, step)?;
        crate::whole_file::write_whole(&self.path, kept)
    }

    /// Every event of the log, in order (the loss plot reads this).
    pub fn read(&self) -> std::io::Result<Vec<Value>> {
        let text = std::fs::read_to_string(&self.path)?;
        Ok(text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cutting_keeps_whole_lines_up_to_the_step_and_drops_a_partial_tail() {
        let dir = tempfile::tempdir().unwrap();
        let log = MetricsLog::new(dir.path().join("metrics.jsonl"));
        for step in 1..=5 {
            log.append(&json!({"event": "train", "step": step, "loss": 1.0})).unwrap();
        }
        let mut f = std::fs::OpenOptions::new().append(true).open(log.path()).unwrap();
        f.write_all(b"{\"event\": \"train\", \"st").unwrap();
        log.cut_to_step(3).unwrap();
        let steps: Vec<u64> = log.read().unwrap().iter().map(|v| v["step"].as_u64().unwrap()).collect();
        assert_eq!(steps, [1, 2, 3]);
    }

    #[test]
    fn a_damaged_complete_line_is_an_error_naming_it_and_nothing_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let log = MetricsLog::new(dir.path().join("metrics.jsonl"));
        log.append(&json!({"event": "train", "step": 1, "loss": 1.0})).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(log.path()).unwrap();
        f.write_all(b"not json\n").unwrap();
        log.append(&json!({"event": "train", "step": 2, "loss": 1.0})).unwrap();
        let before = std::fs::read(log.path()).unwrap();
        let err = log.cut_to_step(5).unwrap_err().to_string();
        assert!(err.contains("line 2: not an event with a step"), "{err}");
        assert_eq!(std::fs::read(log.path()).unwrap(), before, "the log as it was");
    }
}
