//! A small `KubeApi` fake for the scheduler and kubelet stand-in tests, independent of the
//! simulation's in-memory API server: an ordered map of objects with resourceVersion
//! preconditions, merge (and JSON) patches split between the main resource and the status
//! subresource, graceful pod deletion and finalizers. Enough API-server behaviour for the
//! stand-ins, plus a log of writes so tests can check what a step wrote (and that it wrote
//! nothing when nothing changed). Watches yield nothing: the stand-ins only list.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use karpenter_core::seams::kube::{
    DeleteOptions, DeleteOutcome, EventRecord, ListOptions, ObjectKey, ObjectList, Patch,
    ResourceKind, WatchStream,
};
use karpenter_core::seams::{Clock, KubeApi, KubeError};
use serde_json::{Value, json};

/// One write the fake served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// `create`, `patch`, `patch_status` or `delete`.
    pub verb: &'static str,
    pub kind: &'static str,
    pub name: String,
}

#[derive(Default)]
struct State {
    objects: BTreeMap<(ResourceKind, ObjectKey), Value>,
    version: u64,
    uids: u64,
    writes: Vec<Write>,
    events: Vec<EventRecord>,
}

impl State {
    fn bump(&mut self) -> String {
        self.version += 1;
        self.version.to_string()
    }
}

pub struct FakeKube {
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
}

fn time(clock: &dyn Clock, plus_seconds: i64) -> String {
    let at = clock
        .now()
        .saturating_add(jiff::SignedDuration::from_secs(plus_seconds))
        .expect("time in range");
    jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", at).expect("format")
}

fn key_of(kind: &ResourceKind, object: &Value) -> ObjectKey {
    let metadata = &object["metadata"];
    let name = metadata["name"].as_str().unwrap_or_default().to_string();
    if kind.namespaced {
        let namespace = metadata["namespace"].as_str().unwrap_or("default");
        ObjectKey::namespaced(namespace, name)
    } else {
        ObjectKey::cluster(name)
    }
}

