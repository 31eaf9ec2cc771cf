//! [`KubeClient`]: the `KubeApi` seam over kube-rs's `Api<DynamicObject>`, one `ApiResource` per
//! `ResourceKind`, every call behind the client's QPS/burst limit.
//!
//! What each seam call sends (the request-shape tests in `tests/adapter` pin these):
//!
//! | call | request |
//! |---|---|
//! | `get` | `GET …/{plural}/{name}`; 404 is `Ok(None)` |
//! | `list` | `GET …/{plural}?labelSelector&fieldSelector`, items sorted by (namespace, name) |
//! | `watch` | `GET …/{plural}?watch=true&resourceVersion=RV&allowWatchBookmarks=true&timeoutSeconds=290`; an `ERROR` event with 410 is `Gone` |
//! | `create` | `POST …/{plural}` |
//! | `patch` | `PATCH …/{name}` as `application/merge-patch+json` or `application/json-patch+json` |
//! | `patch_status` | the same on `…/{name}/status` |
//! | `delete` | `DELETE …/{name}` with `gracePeriodSeconds` and a UID precondition |
//! | `evict` | `POST /api/v1/namespaces/{ns}/pods/{name}/eviction` (`policy/v1` Eviction); 429 when a PDB forbids it |
//! | `record_event` | `POST /apis/events.k8s.io/v1/namespaces/{ns}/events`, a repeat `PATCH`es the event's `series` |

use std::num::NonZeroU32;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use karpenter_core::seams::kube::{
    DeleteOptions, DeleteOutcome, EventRecord, ListOptions, ObjectKey, ObjectList, Patch,
    ResourceKind, SharedObject, WatchEvent, WatchStream,
};
use karpenter_core::seams::{Clock, KubeApi, KubeError};
use kube::api::{
    Api, DeleteParams, ListParams, PatchParams, PostParams, Preconditions, WatchParams,
};
use kube::core::{ApiResource, DynamicObject, TypeMeta};
use serde_json::Value;

use crate::errors::{from_kube, from_status};
use crate::events::EventSeries;

/// Upstream's `KUBE_CLIENT_QPS` default: requests per second the client sends on average.
pub const CLIENT_QPS_DEFAULT: u32 = 200;
/// Upstream's `KUBE_CLIENT_BURST` default: requests the client may send at once after a quiet
/// spell.
pub const CLIENT_BURST_DEFAULT: u32 = 300;
/// How long one watch request stays open, seconds (kube-rs's and client-go's bound stays under
/// the API server's 5-minute cap, so the server ends it cleanly and the informer resumes).
pub const WATCH_TIMEOUT_SECS: u32 = 290;

/// The client-side rate limit (upstream's `KUBE_CLIENT_QPS` / `KUBE_CLIENT_BURST`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientLimits {
    pub qps: NonZeroU32,
    pub burst: NonZeroU32,
}

impl Default for ClientLimits {
    fn default() -> Self {
        Self {
            qps: NonZeroU32::new(CLIENT_QPS_DEFAULT).unwrap_or(NonZeroU32::MIN),
            burst: NonZeroU32::new(CLIENT_BURST_DEFAULT).unwrap_or(NonZeroU32::MIN),
        }
    }
}

/// The `KubeApi` seam over a kube-rs [`kube::Client`].
pub struct KubeClient {
    client: kube::Client,
    /// A token bucket (GCRA): `qps` per second, up to `burst` at once; every request waits for a
    /// token, as client-go's `flowcontrol` limiter does.
    limiter: Arc<DefaultDirectRateLimiter>,
    events: EventSeries,
}

impl std::fmt::Debug for KubeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClient").finish_non_exhaustive()
    }
}

impl KubeClient {
    /// The adapter over `client`. `clock` stamps events; `reporting_instance` names this replica
    /// in them (events.k8s.io's `reportingInstance`).
    pub fn new(
        client: kube::Client,
        limits: ClientLimits,
        clock: Arc<dyn Clock>,
        reporting_instance: impl Into<String>,
    ) -> Self {
        let quota = Quota::per_second(limits.qps).allow_burst(limits.burst);
        Self {
            client,
            limiter: Arc::new(RateLimiter::direct(quota)),
            events: EventSeries::new(clock, reporting_instance.into()),
        }
    }

    /// The kube-rs client (the binary reads `/version` through it).
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Waits for a token of the QPS/burst limit.
    pub(crate) async fn throttle(&self) {
        self.limiter.until_ready().await;
    }

