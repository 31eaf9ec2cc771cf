//! Test-only bug switches: deliberately broken behaviours, each named with the invariant that
//! must catch it.
//!
//! The invariant catalogue is only worth something if it catches the bugs it is meant to catch.
//! Each [`Bug`] is injected **in the simulation, never in the controller**: seam layers between the
//! controller (or the kube-scheduler stand-in) and the API server or the cloud either distort what
//! the controller sees ([`View`]: a NodePool without its limits, pods without
//! `karpenter.sh/do-not-disrupt`) or do something other than what it asked ([`Broken`]: an
//! eviction turned into a plain delete, a TerminateInstances dropped). The production code is
//! untouched, so a bug test shows the *invariant* catches the behaviour, whoever causes it. Where
//! the layers sit is [`crate::seams`].

use std::collections::BTreeSet;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use fakecloud::FakeCloud;
use fakekube::ApiServer;
use futures::StreamExt;
use karpenter_core::seams::ec2::InstanceState;
use karpenter_core::seams::kube::{
    DeleteOutcome, ObjectKey, ObjectList, Patch, ResourceKind, WatchEvent, WatchStream,
};
use karpenter_core::seams::layered::{
    Ec2Call, Ec2Layer, Ec2Reply, KubeCall, KubeLayer, KubeReply, SqsCall, SqsLayer, SqsReply,
};
use karpenter_core::seams::{Ec2, KubeApi, KubeError, Sqs};
use serde_json::{Value, json};
use strum::VariantArray;

