//! The call log: every seam call a fake served, with its time, input and outcome, in call order.
//! Tests assert on it, the simulation tallies faults from it, and two runs with the same seed
//! produce the same log.

use std::collections::VecDeque;
use std::fmt;

use jiff::Timestamp;

/// One call as a fake served it (fakecloud's `CallRecord`, fakekube's `ApiCall`).
pub trait Record: Clone {
    /// The operation enum of the fake (AWS's action names, the `KubeApi` method names).
    type Operation: Copy + PartialEq;
    /// What the record keeps of the request.
    type Input;

    /// The record of call number `seq` (1 for the first since construction or reset).
    fn new(
        seq: u64,
        time: Timestamp,
        operation: Self::Operation,
        input: Self::Input,
        outcome: String,
    ) -> Self;

    fn operation(&self) -> Self::Operation;
}

/// Bounded: the oldest records go first once `len_max` is reached. Sequence numbers count every
/// call, kept or not.
#[derive(Clone, Debug)]
pub struct CallLog<R> {
    records: VecDeque<R>,
    len_max: usize,
    next_seq: u64,
}

impl<R: Record> CallLog<R> {
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
        operation: R::Operation,
        input: R::Input,
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
        self.records
            .push_back(R::new(seq, time, operation, input, outcome));
    }

    /// Changes the bound, dropping the oldest records beyond it.
    pub fn set_len_max(&mut self, len_max: usize) {
        self.len_max = len_max;
        while self.records.len() > len_max {
            self.records.pop_front();
        }
    }

    /// The records kept, oldest first.
    pub fn records(&self) -> Vec<R> {
        self.records.iter().cloned().collect()
    }

    /// The records kept of one operation, oldest first.
    pub fn of(&self, operation: R::Operation) -> Vec<R> {
        self.records
            .iter()
            .filter(|r| r.operation() == operation)
            .cloned()
            .collect()
    }

    /// Forgets the records kept (sequence numbers go on).
    pub fn clear(&mut self) {
        self.records.clear();
    }
}

/// `ok …`/`err …` for a call result.
pub fn outcome<T, E: fmt::Display>(result: &Result<T, E>, ok: impl FnOnce(&T) -> String) -> String {
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
pub fn list<I, S>(items: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let joined: Vec<String> = items.into_iter().map(|s| s.as_ref().to_string()).collect();
    format!("[{}]", joined.join(","))
}
