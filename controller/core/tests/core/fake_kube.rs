//! A small in-memory `KubeApi` for core tests: objects by (kind, namespace, name), server-side
//! `generateName`, resourceVersions, recorded events, recorded deletes and evictions, evictions a
//! test refuses (as a PodDisruptionBudget would, 429), scripted write failures and watches (every
//! change is kept, so a watch from any version replays what followed it). (The
//! simulation's API server, with watches, finalizers and PDB-aware eviction, lives in `sim`;
//! this fake only has what core tests need.)

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::channel::mpsc;

use async_trait::async_trait;
use karpenter_core::seams::kube::{
    DeleteOptions, DeleteOutcome, EventRecord, ListOptions, ObjectKey, ObjectList, Patch,
    ResourceKind, WatchEvent, WatchStream,
};
use karpenter_core::seams::{Clock, KubeApi, KubeError};
use serde_json::{Value, json};

type Key = (&'static str, Option<String>, String);

/// Where one open watch's events go.
type WatchSender = mpsc::UnboundedSender<Result<WatchEvent, KubeError>>;

/// One delete or eviction call a test can look at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// `delete` or `evict`.
    pub verb: &'static str,
    /// The resource plural (`pods`, `nodeclaims`, ...).
    pub kind: &'static str,
    /// `namespace/name` for namespaced kinds, `name` otherwise.
    pub name: String,
    pub options: DeleteOptions,
    /// `ok` or the error's text.
    pub outcome: String,
}