/// A deliberately broken behaviour the world can be built with ([`crate::world::World::with_bug`]),
/// and the invariant that must catch it.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    strum::Display,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[strum(serialize_all = "kebab-case")]
pub enum Bug {
    /// Nothing broken.
    #[default]
    None,
    /// The controller's evictions reach the API server as plain deletes, bypassing
    /// PodDisruptionBudgets. Caught by `pdb-respected`.
    EvictionsAsDeletes,
    /// The controller does not see `karpenter.sh/do-not-disrupt` on pods. Caught by
    /// `do-not-disrupt-respected`.
    HideDoNotDisrupt,
    /// A NodeClaim's instance is terminated as soon as the controller deletes the claim, before
    /// its node is drained. Caught by `drained-before-terminate`.
    TerminateOnClaimDelete,
    /// The controller's pod deletes (the terminator's, at `deadline − a pod's grace period`,
    /// past PodDisruptionBudgets and `do-not-disrupt`) are answered with success and dropped:
    /// pods a drain could not evict run on until their node's instance is terminated under them,
    /// with no graceful shutdown. Caught by `drained-before-terminate` (its clause for a
    /// terminationGracePeriod deadline that has passed).
    DropPodDeletes,
    /// TerminateInstances is dropped and the instance then reported terminated, so the controller
    /// finalizes a claim whose instance runs on. Caught by `no-leaked-instances`.
    DropTerminations,
    /// TerminateInstances is accepted and ignored: the instance runs on and its claim waits for it
    /// forever. Caught by `termination-progress`.
    IgnoreTerminations,
    /// Deleting a NodeClaim that never launched (an insufficient-capacity failure) mints a copy of
    /// it: launch retries become new claims. Caught by `claim-storm`.
    MintClaimOnFailedLaunch,
    /// NodePools reach the controller without `spec.limits`. Caught by `nodepool-limits`.
    #[strum(serialize = "hide-nodepool-limits")]
    HideNodePoolLimits,
    /// Pods not bound to a node are hidden from the controller. Caught by `pods-scheduled` and
    /// `liveness`.
    HidePendingPods,
    /// Deletes of NodeClaims that never registered are dropped (the registration timeout is
    /// lost). Caught by `claims-progress`.
    KeepUnregisteredClaims,
    /// Interruption messages are consumed before the controller receives them, so nothing is
    /// replaced before EC2 reclaims a spot instance. Caught by `interruption-rehomed`.
    DropInterruptionMessages,
    /// The kube-scheduler stand-in sees every node as enormous and overcommits it. Caught by
    /// `pods-fit-nodes`.
    SchedulerOvercommit,
    /// Lease reads reach the controller without `spec.holderIdentity`, so every candidate
    /// believes the lease is free and takes it. Caught by `single-leader` (with
    /// `leader-failover` on).
    HideLeaseHolder,
    /// NodePools reach the controller with one budget of 100% in place of theirs. Caught by
    /// `budgets-respected`.
    HideDisruptionBudgets,
    /// PodDisruptionBudgets are hidden from the controller's reads (its evictions still meet
    /// them at the API server), so disruption picks nodes whose pods no eviction may move.
    /// Caught by `disruption-respects-pdbs`.
    #[strum(serialize = "hide-pdbs")]
    HidePdbs,
    /// NodePools reach the controller with `consolidateAfter: 0s` and NodeClaims without
    /// `karpenter.sh/replaces`, so nodes just launched as replacements are consolidated again at
    /// once. Caught by `consolidation-churn`.
    HideConsolidationSettling,
    /// Garbage collection's DescribeInstances is scoped by `kubernetes.io/cluster/NAME=owned`
    /// (the tag node groups carry too) and every instance it finds looks like Karpenter's, so a
    /// node group's instances are terminated as leaks. Caught by `foreign-instances-untouched`.
    GcOverClusterTag,
    /// The controller's node patches reach the API server without the
    /// `karpenter.sh/disrupted:NoSchedule` taint: nodes are drained while still open to pods.
    /// Caught by `draining-nodes-closed`.
    StripDisruptedTaint,
    /// The controller's registration patch (the node patch that takes ownership for a NodeClaim)
    /// reaches the API server without the claim's startup taints: nodes register open to pods
    /// before the taints' owners are done. Caught by `startup-taints-honoured`.
    StripStartupTaints,
    /// Garbage collection's DescribeInstances (the one scoped by Karpenter's tags) finds
    /// nothing, so an instance whose claim is gone is never collected. Caught by
    /// `no-leaked-instances` (with `claim-force-deleted` or lost launch answers orphaning one).
    GcBlind,
    /// The kube-scheduler stand-in sees nodes without the `karpenter.sh/disrupted` taint (the
    /// controller's view is not distorted), so pods land on nodes being drained. Caught by
    /// `draining-nodes-closed`.
    SchedulerIgnoresDisruptedTaint,
    /// NodeClaims reach the controller with `spec.expireAfter: Never`, so none expires. Caught by
    /// `expiration-honoured`.
    HideExpireAfter,
    /// DeleteLaunchTemplate is answered with success and dropped: templates outlive their use.
    /// Caught by `launch-templates-collected`.
    KeepLaunchTemplates,
    /// DescribeLaunchTemplates scoped by this cluster's `eks:eks-cluster-name` tag is sent scoped
    /// by the tag's key alone, so the collector finds every cluster's templates. Caught by
    /// `foreign-templates-untouched`.
    TemplateGcOverAnyCluster,
    /// Garbage collection's DescribeInstances scoped by this cluster's `eks:eks-cluster-name` tag
    /// is sent scoped by the tag's key alone, and every instance it finds is answered as this
    /// cluster's (the name unchecked, as the collector's own test would then be), so the
    /// neighbour cluster's Karpenter instance is terminated as a leak. Caught by
    /// `foreign-instances-untouched`.
    InstanceGcOverAnyCluster,
    /// SSM `GetParameter` of an EKS AMI release's own parameter is answered with the family's
    /// `recommended` one, so a pinned alias follows the latest release. Caught by
    /// `pinned-ami-honoured` (once a release is published).
    PinnedAliasFollowsLatest,
    /// NodeClaims reach the controller without `status.lastPodEventTime`, so it measures
    /// `consolidateAfter` from a node's initialization, not its last pod event. Caught by
    /// `consolidate-after-honoured`.
    HideLastPodEvents,
    /// NodeClaims the controller creates as replacements (`karpenter.sh/replaces`) reach the API
    /// server asking for the first replaced claim's own instance type, zone and capacity type, so
    /// a consolidation launches a node as dear as the one it replaces. Caught by
    /// `consolidation-saves`.
    ReplaceWithOwnOffering,
    /// `CreateFleet` answers reach the controller without their insufficient-capacity errors, so
    /// it never learns which offerings were dry and offers them again at once. Caught by
    /// `unavailable-offerings-honoured` (the audit of what EC2 answered sits under this layer).
    HideCapacityErrors,
    /// Pods reach the controller without `spec.priorityClassName`, so its drain sees no critical
    /// pod and evicts cluster services with the workloads. Caught by `drain-order`.
    HidePriorityClasses,
    /// Every NodeClaim the controller creates for pending pods (one without
    /// `karpenter.sh/replaces`) is created twice, as a create retried after its first attempt
    /// landed (a generated name makes the retry a second claim): pending pods get two nodes.
    /// Caught by `provisioning-bounded`.
    DoubleClaimCreates,
    /// Every second world built with this bug in a process fails its first NodeClaim create once:
    /// the same seed gives another event log. Caught by `determinism`.
    Nondeterministic,
}

