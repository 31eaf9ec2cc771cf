//! Kubernetes Events, the way every controller records them (kube-rs's `events::Recorder` habit):
//! one [`Recorder`] over the Kubernetes seam, an [`EventType`] instead of a string, and a
//! [`Reference`] naming the object an event is about.
//!
//! Events are best effort, as upstream treats them: a failed write is logged at debug level and
//! never fails the reconcile that recorded it (the state it reports lives in conditions).

use std::sync::Arc;

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

/// Records events through the Kubernetes seam.
#[derive(Clone)]
pub struct Recorder {
    kube: Arc<dyn KubeApi>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

impl Recorder {
    pub fn new(kube: Arc<dyn KubeApi>) -> Self {
        Self { kube }
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
        if let Err(err) = self.kube.record_event(&record).await {
            tracing::debug!(%err, reason, "event not recorded");
        }
    }
}
