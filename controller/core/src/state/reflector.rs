//! A list-then-watch cache of one kind, decoded once per change.
//!
//! Reading the cluster by listing every object on every pass costs a copy and a decode of the
//! whole cluster each time; at a few hundred nodes that dominated a step. A [`Reflector`] lists
//! once, then applies the watch's changes: a pass that finds nothing new costs nothing. It is the
//! same shape as kube-runtime's reflector, driven by hand so the simulation stays single-threaded
//! and deterministic: [`Reflector::sync`] takes what the watch has already delivered and never
//! waits for more.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::seams::kube::{
    ListOptions, ObjectKey, ObjectList, ResourceKind, SharedObject, WatchEvent, WatchStream,
};
use crate::seams::{KubeApi, KubeError};

/// How many times one [`Reflector::sync`] re-opens a watch that ended (a dropped connection)
/// before leaving the rest to the next sync; bounds the work a flapping server can cause.
pub const REWATCH_COUNT_MAX: usize = 3;

/// How many watch events one sync applies at most; the rest wait for the next sync (the watch
/// queue holds them), so one sync's work is bounded even after a burst.
pub const SYNC_EVENTS_MAX: usize = 100_000;

/// A cache of every object of one kind, ordered by namespace and name.
pub struct Reflector<T> {
    kind: ResourceKind,
    options: ListOptions,
    objects: BTreeMap<ObjectKey, Arc<T>>,
    /// The resourceVersion to resume a dropped watch from; `None` until the first list.
    resource_version: Option<String>,
    stream: Option<WatchStream>,
    /// An informer task (`crate::runtime::informer`) feeds this cache: [`Reflector::sync`] leaves
    /// it alone, so two consumers never apply one kind's events out of order.
    driven: bool,
    /// How many times the cached objects changed (an event applied, a relist, an own write):
    /// equal counts mean the same objects, so a reader can tell "nothing changed" without
    /// comparing them (bookmarks do not count).
    changes: u64,
}

impl<T> std::fmt::Debug for Reflector<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reflector")
            .field("kind", &self.kind.kind)
            .field("objects", &self.objects.len())
            .field("resource_version", &self.resource_version)
            .field("watching", &self.stream.is_some())
            .finish()
    }
}

fn key_of(object: &Value) -> Option<ObjectKey> {
    let metadata = &object["metadata"];
    let name = metadata["name"].as_str()?.to_string();
    Some(ObjectKey {
        namespace: metadata["namespace"].as_str().map(str::to_string),
        name,
    })
}

impl<T: DeserializeOwned + Any + Send + Sync> Reflector<T> {
    pub fn new(kind: ResourceKind) -> Self {
        Self::with_options(kind, ListOptions::default())
    }

    /// A reflector over the objects `options` selects.
    pub fn with_options(kind: ResourceKind, options: ListOptions) -> Self {
        Self {
            kind,
            options,
            objects: BTreeMap::new(),
            resource_version: None,
            stream: None,
            driven: false,
            changes: 0,
        }
    }

    /// Brings the cache up to date with what the server has sent: lists on first use (and after
    /// the server says the watch's version is gone), otherwise applies the watch's pending
    /// events. Returns whether anything changed. On error the cache keeps what it had and the
    /// next sync carries on from there.
    pub async fn sync(&mut self, kube: &dyn KubeApi) -> Result<bool, KubeError> {
        if self.driven {
            return Ok(false);
        }
        let mut changed = false;
        if self.resource_version.is_none() {
            self.relist(kube).await?;
            changed = true;
        }
        let mut rewatches = 0;
        let mut applied = 0;
        loop {
            if self.stream.is_none() {
                if rewatches == REWATCH_COUNT_MAX {
                    return Ok(changed);
                }
                rewatches += 1;
                let from = self.resource_version.clone().unwrap_or_default();
                match kube.watch(&self.kind, &self.options, &from).await {
                    Ok(stream) => self.stream = Some(stream),
                    // Too old to resume (or no watch support): list afresh on the next sync.
                    Err(KubeError::Gone(_)) => {
                        self.resource_version = None;
                        return Ok(changed);
                    }
                    Err(err) => return Err(err),
                }
            }
            let Some(stream) = self.stream.as_mut() else {
                continue;
            };
            if applied == SYNC_EVENTS_MAX {
                return Ok(changed);
            }
            match stream.next().now_or_never() {
                // Nothing more delivered yet: the cache is as fresh as the server has made it.
                None => return Ok(changed),
                // The connection ended: resume from the last version seen.
                Some(None) => self.stream = None,
                Some(Some(Err(KubeError::Gone(_)))) => {
                    self.stream = None;
                    self.relist(kube).await?;
                    changed = true;
                }
                Some(Some(Err(err))) => {
                    self.stream = None;
                    return Err(err);
                }
                Some(Some(Ok(event))) => {
                    applied += 1;
                    changed |= self.apply(event);
                }
            }
        }
    }

