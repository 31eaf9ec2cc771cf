//! The call log: every seam call with its time, target and outcome, in call order. Tests assert on
//! it, the simulation prints it, and two runs with the same seed produce the same log.

use std::collections::VecDeque;
use std::fmt;

use jiff::Timestamp;

use crate::apiserver::faults::ApiOperation;

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

/// Bounded: the oldest records go first once `len_max` is reached.
#[derive(Clone, Debug)]
pub(crate) struct CallLog {
    records: VecDeque<ApiCall>,
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
        operation: ApiOperation,
        kind: &'static str,
        target: String,
        outcome: String,
    ) {
        let seq = self.next_seq;
        self.next_seq += 1;
        if self.len_max == 0 {
            return;
        }
        while self.records.len() >= self.len_max {
            self.records.pop_front();
        }
        self.records.push_back(ApiCall {
            seq,
            time,
            operation,
            kind,
            target,
            outcome,
        });
    }

    /// Changes the bound, dropping the oldest records beyond it.
    pub fn set_len_max(&mut self, len_max: usize) {
        self.len_max = len_max;
        while self.records.len() > len_max {
            self.records.pop_front();
        }
    }

    pub fn records(&self) -> Vec<ApiCall> {
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