    /// The dynamic API of `kind`, in `namespace` for namespaced kinds (all namespaces when
    /// `None`).
    pub(crate) fn api(&self, kind: &ResourceKind, namespace: Option<&str>) -> Api<DynamicObject> {
        let resource = api_resource(kind);
        match namespace {
            Some(ns) if kind.namespaced => Api::namespaced_with(self.client.clone(), ns, &resource),
            _ => Api::all_with(self.client.clone(), &resource),
        }
    }

    /// The API for one object: a namespaced kind needs the key's namespace.
    fn object_api(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
    ) -> Result<Api<DynamicObject>, KubeError> {
        if kind.namespaced && key.namespace.is_none() {
            return Err(KubeError::Invalid(format!(
                "{} {} is namespaced: the key needs a namespace",
                kind.kind, key.name
            )));
        }
        Ok(self.api(kind, key.namespace.as_deref()))
    }
}

/// kube-rs's description of `kind`'s REST resource.
pub fn api_resource(kind: &ResourceKind) -> ApiResource {
    ApiResource {
        group: kind.group.to_string(),
        version: kind.version.to_string(),
        api_version: kind.api_version(),
        kind: kind.kind.to_string(),
        plural: kind.plural.to_string(),
    }
}

/// An object as the seam's JSON, with `apiVersion` and `kind` filled in (the API server leaves
/// them out of list items and some watch events; the typed decoders check them when present).
fn to_value(mut object: DynamicObject, kind: &ResourceKind) -> Result<Value, KubeError> {
    if object.types.is_none() {
        object.types = Some(TypeMeta {
            api_version: kind.api_version(),
            kind: kind.kind.to_string(),
        });
    }
    serde_json::to_value(object).map_err(|e| KubeError::Decode(e.to_string()))
}

fn from_value(object: Value) -> Result<DynamicObject, KubeError> {
    serde_json::from_value(object).map_err(|e| KubeError::Decode(e.to_string()))
}

fn list_params(options: &ListOptions) -> ListParams {
    ListParams {
        label_selector: options.label_selector.clone(),
        field_selector: options.field_selector.clone(),
        ..ListParams::default()
    }
}

fn kube_patch(patch: &Patch) -> Result<kube::api::Patch<Value>, KubeError> {
    Ok(match patch {
        Patch::Merge(value) => kube::api::Patch::Merge(value.clone()),
        Patch::Json(ops) => kube::api::Patch::Json(
            serde_json::from_value::<json_patch_4::Patch>(ops.clone())
                .map_err(|e| KubeError::Invalid(format!("not an RFC 6902 JSON patch: {e}")))?,
        ),
    })
}

fn delete_params(options: &DeleteOptions) -> DeleteParams {
    DeleteParams {
        // Negative grace periods mean "now" to the API server too.
        grace_period_seconds: options
            .grace_period_seconds
            .map(|s| u32::try_from(s.max(0)).unwrap_or(u32::MAX)),
        preconditions: options.precondition_uid.clone().map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    }
}

/// Whether a delete's answer is an object that still exists: it carries finalizers, or it is
/// terminating gracefully (a pod with a grace period).
fn still_exists(object: &Value) -> bool {
    let meta = &object["metadata"];
    let finalizers = meta["finalizers"].as_array().is_some_and(|f| !f.is_empty());
    let graceful = meta["deletionTimestamp"].is_string()
        && meta["deletionGracePeriodSeconds"]
            .as_i64()
            .is_some_and(|s| s > 0);
    finalizers || graceful
}

#[async_trait]
impl KubeApi for KubeClient {
    async fn get(&self, kind: &ResourceKind, key: &ObjectKey) -> Result<Option<Value>, KubeError> {
        let api = self.object_api(kind, key)?;
        self.throttle().await;
        match api.get_opt(&key.name).await.map_err(from_kube)? {
            Some(object) => to_value(object, kind).map(Some),
            None => Ok(None),
        }
    }

