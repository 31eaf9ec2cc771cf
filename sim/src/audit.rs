//! The audit of what the controller removed and created (pods evicted or deleted, NodeClaims
//! created and deleted), as its Kubernetes seam saw the calls succeed, and of every `CreateFleet`
//! each controller process sent (with what EC2 answered). Invariants need it on every run, and
//! the API server's and fakecloud's anonymous call logs cannot attribute a call to a caller: the
//! [`Audited`] layer sits on the controller's Kubernetes seam only, an [`AuditedFleets`] on each
//! process's EC2 seam, under the bug layer (it records what EC2 answered, not what a bug let the
//! controller see).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use fakekube::ApiServer;
use jiff::Timestamp;
use karpenter_core::catalog::CapacityType;
use karpenter_core::seams::kube::{DeleteOutcome, ObjectKey, ResourceKind};
use karpenter_core::seams::layered::{
    Ec2Call, Ec2Layer, Ec2Reply, KubeCall, KubeLayer, KubeReply, SqsCall, SqsLayer, SqsReply,
};
use karpenter_core::seams::{Clock, Ec2, KubeApi, Sqs};
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
    /// The other pods bound to the same node just before the call (empty when unbound): the
    /// eviction order is judged against what was still on the node at that moment.
    pub neighbours: Vec<Value>,
}

/// A NodeClaim the controller deleted (the delete that marked it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimEnded {
    pub at: Timestamp,
    pub name: String,
    /// It had a `status.providerID`: an instance was launched for it.
    pub launched: bool,
}

/// One `CreateFleet` a controller process sent, and the offerings EC2 answered it had no
/// capacity for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetCall {
    pub at: Timestamp,
    /// The process that sent it (`karpenter-0-1`: replica 0's second process): each process
    /// has its own unavailable-offerings cache.
    pub process: String,
    pub capacity_type: CapacityType,
    /// The NodeClaim the request launches for (its `karpenter.sh/nodeclaim` tag), if tagged.
    pub claim: Option<String>,
    /// Every (instance type, zone) the request offered EC2, sorted.
    pub offerings: BTreeSet<(String, String)>,
    /// The (instance type, zone) pairs the answer's errors named with an insufficient-capacity
    /// code, sorted.
    pub insufficient: BTreeSet<(String, String)>,
}

/// A spot interruption warning a controller process handled: it deleted the message from the
/// queue, which the handler does only once it has acted on the message (and upstream's marks the
/// offering unavailable before that).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpotWarningHandled {
    pub at: Timestamp,
    /// The process that deleted the message (each process has its own unavailable-offerings
    /// cache).
    pub process: String,
    /// The warned instance (the message's `detail.instance-id`).
    pub instance_id: String,
}

