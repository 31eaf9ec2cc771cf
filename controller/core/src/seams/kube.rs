//! The Kubernetes seam: the API-server calls the controller makes.
//!
//! Objects cross the seam as JSON (`serde_json::Value`) addressed by a [`ResourceKind`] and an
//! [`ObjectKey`], which kube-rs serves with `DynamicObject` and the in-memory API server stores
//! natively; [`KubeApiExt`] adds typed helpers on top. This keeps the trait object safe and
//! small while every call still has API-server semantics (resourceVersion, finalizers, 409/429).

use async_trait::async_trait;
use futures::stream::BoxStream;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Retryable;

/// Which resource a call is about (group/version/kind plus the REST plural).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceKind {
    /// API group; `""` for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
}

impl ResourceKind {
    pub const NODE_POOL: Self = Self::cluster("karpenter.sh", "v1", "NodePool", "nodepools");
    pub const NODE_CLAIM: Self = Self::cluster("karpenter.sh", "v1", "NodeClaim", "nodeclaims");
    pub const EC2_NODE_CLASS: Self =
        Self::cluster("karpenter.k8s.aws", "v1", "EC2NodeClass", "ec2nodeclasses");
    pub const NODE: Self = Self::cluster("", "v1", "Node", "nodes");
    pub const POD: Self = Self::namespaced("", "v1", "Pod", "pods");
    pub const DAEMON_SET: Self = Self::namespaced("apps", "v1", "DaemonSet", "daemonsets");
    pub const POD_DISRUPTION_BUDGET: Self = Self::namespaced(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
    );
    pub const PERSISTENT_VOLUME_CLAIM: Self =
        Self::namespaced("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims");
    pub const PERSISTENT_VOLUME: Self =
        Self::cluster("", "v1", "PersistentVolume", "persistentvolumes");
    pub const STORAGE_CLASS: Self =
        Self::cluster("storage.k8s.io", "v1", "StorageClass", "storageclasses");
    pub const VOLUME_ATTACHMENT: Self = Self::cluster(
        "storage.k8s.io",
        "v1",
        "VolumeAttachment",
        "volumeattachments",
    );
    /// A node's CSI drivers and how many volumes each may attach (`spec.drivers[].allocatable`).
    pub const CSI_NODE: Self = Self::cluster("storage.k8s.io", "v1", "CSINode", "csinodes");
    pub const NAMESPACE: Self = Self::cluster("", "v1", "Namespace", "namespaces");
    /// Read only with default topology spread constraints configured: the selectors
    /// kube-scheduler deduces for them ([`crate::scheduling::defaults`]).
    pub const SERVICE: Self = Self::namespaced("", "v1", "Service", "services");
    pub const REPLICA_SET: Self = Self::namespaced("apps", "v1", "ReplicaSet", "replicasets");
    pub const STATEFUL_SET: Self = Self::namespaced("apps", "v1", "StatefulSet", "statefulsets");
    pub const REPLICATION_CONTROLLER: Self =
        Self::namespaced("", "v1", "ReplicationController", "replicationcontrollers");
    pub const EVENT: Self = Self::namespaced("", "v1", "Event", "events");
    pub const LEASE: Self = Self::namespaced("coordination.k8s.io", "v1", "Lease", "leases");

    const fn cluster(
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        plural: &'static str,
    ) -> Self {
        Self {
            group,
            version,
            kind,
            plural,
            namespaced: false,
        }
    }

    const fn namespaced(
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        plural: &'static str,
    ) -> Self {
        Self {
            group,
            version,
            kind,
            plural,
            namespaced: true,
        }
    }

    /// `apiVersion` as written in manifests (`v1`, `karpenter.sh/v1`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// Namespace (for namespaced kinds) and name of one object.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectKey {
    pub fn cluster(name: impl Into<String>) -> Self {
        Self {
            namespace: None,
            name: name.into(),
        }
    }
    pub fn namespaced(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: Some(namespace.into()),
            name: name.into(),
        }
    }
}

/// Filters of a list or watch. Empty selectors match everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// Restrict to one namespace (namespaced kinds); `None` lists all namespaces.
    pub namespace: Option<String>,
    /// Label selector in Kubernetes syntax (`a=b,c in (d)`).
    pub label_selector: Option<String>,
    /// Field selector (`spec.nodeName=node-1`).
    pub field_selector: Option<String>,
}

