//! The call log's records: every API call with its time, input and outcome, in call order (the
//! log itself is fakekit's [`CallLog`](fakekit::CallLog)). Tests assert on it, the simulation
//! prints it, and two runs with the same seed produce the same log.

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

impl fakekit::Record for CallRecord {
    type Operation = Operation;
    type Input = String;

    fn new(
        seq: u64,
        time: Timestamp,
        operation: Operation,
        input: String,
        outcome: String,
    ) -> Self {
        Self {
            seq,
            time,
            operation,
            input,
            outcome,
        }
    }

    fn operation(&self) -> Operation {
        self.operation
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
