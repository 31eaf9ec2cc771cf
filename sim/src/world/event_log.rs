//! [`EventLog`]: the world's event log. Every line is hashed (SHA-256) into the run's
//! behaviour fingerprint, counted, and kept in two bounded windows: the last
//! [`RECENT_LINES_MAX`] lines, for failure messages, and the lines of the last step, for the
//! swarm's per-seed log. The lines themselves are not stored otherwise: a long run's log would
//! not fit.

use std::collections::VecDeque;

use sha2::{Digest, Sha256};

/// Event-log lines kept in memory for [`EventLog::recent`].
pub const RECENT_LINES_MAX: usize = 500;

/// The hash, line count and recent lines of a run's event log.
#[derive(Clone, Debug, Default)]
pub struct EventLog {
    sha: Sha256,
    lines: u64,
    /// The last [`RECENT_LINES_MAX`] lines.
    recent: VecDeque<String>,
    /// Every line appended since [`EventLog::start_step`].
    step: Vec<String>,
}

impl EventLog {
    /// Starts a step: [`EventLog::step_lines`] is empty until the next append.
    pub fn start_step(&mut self) {
        self.step.clear();
    }

    /// Appends one line (without its newline).
    pub fn append(&mut self, line: &str) {
        self.sha.update(line.as_bytes());
        self.sha.update(b"\n");
        self.lines += 1;
        if self.recent.len() == RECENT_LINES_MAX {
            self.recent.pop_front();
        }
        self.recent.push_back(line.to_string());
        self.step.push(line.to_string());
    }

    /// Every line the current step appended.
    pub fn step_lines(&self) -> &[String] {
        &self.step
    }

    /// The last lines (at most [`RECENT_LINES_MAX`]), oldest first.
    pub fn recent(&self) -> Vec<String> {
        self.recent.iter().cloned().collect()
    }

    /// SHA-256 of every line so far, each followed by a newline, in lowercase hex.
    pub fn sha256_hex(&self) -> String {
        format!("{:x}", self.sha.clone().finalize())
    }

    /// Lines appended so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }
}