/// An object as a list or watch hands it out: shared, not copied. An API server that holds its
/// objects this way (the in-memory one) gives every watcher and list the same allocation; deep
/// copies of every object for every watcher were a third of the simulation's CPU (issue 13).
/// Whoever needs to change one copies it (`Arc::unwrap_or_clone`, `Arc::make_mut`).
pub type SharedObject = std::sync::Arc<Value>;

/// A consistent list: the items and the resourceVersion to watch from.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectList {
    /// Items in a defined order (by namespace, then name), so callers iterate deterministically.
    pub items: Vec<SharedObject>,
    pub resource_version: String,
}

/// A patch. Merge patches are what the controller uses; JSON patches express test-and-set
/// (`test` of `metadata.resourceVersion`) where a merge patch could lose a concurrent update.
#[derive(Clone, Debug, PartialEq)]
pub enum Patch {
    /// RFC 7386 JSON merge patch.
    Merge(Value),
    /// RFC 6902 JSON patch (an array of operations).
    Json(Value),
}

/// What the API server's eviction subresource says (with a 500, since Kubernetes 1.26) when a pod
/// is matched by several PodDisruptionBudgets: no eviction can succeed until the budgets change,
/// so callers treat it as a budget refusal (upstream Karpenter matches the same text).
pub const MULTIPLE_BUDGETS_MESSAGE: &str = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";

/// Options of a delete.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// Pod grace period override, seconds (`Some(0)` forces immediate removal).
    pub grace_period_seconds: Option<i64>,
    /// Only delete if the object still has this UID (guards against deleting a re-created object).
    pub precondition_uid: Option<String>,
}

/// What a delete did.
#[derive(Clone, Debug, PartialEq)]
pub enum DeleteOutcome {
    /// The object is gone.
    Deleted,
    /// The object has finalizers: it now carries a deletionTimestamp and is returned as is.
    Marked(Value),
    /// There was no such object (deletes are idempotent; this is not an error).
    NotFound,
}

/// One change seen by a watch.
#[derive(Clone, Debug, PartialEq)]
pub enum WatchEvent {
    Added(SharedObject),
    Modified(SharedObject),
    Deleted(SharedObject),
    /// Progress marker: nothing changed up to this resourceVersion.
    Bookmark {
        resource_version: String,
    },
}

/// A Kubernetes Event's `type`: the only two values the API server accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    /// The wire value (`Normal`, `Warning`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Compares with the wire value, so a reader of recorded events can write `type_ == "Warning"`.
impl PartialEq<&str> for EventType {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A Kubernetes Event to record against an object (`reason` uses upstream's names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRecord {
    pub involved: ResourceKind,
    pub key: ObjectKey,
    pub uid: Option<String>,
    pub type_: EventType,
    pub reason: String,
    pub message: String,
}

/// Errors of the Kubernetes seam, mapped from HTTP status codes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KubeError {
    /// 404: the object (or its namespace) does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// 409 on create: an object with this name exists.
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// 409 on update: the resourceVersion was stale; re-read and retry.
    #[error("conflict: {0}")]
    Conflict(String),
    /// 429: eviction refused by a PodDisruptionBudget, or client-side throttling.
    #[error("too many requests: {0}")]
    TooManyRequests(String),
    /// 422: the API server rejected the object (schema, CEL or admission).
    #[error("invalid: {0}")]
    Invalid(String),
    /// 410: the watch's resourceVersion is too old; re-list and watch again.
    #[error("gone: {0}")]
    Gone(String),
    /// 401/403: credentials or RBAC. Not retryable without operator action.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// 5xx, timeouts, connection errors: the call may or may not have taken effect.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The object could not be (de)serialized to the expected type.
    #[error("decode: {0}")]
    Decode(String),
}

impl Retryable for KubeError {
    fn is_retryable(&self) -> bool {
        matches!(
            self,
            KubeError::Conflict(_)
                | KubeError::TooManyRequests(_)
                | KubeError::Gone(_)
                | KubeError::Unavailable(_)
        )
    }
}

/// A stream of watch events; ends (or yields `Gone`) when the server closes it.
pub type WatchStream = BoxStream<'static, Result<WatchEvent, KubeError>>;

/// The API-server calls the controller makes.
///
/// Contract shared by every implementation:
/// - reads of a missing object return `Ok(None)` (get) or `DeleteOutcome::NotFound` (delete),
///   never an error; writes to a missing object return [`KubeError::NotFound`];
/// - writes carrying `metadata.resourceVersion` fail with [`KubeError::Conflict`] if it is stale;
/// - returned objects always carry `metadata.resourceVersion` and `metadata.uid`.
#[async_trait]
pub trait KubeApi: Send + Sync {
    /// Reads one object; `Ok(None)` when it does not exist.
    async fn get(&self, kind: &ResourceKind, key: &ObjectKey) -> Result<Option<Value>, KubeError>;