impl Bug {
    /// The name used on the command line (`--bug NAME`).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Whether the controller's (or the scheduler's) view of objects is distorted, so watch
    /// streams must be rewritten too.
    pub fn distorts_view(self) -> bool {
        matches!(
            self,
            Bug::HideDoNotDisrupt
                | Bug::HideNodePoolLimits
                | Bug::HidePendingPods
                | Bug::SchedulerOvercommit
                | Bug::SchedulerIgnoresDisruptedTaint
                | Bug::HideLeaseHolder
                | Bug::HideDisruptionBudgets
                | Bug::HidePdbs
                | Bug::HideConsolidationSettling
                | Bug::HideExpireAfter
                | Bug::HideLastPodEvents
                | Bug::HidePriorityClasses
        )
    }
}

/// An unknown `--bug` name.
#[derive(Debug, thiserror::Error)]
#[error("unknown bug {0:?} (one of: {names})", names = Bug::VARIANTS.iter().map(|b| b.name()).collect::<Vec<_>>().join(", "))]
pub struct UnknownBug(String);

impl FromStr for Bug {
    type Err = UnknownBug;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Bug::VARIANTS
            .iter()
            .copied()
            .find(|b| b.name() == text)
            .ok_or_else(|| UnknownBug(text.to_string()))
    }
}

/// How `bug` distorts one object of `kind` on its way to the reader; `None` hides it.
fn view(bug: Bug, kind: &ResourceKind, mut object: Value) -> Option<Value> {
    match bug {
        Bug::HideDoNotDisrupt if *kind == ResourceKind::POD => {
            if let Some(annotations) = object["metadata"]["annotations"].as_object_mut() {
                annotations.remove(karpenter_core::api::labels::DO_NOT_DISRUPT_ANNOTATION);
            }
            Some(object)
        }
        Bug::HidePriorityClasses if *kind == ResourceKind::POD => {
            if let Some(spec) = object["spec"].as_object_mut() {
                spec.remove("priorityClassName");
            }
            Some(object)
        }
        Bug::HideNodePoolLimits if *kind == ResourceKind::NODE_POOL => {
            if let Some(spec) = object["spec"].as_object_mut() {
                spec.remove("limits");
            }
            Some(object)
        }
        Bug::HidePdbs if *kind == ResourceKind::POD_DISRUPTION_BUDGET => None,
        Bug::HideDisruptionBudgets if *kind == ResourceKind::NODE_POOL => {
            if object["spec"].is_object() {
                object["spec"]["disruption"]["budgets"] = json!([{"nodes": "100%"}]);
            }
            Some(object)
        }
        Bug::HideConsolidationSettling if *kind == ResourceKind::NODE_POOL => {
            if object["spec"].is_object() {
                object["spec"]["disruption"]["consolidateAfter"] = json!("0s");
            }
            Some(object)
        }
        Bug::HideConsolidationSettling if *kind == ResourceKind::NODE_CLAIM => {
            if let Some(annotations) = object["metadata"]["annotations"].as_object_mut() {
                annotations.remove(karpenter_core::api::labels::REPLACES_ANNOTATION);
            }
            Some(object)
        }
        Bug::HideExpireAfter if *kind == ResourceKind::NODE_CLAIM => {
            if object["spec"].is_object() {
                object["spec"]["expireAfter"] = json!("Never");
            }
            Some(object)
        }
        Bug::HideLastPodEvents if *kind == ResourceKind::NODE_CLAIM => {
            if let Some(status) = object["status"].as_object_mut() {
                status.remove("lastPodEventTime");
            }
            Some(object)
        }
        Bug::HidePendingPods if *kind == ResourceKind::POD => {
            let bound = object["spec"]["nodeName"]
                .as_str()
                .is_some_and(|n| !n.is_empty());
            bound.then_some(object)
        }
        Bug::SchedulerOvercommit if *kind == ResourceKind::NODE => {
            if object["status"].is_object() {
                object["status"]["allocatable"] =
                    json!({"cpu": "1000", "memory": "4000Gi", "pods": "1000"});
            }
            Some(object)
        }
        Bug::SchedulerIgnoresDisruptedTaint if *kind == ResourceKind::NODE => {
            if let Some(taints) = object["spec"]["taints"].as_array_mut() {
                taints.retain(|t| t["key"] != karpenter_core::api::labels::DISRUPTED_TAINT_KEY);
            }
            Some(object)
        }
        Bug::HideLeaseHolder if *kind == ResourceKind::LEASE => {
            if let Some(spec) = object["spec"].as_object_mut() {
                spec.remove("holderIdentity");
            }
            Some(object)
        }
        _ => Some(object),
    }
}

