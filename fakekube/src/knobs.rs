//! Behaviour knobs and inspection: what tests and the simulation use besides the seam. None of
//! these is a seam call: they draw no fault and are not in the call log. The fault and call-log
//! knobs every fake has (`set_fault_rates`, `script_faults`, `add_fault_window`, `clear_faults`,
//! `calls`, ...) are fakekit's [`Fake`](fakekit::Fake) methods.

use std::collections::BTreeMap;

use jiff::Timestamp;
use karpenter_core::seams::KubeError;
use karpenter_core::seams::kube::{DeleteOptions, ObjectKey, ResourceKind, SharedObject};
use serde_json::Value;

use crate::config::ApiServerConfig;
use crate::faults::{ApiFaultRates, ApiOperation};
use crate::store::{is_marked, key_of, resource};
use crate::{ApiServer, RecordedEvent};

/// Standing fault rates taken off by [`ApiServer::suspend_faults`], to put back with
/// [`ApiServer::resume_faults`].
#[must_use = "suspended faults are put back with `resume_faults`"]
#[derive(Debug)]
pub struct SuspendedFaults(BTreeMap<ApiOperation, ApiFaultRates>);

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
        state.kit.calls.set_len_max(config.call_log_len_max);
        while state.events.len() > config.events_max {
            state.events.pop_front();
        }
    }

    /// Puts `object` in place as a test wrote it: created (with the `creationTimestamp` it
    /// gives, if any), or replacing the stored one (the metadata the server owns stays), with its
    /// `status` set through the status subresource on top of what the server gives a new object
    /// (a pod's `Pending`), and, if it carries a `metadata.deletionTimestamp`, deleted so that its
    /// deletion falls due then (a pod's grace period runs until then; anything else stays only
    /// while it has finalizers). Returns the object as stored (`None` if the deletion removed it).
    pub fn apply_fixture(
        &self,
        kind: &ResourceKind,
        mut object: Value,
    ) -> Result<Option<Value>, KubeError> {
        let status = object.as_object_mut().and_then(|o| o.remove("status"));
        let deleting = object["metadata"]
            .as_object_mut()
            .and_then(|m| m.remove("deletionTimestamp"));
        let mut state = self.current();
        let stored = state.put(kind, object, status)?;
        let key = key_of(kind, &stored);
        if let Some(at) = deleting {
            let at: Timestamp = at.as_str().and_then(|t| t.parse().ok()).ok_or_else(|| {
                KubeError::Invalid(format!("deletionTimestamp {at} is not a timestamp"))
            })?;
            let options = DeleteOptions {
                grace_period_seconds: Some((at.as_second() - state.now.as_second()).max(0)),
                ..DeleteOptions::default()
            };
            state.delete(kind, &key, &options)?;
        }
        Ok(state.lookup(resource(kind), &key).map(|o| Value::clone(o)))
    }

    /// Removes every pod marked for deletion that has no finalizers left, at once, as its kubelet
    /// does once the containers stopped: for clusters without a kubelet stand-in (the simulation's
    /// kubelet completes deletions through the seam). Returns how many went.
    pub fn complete_pod_deletions(&self) -> usize {
        let mut state = self.current();
        let marked: Vec<ObjectKey> = state
            .all(&ResourceKind::POD)
            .filter(|p| {
                is_marked(p)
                    && p["metadata"]["finalizers"]
                        .as_array()
                        .is_none_or(Vec::is_empty)
            })
            .map(|p| key_of(&ResourceKind::POD, p))
            .collect();
        let now = DeleteOptions {
            grace_period_seconds: Some(0),
            ..DeleteOptions::default()
        };
        marked
            .iter()
            .filter(|key| state.delete(&ResourceKind::POD, key, &now).is_ok())
            .count()
    }

    /// Takes the standing fault rates off until [`ApiServer::resume_faults`]: the harness's own
    /// work (a workload stand-in, an observer, a user's `kubectl`) runs without them, since faults
    /// are for the controller. Scripts and windows stay.
    pub fn suspend_faults(&self) -> SuspendedFaults {
        SuspendedFaults(std::mem::take(&mut self.current().config.faults))
    }

    /// Puts back the rates [`ApiServer::suspend_faults`] took off (replacing any set since).
    pub fn resume_faults(&self, suspended: SuspendedFaults) {
        self.current().config.faults = suspended.0;
    }

    /// Runs `work` with the standing fault rates off (see [`ApiServer::suspend_faults`]).
    pub async fn without_faults<T>(&self, work: impl AsyncFnOnce(&ApiServer) -> T) -> T {
        let suspended = self.suspend_faults();
        let out = work(self).await;
        self.resume_faults(suspended);
        out
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
    /// Every object of `kind`, in (namespace, name) order: the stored objects themselves,
    /// shared (an observer reading the whole cluster every step copies nothing).
    pub fn objects(&self, kind: &ResourceKind) -> Vec<SharedObject> {
        self.current().all(kind).cloned().collect()
    }

    /// One object, if it exists (`None` too for a key of the wrong scope).
    pub fn object(&self, kind: &ResourceKind, key: &ObjectKey) -> Option<Value> {
        self.current()
            .lookup(resource(kind), key)
            .map(|o| Value::clone(o))
    }

    /// Recorded Events, oldest first (at most `events_max`).
    pub fn events(&self) -> Vec<RecordedEvent> {
        self.current().events.iter().cloned().collect()
    }

    /// The time the server has caught up to (the clock's now).
    pub fn now(&self) -> Timestamp {
        self.current().now
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
