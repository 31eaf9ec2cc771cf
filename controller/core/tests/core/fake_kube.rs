//! A small in-memory `KubeApi` for core tests: objects by (kind, namespace, name), server-side
//! `generateName`, resourceVersions, recorded events. (The simulation's API server, with watches,
//! finalizers and PDB-aware eviction, lives in `sim`; this fake only has what core tests need.)

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use karpenter_core::seams::kube::{
    DeleteOptions, DeleteOutcome, EventRecord, ListOptions, ObjectKey, ObjectList, Patch,
    ResourceKind, WatchStream,
};
use karpenter_core::seams::{KubeApi, KubeError};
use serde_json::{Value, json};

type Key = (&'static str, Option<String>, String);

#[derive(Default)]
pub struct FakeKube {
    objects: Mutex<BTreeMap<Key, Value>>,
    events: Mutex<Vec<EventRecord>>,
    counter: Mutex<u64>,
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
        self.objects
            .lock()
            .unwrap()
            .insert((kind.plural, namespace, name), object);
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
        let id = (kind.plural, key.namespace.clone(), key.name.clone());
        let mut objects = self.objects.lock().unwrap();
        let object = objects
            .get_mut(&id)
            .ok_or_else(|| KubeError::NotFound(key.name.clone()))?;
        let Patch::Merge(patch) = patch else {
            return Err(KubeError::Invalid("only merge patches".into()));
        };
        let mut patch = patch.clone();
        if status {
            patch = json!({"status": patch["status"].clone()});
        } else if let Some(map) = patch.as_object_mut() {
            map.remove("status");
        }
        json_patch::merge(object, &patch);
        let done = object["metadata"]["deletionTimestamp"].is_string()
            && object["metadata"]["finalizers"]
                .as_array()
                .is_none_or(|f| f.is_empty());
        let out = object.clone();
        if done {
            objects.remove(&id);
        }
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
        _: &DeleteOptions,
    ) -> Result<DeleteOutcome, KubeError> {
        let id = (kind.plural, key.namespace.clone(), key.name.clone());
        let mut objects = self.objects.lock().unwrap();
        let Some(object) = objects.get_mut(&id) else {
            return Ok(DeleteOutcome::NotFound);
        };
        if object["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
        {
            object["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            return Ok(DeleteOutcome::Marked(object.clone()));
        }
        objects.remove(&id);
        Ok(DeleteOutcome::Deleted)
    }

    async fn evict(&self, _: &ObjectKey, _: &DeleteOptions) -> Result<(), KubeError> {
        Ok(())
    }

    async fn watch(
        &self,
        _: &ResourceKind,
        _: &ListOptions,
        rv: &str,
    ) -> Result<WatchStream, KubeError> {
        Err(KubeError::Gone(rv.to_string()))
    }

    async fn record_event(&self, event: &EventRecord) -> Result<(), KubeError> {
        self.events.lock().unwrap().push(event.clone());
        Ok(())
    }
}
