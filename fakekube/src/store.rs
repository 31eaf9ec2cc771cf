//! The object store and the write semantics of the API server: metadata the server owns
//! (resourceVersion, uid, generation, creationTimestamp, generateName), optimistic concurrency,
//! merge and JSON patches, the status subresource, finalizers and graceful deletion.
//!
//! Every method here runs under the server's lock and applies a call completely or not at all;
//! each change takes the next resourceVersion and goes to the watch history in that order.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use fakekit::{Kit, KitSpec};
use jiff::{SignedDuration, Timestamp};
use json_patch::PatchErrorKind;
use karpenter_core::seams::KubeError;
use karpenter_core::seams::kube::{
    DeleteOptions, DeleteOutcome, ListOptions, ObjectKey, ObjectList, Patch, ResourceKind,
    SharedObject,
};
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value, json};
use strum::VariantArray;

use crate::RecordedEvent;
use crate::calls::ApiCall;
use crate::config::ApiServerConfig;
use crate::faults::{ApiFault, ApiFaultRates, ApiOperation};
use crate::rng::{self, NAME_SUFFIX_LEN, name_suffix, uuid};
use crate::selectors::Filter;
use crate::watch::{Change, ChangeType, WatchHub};

/// Objects are stored per (API group, plural): two groups may share a plural (`events`).
pub(crate) type Resource = (&'static str, &'static str);

pub(crate) fn resource(kind: &ResourceKind) -> Resource {
    (kind.group, kind.plural)
}

/// Namespaces that exist from the start and cannot be deleted (Kubernetes forbids it too).
pub const PREDEFINED_NAMESPACES: [&str; 2] = ["default", "kube-system"];

/// Longest object name (a DNS subdomain).
const NAME_LEN_MAX: usize = 253;
/// Longest `generateName` prefix kept: Kubernetes trims it so prefix plus suffix fit 63 characters.
const GENERATE_NAME_PREFIX_LEN_MAX: usize = 63 - NAME_SUFFIX_LEN;
/// Suffixes drawn before a `generateName` create gives up with AlreadyExists. Kubernetes draws
/// once and lets the client retry; drawing again here keeps a seeded run from failing on the rare
/// collision while staying bounded.
const GENERATE_NAME_ATTEMPTS_MAX: usize = 16;
/// A pod's grace period when neither the delete nor `spec.terminationGracePeriodSeconds` sets one.
const POD_GRACE_PERIOD_DEFAULT_SECONDS: i64 = 30;

