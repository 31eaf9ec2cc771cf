//! Behaviour knobs and inspection: what tests and the simulation use besides the seam. None of
//! these is a seam call: they draw no fault and are not in the call log.

use karpenter_core::seams::kube::{ObjectKey, ResourceKind};
use serde_json::Value;

use crate::apiserver::calls::ApiCall;
use crate::apiserver::config::ApiServerConfig;
use crate::apiserver::faults::{ApiFault, ApiFaultRates, ApiOperation};
use crate::apiserver::store::resource;
use crate::apiserver::{ApiServer, RecordedEvent};

/// Knobs.
impl ApiServer {
    /// Changes settings for the rest of the run. The history, call log and event bounds apply at
    /// once (dropping the oldest entries beyond them); `watch_events_max` applies to watches
    /// opened afterwards; the seed only matters at construction and [`ApiServer::reset`].
    pub fn configure(&self, change: impl FnOnce(&mut ApiServerConfig)) {
        let mut state = self.current();
        change(&mut state.config);
        let config = state.config.clone();
        state.watch.set_history_max(config.watch_history_max);
        state.calls.set_len_max(config.call_log_len_max);
        while state.events.len() > config.events_max {
            state.events.pop_front();
        }
    }

    /// Standing fault rates of one operation.
    pub fn set_fault_rates(&self, operation: ApiOperation, rates: ApiFaultRates) {
        self.configure(|c| {
            c.faults.insert(operation, rates);
        });
    }

    /// Standing fault rates of every operation.
    pub fn set_fault_rates_all(&self, rates: ApiFaultRates) {
        self.configure(|c| {
            for operation in ApiOperation::ALL {
                c.faults.insert(operation, rates);
            }
        });
    }

    /// What the next calls of `operation` get, one fault per call, before any rate applies.
    pub fn script_faults(
        &self,
        operation: ApiOperation,
        faults: impl IntoIterator<Item = ApiFault>,
    ) {
        self.current()
            .faults
            .scripts
            .entry(operation)
            .or_default()
            .extend(faults);
    }

    /// Removes every fault: rates and scripts.
    pub fn clear_faults(&self) {
        let mut state = self.current();
        state.config.faults.clear();
        state.faults = Default::default();
    }

    /// Writes each PodDisruptionBudget's numbers (`expectedPods`, `currentHealthy`,
    /// `desiredHealthy`, `disruptionsAllowed`, `observedGeneration`) to its status, as Kubernetes'
    /// disruption controller does; the simulation calls it each step. Returns how many changed.
    pub fn sync_pdb_status(&self) -> usize {
        self.current().sync_budget_status()
    }
}

/// Inspection.
impl ApiServer {
    /// Every object of `kind`, in (namespace, name) order.
    pub fn objects(&self, kind: &ResourceKind) -> Vec<Value> {
        self.current().all(kind).cloned().collect()
    }

    /// One object, if it exists (`None` too for a key of the wrong scope).
    pub fn object(&self, kind: &ResourceKind, key: &ObjectKey) -> Option<Value> {
        self.current().lookup(resource(kind), key).cloned()
    }

    /// Recorded Events, oldest first (at most `events_max`).
    pub fn events(&self) -> Vec<RecordedEvent> {
        self.current().events.iter().cloned().collect()
    }

    /// The call log, oldest first (at most `call_log_len_max`).
    pub fn calls(&self) -> Vec<ApiCall> {
        self.current().calls.records()
    }

    pub fn calls_of(&self, operation: ApiOperation) -> Vec<ApiCall> {
        self.calls()
            .into_iter()
            .filter(|c| c.operation == operation)
            .collect()
    }

    /// The call log, one line per call, for printing.
    pub fn render_calls(&self) -> String {
        self.calls().iter().map(|c| format!("{c}\n")).collect()
    }

    pub fn clear_calls(&self) {
        self.current().calls.clear();
    }

    /// The last resourceVersion handed out.
    pub fn resource_version(&self) -> u64 {
        self.current().resource_version
    }

    /// Watches still open (streams the client dropped are not counted).
    pub fn open_watches(&self) -> usize {
        self.current().watch.open_count()
    }
}