fn view_list(bug: Bug, kind: &ResourceKind, mut list: ObjectList) -> ObjectList {
    if bug.distorts_view() {
        list.items = std::mem::take(&mut list.items)
            .into_iter()
            .filter_map(|o| view(bug, kind, Arc::unwrap_or_clone(o)).map(Arc::new))
            .collect();
    }
    list
}

fn view_watch(bug: Bug, kind: &ResourceKind, stream: WatchStream) -> WatchStream {
    if !bug.distorts_view() {
        return stream;
    }
    let kind = *kind;
    stream
        .filter_map(move |event| {
            let event = match event {
                Ok(WatchEvent::Added(o)) => view(bug, &kind, Arc::unwrap_or_clone(o))
                    .map(|o| Ok(WatchEvent::Added(Arc::new(o)))),
                Ok(WatchEvent::Modified(o)) => view(bug, &kind, Arc::unwrap_or_clone(o))
                    .map(|o| Ok(WatchEvent::Modified(Arc::new(o)))),
                // A delete is passed on as it is: the reader drops what it holds under the name.
                other => Some(other),
            };
            futures::future::ready(event)
        })
        .boxed()
}

fn has_deletion(object: &Value) -> bool {
    object["metadata"]["deletionTimestamp"].is_string()
}

/// A reader's view of the API server distorted by a bug (reads pass through [`view`]; writes
/// pass unchanged): the controller's for the view bugs, the kube-scheduler stand-in's for
/// [`Bug::SchedulerOvercommit`].
pub struct View(pub Bug);

#[async_trait]
impl KubeLayer for View {
    async fn call(&self, call: KubeCall<'_>, next: &dyn KubeApi) -> KubeReply {
        let bug = self.0;
        let kind = *call.kind();
        match call.send(next).await {
            KubeReply::Get(found) => {
                KubeReply::Get(found.map(|o| o.and_then(|o| view(bug, &kind, o))))
            }
            KubeReply::List(list) => KubeReply::List(list.map(|l| view_list(bug, &kind, l))),
            KubeReply::Watch(stream) => KubeReply::Watch(stream.map(|s| view_watch(bug, &kind, s))),
            reply => reply,
        }
    }
}

/// What the controller's seams do differently under a bug (every bug that acts rather than
/// distorts a view; with [`Bug::None`] the layer passes every call on).
pub struct Broken {
    bug: Bug,
    /// Objects as they are, for the checks a bug makes before a delete.
    api: Arc<ApiServer>,
    /// The cloud, for [`Bug::TerminateOnClaimDelete`].
    cloud: Arc<FakeCloud>,
    /// [`Bug::Nondeterministic`]: the next NodeClaim create fails once.
    fail_first_claim: AtomicBool,
    /// [`Bug::DropTerminations`]: instances the controller asked to terminate, reported
    /// terminated from then on.
    dropped: Mutex<BTreeSet<String>>,
}

impl Broken {
    pub fn new(
        bug: Bug,
        api: Arc<ApiServer>,
        cloud: Arc<FakeCloud>,
        fail_first_claim: bool,
    ) -> Self {
        Self {
            bug,
            api,
            cloud,
            fail_first_claim: AtomicBool::new(fail_first_claim),
            dropped: Mutex::new(BTreeSet::new()),
        }
    }