impl FakeKube {
    pub fn new(clock: Arc<dyn Clock>) -> Arc<Self> {
        Arc::new(Self {
            clock,
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stores an object as a test fixture (not logged as a write); returns it as stored.
    pub fn insert(&self, kind: ResourceKind, object: Value) -> Value {
        let stored = crate::block_on(self.create(&kind, object)).expect("fixture");
        self.lock().writes.pop();
        stored
    }

    /// The stored object, if any.
    pub fn object(&self, kind: ResourceKind, key: &ObjectKey) -> Option<Value> {
        self.lock().objects.get(&(kind, key.clone())).cloned()
    }

    pub fn pod(&self, name: &str) -> Value {
        self.object(ResourceKind::POD, &ObjectKey::namespaced("default", name))
            .unwrap_or_else(|| panic!("pod {name} exists"))
    }

    pub fn node(&self, name: &str) -> Option<Value> {
        self.object(ResourceKind::NODE, &ObjectKey::cluster(name))
    }

    /// Every object of a kind, in key order.
    pub fn all(&self, kind: ResourceKind) -> Vec<Value> {
        self.lock()
            .objects
            .iter()
            .filter(|((k, _), _)| *k == kind)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Changes a stored object as another client would (bumps its resourceVersion; not logged).
    pub fn edit(&self, kind: ResourceKind, key: &ObjectKey, change: impl FnOnce(&mut Value)) {
        let mut state = self.lock();
        let version = state.bump();
        let object = state
            .objects
            .get_mut(&(kind, key.clone()))
            .expect("object to edit exists");
        change(object);
        object["metadata"]["resourceVersion"] = json!(version);
    }

    pub fn writes(&self) -> Vec<Write> {
        self.lock().writes.clone()
    }

    pub fn clear_writes(&self) {
        self.lock().writes.clear();
    }

    fn log(state: &mut State, verb: &'static str, kind: &ResourceKind, key: &ObjectKey) {
        state.writes.push(Write {
            verb,
            kind: kind.kind,
            name: key.name.clone(),
        });
    }

    /// Applies a patch to the main resource (`status: false`) or the status subresource.
    fn apply(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
        status: bool,
    ) -> Result<Value, KubeError> {
        let mut state = self.lock();
        let slot = (*kind, key.clone());
        let Some(current) = state.objects.get(&slot).cloned() else {
            return Err(KubeError::NotFound(key.name.clone()));
        };
        let mut patched = current.clone();
        match patch {
            Patch::Merge(body) => {
                let wanted = &body["metadata"]["resourceVersion"];
                if !wanted.is_null() && *wanted != current["metadata"]["resourceVersion"] {
                    return Err(KubeError::Conflict(key.name.clone()));
                }
                let mut body = body.clone();
                if let Some(fields) = body.as_object_mut() {
                    if status {
                        fields.retain(|k, _| k == "status");
                    } else {
                        fields.remove("status");
                    }
                }
                json_patch::merge(&mut patched, &body);
            }
            Patch::Json(ops) => {
                let ops: json_patch::Patch = serde_json::from_value(ops.clone())
                    .map_err(|e| KubeError::Invalid(e.to_string()))?;
                json_patch::patch(&mut patched, &ops)
                    .map_err(|e| KubeError::Conflict(e.to_string()))?;
                // The subresource a call does not address keeps its old value.
                if status {
                    let status = patched["status"].clone();
                    patched = current.clone();
                    patched["status"] = status;
                } else {
                    patched["status"] = current["status"].clone();
                }
            }
        }
        for field in [
            "uid",
            "name",
            "namespace",
            "creationTimestamp",
            "deletionTimestamp",
        ] {
            patched["metadata"][field] = current["metadata"][field].clone();
        }
        strip_nulls(&mut patched["metadata"]);
        let version = state.bump();
        patched["metadata"]["resourceVersion"] = json!(version);
        Self::log(
            &mut state,
            if status { "patch_status" } else { "patch" },
            kind,
            key,
        );
        let deleting = !patched["metadata"]["deletionTimestamp"].is_null();
        let finalizers = patched["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if deleting && !finalizers && !(kind.kind == "Pod" && is_bound(&patched)) {
            state.objects.remove(&slot);
        } else {
            state.objects.insert(slot, patched.clone());
        }
        Ok(patched)
    }
}

fn strip_nulls(object: &mut Value) {
    if let Some(fields) = object.as_object_mut() {
        fields.retain(|_, v| !v.is_null());
    }
}

fn is_bound(pod: &Value) -> bool {
    pod["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty())
}

#[async_trait]
impl KubeApi for FakeKube {
    async fn get(&self, kind: &ResourceKind, key: &ObjectKey) -> Result<Option<Value>, KubeError> {
        Ok(self.object(*kind, key))
    }

    async fn list(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
    ) -> Result<ObjectList, KubeError> {
        let state = self.lock();
        let items = state
            .objects
            .iter()
            .filter(|((k, key), _)| {
                k == kind
                    && options
                        .namespace
                        .as_ref()
                        .is_none_or(|ns| key.namespace.as_ref() == Some(ns))
            })
            .map(|(_, v)| v.clone())
            .collect();
        Ok(ObjectList {
            items,
            resource_version: state.version.to_string(),
        })
    }

    async fn create(&self, kind: &ResourceKind, mut object: Value) -> Result<Value, KubeError> {
        let now = time(self.clock.as_ref(), 0);
        let mut state = self.lock();
        if object["metadata"]["name"]
            .as_str()
            .is_none_or(str::is_empty)
        {
            let prefix = object["metadata"]["generateName"]
                .as_str()
                .ok_or_else(|| KubeError::Invalid("name or generateName is required".into()))?
                .to_string();
            state.uids += 1;
            object["metadata"]["name"] = json!(format!("{prefix}{:05}", state.uids));
        }
        if kind.namespaced && object["metadata"]["namespace"].is_null() {
            object["metadata"]["namespace"] = json!("default");
        }
        let key = key_of(kind, &object);
        let slot = (*kind, key.clone());
        if state.objects.contains_key(&slot) {
            return Err(KubeError::AlreadyExists(key.name));
        }
        state.uids += 1;
        object["metadata"]["uid"] = json!(format!("uid-{}", state.uids));
        if object["metadata"]["creationTimestamp"].is_null() {
            object["metadata"]["creationTimestamp"] = json!(now);
        }
        let version = state.bump();
        object["metadata"]["resourceVersion"] = json!(version);
        Self::log(&mut state, "create", kind, &key);
        state.objects.insert(slot, object.clone());
        Ok(object)
    }

    async fn patch(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<Value, KubeError> {
        self.apply(kind, key, patch, false)
    }

    async fn patch_status(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<Value, KubeError> {
        self.apply(kind, key, patch, true)
    }

    /// Pods bound to a node are deleted gracefully: `deletionTimestamp = now + grace` (the
    /// request's grace, else the pod's `terminationGracePeriodSeconds`, else 30 s), and the
    /// kubelet removes them with a grace of 0. Anything with finalizers is only marked.
    async fn delete(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome, KubeError> {
        let slot = (*kind, key.clone());
        let Some(current) = self.object(*kind, key) else {
            return Ok(DeleteOutcome::NotFound);
        };
        if let Some(uid) = &options.precondition_uid
            && current["metadata"]["uid"] != uid.as_str()
        {
            return Err(KubeError::Conflict(format!(
                "uid precondition of {}",
                key.name
            )));
        }
        let grace = if kind.kind == "Pod" && is_bound(&current) {
            options
                .grace_period_seconds
                .or_else(|| current["spec"]["terminationGracePeriodSeconds"].as_i64())
                .unwrap_or(30)
        } else {
            0
        };
        let finalizers = current["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        let already = !current["metadata"]["deletionTimestamp"].is_null();
        let mut state = self.lock();
        Self::log(&mut state, "delete", kind, key);
        if grace == 0 && !finalizers {
            state.objects.remove(&slot);
            return Ok(DeleteOutcome::Deleted);
        }
        let mut marked = current.clone();
        if !already || grace == 0 {
            marked["metadata"]["deletionTimestamp"] = json!(time(self.clock.as_ref(), grace));
            marked["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
        }
        let version = state.bump();
        marked["metadata"]["resourceVersion"] = json!(version);
        state.objects.insert(slot, marked.clone());
        Ok(DeleteOutcome::Marked(marked))
    }

    async fn evict(&self, pod: &ObjectKey, options: &DeleteOptions) -> Result<(), KubeError> {
        self.delete(&ResourceKind::POD, pod, options)
            .await
            .map(|_| ())
    }

    async fn watch(
        &self,
        _kind: &ResourceKind,
        _options: &ListOptions,
        _resource_version: &str,
    ) -> Result<WatchStream, KubeError> {
        // No watch support: clients (the reflectors) list again on every sync.
        Err(KubeError::Gone(_resource_version.to_string()))
    }

    async fn record_event(&self, event: &EventRecord) -> Result<(), KubeError> {
        self.lock().events.push(event.clone());
        Ok(())
    }
}

// ---- fixtures -------------------------------------------------------------------------------

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