    /// The cached objects after a [`Reflector::sync`]; when the sync fails, the objects of the
    /// last successful list and watch, as an informer serves reads from its cache while its
    /// watch reconnects (upstream's controllers read through controller-runtime's cache and never
    /// see a List fail). `Err` only if the cache has never been listed.
    ///
    /// Why: the interruption handler listed NodeClaims from the API server for each receive
    /// batch; one 503 on that List left a spot warning for SQS to redeliver after its 30 s
    /// visibility timeout, and the replacement launched too late to be up before the reclaim
    /// (swarm seed 211).
    pub async fn read(&mut self, kube: &dyn KubeApi) -> Result<Vec<Arc<T>>, KubeError> {
        if let Err(err) = self.sync(kube).await {
            if self.changes == 0 {
                return Err(err);
            }
            tracing::debug!(kind = %self.kind.plural, %err, "cache sync failed; reading the cache as last synced");
        }
        Ok(self.to_vec())
    }

    async fn relist(&mut self, kube: &dyn KubeApi) -> Result<(), KubeError> {
        let list = kube.list(&self.kind, &self.options).await?;
        self.replace(list);
        Ok(())
    }

    /// Replaces the whole cache with a list's result (an informer's list, made without holding
    /// the cache) and resumes watching from its version.
    pub fn replace(&mut self, list: ObjectList) {
        self.changes += 1;
        self.objects.clear();
        for item in list.items {
            self.insert(item);
        }
        self.resource_version = Some(list.resource_version);
        self.stream = None;
    }

    /// Records the result of this process's own write (a create) before the watch delivers it,
    /// so the next pass already counts it. Should the watch already have delivered a later
    /// change, this briefly shows the older state; the next event for the object replaces it.
    pub fn observe(&mut self, object: impl Into<SharedObject>) {
        self.insert(object.into());
    }

    /// Applies one watch event; returns whether the cache changed.
    pub fn apply(&mut self, event: WatchEvent) -> bool {
        match event {
            WatchEvent::Bookmark { resource_version } => {
                self.resource_version = Some(resource_version);
                false
            }
            WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                self.note_version(&object);
                self.insert(object);
                true
            }
            WatchEvent::Deleted(object) => {
                self.changes += 1;
                self.note_version(&object);
                if let Some(key) = key_of(&object) {
                    self.objects.remove(&key);
                }
                true
            }
        }
    }

    fn note_version(&mut self, object: &Value) {
        if let Some(version) = object["metadata"]["resourceVersion"].as_str() {
            self.resource_version = Some(version.to_string());
        }
    }

    /// Caches an object; one that does not decode is dropped from the cache with a warning (the
    /// controller never fails on an object it reads).
    fn insert(&mut self, object: SharedObject) {
        self.changes += 1;
        let Some(key) = key_of(&object) else {
            tracing::warn!(kind = self.kind.kind, "object without a name skipped");
            return;
        };
        match decode::<T>(object) {
            Ok(decoded) => {
                self.objects.insert(key, decoded);
            }
            Err(err) => {
                tracing::warn!(kind = self.kind.kind, name = %key.name, %err, "undecodable object skipped");
                self.objects.remove(&key);
            }
        }
    }
}

/// Decodes a shared object without copying it first: a cache of raw objects (`T = Value`, the
/// simulation's stand-ins) keeps the very allocation the server handed out, a typed cache decodes
/// from a borrow (strings copied once, into the typed object).
fn decode<T: DeserializeOwned + Any + Send + Sync>(
    object: SharedObject,
) -> Result<Arc<T>, serde_json::Error> {
    let shared: Arc<dyn Any + Send + Sync> = object;
    match shared.downcast::<T>() {
        Ok(same) => Ok(same),
        Err(shared) => {
            let object = shared
                .downcast::<Value>()
                .expect("a SharedObject is an Arc<Value>");
            T::deserialize(&*object).map(Arc::new)
        }
    }
}

impl<T> Reflector<T> {
    /// Hands this cache to an informer task: from now on [`Reflector::sync`] does nothing.
    pub fn drive(&mut self) {
        self.driven = true;
        self.stream = None;
    }

    /// How many times the cached objects changed (see the field): a revision, not a count of
    /// objects.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Whether an informer task feeds this cache.
    pub fn is_driven(&self) -> bool {
        self.driven
    }

    pub fn kind(&self) -> ResourceKind {
        self.kind
    }

    pub fn options(&self) -> &ListOptions {
        &self.options
    }

    /// The version a watch resumes from; `None` until listed (or after the server said `Gone`).
    pub fn resource_version(&self) -> Option<&str> {
        self.resource_version.as_deref()
    }

    /// The server said the version is gone: the next read lists afresh (the objects stay until
    /// that list replaces them, so readers never see an empty cluster in between).
    pub fn forget_version(&mut self) {
        self.resource_version = None;
        self.stream = None;
    }

    /// The cached objects, ordered by namespace then name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<T>> {
        self.objects.values()
    }

    /// The cached objects (cheap: shared pointers), ordered by namespace then name.
    pub fn to_vec(&self) -> Vec<Arc<T>> {
        self.objects.values().cloned().collect()
    }

    pub fn get(&self, key: &ObjectKey) -> Option<&Arc<T>> {
        self.objects.get(key)
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Forgets everything: the next sync lists again (after a controller restart, say).
    pub fn reset(&mut self) {
        self.objects.clear();
        self.resource_version = None;
        self.stream = None;
    }
}