    /// Terminates the claim's instance now ([`Bug::TerminateOnClaimDelete`]).
    async fn terminate_now(&self, claim: &Value) {
        let Some(id) = claim["status"]["providerID"]
            .as_str()
            .and_then(|p| p.rsplit('/').next())
            .filter(|id| !id.is_empty())
        else {
            return;
        };
        if let Err(err) = self.cloud.terminate_instances(&[id.to_string()]).await {
            tracing::debug!(%err, "bug terminate-on-claim-delete: terminate failed");
        }
    }

    /// Creates a copy of a NodeClaim that failed to launch ([`Bug::MintClaimOnFailedLaunch`]).
    async fn mint_copy(&self, claim: &Value, next: &dyn KubeApi) {
        let name = claim["metadata"]["name"].as_str().unwrap_or("claim");
        let prefix = match name.rsplit_once('-') {
            Some((stem, _)) => format!("{stem}-"),
            None => format!("{name}-"),
        };
        let copy = json!({
            "apiVersion": claim["apiVersion"],
            "kind": claim["kind"],
            "metadata": {
                "generateName": prefix,
                "labels": claim["metadata"]["labels"],
                "annotations": claim["metadata"]["annotations"],
                "finalizers": claim["metadata"]["finalizers"],
            },
            "spec": claim["spec"],
        });
        match next.create(&ResourceKind::NODE_CLAIM, copy).await {
            Ok(created) => {
                let minted = created["metadata"]["name"].as_str().unwrap_or_default();
                tracing::debug!(minted, "bug mint-claim-on-failed-launch: minted a copy");
            }
            Err(err) => tracing::debug!(%err, "bug mint-claim-on-failed-launch: create failed"),
        }
    }

