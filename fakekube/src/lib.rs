//! fakekube: an in-memory Kubernetes API server implementing the [`KubeApi`] seam, for the
//! simulation, the behaviour specs and the controller's own tests, with the semantics the
//! controller can observe from a real one:
//!
//! - **Store**: JSON objects by (API group, plural, namespace, name) in ordered maps; `list`
//!   returns them by (namespace, name). One global resourceVersion counter (etcd's revision);
//!   `uid`s and `generateName` suffixes (5 characters, Kubernetes' alphabet, redrawn on a
//!   collision) come from the seeded RNG; `creationTimestamp` from the injected [`Clock`];
//!   `generation` starts at 1 and is bumped by spec changes (anything outside metadata and status)
//!   and by setting a deletionTimestamp, never by status or metadata-only changes. A write that
//!   changes nothing keeps the resourceVersion and sends no watch event.
//! - **Optimistic concurrency**: a patch whose result carries a `metadata.resourceVersion` (merge
//!   patch) or changes it (JSON patch) other than the current one fails with 409
//!   [`KubeError::Conflict`]; likewise a `metadata.uid` that is not the object's.
//! - **Patches**: RFC 7386 merge and RFC 6902 JSON patches (atomic: a failing operation applies
//!   none). `patch` changes metadata and spec and ignores status; `patch_status` changes status
//!   only. Name, namespace, apiVersion, kind and server-owned metadata cannot be patched.
//! - **Deletion**: an object with finalizers, or a pod bound to a node with a grace period, is only
//!   marked (`deletionTimestamp`, `deletionGracePeriodSeconds`) and returned as
//!   [`DeleteOutcome::Marked`]; removing the last finalizer of a marked object with no grace
//!   period left deletes it. Pods: the grace period is the delete's, else
//!   `spec.terminationGracePeriodSeconds`, else 30 s; an unbound or finished pod goes at once. The
//!   kubelet stand-in completes a graceful pod deletion with a `grace_period_seconds: Some(0)`
//!   delete. Marked objects accept no new finalizers.
//! - **Namespaces**: `default` and `kube-system` exist from the start and cannot be deleted;
//!   namespaced objects can only be created in an existing namespace (404 otherwise) that is not
//!   being deleted (403). Deleting a namespace does not delete its contents.
//! - **Watches**: see [`watch`]; changes after a resourceVersion, filtered like `list`, with
//!   periodic bookmarks, 410 Gone past the history, and slow watchers closed.
//! - **Eviction**: see [`eviction`] for how PodDisruptionBudgets are evaluated.
//! - **Events**: kept in a bounded list for inspection, outside the object store (they take no
//!   resourceVersion and are not listed as objects).
//! - **Faults**: see [`faults`]; decided before the call touches state by fakekit's fault plan
//!   (scripts, time windows, standing rates), each kind from its own seeded stream, so the same
//!   seed and calls give the same failures. The fault and call-log knobs are fakekit's
//!   [`Fake`] methods.
//! - **Admission**: EKS's VPC admission webhook on created pods, when configured
//!   ([`admission`]).
//!
//! Deliberate differences from Kubernetes, each where a real server would make the simulation
//! less useful or where nothing in the simulation can tell:
//! - A failed JSON patch `test` operation is a 409 `Conflict`, where Kubernetes answers 422: the
//!   seam documents `test` of `metadata.resourceVersion` as the controller's test-and-set, whose
//!   failure means "re-read and retry". The production adapter should map the 422 of a patch
//!   with a failed `test` operation the same way, so both worlds agree. Other JSON patch failures
//!   are 422 `Invalid`.
//! - Pod spec immutability (but `spec.nodeName`, which only a [`BINDING`] sets: see
//!   `binding.rs`), admission (but EKS's VPC webhook, see [`admission`]), schema and CEL
//!   validation are not enforced.
//! - There is no garbage collector (ownerReferences are not followed) and no namespace
//!   controller.
//!
//! Determinism: time only from the injected clock (and `tokio::time` for injected latency, virtual
//! under madsim), randomness only from [`ApiServerConfig::seed`], ordered collections everywhere.
//! The server has no background task: bookmarks are sent when a call arrives or when the
//! simulation calls [`ApiServer::advance_to_now`].
//!
//! Knobs and inspection methods live in `knobs.rs`; the model in one module per concern.

