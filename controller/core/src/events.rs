//! Kubernetes Events, the way every controller records them (kube-rs's `events::Recorder` habit):
//! one [`Recorder`] over the Kubernetes seam, an [`EventType`] instead of a string, and a
//! [`Reference`] naming the object an event is about.
//!
//! Events are best effort, as upstream treats them: a failed write is logged at debug level and
//! never fails the reconcile that recorded it (the state it reports lives in conditions). When
//! the operator runs its loops ([`crate::operator::Operator::spawn`]) events are handed to a
//! writer task through a bounded queue (client-go's broadcaster: queued, dropped when full), so a
//! pass that nominates a thousand pods does not wait a thousand API round trips.

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use k8s_openapi::api::core::v1::Node;
use kube_core::ResourceExt;

use crate::api::NodeClaim;
use crate::seams::KubeApi;
use crate::seams::kube::{EventRecord, ObjectKey, ResourceKind};

pub use crate::seams::kube::EventType;

/// The object an event is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    pub kind: ResourceKind,
    pub key: ObjectKey,
    pub uid: Option<String>,
}

impl Reference {
    pub fn claim(claim: &NodeClaim) -> Self {
        Self {
            kind: ResourceKind::NODE_CLAIM,
            key: ObjectKey::cluster(claim.name_any()),
            uid: claim.uid(),
        }
    }

    pub fn node(node: &Node) -> Self {
        Self {
            kind: ResourceKind::NODE,
            key: ObjectKey::cluster(node.name_any()),
            uid: node.uid(),
        }
    }

    /// A node known only by name (from a claim's `status.nodeName`).
    pub fn node_named(name: impl Into<String>) -> Self {
        Self {
            kind: ResourceKind::NODE,
            key: ObjectKey::cluster(name),
            uid: None,
        }
    }

    pub fn pod(key: ObjectKey, uid: Option<String>) -> Self {
        Self {
            kind: ResourceKind::POD,
            key,
            uid,
        }
    }
}

/// Events queued for the writer task at most; more are dropped (client-go's broadcaster queue
/// holds 1000).
pub const EVENTS_QUEUED_MAX: usize = 1_000;
/// Event writes the writer task has in flight at once.
pub const EVENT_WRITES_PARALLEL_MAX: usize = 10;

/// Records events through the Kubernetes seam.
#[derive(Clone)]
pub struct Recorder {
    kube: Arc<dyn KubeApi>,
    /// The writer task's queue, once the operator runs as tasks; direct writes before that.
    sink: Arc<Mutex<Option<mpsc::Sender<EventRecord>>>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

impl Recorder {
    pub fn new(kube: Arc<dyn KubeApi>) -> Self {
        Self {
            kube,
            sink: Arc::new(Mutex::new(None)),
        }
    }

    fn lock_sink(&self) -> std::sync::MutexGuard<'_, Option<mpsc::Sender<EventRecord>>> {
        self.sink
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// From now on events go through a queue to the returned writer future, which the caller
    /// spawns (and stops with its loops); a later call replaces the writer.
    pub fn start_writer(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (sender, receiver) = mpsc::channel(EVENTS_QUEUED_MAX);
        *self.lock_sink() = Some(sender);
        let kube = self.kube.clone();
        async move {
            use futures::StreamExt;
            let records = futures::stream::unfold(receiver, |mut r| async move {
                r.recv().await.map(|record| (record, r))
            });
            records
                .for_each_concurrent(EVENT_WRITES_PARALLEL_MAX, |record| {
                    let kube = kube.clone();
                    async move {
                        if let Err(err) = kube.record_event(&record).await {
                            tracing::debug!(%err, reason = record.reason, "event not recorded");
                        }
                    }
                })
                .await;
        }
    }

    /// Back to direct writes (the writer task was stopped with the loops).
    pub fn stop_writer(&self) {
        *self.lock_sink() = None;
    }

    /// Records one event about `regarding`. Best effort: a failure is logged, not returned.
    pub async fn publish(
        &self,
        regarding: Reference,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        let record = EventRecord {
            involved: regarding.kind,
            key: regarding.key,
            uid: regarding.uid,
            type_,
            reason: reason.to_string(),
            message: message.into(),
        };
        let sink = self.lock_sink().clone();
        if let Some(sink) = sink {
            if let Err(err) = sink.try_send(record) {
                tracing::debug!(%err, reason, "event queue full; event dropped");
            }
            return;
        }
        if let Err(err) = self.kube.record_event(&record).await {
            tracing::debug!(%err, reason, "event not recorded");
        }
    }
}