#[derive(Default)]
pub struct FakeKube {
    objects: Mutex<BTreeMap<Key, Value>>,
    events: Mutex<Vec<EventRecord>>,
    counter: Mutex<u64>,
    calls: Mutex<Vec<Call>>,
    /// Pods (`namespace/name`) whose eviction a PodDisruptionBudget refuses (429).
    refused: Mutex<BTreeSet<String>>,
    /// Errors the next patch/delete calls return, in order (then calls succeed again).
    failures: Mutex<Vec<KubeError>>,
    /// Time for deletionTimestamps (a fixed instant without one).
    clock: Mutex<Option<Arc<dyn Clock>>>,
    /// Every change so far: (resourceVersion, kind plural, event).
    history: Mutex<Vec<(u64, &'static str, WatchEvent)>>,
    /// Open watches: (kind plural, where its events go).
    watchers: Mutex<Vec<(&'static str, WatchSender)>>,
}

impl FakeKube {
    /// Stores `object` as is (for test setup), filling uid and resourceVersion.
    pub fn apply(&self, kind: &ResourceKind, mut object: Value) {
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .map(str::to_string)
            .filter(|_| kind.namespaced);
        let namespace = if kind.namespaced {
            namespace.or(Some("default".into()))
        } else {
            None
        };
        let name = object["metadata"]["name"]
            .as_str()
            .expect("test objects are named")
            .to_string();
        let mut counter = self.counter.lock().unwrap();
        *counter += 1;
        object["metadata"]["resourceVersion"] = json!(counter.to_string());
        if object["metadata"]["uid"].is_null() {
            object["metadata"]["uid"] = json!(format!("uid-{name}"));
        }
        if let Some(ns) = &namespace {
            object["metadata"]["namespace"] = json!(ns);
        }
        drop(counter);
        let existed = self
            .objects
            .lock()
            .unwrap()
            .insert((kind.plural, namespace, name), object.clone())
            .is_some();
        let event = if existed {
            WatchEvent::Modified(object)
        } else {
            WatchEvent::Added(object)
        };
        self.emit(kind.plural, event);
    }

    pub fn all(&self, kind: &ResourceKind) -> Vec<Value> {
        self.objects
            .lock()
            .unwrap()
            .iter()
            .filter(|((k, _, _), _)| *k == kind.plural)
            .map(|(_, v)| v.clone())
            .collect()
    }

    pub fn events(&self) -> Vec<EventRecord> {
        self.events.lock().unwrap().clone()
    }

    /// Delete and evict calls so far, oldest first.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// One object by kind and name (`namespace/name` for namespaced kinds).
    pub fn object(&self, kind: &ResourceKind, name: &str) -> Option<Value> {
        let (namespace, name) = match name.split_once('/') {
            Some((ns, n)) => (Some(ns.to_string()), n.to_string()),
            None => (None, name.to_string()),
        };
        self.objects
            .lock()
            .unwrap()
            .get(&(kind.plural, namespace, name))
            .cloned()
    }

    /// Evictions of `pod` (`namespace/name`) are refused with 429 until [`Self::allow_eviction`].
    pub fn refuse_eviction(&self, pod: &str) {
        self.refused.lock().unwrap().insert(pod.to_string());
    }

    pub fn allow_eviction(&self, pod: &str) {
        self.refused.lock().unwrap().remove(pod);
    }

    /// The next patch/delete calls fail with these errors, one each.
    pub fn fail_next_writes(&self, errors: impl IntoIterator<Item = KubeError>) {
        self.failures.lock().unwrap().extend(errors);
    }

    /// deletionTimestamps come from `clock` from now on.
    pub fn set_clock(&self, clock: Arc<dyn Clock>) {
        *self.clock.lock().unwrap() = Some(clock);
    }

    fn now_text(&self) -> String {
        match &*self.clock.lock().unwrap() {
            Some(clock) => jiff::Timestamp::from_second(clock.now().as_second())
                .unwrap_or(clock.now())
                .to_string(),
            None => "2026-01-01T00:00:00Z".to_string(),
        }
    }

    /// Records a change and sends it to the open watches of its kind.
    fn emit(&self, plural: &'static str, event: WatchEvent) {
        let version = *self.counter.lock().unwrap();
        self.history
            .lock()
            .unwrap()
            .push((version, plural, event.clone()));
        self.watchers.lock().unwrap().retain(|(kind, sender)| {
            *kind != plural || sender.unbounded_send(Ok(event.clone())).is_ok()
        });
    }

    fn scripted_failure(&self) -> Option<KubeError> {
        let mut failures = self.failures.lock().unwrap();
        (!failures.is_empty()).then(|| failures.remove(0))
    }

    fn record_call(
        &self,
        verb: &'static str,
        kind: &ResourceKind,
        key: &ObjectKey,
        options: &DeleteOptions,
        outcome: &str,
    ) {
        let name = match &key.namespace {
            Some(ns) => format!("{ns}/{}", key.name),
            None => key.name.clone(),
        };
        self.calls.lock().unwrap().push(Call {
            verb,
            kind: kind.plural,
            name,
            options: options.clone(),
            outcome: outcome.to_string(),
        });
    }
}

impl FakeKube {
    /// Merge-patches an object (metadata/spec, or only status); removing the last finalizer of
    /// an object marked for deletion deletes it, as the API server does.
    fn merge(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
        status: bool,
    ) -> Result<Value, KubeError> {
        if let Some(err) = self.scripted_failure() {
            return Err(err);
        }
        let id = (kind.plural, key.namespace.clone(), key.name.clone());
        let mut counter = self.counter.lock().unwrap();
        let mut objects = self.objects.lock().unwrap();
        let object = objects
            .get_mut(&id)
            .ok_or_else(|| KubeError::NotFound(key.name.clone()))?;
        let Patch::Merge(patch) = patch else {
            return Err(KubeError::Invalid("only merge patches".into()));
        };
        // Optimistic concurrency, as the API server does it: a patch carrying a stale
        // resourceVersion is a 409, and every write gets a new one.
        if let Some(wanted) = patch["metadata"]["resourceVersion"].as_str()
            && object["metadata"]["resourceVersion"].as_str() != Some(wanted)
        {
            return Err(KubeError::Conflict(format!(
                "{}: the object has been modified (resourceVersion {wanted} is stale)",
                key.name
            )));
        }
        let mut patch = patch.clone();
        if status {
            patch = json!({"status": patch["status"].clone()});
        } else if let Some(map) = patch.as_object_mut() {
            map.remove("status");
        }
        json_patch::merge(object, &patch);
        *counter += 1;
        object["metadata"]["resourceVersion"] = json!(counter.to_string());
        let done = object["metadata"]["deletionTimestamp"].is_string()
            && object["metadata"]["finalizers"]
                .as_array()
                .is_none_or(|f| f.is_empty());
        let out = object.clone();
        if done {
            objects.remove(&id);
        }
        drop(objects);
        drop(counter);
        let event = if done {
            WatchEvent::Deleted(out.clone())
        } else {
            WatchEvent::Modified(out.clone())
        };
        self.emit(kind.plural, event);
        Ok(out)
    }
}

#[async_trait]
impl KubeApi for FakeKube {
    async fn get(&self, kind: &ResourceKind, key: &ObjectKey) -> Result<Option<Value>, KubeError> {
        Ok(self
            .objects
            .lock()
            .unwrap()
            .get(&(kind.plural, key.namespace.clone(), key.name.clone()))
            .cloned())
    }

    async fn list(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
    ) -> Result<ObjectList, KubeError> {
        let items = self
            .objects
            .lock()
            .unwrap()
            .iter()
            .filter(|((k, ns, _), _)| {
                *k == kind.plural && (options.namespace.is_none() || *ns == options.namespace)
            })
            .map(|(_, v)| v.clone())
            .collect();
        Ok(ObjectList {
            items,
            resource_version: self.counter.lock().unwrap().to_string(),
        })
    }

    async fn create(&self, kind: &ResourceKind, mut object: Value) -> Result<Value, KubeError> {
        if object["metadata"]["name"].is_null() {
            let prefix = object["metadata"]["generateName"]
                .as_str()
                .unwrap_or("obj-")
                .to_string();
            let n = *self.counter.lock().unwrap() + 1;
            object["metadata"]["name"] = json!(format!("{prefix}{n:05}"));
        }
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let namespace = if kind.namespaced {
            Some(
                object["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("default")
                    .to_string(),
            )
        } else {
            None
        };
        if self
            .objects
            .lock()
            .unwrap()
            .contains_key(&(kind.plural, namespace, name.clone()))
        {
            return Err(KubeError::AlreadyExists(name));
        }
        self.apply(kind, object.clone());
        Ok(self
            .all(kind)
            .into_iter()
            .find(|o| o["metadata"]["name"] == json!(name))
            .unwrap_or(object))
    }

    async fn patch(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<Value, KubeError> {
        self.merge(kind, key, patch, false)
    }

    async fn patch_status(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<Value, KubeError> {
        self.merge(kind, key, patch, true)
    }

    async fn delete(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome, KubeError> {
        if let Some(err) = self.scripted_failure() {
            self.record_call("delete", kind, key, options, &err.to_string());
            return Err(err);
        }
        self.record_call("delete", kind, key, options, "ok");
        let now = self.now_text();
        let id = (kind.plural, key.namespace.clone(), key.name.clone());
        let mut objects = self.objects.lock().unwrap();
        let Some(object) = objects.get_mut(&id) else {
            return Ok(DeleteOutcome::NotFound);
        };
        if object["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
        {
            if object["metadata"]["deletionTimestamp"].is_null() {
                object["metadata"]["deletionTimestamp"] = json!(now);
                *self.counter.lock().unwrap() += 1;
                let version = self.counter.lock().unwrap().to_string();
                object["metadata"]["resourceVersion"] = json!(version);
                let marked = object.clone();
                drop(objects);
                self.emit(kind.plural, WatchEvent::Modified(marked.clone()));
                return Ok(DeleteOutcome::Marked(marked));
            }
            return Ok(DeleteOutcome::Marked(object.clone()));
        }
        let removed = objects.remove(&id);
        drop(objects);
        if let Some(removed) = removed {
            *self.counter.lock().unwrap() += 1;
            self.emit(kind.plural, WatchEvent::Deleted(removed));
        }
        Ok(DeleteOutcome::Deleted)
    }

    /// Refused pods get 429; others are removed at once (no kubelet here to wait for).
    async fn evict(&self, pod: &ObjectKey, options: &DeleteOptions) -> Result<(), KubeError> {
        let name = format!(
            "{}/{}",
            pod.namespace.as_deref().unwrap_or("default"),
            pod.name
        );
        let id = (
            ResourceKind::POD.plural,
            pod.namespace.clone(),
            pod.name.clone(),
        );
        if self.refused.lock().unwrap().contains(&name)
            && self.objects.lock().unwrap().contains_key(&id)
        {
            let err = KubeError::TooManyRequests(format!(
                "Cannot evict pod as it would violate the pod's disruption budget: {name}"
            ));
            self.record_call("evict", &ResourceKind::POD, pod, options, &err.to_string());
            return Err(err);
        }
        self.record_call("evict", &ResourceKind::POD, pod, options, "ok");
        let removed = self.objects.lock().unwrap().remove(&id);
        if let Some(removed) = removed {
            *self.counter.lock().unwrap() += 1;
            self.emit(ResourceKind::POD.plural, WatchEvent::Deleted(removed));
        }
        Ok(())
    }

    /// Replays the kind's changes after `rv`, then streams new ones (namespace filters are not
    /// applied: core tests watch whole kinds).
    async fn watch(
        &self,
        kind: &ResourceKind,
        _: &ListOptions,
        rv: &str,
    ) -> Result<WatchStream, KubeError> {
        let from: u64 = rv.parse().map_err(|_| KubeError::Gone(rv.to_string()))?;
        let (sender, receiver) = mpsc::unbounded();
        let history = self.history.lock().unwrap();
        for (version, plural, event) in history.iter() {
            if *plural == kind.plural && *version > from {
                let _ = sender.unbounded_send(Ok(event.clone()));
            }
        }
        self.watchers.lock().unwrap().push((kind.plural, sender));
        drop(history);
        Ok(Box::pin(receiver))
    }

    async fn record_event(&self, event: &EventRecord) -> Result<(), KubeError> {
        self.events.lock().unwrap().push(event.clone());
        Ok(())
    }
}