    /// Lists objects of `kind` matching `options`, in (namespace, name) order.
    async fn list(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
    ) -> Result<ObjectList, KubeError>;

    /// Creates `object`, named by `metadata.name` or, when that is absent, by the server from
    /// `metadata.generateName` plus a random suffix (as Kubernetes does); returns the stored object.
    /// [`KubeError::AlreadyExists`] if the name is taken. Not idempotent: callers that may retry
    /// re-read state first (the provisioner counts in-flight NodeClaims before planning more).
    async fn create(&self, kind: &ResourceKind, object: Value) -> Result<Value, KubeError>;

    /// Patches the object's main resource (metadata and spec; status is ignored); returns the
    /// stored object, shared as lists and watch events are: most writers never read it, and an
    /// owned copy of every written object was the largest cost of a simulated burst (a status
    /// write per pending pod each time the scheduler's message changes).
    async fn patch(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<SharedObject, KubeError>;

    /// Patches the status subresource only; returns the stored object, shared (see `patch`).
    async fn patch_status(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<SharedObject, KubeError>;

    /// Deletes an object. Idempotent: deleting a missing object is `Ok(NotFound)`; an object with
    /// finalizers is only marked (`Ok(Marked)`) until they are removed.
    async fn delete(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome, KubeError>;

    /// Evicts a pod through the Eviction API. [`KubeError::TooManyRequests`] when a
    /// PodDisruptionBudget does not allow it now (retry later); `Ok` when the pod is already gone.
    async fn evict(&self, pod: &ObjectKey, options: &DeleteOptions) -> Result<(), KubeError>;

    /// Watches `kind` from `resource_version` (from a previous list). The stream yields
    /// [`KubeError::Gone`] when that version has expired: the caller re-lists.
    async fn watch(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
        resource_version: &str,
    ) -> Result<WatchStream, KubeError>;

    /// Records an Event. Best effort: callers log failures and go on.
    async fn record_event(&self, event: &EventRecord) -> Result<(), KubeError>;
}

/// Typed helpers over [`KubeApi`] for kube-derived and k8s-openapi types.
#[async_trait]
pub trait KubeApiExt: KubeApi {
    /// Reads one object as `T`.
    async fn get_typed<T: DeserializeOwned>(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
    ) -> Result<Option<T>, KubeError> {
        match self.get(kind, key).await? {
            Some(value) => decode(value).map(Some),
            None => Ok(None),
        }
    }

    /// Lists objects as `T`, in (namespace, name) order.
    async fn list_typed<T: DeserializeOwned>(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
    ) -> Result<Vec<T>, KubeError> {
        let list = self.list(kind, options).await?;
        list.items.iter().map(|item| decode_shared(item)).collect()
    }

    /// Lists objects as `T`, in (namespace, name) order, skipping any that do not decode: one odd
    /// object (a newer API version, a hand-edited field) must not stop a controller from
    /// reconciling all the others. Skips are logged.
    async fn list_decodable<T: DeserializeOwned>(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
    ) -> Result<Vec<T>, KubeError> {
        let list = self.list(kind, options).await?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|value| match T::deserialize(&*value) {
                Ok(object) => Some(object),
                Err(err) => {
                    tracing::warn!(kind = kind.kind, %err, "skipping an object that does not decode");
                    None
                }
            })
            .collect())
    }

    /// Creates a typed object.
    async fn create_typed<T: Serialize + DeserializeOwned + Sync>(
        &self,
        kind: &ResourceKind,
        object: &T,
    ) -> Result<T, KubeError> {
        let value = serde_json::to_value(object).map_err(|e| KubeError::Decode(e.to_string()))?;
        decode(self.create(kind, value).await?)
    }
}

impl<K: KubeApi + ?Sized> KubeApiExt for K {}

fn decode<T: DeserializeOwned>(value: Value) -> Result<T, KubeError> {
    serde_json::from_value(value).map_err(|e| KubeError::Decode(e.to_string()))
}

/// Decodes from a borrow: a shared list item is never copied just to be decoded.
fn decode_shared<T: DeserializeOwned>(value: &Value) -> Result<T, KubeError> {
    T::deserialize(value).map_err(|e| KubeError::Decode(e.to_string()))
}
