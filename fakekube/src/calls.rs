//! The call log's records: every seam call with its time, target and outcome, in call order (the
//! log itself is fakekit's [`CallLog`](fakekit::CallLog)). Tests assert on it, the simulation
//! prints it, and two runs with the same seed produce the same log.

use std::fmt;

use jiff::Timestamp;

use crate::faults::ApiOperation;

/// One call as the server answered it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiCall {
    /// 1 for the first call since construction or reset.
    pub seq: u64,
    pub time: Timestamp,
    pub operation: ApiOperation,
    /// The resource's plural (`pods`, `nodeclaims`).
    pub kind: &'static str,
    /// `namespace/name` or `name`; for list and watch the filters (`ns=… labels=… fields=…`).
    pub target: String,
    /// `ok …` with what came back, or `err …` with the error.
    pub outcome: String,
}

impl ApiCall {
    pub fn is_ok(&self) -> bool {
        self.outcome.starts_with("ok")
    }
}

impl fmt::Display for ApiCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "#{} {} {} {} {} -> {}",
            self.seq, self.time, self.operation, self.kind, self.target, self.outcome
        )
    }
}

impl fakekit::Record for ApiCall {
    type Operation = ApiOperation;
    /// The resource's plural and the target.
    type Input = (&'static str, String);

    fn new(
        seq: u64,
        time: Timestamp,
        operation: ApiOperation,
        (kind, target): (&'static str, String),
        outcome: String,
    ) -> Self {
        Self {
            seq,
            time,
            operation,
            kind,
            target,
            outcome,
        }
    }

    fn operation(&self) -> ApiOperation {
        self.operation
    }
}
