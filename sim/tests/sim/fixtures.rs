//! Fixtures of the stand-in tests: the in-memory API server (fakekube) with objects put in place
//! as a test wrote them (not seam calls: the stand-ins' own writes are what the call log shows),
//! and the node and pod manifests the tests start from.

use std::sync::Arc;

use fakekube::{ApiCall, ApiOperation, ApiServer, ApiServerConfig, Fake};
use karpenter_core::seams::Clock;
use karpenter_core::seams::kube::{ObjectKey, ResourceKind};
use serde_json::{Value, json};

/// An empty cluster on `clock`.
pub fn api(clock: Arc<dyn Clock>) -> Arc<ApiServer> {
    Arc::new(ApiServer::new(clock, ApiServerConfig::default()))
}

/// Objects as a test puts them in place and looks at them.
pub trait Objects {
    /// Stores an object as a test fixture (status included); returns it as stored.
    fn insert(&self, kind: ResourceKind, object: Value) -> Value;

    /// The pod `name` in `default`.
    fn pod(&self, name: &str) -> Value;

    fn node(&self, name: &str) -> Option<Value>;

    /// Changes a stored object as another client would (a new resourceVersion).
    fn edit(&self, kind: ResourceKind, key: &ObjectKey, change: impl FnOnce(&mut Value));

    /// The writes (creates, patches, deletes, evictions) made since the last
    /// [`Objects::clear_writes`].
    fn writes(&self) -> Vec<ApiCall>;

    fn clear_writes(&self);
}

impl Objects for ApiServer {
    fn insert(&self, kind: ResourceKind, object: Value) -> Value {
        self.apply_fixture(&kind, object)
            .expect("a valid fixture")
            .expect("a fixture that stays")
    }

    fn pod(&self, name: &str) -> Value {
        self.object(&ResourceKind::POD, &ObjectKey::namespaced("default", name))
            .unwrap_or_else(|| panic!("pod {name} exists"))
    }

    fn node(&self, name: &str) -> Option<Value> {
        self.object(&ResourceKind::NODE, &ObjectKey::cluster(name))
    }

    fn edit(&self, kind: ResourceKind, key: &ObjectKey, change: impl FnOnce(&mut Value)) {
        let mut object = self.object(&kind, key).expect("object to edit exists");
        change(&mut object);
        self.insert(kind, object);
    }

    fn writes(&self) -> Vec<ApiCall> {
        self.calls()
            .into_iter()
            .filter(|c| {
                !matches!(
                    c.operation,
                    ApiOperation::Get | ApiOperation::List | ApiOperation::Watch
                )
            })
            .collect()
    }

    fn clear_writes(&self) {
        self.clear_calls();
    }
}

/// A Ready node with `cpu` cores, `memory_gi` GiB and room for `pods` pods, in `zone`.
pub fn node(name: &str, zone: &str, cpu: i64, memory_gi: i64, pods: i64) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": zone,
                "kubernetes.io/os": "linux",
            },
        },
        "spec": {},
        "status": {
            "allocatable": {
                "cpu": cpu.to_string(),
                "memory": format!("{memory_gi}Gi"),
                "pods": pods.to_string(),
            },
            "conditions": [{ "type": "Ready", "status": "True" }],
        },
    })
}

/// A pending pod in `default` with one container requesting `cpu` (e.g. `"500m"`) and `memory`.
pub fn pod(name: &str, cpu: &str, memory: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": "default", "labels": {} },
        "spec": {
            "containers": [{
                "name": "app",
                "image": "app:1",
                "resources": { "requests": { "cpu": cpu, "memory": memory } },
            }],
        },
    })
}