/// Metadata the server owns: a patch of the main resource cannot change them.
const SYSTEM_METADATA: [&str; 6] = [
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Which part of an object a patch may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PatchTarget {
    /// Metadata and spec; status changes are ignored.
    Main,
    /// The status subresource: only `status` changes.
    Status,
}

/// Everything the server holds, behind one lock (unnameable outside the crate: fakekit's `Fake`
/// lends it back to the crate only).
pub struct State {
    pub(crate) config: ApiServerConfig,
    /// The injected clock's time at the current call.
    pub(crate) now: Timestamp,
    /// The last resourceVersion handed out (one counter for all kinds, as etcd's revision).
    pub(crate) resource_version: u64,
    /// Shared with the watch history, watchers and lists: a write makes one new object, and
    /// nobody copies it to read it.
    pub(crate) objects: BTreeMap<Resource, BTreeMap<ObjectKey, SharedObject>>,
    pub(crate) watch: WatchHub,
    pub(crate) events: VecDeque<RecordedEvent>,
    pub(crate) next_event_seq: u64,
    /// The fault plan, the call log and the latency tally.
    pub(crate) kit: Kit<ApiKit>,
    /// Generated names and uids.
    pub(crate) ids: ChaCha8Rng,
}

/// The types of the API server's kit: the `KubeApi` operations, API-server faults, [`ApiCall`]s.
pub struct ApiKit;

impl KitSpec for ApiKit {
    type Operation = ApiOperation;
    type Rates = ApiFaultRates;
    type Fault = ApiFault;
    type Record = ApiCall;
    const OPERATIONS: &'static [ApiOperation] = ApiOperation::VARIANTS;
}

impl State {
    /// A fresh store at `now`, holding only the predefined namespaces.
    pub(crate) fn new(config: ApiServerConfig, now: Timestamp) -> Self {
        let streams = rng::streams(config.seed);
        let mut state = Self {
            now,
            resource_version: 0,
            objects: BTreeMap::new(),
            watch: WatchHub::new(config.watch_history_max),
            events: VecDeque::new(),
            next_event_seq: 1,
            kit: Kit::new(streams.clone(), config.call_log_len_max),
            ids: streams.stream("ids"),
            config,
        };
        for namespace in PREDEFINED_NAMESPACES {
            state
                .create(
                    &ResourceKind::NAMESPACE,
                    json!({"metadata": {"name": namespace}}),
                )
                .expect("the predefined namespaces are valid objects");
        }
        state
    }

    pub(crate) fn lookup(&self, resource: Resource, key: &ObjectKey) -> Option<&SharedObject> {
        self.objects.get(&resource)?.get(key)
    }

    /// Objects of `kind` in (namespace, name) order.
    pub(crate) fn all(&self, kind: &ResourceKind) -> impl Iterator<Item = &SharedObject> {
        self.objects
            .get(&resource(kind))
            .into_iter()
            .flat_map(BTreeMap::values)
    }

    /// Objects of `kind` in `namespace` (all namespaces for `None`), in (namespace, name) order.
    /// A namespace is a contiguous range of the ordered map, so this does not scan the others.
    pub(crate) fn scan<'a>(
        &'a self,
        kind: &ResourceKind,
        namespace: Option<&'a str>,
    ) -> Box<dyn Iterator<Item = &'a SharedObject> + 'a> {
        let Some(objects) = self.objects.get(&resource(kind)) else {
            return Box::new(std::iter::empty());
        };
        match namespace {
            None => Box::new(objects.values()),
            Some(namespace) => Box::new(
                objects
                    .range(ObjectKey::namespaced(namespace, "")..)
                    .take_while(move |(key, _)| key.namespace.as_deref() == Some(namespace))
                    .map(|(_, object)| object),
            ),
        }
    }

    pub(crate) fn get(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
    ) -> Result<Option<Value>, KubeError> {
        check_key(kind, key)?;
        Ok(self.lookup(resource(kind), key).map(|o| Value::clone(o)))
    }

    pub(crate) fn list(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
    ) -> Result<ObjectList, KubeError> {
        let filter = Filter::parse(kind, options)?;
        let items = self
            .scan(kind, filter.namespace.as_deref())
            .filter(|object| filter.matches(object))
            .cloned()
            .collect();
        Ok(ObjectList {
            items,
            resource_version: self.resource_version.to_string(),
        })
    }

    pub(crate) fn create(
        &mut self,
        kind: &ResourceKind,
        mut object: Value,
    ) -> Result<SharedObject, KubeError> {
        if *kind == crate::binding::BINDING {
            return self.bind(&object);
        }
        let resource = resource(kind);
        fill_type_meta(kind, &mut object)?;
        check_metadata(kind, &object)?;
        if *kind == ResourceKind::POD && self.config.vpc_admission_webhook {
            crate::admission::vpc_admission(&mut object);
        }
        if *kind == ResourceKind::POD {
            crate::admission::priority_admission(&mut object).map_err(KubeError::Forbidden)?;
        }
        if object["metadata"]["resourceVersion"]
            .as_str()
            .is_some_and(|rv| !rv.is_empty())
        {
            return Err(invalid(
                kind,
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let namespace = if kind.namespaced {
            let namespace = object["metadata"]["namespace"]
                .as_str()
                .filter(|ns| !ns.is_empty())
                .unwrap_or("default")
                .to_string();
            self.check_namespace_open(&namespace)?;
            object["metadata"]["namespace"] = json!(namespace);
            Some(namespace)
        } else {
            remove_field(&mut object["metadata"], "namespace");
            None
        };
        let name = match object["metadata"]["name"]
            .as_str()
            .filter(|n| !n.is_empty())
        {
            Some(name) => {
                check_name(kind, name)?;
                name.to_string()
            }
            None => match object["metadata"]["generateName"]
                .as_str()
                .filter(|p| !p.is_empty())
            {
                Some(prefix) => self.generate_name(kind, &namespace, prefix)?,
                None => {
                    return Err(invalid(
                        kind,
                        "metadata.name or metadata.generateName is required",
                    ));
                }
            },
        };
        let key = ObjectKey { namespace, name };
        if self.lookup(resource, &key).is_some() {
            return Err(KubeError::AlreadyExists(format!(
                "{} {} already exists",
                kind.plural,
                describe_key(&key)
            )));
        }
        let metadata = &mut object["metadata"];
        for field in SYSTEM_METADATA {
            remove_field(metadata, field);
        }
        metadata["name"] = json!(key.name);
        metadata["uid"] = json!(uuid(&mut self.ids));
        metadata["creationTimestamp"] = json!(format_timestamp(self.now));
        metadata["generation"] = json!(1);
        let status = initial_status(kind, object.get("status").cloned());
        set_field(&mut object, "status", status);
        Ok(self.insert_new(resource, key, object))
    }

    pub(crate) fn patch(
        &mut self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
        target: PatchTarget,
    ) -> Result<SharedObject, KubeError> {
        check_key(kind, key)?;
        let resource = resource(kind);
        let Some(current) = self.lookup(resource, key).cloned() else {
            return Err(not_found(kind, key));
        };
        let mut patched = Value::clone(&current);
        apply_patch(kind, &mut patched, patch)?;
        check_preconditions(kind, &current, &patched)?;
        let (next, unchanged) = match target {
            PatchTarget::Main => {
                let next = main_update(kind, &current, patched)?;
                let unchanged = next == *current;
                (next, unchanged)
            }
            PatchTarget::Status => {
                // Everything but `status` is the current object's again, so only `status` can
                // have changed (a status write is the commonest write: comparing whole objects
                // twice was a tenth of its cost).
                let next = status_update(&current, patched, touched_fields(patch).as_ref());
                let unchanged = next.get("status") == current.get("status");
                (next, unchanged)
            }
        };
        if unchanged {
            // A no-op write: Kubernetes keeps the resourceVersion and sends no watch event.
            return Ok(current);
        }
        if is_marked(&next) && finalizers(&next).is_empty() && grace_seconds(&next) == 0 {
            // The last finalizer went: the deletion completes.
            return Ok(self.remove(resource, key, next));
        }
        Ok(self.replace(resource, key, &current, next))
    }

    pub(crate) fn delete(
        &mut self,
        kind: &ResourceKind,
        key: &ObjectKey,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome, KubeError> {
        check_key(kind, key)?;
        let resource = resource(kind);
        let Some(current) = self.lookup(resource, key).cloned() else {
            return Ok(DeleteOutcome::NotFound);
        };
        if *kind == ResourceKind::NAMESPACE && PREDEFINED_NAMESPACES.contains(&key.name.as_str()) {
            return Err(KubeError::Forbidden(format!(
                "namespace {} may not be deleted",
                key.name
            )));
        }
        check_uid_precondition(kind, key, &current, options.precondition_uid.as_deref())?;
        let grace = if *kind == ResourceKind::POD {
            pod_grace_seconds(&current, options)
        } else {
            0
        };
        if finalizers(&current).is_empty() && grace == 0 {
            self.remove(resource, key, Value::clone(&current));
            return Ok(DeleteOutcome::Deleted);
        }
        let mut next = Value::clone(&current);
        if is_marked(&current) {
            if grace >= grace_seconds(&current) {
                // Already being deleted at least as soon: nothing changes.
                return Ok(DeleteOutcome::Marked(Value::clone(&current)));
            }
        } else if let Some(generation) = current["metadata"]["generation"].as_i64() {
            // Kubernetes bumps the generation when it sets a deletionTimestamp.
            next["metadata"]["generation"] = json!(generation + 1);
        }
        let at = self
            .now
            .checked_add(SignedDuration::from_secs(grace))
            .unwrap_or(self.now);
        next["metadata"]["deletionTimestamp"] = json!(format_timestamp(at));
        next["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
        let marked = self.replace(resource, key, &current, next);
        Ok(DeleteOutcome::Marked(Value::clone(&marked)))
    }

    /// Objects may only be created in a namespace that exists and is not being deleted.
    fn check_namespace_open(&self, namespace: &str) -> Result<(), KubeError> {
        match self.lookup(
            resource(&ResourceKind::NAMESPACE),
            &ObjectKey::cluster(namespace),
        ) {
            None => Err(KubeError::NotFound(format!(
                "namespaces \"{namespace}\" not found"
            ))),
            Some(ns) if is_marked(ns) => Err(KubeError::Forbidden(format!(
                "unable to create new content in namespace {namespace} because it is being \
                 terminated"
            ))),
            Some(_) => Ok(()),
        }
    }

    fn generate_name(
        &mut self,
        kind: &ResourceKind,
        namespace: &Option<String>,
        prefix: &str,
    ) -> Result<String, KubeError> {
        let prefix: String = prefix.chars().take(GENERATE_NAME_PREFIX_LEN_MAX).collect();
        for _ in 0..GENERATE_NAME_ATTEMPTS_MAX {
            let name = format!("{prefix}{}", name_suffix(&mut self.ids));
            check_name(kind, &name)?;
            let key = ObjectKey {
                namespace: namespace.clone(),
                name: name.clone(),
            };
            if self.lookup(resource(kind), &key).is_none() {
                return Ok(name);
            }
        }
        Err(KubeError::AlreadyExists(format!(
            "{}: no free name with prefix {prefix} after {GENERATE_NAME_ATTEMPTS_MAX} attempts",
            kind.plural
        )))
    }

    fn next_resource_version(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    fn insert_new(
        &mut self,
        resource: Resource,
        key: ObjectKey,
        mut object: Value,
    ) -> SharedObject {
        let version = self.next_resource_version();
        object["metadata"]["resourceVersion"] = json!(version.to_string());
        let object = Arc::new(object);
        self.objects
            .entry(resource)
            .or_default()
            .insert(key, Arc::clone(&object));
        self.watch.publish(Change {
            resource_version: version,
            resource,
            change: ChangeType::Added,
            old: None,
            object: Arc::clone(&object),
        });
        object
    }

    /// Creates `object` (keeping a `creationTimestamp` it gives) and merges `status` into the
    /// status the server gives it, or replaces the existing object with `object` and `status` as
    /// given (metadata the server owns carried over; without a `status` the stored one stays). A
    /// fixture: not a seam call.
    pub(crate) fn put(
        &mut self,
        kind: &ResourceKind,
        object: Value,
        status: Option<Value>,
    ) -> Result<SharedObject, KubeError> {
        let key = key_of(kind, &object);
        let Some(current) = self.lookup(resource(kind), &key).cloned() else {
            let created_at = object["metadata"]["creationTimestamp"].clone();
            let mut created = self.create(kind, object)?;
            if created_at.is_string() {
                // An object that existed before the test began.
                let mut older = Value::clone(&created);
                older["metadata"]["creationTimestamp"] = created_at;
                created = self.replace(resource(kind), &key, &created, older);
            }
            let Some(status) = status else {
                return Ok(created);
            };
            let patch = Patch::Merge(json!({ "status": status }));
            return self.patch(kind, &key, &patch, PatchTarget::Status);
        };
        let mut next = object;
        next["apiVersion"] = current["apiVersion"].clone();
        next["kind"] = current["kind"].clone();
        for field in SYSTEM_METADATA.iter().chain(&["name", "namespace"]) {
            match current["metadata"].get(*field) {
                Some(value) => next["metadata"][*field] = value.clone(),
                None => remove_field(&mut next["metadata"], field),
            }
        }
        match status.or_else(|| current.get("status").cloned()) {
            Some(status) => next["status"] = status,
            None => remove_field(&mut next, "status"),
        }
        Ok(self.replace(resource(kind), &key, &current, next))
    }

    /// Stores `next` in place of `current` at a new resourceVersion.
    pub(crate) fn replace(
        &mut self,
        resource: Resource,
        key: &ObjectKey,
        current: &SharedObject,
        mut next: Value,
    ) -> SharedObject {
        let version = self.next_resource_version();
        next["metadata"]["resourceVersion"] = json!(version.to_string());
        let next = Arc::new(next);
        self.objects
            .entry(resource)
            .or_default()
            .insert(key.clone(), Arc::clone(&next));
        self.watch.publish(Change {
            resource_version: version,
            resource,
            change: ChangeType::Modified,
            old: Some(Arc::clone(current)),
            object: Arc::clone(&next),
        });
        next
    }

    /// Removes the object; `last` is its final state, returned and sent to watchers at the
    /// deletion's resourceVersion.
    fn remove(&mut self, resource: Resource, key: &ObjectKey, mut last: Value) -> SharedObject {
        let version = self.next_resource_version();
        last["metadata"]["resourceVersion"] = json!(version.to_string());
        let last = Arc::new(last);
        if let Some(objects) = self.objects.get_mut(&resource) {
            objects.remove(key);
        }
        self.watch.publish(Change {
            resource_version: version,
            resource,
            change: ChangeType::Deleted,
            old: None,
            object: Arc::clone(&last),
        });
        last
    }
}

/// The main-resource half of a patch: identity and server-owned metadata stay, status stays, new
/// finalizers are refused on an object being deleted, and the generation follows the spec.
/// A status write: `current` with the patched object's `status`, nothing else of the patch.
///
/// Built from `patched` itself, putting back each other top-level field only where the patch
/// changed it (perf: a second deep copy of the whole object per status write was a twentieth of
/// a 3,000-pod burst's CPU; a status patch rarely touches any other field, and comparing costs no
/// allocation).
/// Fills in `apiVersion`, `kind` and `metadata` of an object to create, refusing ones that name
/// another kind.
fn fill_type_meta(kind: &ResourceKind, object: &mut Value) -> Result<(), KubeError> {
    let Some(map) = object.as_object_mut() else {
        return Err(invalid(kind, "the object is not a JSON object"));
    };
    for (field, expected) in [
        ("apiVersion", kind.api_version()),
        ("kind", kind.kind.to_string()),
    ] {
        match map.get(field) {
            None | Some(Value::Null) => {
                map.insert(field.to_string(), Value::String(expected));
            }
            Some(Value::String(given)) if *given == expected => {}
            Some(given) => {
                return Err(invalid(
                    kind,
                    &format!("{field} {given} does not match {expected}"),
                ));
            }
        }
    }
    let metadata = map.entry("metadata").or_insert_with(|| json!({}));
    if !metadata.is_object() {
        return Err(invalid(kind, "metadata is not an object"));
    }
    Ok(())
}

/// The top-level fields a merge patch names (set or removed); `None` for a JSON patch, which
/// may touch any.
fn touched_fields(patch: &Patch) -> Option<BTreeSet<&str>> {
    match patch {
        Patch::Merge(Value::Object(body)) => Some(body.keys().map(String::as_str).collect()),
        Patch::Merge(_) | Patch::Json(_) => None,
    }
}

/// `patched` with every top-level field but `status` put back as in `current`: the status
/// subresource ignores the rest. Only the fields in `touched` (all, when `None`) can differ from
/// `current`, since `patched` was built from a copy of it.
fn status_update(current: &Value, mut patched: Value, touched: Option<&BTreeSet<&str>>) -> Value {
    let (Some(current_map), Some(patched_map)) = (current.as_object(), patched.as_object_mut())
    else {
        let status = patched.as_object_mut().and_then(|o| o.remove("status"));
        let mut next = Value::clone(current);
        set_field(&mut next, "status", status);
        return next;
    };
    patched_map.retain(|field, _| field == "status" || current_map.contains_key(field));
    for (field, value) in current_map {
        if field == "status" || touched.is_some_and(|t| !t.contains(field.as_str())) {
            continue;
        }
        if patched_map.get(field) != Some(value) {
            patched_map.insert(field.clone(), value.clone());
        }
    }
    patched
}

fn main_update(kind: &ResourceKind, current: &Value, patched: Value) -> Result<Value, KubeError> {
    if !patched.is_object() || !patched["metadata"].is_object() {
        return Err(invalid(
            kind,
            "the patched object or its metadata is not an object",
        ));
    }
    for pointer in [
        "/apiVersion",
        "/kind",
        "/metadata/name",
        "/metadata/namespace",
    ] {
        if patched.pointer(pointer) != current.pointer(pointer) {
            return Err(invalid(kind, &format!("{pointer} cannot be changed")));
        }
    }
    check_metadata(kind, &patched)?;
    if *kind == ResourceKind::POD
        && patched.pointer("/spec/nodeName") != current.pointer("/spec/nodeName")
    {
        // Kubernetes' pod update validation: only a Binding assigns a pod to a node.
        return Err(invalid(
            kind,
            "spec.nodeName: Forbidden: pod updates may not change spec.nodeName (bind the pod \
             with the pods/binding subresource)",
        ));
    }
    let mut next = patched;
    for field in SYSTEM_METADATA {
        set_field(
            &mut next["metadata"],
            field,
            current["metadata"].get(field).cloned(),
        );
    }
    set_field(&mut next, "status", current.get("status").cloned());
    if is_marked(current) {
        let before = finalizers(current);
        if let Some(added) = finalizers(&next).iter().find(|f| !before.contains(f)) {
            return Err(invalid(
                kind,
                &format!("no new finalizers can be added if the object is being deleted: {added}"),
            ));
        }
    }
    if spec_of(&next) != spec_of(current) {
        let generation = current["metadata"]["generation"].as_i64().unwrap_or(0);
        next["metadata"]["generation"] = json!(generation + 1);
    }
    Ok(next)
}

fn apply_patch(kind: &ResourceKind, doc: &mut Value, patch: &Patch) -> Result<(), KubeError> {
    match patch {
        Patch::Merge(body) => {
            if !body.is_object() {
                return Err(invalid(kind, "a merge patch must be a JSON object"));
            }
            json_patch::merge(doc, body);
            Ok(())
        }
        Patch::Json(body) => {
            let operations: json_patch::Patch = serde_json::from_value(body.clone())
                .map_err(|e| invalid(kind, &format!("malformed JSON patch: {e}")))?;
            json_patch::patch(doc, &operations).map_err(|e| match e.kind {
                // A failed `test` is a failed precondition: the object is not what the caller
                // read, the same situation as a stale resourceVersion (see the module docs of
                // `apiserver` for how this differs from Kubernetes' 422).
                PatchErrorKind::TestFailed => {
                    KubeError::Conflict(format!("{}: JSON patch test failed: {e}", kind.plural))
                }
                _ => invalid(kind, &format!("JSON patch failed: {e}")),
            })
        }
    }
}

/// A write carrying `metadata.resourceVersion` or `metadata.uid` is conditional on them.
fn check_preconditions(
    kind: &ResourceKind,
    current: &Value,
    patched: &Value,
) -> Result<(), KubeError> {
    for (field, what) in [("resourceVersion", "resourceVersion"), ("uid", "UID")] {
        let wanted = match patched["metadata"].get(field) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) if s.is_empty() => continue,
            Some(Value::String(s)) => s,
            Some(other) => {
                return Err(invalid(
                    kind,
                    &format!("metadata.{field} {other} is not a string"),
                ));
            }
        };
        let actual = current["metadata"][field].as_str().unwrap_or_default();
        if wanted != actual {
            return Err(KubeError::Conflict(format!(
                "{} {}: precondition failed: {what} {wanted} is not the current {actual}; the \
                 object has been modified, re-read it and try again",
                kind.plural,
                current["metadata"]["name"].as_str().unwrap_or_default()
            )));
        }
    }
    Ok(())
}

pub(crate) fn check_uid_precondition(
    kind: &ResourceKind,
    key: &ObjectKey,
    current: &Value,
    wanted: Option<&str>,
) -> Result<(), KubeError> {
    let actual = current["metadata"]["uid"].as_str().unwrap_or_default();
    match wanted {
        Some(wanted) if wanted != actual => Err(KubeError::Conflict(format!(
            "{} {}: precondition failed: UID in precondition: {wanted}, UID in object meta: \
             {actual}",
            kind.plural,
            describe_key(key)
        ))),
        _ => Ok(()),
    }
}

/// Shapes the selectors and the finalizer logic rely on: string maps and a string list.
fn check_metadata(kind: &ResourceKind, object: &Value) -> Result<(), KubeError> {
    let metadata = &object["metadata"];
    for field in ["labels", "annotations"] {
        match metadata.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::Object(map)) if map.values().all(Value::is_string) => {}
            Some(_) => {
                return Err(invalid(
                    kind,
                    &format!("metadata.{field} must map strings to strings"),
                ));
            }
        }
    }
    match metadata.get("finalizers") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => Ok(()),
        Some(_) => Err(invalid(
            kind,
            "metadata.finalizers must be a list of strings",
        )),
    }
}

/// Kubernetes object names (DNS subdomains): lower-case alphanumerics, `-` and `.`, starting and
/// ending alphanumeric, at most 253 characters.
fn check_name(kind: &ResourceKind, name: &str) -> Result<(), KubeError> {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let ok = !name.is_empty()
        && name.len() <= NAME_LEN_MAX
        && name.chars().all(|c| alnum(c) || c == '-' || c == '.')
        && name.starts_with(alnum)
        && name.ends_with(alnum);
    if ok {
        Ok(())
    } else {
        Err(invalid(
            kind,
            &format!("metadata.name {name:?} is not a valid DNS subdomain"),
        ))
    }
}

/// Namespaced kinds are addressed with a namespace, cluster-scoped ones without: a mismatch is a
/// caller bug, reported rather than guessed around.
fn check_key(kind: &ResourceKind, key: &ObjectKey) -> Result<(), KubeError> {
    match (&key.namespace, kind.namespaced) {
        (None, true) => Err(invalid(
            kind,
            &format!("{} is namespaced: the key needs a namespace", key.name),
        )),
        (Some(ns), false) => Err(invalid(
            kind,
            &format!("{} is cluster-scoped: the key has namespace {ns}", key.name),
        )),
        _ => Ok(()),
    }
}

/// The status an object starts with. Kubernetes ignores status on create for pods (they start
/// `Pending`), namespaces (`Active`) and kinds with a status subresource (custom resources and
/// most built-ins); nodes keep theirs, since the kubelet registers them with one.
fn initial_status(kind: &ResourceKind, given: Option<Value>) -> Option<Value> {
    if *kind == ResourceKind::NODE {
        given
    } else if *kind == ResourceKind::POD {
        Some(json!({"phase": "Pending"}))
    } else if *kind == ResourceKind::NAMESPACE {
        Some(json!({"phase": "Active"}))
    } else {
        None
    }
}

/// A pod's grace period for this delete: 0 for a pod no kubelet runs (unbound) or that has
/// finished; else the delete's, the pod's `terminationGracePeriodSeconds`, or 30 s. A negative
/// value counts as 1 s, as in Kubernetes.
fn pod_grace_seconds(pod: &Value, options: &DeleteOptions) -> i64 {
    let bound = pod["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty());
    if !bound || is_terminal_pod(pod) {
        return 0;
    }
    let grace = options
        .grace_period_seconds
        .or_else(|| pod["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(POD_GRACE_PERIOD_DEFAULT_SECONDS);
    if grace < 0 { 1 } else { grace }
}

/// Everything but metadata and status: what `generation` tracks.
fn spec_of(object: &Value) -> Map<String, Value> {
    let mut rest = object.as_object().cloned().unwrap_or_default();
    for field in ["apiVersion", "kind", "metadata", "status"] {
        rest.remove(field);
    }
    rest
}

pub(crate) fn is_terminal_pod(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    )
}

pub(crate) fn is_marked(object: &Value) -> bool {
    object["metadata"]["deletionTimestamp"]
        .as_str()
        .is_some_and(|t| !t.is_empty())
}

fn grace_seconds(object: &Value) -> i64 {
    object["metadata"]["deletionGracePeriodSeconds"]
        .as_i64()
        .unwrap_or(0)
}

fn finalizers(object: &Value) -> Vec<&str> {
    object["metadata"]["finalizers"]
        .as_array()
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Sets `field` of an object to `value`, or removes it for `None`.
fn set_field(object: &mut Value, field: &str, value: Option<Value>) {
    match value {
        Some(value) => object[field] = value,
        None => remove_field(object, field),
    }
}

fn remove_field(object: &mut Value, field: &str) {
    if let Some(map) = object.as_object_mut() {
        map.remove(field);
    }
}

/// Kubernetes timestamps: RFC 3339, whole seconds, UTC.
pub(crate) fn format_timestamp(at: Timestamp) -> String {
    Timestamp::from_second(at.as_second())
        .unwrap_or(at)
        .to_string()
}

/// `namespace/name` or `name`.
/// The key of `object` of `kind` (a namespaced object without a namespace is in `default`).
pub(crate) fn key_of(kind: &ResourceKind, object: &Value) -> ObjectKey {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    if kind.namespaced {
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .filter(|ns| !ns.is_empty())
            .unwrap_or("default");
        ObjectKey::namespaced(namespace, name)
    } else {
        ObjectKey::cluster(name)
    }
}

pub(crate) fn describe_key(key: &ObjectKey) -> String {
    match &key.namespace {
        Some(ns) => format!("{ns}/{}", key.name),
        None => key.name.clone(),
    }
}

fn invalid(kind: &ResourceKind, why: &str) -> KubeError {
    KubeError::Invalid(format!("{}: {why}", kind.plural))
}

fn not_found(kind: &ResourceKind, key: &ObjectKey) -> KubeError {
    KubeError::NotFound(format!("{} {} not found", kind.plural, describe_key(key)))
}