pub mod admission;
mod binding;
mod calls;
mod config;
mod eviction;
mod faults;
mod knobs;
mod rng;
mod selectors;
mod store;
mod watch;

use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use fakekit::KitView;
use jiff::Timestamp;
use karpenter_core::seams::kube::{
    DeleteOptions, DeleteOutcome, EventRecord, ListOptions, ObjectKey, ObjectList, Patch,
    ResourceKind, SharedObject, WatchStream,
};
use karpenter_core::seams::{Clock, KubeApi, KubeError};
use serde_json::Value;

pub use binding::BINDING;
pub use calls::ApiCall;
pub use config::ApiServerConfig;
pub use fakekit::Fake;
pub use faults::{ApiFault, ApiFaultRates, ApiFaultWindow, ApiOperation, Disconnect, Injected};
pub use knobs::SuspendedFaults;
pub use store::{ApiKit, PREDEFINED_NAMESPACES};

use crate::faults::Decision;
use crate::selectors::Filter;
use crate::store::{PatchTarget, State, describe_key, resource};
use crate::watch::{WatchRequest, WatchStart};

/// A recorded Kubernetes Event, in the order the server received them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedEvent {
    /// 1 for the first event since construction or reset (counts events dropped by the bound too).
    pub seq: u64,
    pub time: Timestamp,
    pub event: EventRecord,
}

/// The in-memory API server. Share it as `Arc<ApiServer>`; it is an `Arc<dyn KubeApi>`.
///
/// All state sits behind one `std::sync::Mutex`, never held across an `.await`: each call is
/// applied atomically, and calls are ordered by when they take the lock.
pub struct ApiServer {
    clock: Arc<dyn Clock>,
    /// What [`ApiServer::reset`] returns to.
    initial: ApiServerConfig,
    state: Mutex<State>,
}

impl ApiServer {
    /// An empty cluster at `clock.now()`, holding only the [`PREDEFINED_NAMESPACES`].
    pub fn new(clock: Arc<dyn Clock>, config: ApiServerConfig) -> Self {
        let state = State::new(config.clone(), clock.now());
        Self {
            clock,
            initial: config,
            state: Mutex::new(state),
        }
    }

    /// Back to the cluster [`ApiServer::new`] built, at the current time: objects, history,
    /// events, call log, faults, knob changes and the random streams start over. Open watches
    /// end.
    pub fn reset(&self) {
        let fresh = State::new(self.initial.clone(), self.clock.now());
        let mut state = self.lock();
        state.watch.close_all();
        *state = fresh;
    }

    /// Sends the bookmarks due by the clock's now (the simulation calls this each step, so idle
    /// watches get them even when no call arrives).
    pub fn advance_to_now(&self) {
        drop(self.current());
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The state at the clock's now, with due bookmarks sent.
    fn current(&self) -> MutexGuard<'_, State> {
        let now = self.clock.now();
        let mut state = self.lock();
        state.now = now;
        let (version, interval_ms) = (state.resource_version, state.config.bookmark_interval_ms);
        state.watch.send_due_bookmarks(now, version, interval_ms);
        state
    }
}

impl Fake for ApiServer {
    type Kit = ApiKit;
    type State = State;

    fn state(&self) -> MutexGuard<'_, State> {
        self.current()
    }

    fn kit(state: &mut State) -> KitView<'_, ApiKit> {
        KitView {
            kit: &mut state.kit,
            rates: &mut state.config.faults,
            now: state.now,
        }
    }
}

/// One seam call through the kit: the `kind`'s plural and `target` are what the log keeps.
async fn serve<T>(
    api: &ApiServer,
    operation: ApiOperation,
    kind: &ResourceKind,
    target: String,
    call: impl FnOnce(&mut State, &Decision) -> Result<T, KubeError>,
    describe: impl FnOnce(&T) -> String,
) -> Result<T, KubeError> {
    fakekit::serve(api, operation, (kind.plural, target), call, describe).await
}