/// What the controller did since the last [`Audit::take`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AuditLog {
    pub pod_removals: Vec<PodRemoval>,
    pub claims_created: Vec<(Timestamp, String)>,
    pub claims_ended: Vec<ClaimEnded>,
    /// Every `CreateFleet` that reached EC2, in call order.
    pub fleets: Vec<FleetCall>,
    /// Every spot interruption warning a process deleted from the queue, in call order.
    pub spot_warnings_handled: Vec<SpotWarningHandled>,
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
        let node_name = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty());
        let node = node_name.and_then(|n| {
            self.api
                .object(&ResourceKind::NODE, &ObjectKey::cluster(n.to_string()))
        });
        let neighbours = node_name.map_or_else(Vec::new, |n| {
            self.api
                .objects(&ResourceKind::POD)
                .iter()
                .filter(|p| p["spec"]["nodeName"].as_str() == Some(n))
                .filter(|p| p["metadata"]["uid"] != pod["metadata"]["uid"])
                .map(|p| (**p).clone())
                .collect()
        });
        self.audit.with(|log| {
            log.pod_removals.push(PodRemoval {
                at,
                pod,
                evicted,
                node,
                neighbours,
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

/// `CreateFleet` error codes that mean the offering had no capacity (upstream's
/// `UnfulfillableCapacityErrorCodes` that name an offering): the controller must keep such an
/// offering out of its requests for its cache's TTL. Listed here, not taken from the controller:
/// a check sharing the code under test would share its mistakes.
pub const INSUFFICIENT_CAPACITY_CODES: [&str; 5] = [
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "UnfulfillableCapacity",
    "VcpuLimitExceeded",
    "InsufficientFreeAddressesInSubnet",
];

/// The seam layer, one per controller process, that records each `CreateFleet` it passes on
/// (and what EC2 answered) in the [`Audit`] under the process's identity.
pub struct AuditedFleets {
    pub audit: Arc<Audit>,
    pub clock: Arc<dyn Clock>,
    pub process: String,
}

#[async_trait]
impl Ec2Layer for AuditedFleets {
    async fn call(&self, call: Ec2Call<'_>, next: &dyn Ec2) -> Ec2Reply {
        let Ec2Call::CreateFleet(request) = call else {
            return call.send(next).await;
        };
        let at = self.clock.now();
        let reply = Ec2Call::CreateFleet(request).send(next).await;
        let insufficient = match &reply {
            Ec2Reply::CreateFleet(Ok(response)) => response
                .errors
                .iter()
                .filter(|e| INSUFFICIENT_CAPACITY_CODES.contains(&e.code.as_str()))
                .filter_map(|e| Some((e.instance_type.clone()?, e.zone.clone()?)))
                .collect(),
            _ => BTreeSet::new(),
        };
        let entry = FleetCall {
            at,
            process: self.process.clone(),
            capacity_type: request.capacity_type,
            claim: request.tags.get("karpenter.sh/nodeclaim").cloned(),
            offerings: request
                .overrides
                .iter()
                .map(|o| (o.instance_type.clone(), o.zone.clone()))
                .collect(),
            insufficient,
        };
        self.audit.with(|log| log.fleets.push(entry));
        reply
    }
}

/// The instance a spot interruption warning names, if `body` is one (EventBridge's shape, read
/// here independently of the controller's parser; a malformed body is none).
fn spot_warning_instance(body: &str) -> Option<String> {
    let event: Value = serde_json::from_str(body).ok()?;
    if event["detail-type"] != "EC2 Spot Instance Interruption Warning" {
        return None;
    }
    event["detail"]["instance-id"].as_str().map(str::to_string)
}

/// The seam layer, one per controller process, that records each spot interruption warning the
/// process deleted from the queue (it remembers which receipt handles it was given for which
/// warned instance). It sits just under the process's fuse, above the bug layer: what the
/// controller itself took off the queue, not what a bug dropped on its behalf.
pub struct AuditedQueue {
    pub audit: Arc<Audit>,
    pub clock: Arc<dyn Clock>,
    pub process: String,
    /// Receipt handle → warned instance, for the spot warnings received and not yet deleted.
    pub warnings: Mutex<BTreeMap<String, String>>,
}

impl AuditedQueue {
    pub fn new(audit: Arc<Audit>, clock: Arc<dyn Clock>, process: &str) -> Self {
        Self {
            audit,
            clock,
            process: process.to_string(),
            warnings: Mutex::new(BTreeMap::new()),
        }
    }

    fn warnings(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.warnings.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl SqsLayer for AuditedQueue {
    async fn call(&self, call: SqsCall<'_>, next: &dyn Sqs) -> SqsReply {
        match call {
            SqsCall::ReceiveMessages { .. } => {
                let reply = call.send(next).await;
                if let SqsReply::ReceiveMessages(Ok(messages)) = &reply {
                    let mut warnings = self.warnings();
                    for message in messages {
                        if let Some(id) = spot_warning_instance(&message.body) {
                            warnings.insert(message.receipt_handle.clone(), id);
                        }
                    }
                }
                reply
            }
            SqsCall::DeleteMessage(handle) => {
                let reply = call.send(next).await;
                // A failed delete is not retried with this handle: the message comes back with
                // a new one.
                let warned = self.warnings().remove(handle);
                if let (SqsReply::DeleteMessage(Ok(())), Some(instance_id)) = (&reply, warned) {
                    let entry = SpotWarningHandled {
                        at: self.clock.now(),
                        process: self.process.clone(),
                        instance_id,
                    };
                    self.audit.with(|log| log.spot_warnings_handled.push(entry));
                }
                reply
            }
        }
    }
}
