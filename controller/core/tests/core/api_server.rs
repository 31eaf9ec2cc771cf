//! The in-memory API server (fakekube) as core tests use it: objects put in place as fixtures,
//! refused evictions as PodDisruptionBudgets with `maxUnavailable: 0`, and the calls the
//! controller made. (No kubelet runs here: a test that needs evicted pods gone calls
//! `ApiServer::complete_pod_deletions`.)

use std::sync::Arc;

use fakekube::{ApiCall, ApiOperation, ApiServer, ApiServerConfig, Fake};
use futures::executor::block_on;
use karpenter_core::seams::kube::{DeleteOptions, EventRecord, ObjectKey, Patch, ResourceKind};
use karpenter_core::seams::{Clock, KubeApi};
use serde_json::{Value, json};

/// An empty cluster on `clock`.
pub fn api_server(clock: Arc<dyn Clock>) -> Arc<ApiServer> {
    Arc::new(ApiServer::new(clock, ApiServerConfig::default()))
}

/// The key of `name` (`namespace/name`, or `name` in `default`, for namespaced kinds).
pub fn key(kind: &ResourceKind, name: &str) -> ObjectKey {
    match name.split_once('/') {
        Some((namespace, name)) if kind.namespaced => ObjectKey::namespaced(namespace, name),
        _ if kind.namespaced => ObjectKey::namespaced("default", name),
        _ => ObjectKey::cluster(name),
    }
}

/// Label the refused-eviction budget of a pod selects it by.
const REFUSED_LABEL: &str = "test.karpenter.sh/refuse-eviction";

/// What core tests do with the API server besides the seam calls under test.
pub trait Fixtures {
    /// Puts `object` in place as the test wrote it (status and deletionTimestamp included; see
    /// `ApiServer::apply_fixture`); returns the stored object.
    fn apply(&self, kind: &ResourceKind, object: Value) -> Value;

    /// One object by kind and name (`namespace/name` for namespaced kinds).
    fn object_named(&self, kind: &ResourceKind, name: &str) -> Option<Value>;

    /// Recorded Events, oldest first.
    fn recorded_events(&self) -> Vec<EventRecord>;

    /// Evictions of `pod` (`namespace/name`) are refused with 429 from now on: a
    /// PodDisruptionBudget with `maxUnavailable: 0` covers it.
    fn refuse_eviction(&self, pod: &str);

    /// Removes the budget [`Fixtures::refuse_eviction`] created.
    fn allow_eviction(&self, pod: &str);

    /// The calls of `operation` on `plural` so far, oldest first.
    fn calls_on(&self, operation: ApiOperation, plural: &str) -> Vec<ApiCall>;
}

fn budget_key(pod: &ObjectKey) -> ObjectKey {
    ObjectKey {
        namespace: pod.namespace.clone(),
        name: format!("refuse-{}", pod.name),
    }
}

impl Fixtures for ApiServer {
    fn apply(&self, kind: &ResourceKind, object: Value) -> Value {
        self.apply_fixture(kind, object)
            .expect("a valid fixture")
            .expect("a fixture that stays")
    }

    fn object_named(&self, kind: &ResourceKind, name: &str) -> Option<Value> {
        self.object(kind, &key(kind, name))
    }

    fn recorded_events(&self) -> Vec<EventRecord> {
        self.events().into_iter().map(|e| e.event).collect()
    }

    fn refuse_eviction(&self, pod: &str) {
        let pod = key(&ResourceKind::POD, pod);
        let label = json!({"metadata": {"labels": {REFUSED_LABEL: pod.name}}});
        block_on(self.patch(&ResourceKind::POD, &pod, &Patch::Merge(label))).expect("label");
        let budget = budget_key(&pod);
        let budget = json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": budget.name, "namespace": budget.namespace},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {REFUSED_LABEL: pod.name}}}
        });
        block_on(self.create(&ResourceKind::POD_DISRUPTION_BUDGET, budget)).expect("budget");
    }

    fn allow_eviction(&self, pod: &str) {
        let budget = budget_key(&key(&ResourceKind::POD, pod));
        let kind = ResourceKind::POD_DISRUPTION_BUDGET;
        block_on(self.delete(&kind, &budget, &DeleteOptions::default())).expect("budget");
    }

    fn calls_on(&self, operation: ApiOperation, plural: &str) -> Vec<ApiCall> {
        self.calls_of(operation)
            .into_iter()
            .filter(|c| c.kind == plural)
            .collect()
    }
}
