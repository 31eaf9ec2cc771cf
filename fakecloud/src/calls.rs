//! The call log: every API call with its time, input and outcome, in call order. Tests assert on
//! it, the simulation prints it, and two runs with the same seed produce the same log.

use std::collections::VecDeque;
use std::fmt;

use jiff::Timestamp;

use crate::faults::Operation;

/// One API call as the fake served it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallRecord {
    /// 1 for the first call since construction or reset.
    pub seq: u64,
    pub time: Timestamp,
    pub operation: Operation,
    /// The request, condensed (`spot lt=x overrides=[m5.large/subnet-…/us-west-2a]`).
    pub input: String,
    /// `ok …` with what came back, or `err …` with the error.
    pub outcome: String,
}

impl CallRecord {
    pub fn is_ok(&self) -> bool {
        self.outcome.starts_with("ok")
    }
}

impl fmt::Display for CallRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "#{} {} {} {} -> {}",
            self.seq, self.time, self.operation, self.input, self.outcome
        )
    }
}

/// Bounded: the oldest records go first once `len_max` is reached.
#[derive(Clone, Debug)]
pub(crate) struct CallLog {
    records: VecDeque<CallRecord>,
    len_max: usize,
    next_seq: u64,
}

impl CallLog {
    pub fn new(len_max: usize) -> Self {
        Self {
            records: VecDeque::new(),
            len_max,
            next_seq: 1,
        }
    }

    pub fn record(
        &mut self,
        time: Timestamp,
        operation: Operation,
        input: String,
        outcome: String,
    ) {
        if self.len_max == 0 {
            self.next_seq += 1;
            return;
        }
        while self.records.len() >= self.len_max {
            self.records.pop_front();
        }
        self.records.push_back(CallRecord {
            seq: self.next_seq,
            time,
            operation,
            input,
            outcome,
        });
        self.next_seq += 1;
    }

    pub fn records(&self) -> Vec<CallRecord> {
        self.records.iter().cloned().collect()
    }

    pub fn clear(&mut self) {
        self.records.clear();
    }
}

/// `ok …`/`err …` for a call result.
pub(crate) fn outcome<T, E: fmt::Display>(
    result: &Result<T, E>,
    ok: impl FnOnce(&T) -> String,
) -> String {
    match result {
        Ok(value) => {
            let detail = ok(value);
            if detail.is_empty() {
                "ok".to_string()
            } else {
                format!("ok {detail}")
            }
        }
        Err(error) => format!("err {error}"),
    }
}

/// `[a,b,c]`.
pub(crate) fn list<I, S>(items: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let joined: Vec<String> = items.into_iter().map(|s| s.as_ref().to_string()).collect();
    format!("[{}]", joined.join(","))
}
