//! Test-only bug switches, and the seams the world hands the controller.
//!
//! The invariant catalogue is only worth something if it catches the bugs it is meant to catch.
//! Each [`Bug`] is a deliberately broken behaviour, injected **in the simulation, never in the
//! controller**: seam wrappers between the controller (or the kube-scheduler stand-in) and the API
//! server or the cloud either distort what the controller sees (a NodePool without its limits, pods
//! without `karpenter.sh/do-not-disrupt`) or do something other than what it asked (an eviction
//! turned into a plain delete, a TerminateInstances dropped). The production code is untouched, so
//! a bug test shows the *invariant* catches the behaviour, whoever causes it.
//!
//! The controller's Kubernetes seam is always wrapped (also with [`Bug::None`], when it only
//! passes calls through): the wrapper keeps the [`Audit`] of what the controller removed and
//! created (pods evicted or deleted, NodeClaims created and deleted), which invariants need and
//! the API server's anonymous call log cannot attribute to a caller.

use std::collections::BTreeSet;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use fakecloud::FakeCloud;
use futures::StreamExt;
use jiff::Timestamp;
use karpenter_core::seams::ec2::{
    CreateFleetRequest, CreateFleetResponse, Filter, Image, ImageQuery, Instance, InstanceState,
    LaunchTemplate, LaunchTemplateRequest, SecurityGroup, Subnet,
};
use karpenter_core::seams::kube::{
    DeleteOptions, DeleteOutcome, EventRecord, ListOptions, ObjectKey, ObjectList, Patch,
    ResourceKind, WatchEvent, WatchStream,
};
use karpenter_core::seams::sqs::Message;
use karpenter_core::seams::{Clock, Ec2, Ec2Error, KubeApi, KubeError, Sqs, SqsError};
use serde_json::{Value, json};

use crate::apiserver::ApiServer;

/// A deliberately broken behaviour the world can be built with ([`crate::world::World::with_bug`]),
/// and the invariant that must catch it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
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
    /// NodePools reach the controller with `consolidateAfter: 0s` and NodeClaims without
    /// `karpenter.sh/replaces`, so nodes just launched as replacements are consolidated again at
    /// once. Caught by `consolidation-churn`.
    HideConsolidationSettling,
    /// Every second world built with this bug in a process fails its first NodeClaim create once:
    /// the same seed gives another event log. Caught by `determinism`.
    Nondeterministic,
}

impl Bug {
    /// Every bug, [`Bug::None`] first.
    pub const ALL: [Bug; 16] = [
        Bug::None,
        Bug::EvictionsAsDeletes,
        Bug::HideDoNotDisrupt,
        Bug::TerminateOnClaimDelete,
        Bug::DropTerminations,
        Bug::IgnoreTerminations,
        Bug::MintClaimOnFailedLaunch,
        Bug::HideNodePoolLimits,
        Bug::HidePendingPods,
        Bug::KeepUnregisteredClaims,
        Bug::DropInterruptionMessages,
        Bug::SchedulerOvercommit,
        Bug::HideLeaseHolder,
        Bug::HideDisruptionBudgets,
        Bug::HideConsolidationSettling,
        Bug::Nondeterministic,
    ];

    /// The name used on the command line (`--bug NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Bug::None => "none",
            Bug::EvictionsAsDeletes => "evictions-as-deletes",
            Bug::HideDoNotDisrupt => "hide-do-not-disrupt",
            Bug::TerminateOnClaimDelete => "terminate-on-claim-delete",
            Bug::DropTerminations => "drop-terminations",
            Bug::IgnoreTerminations => "ignore-terminations",
            Bug::MintClaimOnFailedLaunch => "mint-claim-on-failed-launch",
            Bug::HideNodePoolLimits => "hide-nodepool-limits",
            Bug::HidePendingPods => "hide-pending-pods",
            Bug::KeepUnregisteredClaims => "keep-unregistered-claims",
            Bug::DropInterruptionMessages => "drop-interruption-messages",
            Bug::SchedulerOvercommit => "scheduler-overcommit",
            Bug::HideLeaseHolder => "hide-lease-holder",
            Bug::HideDisruptionBudgets => "hide-disruption-budgets",
            Bug::HideConsolidationSettling => "hide-consolidation-settling",
            Bug::Nondeterministic => "nondeterministic",
        }
    }

    /// Whether the controller's (or the scheduler's) view of objects is distorted, so watch
    /// streams must be rewritten too.
    fn distorts_view(self) -> bool {
        matches!(
            self,
            Bug::HideDoNotDisrupt
                | Bug::HideNodePoolLimits
                | Bug::HidePendingPods
                | Bug::SchedulerOvercommit
                | Bug::HideLeaseHolder
                | Bug::HideDisruptionBudgets
                | Bug::HideConsolidationSettling
        )
    }
}