    /// [`Bug::ReplaceWithOwnOffering`]: a replacement claim's instance type, zone and capacity
    /// type requirements narrowed to its first replaced claim's labels; any other claim as is.
    fn own_offering(&self, mut claim: Value) -> Value {
        let Some(first) = claim["metadata"]["annotations"]
            [karpenter_core::api::labels::REPLACES_ANNOTATION]
            .as_str()
            .and_then(|list| list.split(',').next())
            .map(str::to_string)
        else {
            return claim;
        };
        let Some(replaced) = self
            .api
            .object(&ResourceKind::NODE_CLAIM, &ObjectKey::cluster(first))
        else {
            return claim;
        };
        let keys = [
            "node.kubernetes.io/instance-type",
            "topology.kubernetes.io/zone",
            "karpenter.sh/capacity-type",
        ];
        let mut requirements: Vec<Value> = claim["spec"]["requirements"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        requirements.retain(|r| !keys.iter().any(|k| r["key"] == *k));
        for key in keys {
            let Some(value) = replaced["metadata"]["labels"][key].as_str() else {
                return claim;
            };
            requirements.push(json!({"key": key, "operator": "In", "values": [value]}));
        }
        claim["spec"]["requirements"] = Value::Array(requirements);
        claim
    }

    /// What a bug does before the controller's delete of a NodeClaim reaches the API server;
    /// `Some` answers the delete instead.
    async fn before_claim_delete(&self, key: &ObjectKey, next: &dyn KubeApi) -> Option<KubeReply> {
        let claim = self
            .api
            .object(&ResourceKind::NODE_CLAIM, key)
            .filter(|o| !has_deletion(o))?;
        let launched = claim["status"]["providerID"].is_string();
        let registered = claim["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Registered" && c["status"] == "True");
        match self.bug {
            Bug::KeepUnregisteredClaims if !registered => {
                return Some(KubeReply::Delete(Ok(DeleteOutcome::NotFound)));
            }
            Bug::TerminateOnClaimDelete => self.terminate_now(&claim).await,
            Bug::MintClaimOnFailedLaunch if !launched => self.mint_copy(&claim, next).await,
            _ => {}
        }
        None
    }
}

/// [`Bug::StripStartupTaints`]: a node patch naming a NodeClaim as the node's owner (the
/// registration patch), without the taints that claim declares as startup taints.
async fn without_startup_taints(body: &Value, next: &dyn KubeApi) -> Value {
    let mut body = body.clone();
    let owner = body["metadata"]["ownerReferences"]
        .as_array()
        .and_then(|owners| owners.iter().find(|o| o["kind"] == "NodeClaim"))
        .and_then(|o| o["name"].as_str())
        .map(str::to_string);
    let Some(owner) = owner else {
        return body;
    };
    let Ok(Some(claim)) = next
        .get(&ResourceKind::NODE_CLAIM, &ObjectKey::cluster(owner))
        .await
    else {
        return body;
    };
    let startup: Vec<(Value, Value)> = claim["spec"]["startupTaints"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| (t["key"].clone(), t["effect"].clone()))
        .collect();
    if let Some(taints) = body["spec"]["taints"].as_array_mut() {
        taints.retain(|t| {
            !startup
                .iter()
                .any(|(k, e)| t["key"] == *k && t["effect"] == *e)
        });
    }
    body
}

/// [`Bug::StripDisruptedTaint`]: the patch without `karpenter.sh/disrupted` among its taints.
fn without_disrupted_taint(body: &Value) -> Value {
    let mut body = body.clone();
    if let Some(taints) = body["spec"]["taints"].as_array_mut() {
        taints.retain(|t| t["key"] != karpenter_core::api::labels::DISRUPTED_TAINT_KEY);
    }
    body
}

impl Broken {
    /// [`Bug::DropPodDeletes`]: 200 for an object that is there (nothing marked, nothing
    /// removed), 404 for one that is not, as the API server would answer that.
    fn dropped_delete(&self, kind: &ResourceKind, key: &ObjectKey) -> KubeReply {
        let found = self.api.object(kind, key).is_some();
        KubeReply::Delete(Ok(if found {
            DeleteOutcome::Deleted
        } else {
            DeleteOutcome::NotFound
        }))
    }
}

#[async_trait]
impl KubeLayer for Broken {
    async fn call(&self, call: KubeCall<'_>, next: &dyn KubeApi) -> KubeReply {
        match call {
            KubeCall::Patch {
                kind,
                key,
                patch: Patch::Merge(body),
            } if self.bug == Bug::StripStartupTaints && *kind == ResourceKind::NODE => {
                let patch = Patch::Merge(without_startup_taints(body, next).await);
                KubeCall::Patch {
                    kind,
                    key,
                    patch: &patch,
                }
                .send(next)
                .await
            }
            KubeCall::Patch {
                kind,
                key,
                patch: Patch::Merge(body),
            } if self.bug == Bug::StripDisruptedTaint && *kind == ResourceKind::NODE => {
                let patch = Patch::Merge(without_disrupted_taint(body));
                KubeCall::Patch {
                    kind,
                    key,
                    patch: &patch,
                }
                .send(next)
                .await
            }
            KubeCall::Create { kind, object }
                if self.bug == Bug::ReplaceWithOwnOffering && *kind == ResourceKind::NODE_CLAIM =>
            {
                KubeCall::Create {
                    kind,
                    object: self.own_offering(object),
                }
                .send(next)
                .await
            }
            KubeCall::Create { kind, object }
                if self.bug == Bug::DoubleClaimCreates
                    && *kind == ResourceKind::NODE_CLAIM
                    && object["metadata"]["annotations"]
                        [karpenter_core::api::labels::REPLACES_ANNOTATION]
                        .is_null() =>
            {
                let retried = object.clone();
                let first = KubeCall::Create { kind, object }.send(next).await;
                if let Err(err) = next.create(kind, retried).await {
                    tracing::debug!(%err, "bug double-claim-creates: the second create failed");
                }
                first
            }
            KubeCall::Create { kind, .. }
                if *kind == ResourceKind::NODE_CLAIM
                    && self.fail_first_claim.swap(false, Ordering::Relaxed) =>
            {
                call.fail(KubeError::Unavailable(
                    "bug nondeterministic: the first NodeClaim create of every second world fails"
                        .into(),
                ))
            }
            KubeCall::Patch { kind, .. } | KubeCall::PatchStatus { kind, .. } => {
                let bug = self.bug;
                let kind = *kind;
                match call.send(next).await {
                    // Only a bug that distorts what the controller reads copies the object.
                    KubeReply::Patch(Ok(patched)) if bug.distorts_view() => {
                        let viewed = view(bug, &kind, Value::clone(&patched)).map(Arc::new);
                        KubeReply::Patch(Ok(viewed.unwrap_or(patched)))
                    }
                    reply => reply,
                }
            }
            KubeCall::Delete { kind, key, .. } if *kind == ResourceKind::NODE_CLAIM => {
                match self.before_claim_delete(key, next).await {
                    Some(reply) => reply,
                    None => call.send(next).await,
                }
            }
            KubeCall::Delete { kind, key, .. }
                if self.bug == Bug::DropPodDeletes && *kind == ResourceKind::POD =>
            {
                self.dropped_delete(kind, key)
            }
            KubeCall::Evict { pod, options } if self.bug == Bug::EvictionsAsDeletes => {
                let delete = KubeCall::Delete {
                    kind: &ResourceKind::POD,
                    key: pod,
                    options,
                };
                match delete.send(next).await {
                    KubeReply::Delete(result) => KubeReply::Evict(result.map(drop)),
                    reply => reply,
                }
            }
            call => call.send(next).await,
        }
    }
}

#[async_trait]
impl Ec2Layer for Broken {
    async fn call(&self, call: Ec2Call<'_>, next: &dyn Ec2) -> Ec2Reply {
        let terminations = matches!(self.bug, Bug::DropTerminations | Bug::IgnoreTerminations);
        match call {
            Ec2Call::TerminateInstances(ids) if terminations => {
                if self.bug == Bug::DropTerminations {
                    let mut dropped = self.dropped.lock().unwrap_or_else(|p| p.into_inner());
                    dropped.extend(ids.iter().cloned());
                }
                Ec2Reply::TerminateInstances(Ok(ids.to_vec()))
            }
            Ec2Call::DescribeInstances {
                instance_ids,
                filters,
            } if self.bug == Bug::GcOverClusterTag && is_gc_scope(filters) => {
                gc_over_cluster_tag(instance_ids, next).await
            }
            Ec2Call::DescribeInstances {
                instance_ids,
                filters,
            } if self.bug == Bug::InstanceGcOverAnyCluster && is_gc_scope(filters) => {
                gc_over_any_cluster(instance_ids, filters, next).await
            }
            Ec2Call::DescribeInstances { filters, .. }
                if self.bug == Bug::GcBlind && is_gc_scope(filters) =>
            {
                Ec2Reply::DescribeInstances(Ok(Vec::new()))
            }
            Ec2Call::GetParameter(name) if self.bug == Bug::PinnedAliasFollowsLatest => {
                Ec2Reply::GetParameter(next.get_parameter(&recommended_parameter(name)).await)
            }
            Ec2Call::CreateFleet(request) if self.bug == Bug::HideCapacityErrors => {
                let mut reply = next.create_fleet(request).await;
                if let Ok(response) = &mut reply {
                    response.errors.retain(|e| {
                        !crate::audit::INSUFFICIENT_CAPACITY_CODES.contains(&e.code.as_str())
                    });
                }
                Ec2Reply::CreateFleet(reply)
            }
            Ec2Call::DeleteLaunchTemplate(_) if self.bug == Bug::KeepLaunchTemplates => {
                Ec2Reply::DeleteLaunchTemplate(Ok(()))
            }
            Ec2Call::DescribeLaunchTemplates(filters)
                if self.bug == Bug::TemplateGcOverAnyCluster =>
            {
                let filters: Vec<karpenter_core::seams::ec2::Filter> = filters
                    .iter()
                    .map(|f| match f.name.strip_prefix("tag:") {
                        Some(key @ "eks:eks-cluster-name") => {
                            karpenter_core::seams::ec2::Filter::new("tag-key", &[key])
                        }
                        _ => f.clone(),
                    })
                    .collect();
                Ec2Reply::DescribeLaunchTemplates(next.describe_launch_templates(&filters).await)
            }
            Ec2Call::DescribeInstances { .. } if self.bug == Bug::DropTerminations => {
                let mut reply = call.send(next).await;
                if let Ec2Reply::DescribeInstances(Ok(instances)) = &mut reply {
                    let dropped = self.dropped.lock().unwrap_or_else(|p| p.into_inner());
                    for instance in instances {
                        if dropped.contains(&instance.instance_id) {
                            instance.state = InstanceState::Terminated;
                        }
                    }
                }
                reply
            }
            call => call.send(next).await,
        }
    }
}

/// [`Bug::PinnedAliasFollowsLatest`]: an EKS optimized-AMI release parameter
/// (`.../x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.33-v20250601/image_id`) with
/// its release leaf replaced by `recommended`; any other name as is.
fn recommended_parameter(name: &str) -> String {
    let mut parts: Vec<&str> = name.split('/').collect();
    if name.starts_with("/aws/service/eks/optimized-ami/") && parts.len() >= 2 {
        let leaf = parts.len() - 2;
        parts[leaf] = "recommended";
    }
    parts.join("/")
}

/// Whether a DescribeInstances is garbage collection's: scoped by the `karpenter.sh/nodepool`
/// tag key (`karpenter_core::nodeclaim::garbagecollection::ours_filters`).
fn is_gc_scope(filters: &[karpenter_core::seams::ec2::Filter]) -> bool {
    filters.iter().any(|f| {
        f.name == "tag-key"
            && f.values
                .iter()
                .any(|v| v == karpenter_core::api::labels::NODEPOOL_LABEL)
    })
}

/// [`Bug::GcOverClusterTag`]: the cluster's instances by `kubernetes.io/cluster/sim=owned`,
/// each dressed in Karpenter's scope tags.
async fn gc_over_cluster_tag(instance_ids: &[String], next: &dyn Ec2) -> Ec2Reply {
    let cluster = crate::world::CLUSTER;
    let filters = [karpenter_core::seams::ec2::Filter::new(
        format!("tag:kubernetes.io/cluster/{cluster}"),
        &["owned"],
    )];
    let mut reply = next.describe_instances(instance_ids, &filters).await;
    if let Ok(instances) = &mut reply {
        for instance in instances {
            let tags = &mut instance.tags;
            tags.entry(karpenter_core::api::labels::NODEPOOL_LABEL.into())
                .or_insert_with(|| "default".into());
            tags.entry(karpenter_core::api::labels::EC2NODECLASS_TAG.into())
                .or_insert_with(|| "default".into());
            tags.entry("eks:eks-cluster-name".into())
                .or_insert_with(|| cluster.into());
        }
    }
    Ec2Reply::DescribeInstances(reply)
}

/// [`Bug::InstanceGcOverAnyCluster`]: `filters` with the cluster-name tag's value dropped (any
/// cluster's instances), each instance found answered with this cluster's name.
async fn gc_over_any_cluster(
    instance_ids: &[String],
    filters: &[karpenter_core::seams::ec2::Filter],
    next: &dyn Ec2,
) -> Ec2Reply {
    const CLUSTER_TAG: &str = "eks:eks-cluster-name";
    let filters: Vec<karpenter_core::seams::ec2::Filter> = filters
        .iter()
        .map(|f| match f.name.strip_prefix("tag:") {
            Some(key @ CLUSTER_TAG) => karpenter_core::seams::ec2::Filter::new("tag-key", &[key]),
            _ => f.clone(),
        })
        .collect();
    let mut reply = next.describe_instances(instance_ids, &filters).await;
    if let Ok(instances) = &mut reply {
        for instance in instances {
            instance
                .tags
                .insert(CLUSTER_TAG.into(), crate::world::CLUSTER.into());
        }
    }
    Ec2Reply::DescribeInstances(reply)
}

#[async_trait]
impl SqsLayer for Broken {
    /// [`Bug::DropInterruptionMessages`]: receives and deletes every message, hands over none.
    async fn call(&self, call: SqsCall<'_>, next: &dyn Sqs) -> SqsReply {
        if self.bug != Bug::DropInterruptionMessages
            || !matches!(call, SqsCall::ReceiveMessages { .. })
        {
            return call.send(next).await;
        }
        let messages = match call.send(next).await {
            SqsReply::ReceiveMessages(Ok(messages)) => messages,
            reply => return reply,
        };
        for message in messages {
            if let Err(err) = next.delete_message(&message.receipt_handle).await {
                tracing::debug!(%err, "bug drop-interruption-messages: delete failed");
            }
        }
        SqsReply::ReceiveMessages(Ok(Vec::new()))
    }
}
