//! The audit of what the controller removed and created (pods evicted or deleted, NodeClaims
//! created and deleted), as its Kubernetes seam saw the calls succeed. Invariants need it on every
//! run, and the API server's anonymous call log cannot attribute a call to a caller: the
//! [`Audited`] layer sits on the controller's seam only.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use fakekube::ApiServer;
use jiff::Timestamp;
use karpenter_core::seams::kube::{DeleteOutcome, ObjectKey, ResourceKind};
use karpenter_core::seams::layered::{KubeCall, KubeLayer, KubeReply};
use karpenter_core::seams::{Clock, KubeApi};
use serde_json::Value;

/// A pod the controller started removing (the first eviction or delete that marked it).
#[derive(Clone, Debug, PartialEq)]
pub struct PodRemoval {
    pub at: Timestamp,
    /// The pod as it was just before the call.
    pub pod: Value,
    /// Through the Eviction API (which enforces PodDisruptionBudgets), or a plain delete.
    pub evicted: bool,
    /// The pod's node just before the call (`None`: unbound, or the node is gone): whether it
    /// carried `karpenter.sh/disrupted:NoSchedule` when the drain took the pod off it.
    pub node: Option<Value>,
}

/// A NodeClaim the controller deleted (the delete that marked it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimEnded {
    pub at: Timestamp,
    pub name: String,
    /// It had a `status.providerID`: an instance was launched for it.
    pub launched: bool,
}

/// What the controller did since the last [`Audit::take`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AuditLog {
    pub pod_removals: Vec<PodRemoval>,
    pub claims_created: Vec<(Timestamp, String)>,
    pub claims_ended: Vec<ClaimEnded>,
}

/// The controller's removals and creations, as the audited seam saw them succeed.
#[derive(Debug, Default)]
pub struct Audit {
    log: Mutex<AuditLog>,
}

impl Audit {
    fn with(&self, change: impl FnOnce(&mut AuditLog)) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        change(&mut log);
    }

    /// Everything recorded since the last call.
    pub fn take(&self) -> AuditLog {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *log)
    }
}

/// The seam layer that keeps the [`Audit`]: it reads each object as it was before a delete or an
/// eviction straight from the API server (what the controller removed, undistorted).
pub struct Audited {
    pub audit: Arc<Audit>,
    pub api: Arc<ApiServer>,
    pub clock: Arc<dyn Clock>,
}

fn is_deleting(object: &Value) -> bool {
    object["metadata"]["deletionTimestamp"].is_string()
}

#[async_trait]
impl KubeLayer for Audited {
    async fn call(&self, call: KubeCall<'_>, next: &dyn KubeApi) -> KubeReply {
        match call {
            KubeCall::Create { kind, .. } if *kind == ResourceKind::NODE_CLAIM => {
                let reply = call.send(next).await;
                if let KubeReply::Create(Ok(created)) = &reply {
                    let name = created["metadata"]["name"].as_str().unwrap_or_default();
                    let entry = (self.clock.now(), name.to_string());
                    self.audit.with(|log| log.claims_created.push(entry));
                }
                reply
            }
            KubeCall::Delete { kind, key, .. } => {
                // Only the delete that marks an object removes it; later ones change nothing.
                let before = self.api.object(kind, key).filter(|o| !is_deleting(o));
                let reply = call.send(next).await;
                if let (KubeReply::Delete(Ok(outcome)), Some(object)) = (&reply, before)
                    && *outcome != DeleteOutcome::NotFound
                {
                    self.deleted(kind, &key.name, object);
                }
                reply
            }
            KubeCall::Evict { pod, .. } => {
                let before = self.api.object(&ResourceKind::POD, pod);
                let reply = call.send(next).await;
                if let (KubeReply::Evict(Ok(())), Some(pod)) = (&reply, before)
                    && !is_deleting(&pod)
                {
                    self.removed(pod, true);
                }
                reply
            }
            call => call.send(next).await,
        }
    }
}

impl Audited {
    fn removed(&self, pod: Value, evicted: bool) {
        let at = self.clock.now();
        let node = pod["spec"]["nodeName"]
            .as_str()
            .filter(|n| !n.is_empty())
            .and_then(|n| {
                self.api
                    .object(&ResourceKind::NODE, &ObjectKey::cluster(n.to_string()))
            });
        self.audit.with(|log| {
            log.pod_removals.push(PodRemoval {
                at,
                pod,
                evicted,
                node,
            })
        });
    }

    /// A delete that marked or removed `object`.
    fn deleted(&self, kind: &ResourceKind, name: &str, object: Value) {
        if *kind == ResourceKind::POD {
            self.removed(object, false);
        } else if *kind == ResourceKind::NODE_CLAIM {
            let ended = ClaimEnded {
                at: self.clock.now(),
                name: name.to_string(),
                launched: object["status"]["providerID"].is_string(),
            };
            self.audit.with(|log| log.claims_ended.push(ended));
        }
    }
}