/// An unknown `--bug` name.
#[derive(Debug, thiserror::Error)]
#[error("unknown bug {0:?} (one of: {names})", names = Bug::ALL.map(Bug::name).join(", "))]
pub struct UnknownBug(String);

impl FromStr for Bug {
    type Err = UnknownBug;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Bug::ALL
            .into_iter()
            .find(|b| b.name() == text)
            .ok_or_else(|| UnknownBug(text.to_string()))
    }
}

impl std::fmt::Display for Bug {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A pod the controller started removing (the first eviction or delete that marked it).
#[derive(Clone, Debug, PartialEq)]
pub struct PodRemoval {
    pub at: Timestamp,
    /// The pod as it was just before the call.
    pub pod: Value,
    /// Through the Eviction API (which enforces PodDisruptionBudgets), or a plain delete.
    pub evicted: bool,
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

/// The controller's removals and creations, as the wrapped seam saw them succeed.
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

/// The seams a world hands its controller and its kube-scheduler stand-in.
pub struct Seams {
    pub audit: Arc<Audit>,
    pub controller_kube: Arc<dyn KubeApi>,
    pub controller_ec2: Arc<dyn Ec2>,
    pub controller_sqs: Arc<dyn Sqs>,
    pub scheduler_kube: Arc<dyn KubeApi>,
}

/// Worlds built with [`Bug::Nondeterministic`] so far in this process.
static NONDETERMINISTIC_WORLDS: AtomicU64 = AtomicU64::new(0);

impl Seams {
    pub fn new(
        bug: Bug,
        api: Arc<ApiServer>,
        cloud: Arc<FakeCloud>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let audit = Arc::new(Audit::default());
        let fail_first_claim = bug == Bug::Nondeterministic
            && NONDETERMINISTIC_WORLDS.fetch_add(1, Ordering::Relaxed) % 2 == 1;
        let controller_kube = Arc::new(ControllerKube {
            api: api.clone(),
            reads: Distorted {
                api: api.clone(),
                bug,
            },
            cloud: cloud.clone(),
            clock,
            bug,
            audit: audit.clone(),
            fail_first_claim: AtomicBool::new(fail_first_claim),
        });
        let controller_ec2: Arc<dyn Ec2> = match bug {
            Bug::DropTerminations | Bug::IgnoreTerminations => Arc::new(ControllerEc2 {
                cloud: cloud.clone(),
                bug,
                dropped: Mutex::new(BTreeSet::new()),
            }),
            _ => cloud.clone(),
        };
        let controller_sqs: Arc<dyn Sqs> = match bug {
            Bug::DropInterruptionMessages => Arc::new(DroppingSqs {
                cloud: cloud.clone(),
            }),
            _ => cloud,
        };
        let scheduler_kube: Arc<dyn KubeApi> = match bug {
            Bug::SchedulerOvercommit => Arc::new(Distorted {
                api: api.clone(),
                bug,
            }),
            _ => api,
        };
        Self {
            audit,
            controller_kube,
            controller_ec2,
            controller_sqs,
            scheduler_kube,
        }
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
        Bug::HideNodePoolLimits if *kind == ResourceKind::NODE_POOL => {
            if let Some(spec) = object["spec"].as_object_mut() {
                spec.remove("limits");
            }
            Some(object)
        }
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
            .filter_map(|o| view(bug, kind, o))
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
                Ok(WatchEvent::Added(o)) => view(bug, &kind, o).map(|o| Ok(WatchEvent::Added(o))),
                Ok(WatchEvent::Modified(o)) => {
                    view(bug, &kind, o).map(|o| Ok(WatchEvent::Modified(o)))
                }
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

/// The controller's Kubernetes seam: the API server, audited, possibly broken.
struct ControllerKube {
    api: Arc<ApiServer>,
    /// Reads go through the same distorted view a reader of the bug gets.
    reads: Distorted,
    cloud: Arc<FakeCloud>,
    clock: Arc<dyn Clock>,
    bug: Bug,
    audit: Arc<Audit>,
    /// [`Bug::Nondeterministic`]: the next NodeClaim create fails once.
    fail_first_claim: AtomicBool,
}

impl ControllerKube {
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
    async fn mint_copy(&self, claim: &Value) {
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
        match self.api.create(&ResourceKind::NODE_CLAIM, copy).await {
            Ok(created) => {
                let minted = created["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let now = self.clock.now();
                self.audit
                    .with(|log| log.claims_created.push((now, minted)));
            }
            Err(err) => tracing::debug!(%err, "bug mint-claim-on-failed-launch: create failed"),
        }
    }
}

#[async_trait]
impl KubeApi for ControllerKube {
    async fn get(&self, kind: &ResourceKind, key: &ObjectKey) -> Result<Option<Value>, KubeError> {
        self.reads.get(kind, key).await
    }

    async fn list(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
    ) -> Result<ObjectList, KubeError> {
        self.reads.list(kind, options).await
    }

    async fn create(&self, kind: &ResourceKind, object: Value) -> Result<Value, KubeError> {
        if *kind == ResourceKind::NODE_CLAIM && self.fail_first_claim.swap(false, Ordering::Relaxed)
        {
            return Err(KubeError::Unavailable(
                "bug nondeterministic: the first NodeClaim create of every second world fails"
                    .into(),
            ));
        }
        let created = self.api.create(kind, object).await?;
        if *kind == ResourceKind::NODE_CLAIM {
            let name = created["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let now = self.clock.now();
            self.audit.with(|log| log.claims_created.push((now, name)));
        }
        Ok(created)
    }

    async fn patch(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<Value, KubeError> {
        let patched = self.api.patch(kind, key, patch).await?;
        Ok(view(self.bug, kind, patched.clone()).unwrap_or(patched))
    }

    async fn patch_status(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<Value, KubeError> {
        let patched = self.api.patch_status(kind, key, patch).await?;
        Ok(view(self.bug, kind, patched.clone()).unwrap_or(patched))
    }

    async fn delete(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome, KubeError> {
        let before = self.api.object(kind, key);
        let first = before.as_ref().is_some_and(|o| !has_deletion(o));
        if *kind == ResourceKind::NODE_CLAIM
            && let Some(claim) = before.as_ref().filter(|_| first)
        {
            let launched = claim["status"]["providerID"].is_string();
            let registered = claim["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Registered" && c["status"] == "True");
            match self.bug {
                Bug::KeepUnregisteredClaims if !registered => return Ok(DeleteOutcome::NotFound),
                Bug::TerminateOnClaimDelete => self.terminate_now(claim).await,
                Bug::MintClaimOnFailedLaunch if !launched => self.mint_copy(claim).await,
                _ => {}
            }
        }
        let outcome = self.api.delete(kind, key, options).await?;
        if let Some(object) = before.filter(|_| first && outcome != DeleteOutcome::NotFound) {
            let now = self.clock.now();
            if *kind == ResourceKind::POD {
                self.audit.with(|log| {
                    log.pod_removals.push(PodRemoval {
                        at: now,
                        pod: object,
                        evicted: false,
                    })
                });
            } else if *kind == ResourceKind::NODE_CLAIM {
                let ended = ClaimEnded {
                    at: now,
                    name: key.name.clone(),
                    launched: object["status"]["providerID"].is_string(),
                };
                self.audit.with(|log| log.claims_ended.push(ended));
            }
        }
        Ok(outcome)
    }

    async fn evict(&self, pod: &ObjectKey, options: &DeleteOptions) -> Result<(), KubeError> {
        let before = self.api.object(&ResourceKind::POD, pod);
        let evicted = if self.bug == Bug::EvictionsAsDeletes {
            self.api.delete(&ResourceKind::POD, pod, options).await?;
            false
        } else {
            self.api.evict(pod, options).await?;
            true
        };
        if let Some(object) = before.filter(|o| !has_deletion(o)) {
            let now = self.clock.now();
            self.audit.with(|log| {
                log.pod_removals.push(PodRemoval {
                    at: now,
                    pod: object,
                    evicted,
                })
            });
        }
        Ok(())
    }

    async fn watch(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
        resource_version: &str,
    ) -> Result<WatchStream, KubeError> {
        self.reads.watch(kind, options, resource_version).await
    }

    async fn record_event(&self, event: &EventRecord) -> Result<(), KubeError> {
        self.api.record_event(event).await
    }
}

/// A reader's view of the API server distorted by a bug (the kube-scheduler stand-in's, for
/// [`Bug::SchedulerOvercommit`]); writes pass through.
struct Distorted {
    api: Arc<ApiServer>,
    bug: Bug,
}

#[async_trait]
impl KubeApi for Distorted {
    async fn get(&self, kind: &ResourceKind, key: &ObjectKey) -> Result<Option<Value>, KubeError> {
        let found = self.api.get(kind, key).await?;
        Ok(found.and_then(|o| view(self.bug, kind, o)))
    }

    async fn list(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
    ) -> Result<ObjectList, KubeError> {
        let list = self.api.list(kind, options).await?;
        Ok(view_list(self.bug, kind, list))
    }

    async fn create(&self, kind: &ResourceKind, object: Value) -> Result<Value, KubeError> {
        self.api.create(kind, object).await
    }

    async fn patch(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<Value, KubeError> {
        self.api.patch(kind, key, patch).await
    }

    async fn patch_status(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<Value, KubeError> {
        self.api.patch_status(kind, key, patch).await
    }

    async fn delete(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome, KubeError> {
        self.api.delete(kind, key, options).await
    }

    async fn evict(&self, pod: &ObjectKey, options: &DeleteOptions) -> Result<(), KubeError> {
        self.api.evict(pod, options).await
    }

    async fn watch(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
        resource_version: &str,
    ) -> Result<WatchStream, KubeError> {
        let stream = self.api.watch(kind, options, resource_version).await?;
        Ok(view_watch(self.bug, kind, stream))
    }

    async fn record_event(&self, event: &EventRecord) -> Result<(), KubeError> {
        self.api.record_event(event).await
    }
}

/// The controller's EC2 seam for the termination bugs.
struct ControllerEc2 {
    cloud: Arc<FakeCloud>,
    bug: Bug,
    /// [`Bug::DropTerminations`]: instances the controller asked to terminate, reported
    /// terminated from then on.
    dropped: Mutex<BTreeSet<String>>,
}

#[async_trait]
impl Ec2 for ControllerEc2 {
    async fn create_fleet(
        &self,
        request: &CreateFleetRequest,
    ) -> Result<CreateFleetResponse, Ec2Error> {
        self.cloud.create_fleet(request).await
    }

    async fn describe_instances(
        &self,
        instance_ids: &[String],
        filters: &[Filter],
    ) -> Result<Vec<Instance>, Ec2Error> {
        let mut instances = self.cloud.describe_instances(instance_ids, filters).await?;
        if self.bug == Bug::DropTerminations {
            let dropped = self.dropped.lock().unwrap_or_else(|p| p.into_inner());
            for instance in &mut instances {
                if dropped.contains(&instance.instance_id) {
                    instance.state = InstanceState::Terminated;
                }
            }
        }
        Ok(instances)
    }

    async fn terminate_instances(&self, instance_ids: &[String]) -> Result<Vec<String>, Ec2Error> {
        if self.bug == Bug::DropTerminations {
            let mut dropped = self.dropped.lock().unwrap_or_else(|p| p.into_inner());
            dropped.extend(instance_ids.iter().cloned());
        }
        Ok(instance_ids.to_vec())
    }

    async fn create_tags(
        &self,
        resource_ids: &[String],
        tags: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), Ec2Error> {
        self.cloud.create_tags(resource_ids, tags).await
    }

    async fn describe_subnets(&self, filters: &[Filter]) -> Result<Vec<Subnet>, Ec2Error> {
        self.cloud.describe_subnets(filters).await
    }

    async fn describe_security_groups(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<SecurityGroup>, Ec2Error> {
        self.cloud.describe_security_groups(filters).await
    }

    async fn describe_images(&self, query: &ImageQuery) -> Result<Vec<Image>, Ec2Error> {
        self.cloud.describe_images(query).await
    }

    async fn get_parameter(&self, name: &str) -> Result<Option<String>, Ec2Error> {
        self.cloud.get_parameter(name).await
    }

    async fn create_launch_template(
        &self,
        request: &LaunchTemplateRequest,
    ) -> Result<LaunchTemplate, Ec2Error> {
        self.cloud.create_launch_template(request).await
    }

    async fn describe_launch_templates(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<LaunchTemplate>, Ec2Error> {
        self.cloud.describe_launch_templates(filters).await
    }

    async fn delete_launch_template(&self, name: &str) -> Result<(), Ec2Error> {
        self.cloud.delete_launch_template(name).await
    }
}

/// [`Bug::DropInterruptionMessages`]: receives and deletes every message, hands over none.
struct DroppingSqs {
    cloud: Arc<FakeCloud>,
}

#[async_trait]
impl Sqs for DroppingSqs {
    async fn receive_messages(
        &self,
        count_max: u8,
        wait: Duration,
    ) -> Result<Vec<Message>, SqsError> {
        let messages = self.cloud.receive_messages(count_max, wait).await?;
        for message in messages {
            if let Err(err) = self.cloud.delete_message(&message.receipt_handle).await {
                tracing::debug!(%err, "bug drop-interruption-messages: delete failed");
            }
        }
        Ok(Vec::new())
    }

    async fn delete_message(&self, receipt_handle: &str) -> Result<(), SqsError> {
        self.cloud.delete_message(receipt_handle).await
    }
}