fn version_of(object: &Value) -> String {
    format!(
        "rv={}",
        object["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
    )
}

#[async_trait]
impl KubeApi for ApiServer {
    async fn get(&self, kind: &ResourceKind, key: &ObjectKey) -> Result<Option<Value>, KubeError> {
        serve(
            self,
            ApiOperation::Get,
            kind,
            describe_key(key),
            |state, _| state.get(kind, key),
            |found| match found {
                Some(object) => version_of(object),
                None => "none".to_string(),
            },
        )
        .await
    }

    async fn list(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
    ) -> Result<ObjectList, KubeError> {
        serve(
            self,
            ApiOperation::List,
            kind,
            selectors::describe(options),
            |state, _| state.list(kind, options),
            |list| format!("items={} rv={}", list.items.len(), list.resource_version),
        )
        .await
    }

    async fn create(&self, kind: &ResourceKind, object: Value) -> Result<Value, KubeError> {
        let metadata = &object["metadata"];
        let name = match (metadata["name"].as_str(), metadata["generateName"].as_str()) {
            (Some(name), _) => name.to_string(),
            (None, Some(prefix)) => format!("{prefix}*"),
            (None, None) => String::new(),
        };
        let target = match (kind.namespaced, metadata["namespace"].as_str()) {
            (true, Some(ns)) => format!("{ns}/{name}"),
            (true, None) => format!("default/{name}"),
            (false, _) => name,
        };
        serve(
            self,
            ApiOperation::Create,
            kind,
            target,
            // A lost response applies the create too, so the object is cloned for each attempt.
            |state, _| state.create(kind, object.clone()).map(Arc::unwrap_or_clone),
            |created| {
                format!(
                    "{} uid={} {}",
                    created["metadata"]["name"].as_str().unwrap_or_default(),
                    created["metadata"]["uid"].as_str().unwrap_or_default(),
                    version_of(created)
                )
            },
        )
        .await
    }

    async fn patch(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<SharedObject, KubeError> {
        serve(
            self,
            ApiOperation::Patch,
            kind,
            describe_key(key),
            |state, _| state.patch(kind, key, patch, PatchTarget::Main),
            |object| version_of(object),
        )
        .await
    }

    async fn patch_status(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<SharedObject, KubeError> {
        serve(
            self,
            ApiOperation::PatchStatus,
            kind,
            describe_key(key),
            |state, _| state.patch(kind, key, patch, PatchTarget::Status),
            |object| version_of(object),
        )
        .await
    }

    async fn delete(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome, KubeError> {
        serve(
            self,
            ApiOperation::Delete,
            kind,
            describe_key(key),
            |state, _| state.delete(kind, key, options),
            |outcome| match outcome {
                DeleteOutcome::Deleted => "deleted".to_string(),
                DeleteOutcome::Marked(object) => format!("marked {}", version_of(object)),
                DeleteOutcome::NotFound => "not found".to_string(),
            },
        )
        .await
    }

    async fn evict(&self, pod: &ObjectKey, options: &DeleteOptions) -> Result<(), KubeError> {
        serve(
            self,
            ApiOperation::Evict,
            &ResourceKind::POD,
            describe_key(pod),
            |state, _| state.evict(pod, options),
            |_| String::new(),
        )
        .await
    }

    async fn watch(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
        resource_version: &str,
    ) -> Result<WatchStream, KubeError> {
        serve(
            self,
            ApiOperation::Watch,
            kind,
            format!("{} from={resource_version:?}", selectors::describe(options)),
            |state, decision| {
                let filter = Filter::parse(kind, options)?;
                let start = WatchStart::parse(resource_version)?;
                let current = match start {
                    WatchStart::Current => state
                        .scan(kind, filter.namespace.as_deref())
                        .filter(|object| filter.matches(object))
                        .cloned()
                        .collect(),
                    WatchStart::After(_) => Vec::new(),
                };
                let request = WatchRequest {
                    resource: resource(kind),
                    filter,
                    start,
                    current,
                    remaining_events: decision.degraded.0,
                    queue_max: state.config.watch_events_max,
                    now: state.now,
                };
                Ok(state.watch.open(request))
            },
            |_| String::new(),
        )
        .await
    }

    async fn record_event(&self, event: &EventRecord) -> Result<(), KubeError> {
        serve(
            self,
            ApiOperation::RecordEvent,
            &event.involved,
            describe_key(&event.key),
            |state, _| {
                let seq = state.next_event_seq;
                state.next_event_seq += 1;
                let time = state.now;
                state.events.push_back(RecordedEvent {
                    seq,
                    time,
                    event: event.clone(),
                });
                while state.events.len() > state.config.events_max {
                    state.events.pop_front();
                }
                Ok(())
            },
            |_| format!("{} {}", event.type_, event.reason),
        )
        .await
    }
}