    async fn list(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
    ) -> Result<ObjectList, KubeError> {
        let api = self.api(kind, options.namespace.as_deref());
        self.throttle().await;
        let list = api.list(&list_params(options)).await.map_err(from_kube)?;
        let resource_version = list.metadata.resource_version.clone().unwrap_or_default();
        let mut items = list
            .items
            .into_iter()
            .map(|o| to_value(o, kind))
            .collect::<Result<Vec<_>, _>>()?;
        items.sort_by(|a, b| {
            let key = |v: &Value| {
                (
                    v["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                    v["metadata"]["name"].as_str().unwrap_or("").to_string(),
                )
            };
            key(a).cmp(&key(b))
        });
        Ok(ObjectList {
            items: items.into_iter().map(Arc::new).collect(),
            resource_version,
        })
    }

    async fn create(&self, kind: &ResourceKind, object: Value) -> Result<Value, KubeError> {
        let object = from_value(object)?;
        let namespace = object.metadata.namespace.clone();
        if kind.namespaced && namespace.is_none() {
            return Err(KubeError::Invalid(format!(
                "{} is namespaced: metadata.namespace is required",
                kind.kind
            )));
        }
        let api = self.api(kind, namespace.as_deref());
        self.throttle().await;
        let created = api
            .create(&PostParams::default(), &object)
            .await
            .map_err(from_kube)?;
        to_value(created, kind)
    }

    async fn patch(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<SharedObject, KubeError> {
        let api = self.object_api(kind, key)?;
        let patch = kube_patch(patch)?;
        self.throttle().await;
        let patched = api
            .patch(&key.name, &PatchParams::default(), &patch)
            .await
            .map_err(from_kube)?;
        to_value(patched, kind).map(SharedObject::new)
    }

    async fn patch_status(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<SharedObject, KubeError> {
        let api = self.object_api(kind, key)?;
        let patch = kube_patch(patch)?;
        self.throttle().await;
        let patched = api
            .patch_status(&key.name, &PatchParams::default(), &patch)
            .await
            .map_err(from_kube)?;
        to_value(patched, kind).map(SharedObject::new)
    }

    async fn delete(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome, KubeError> {
        let api = self.object_api(kind, key)?;
        self.throttle().await;
        match api.delete(&key.name, &delete_params(options)).await {
            Ok(either) => match either.left() {
                Some(object) => {
                    let value = to_value(object, kind)?;
                    Ok(if still_exists(&value) {
                        DeleteOutcome::Marked(value)
                    } else {
                        DeleteOutcome::Deleted
                    })
                }
                // A `Status` of success: gone at once.
                None => Ok(DeleteOutcome::Deleted),
            },
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(DeleteOutcome::NotFound),
            Err(e) => Err(from_kube(e)),
        }
    }

    async fn evict(&self, pod: &ObjectKey, options: &DeleteOptions) -> Result<(), KubeError> {
        let Some(namespace) = pod.namespace.as_deref() else {
            return Err(KubeError::Invalid(format!(
                "pod {} needs a namespace to be evicted",
                pod.name
            )));
        };
        // kube-rs's `Api::evict` writes `delete_options` (snake case), which the API server
        // ignores: the grace period and UID precondition would be lost. The Eviction is sent
        // as `kubectl drain` sends it.
        let body = serde_json::json!({
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": namespace},
            "deleteOptions": delete_params(options),
        });
        let request = http::Request::post(format!(
            "/api/v1/namespaces/{namespace}/pods/{}/eviction",
            pod.name
        ))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(&body).map_err(|e| KubeError::Decode(e.to_string()))?)
        .map_err(|e| KubeError::Invalid(format!("building the eviction: {e}")))?;
        self.throttle().await;
        match self.client.request_status::<Value>(request).await {
            Ok(_) => Ok(()),
            // Already gone: what the eviction wanted.
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(e) => Err(from_kube(e)),
        }
    }

    async fn watch(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
        resource_version: &str,
    ) -> Result<WatchStream, KubeError> {
        let api = self.api(kind, options.namespace.as_deref());
        // Bookmarks are on by default (`allowWatchBookmarks=true`).
        let mut params = WatchParams::default().timeout(WATCH_TIMEOUT_SECS);
        params.label_selector = options.label_selector.clone();
        params.field_selector = options.field_selector.clone();
        self.throttle().await;
        let stream = api
            .watch(&params, resource_version)
            .await
            .map_err(from_kube)?;
        let kind = *kind;
        Ok(stream
            .map(move |event| {
                use kube::core::WatchEvent as Kube;
                match event.map_err(from_kube)? {
                    Kube::Added(o) => Ok(WatchEvent::Added(Arc::new(to_value(o, &kind)?))),
                    Kube::Modified(o) => Ok(WatchEvent::Modified(Arc::new(to_value(o, &kind)?))),
                    Kube::Deleted(o) => Ok(WatchEvent::Deleted(Arc::new(to_value(o, &kind)?))),
                    Kube::Bookmark(b) => Ok(WatchEvent::Bookmark {
                        resource_version: b.metadata.resource_version,
                    }),
                    Kube::Error(status) => Err(from_status(&status)),
                }
            })
            .boxed())
    }

    async fn record_event(&self, event: &EventRecord) -> Result<(), KubeError> {
        self.events.record(self, event).await
    }
}
