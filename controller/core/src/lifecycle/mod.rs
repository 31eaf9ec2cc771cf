//! The NodeClaim lifecycle: launch → registration → initialization, liveness, and garbage
//! collection of instances and claims that lost each other. Deleting claims are left to the
//! termination controller (`crate::termination`).
//!
//! Every reconcile has the same shape: read the claim and its node, run the phases in order,
//! stop at the first that is not done, write what changed. Nothing is remembered between
//! reconciles except through the API server and EC2 (and the unavailable-offerings cache, which
//! is only an optimisation), so a restarted controller picks up exactly where it was.

pub mod ice;
pub mod launch;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

pub use ice::UnavailableOfferings;
pub use launch::{LaunchContext, LaunchError, Launched};

use crate::api::conditions::{self, nodeclaim as cond};
use crate::api::labels::{
    CAPACITY_TYPE_LABEL, INITIALIZED_LABEL, INSTANCE_TYPE_LABEL, NODEPOOL_LABEL, REGISTERED_LABEL,
    TERMINATION_FINALIZER, UNREGISTERED_TAINT_KEY, ZONE_LABEL,
};
use crate::api::{ConditionStatus, EC2NodeClass, NodeClaim, NodePool};
use crate::catalog::Catalog;
use crate::resources::Resources;
use crate::seams::ec2::{Filter, InstanceState};
use crate::seams::kube::{DeleteOptions, EventRecord, ObjectKey, Patch, ResourceKind};
use crate::seams::{Clock, Ec2, KubeApi, KubeError, Retryable};
use crate::state::SharedState;

/// Launch attempts per reconcile when EC2 answers with a retryable error (throttling, a 5xx): a
/// claim replacing a spot-interrupted node has two minutes, and waiting for the next reconcile
/// after every throttled call can cost most of them. (Found by the simulation swarm once the
/// `interruption-rehomed` invariant stopped excusing every EC2 error in a notice: 7 of 1000 seeds
/// missed the notice with 5-8 throttled launch attempts in a row, 10 s apart.) Backoff between
/// calls is the transport's (the AWS SDK's standard retry mode); each attempt re-checks for an
/// instance already tagged for the claim, so a launch whose answer was lost is adopted.
pub const LAUNCH_ATTEMPTS_MAX: u32 = 3;

/// Knobs of the lifecycle controllers.
#[derive(Clone, Debug)]
pub struct Options {
    pub cluster_name: String,
    /// Kubernetes minor version AMI aliases resolve for (`1.33`).
    pub kubernetes_version: String,
    /// A claim whose node has not registered by then is deleted (upstream: 15 minutes).
    pub registration_timeout: Duration,
    /// A cluster-tagged instance without a NodeClaim older than this is terminated (upstream 30 s).
    pub gc_grace: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            cluster_name: "cluster".into(),
            kubernetes_version: "1.33".into(),
            registration_timeout: Duration::from_secs(15 * 60),
            gc_grace: Duration::from_secs(30),
        }
    }
}

/// Operating errors of a reconcile; the claim is retried on the next pass.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error(transparent)]
    Ec2(#[from] crate::seams::Ec2Error),
}

/// What one reconcile did to a claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Launched,
    LaunchFailed(String),
    /// Deleted because launching found no capacity (its offerings are now cached unavailable).
    DeletedInsufficientCapacity,
    Registered,
    Initialized,
    /// Waiting for the node to register or initialize.
    Waiting,
    /// Deleted because its node never registered.
    DeletedRegistrationTimeout,
    /// Deleted because its NodeClass does not exist.
    DeletedNodeClassNotFound,
    /// Being deleted: the termination controller finalizes it.
    Deleting,
    Ready,
}

/// Reconciles NodeClaims over the seams.
pub struct Lifecycle {
    kube: Arc<dyn KubeApi>,
    ec2: Arc<dyn Ec2>,
    clock: Arc<dyn Clock>,
    catalog: Arc<Catalog>,
    ice: Arc<UnavailableOfferings>,
    options: Options,
    /// Watch-fed caches the passes read (shared with the other controllers by the operator).
    state: SharedState,
}

fn condition_true(claim: &NodeClaim, type_: &str) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| conditions::is_true(&s.conditions, type_))
}

fn key(claim: &NodeClaim) -> ObjectKey {
    ObjectKey::cluster(claim.metadata.name.clone().unwrap_or_default())
}

impl Lifecycle {
    pub fn new(
        kube: Arc<dyn KubeApi>,
        ec2: Arc<dyn Ec2>,
        clock: Arc<dyn Clock>,
        catalog: Arc<Catalog>,
        ice: Arc<UnavailableOfferings>,
        options: Options,
    ) -> Self {
        Self {
            kube,
            ec2,
            clock,
            catalog,
            ice,
            options,
            state: SharedState::default(),
        }
    }

    /// Reads through `state` (the operator shares one cache between its controllers).
    pub fn with_state(mut self, state: SharedState) -> Self {
        self.state = state;
        self
    }

    async fn cached_claims(&self) -> Result<Vec<Arc<NodeClaim>>, KubeError> {
        let mut state = self.state.lock().await;
        state.claims.sync(self.kube.as_ref()).await?;
        Ok(state.claims.to_vec())
    }

    async fn cached_nodes(&self) -> Result<Vec<Arc<Node>>, KubeError> {
        let mut state = self.state.lock().await;
        state.nodes.sync(self.kube.as_ref()).await?;
        Ok(state.nodes.to_vec())
    }

    async fn cached_pools(&self) -> Result<Vec<Arc<NodePool>>, KubeError> {
        let mut state = self.state.lock().await;
        state.pools.sync(self.kube.as_ref()).await?;
        Ok(state.pools.to_vec())
    }

    /// Reconciles every NodeClaim once, in name order. One claim's error does not stop the rest.
    pub async fn reconcile_all(&self) -> Result<Vec<(String, Result<Step, String>)>, KubeError> {
        let claims = self.cached_claims().await?;
        let nodes = self.cached_nodes().await?;
        let mut out = Vec::new();
        for claim in claims {
            let name = claim.metadata.name.clone().unwrap_or_default();
            let step = self
                .reconcile(&claim, &nodes)
                .await
                .map_err(|e| e.to_string());
            out.push((name, step));
        }
        Ok(out)
    }

    /// One reconcile of one claim: finalizer, launch, registration, initialization, liveness.
    pub async fn reconcile(
        &self,
        claim: &NodeClaim,
        nodes: &[Arc<Node>],
    ) -> Result<Step, LifecycleError> {
        // A deleting claim belongs to the termination controller (drain, instance, finalizers).
        if claim.metadata.deletion_timestamp.is_some() {
            return Ok(Step::Deleting);
        }
        let finalizers = claim.metadata.finalizers.clone().unwrap_or_default();
        if !finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
            let mut with = finalizers;
            with.push(TERMINATION_FINALIZER.to_string());
            self.kube
                .patch(
                    &ResourceKind::NODE_CLAIM,
                    &key(claim),
                    &Patch::Merge(json!({"metadata": {"finalizers": with}})),
                )
                .await?;
        }
        if !condition_true(claim, cond::LAUNCHED) {
            return self.launch(claim).await;
        }
        let provider_id = claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .unwrap_or_default();
        let node = nodes.iter().find(|n| {
            n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id.as_str())
        });
        if !condition_true(claim, cond::REGISTERED) {
            return match node {
                Some(node) => self.register(claim, node).await,
                None => self.check_liveness(claim).await,
            };
        }
        if !condition_true(claim, cond::INITIALIZED) {
            return match node {
                Some(node) => self.initialize(claim, node).await,
                None => Ok(Step::Waiting),
            };
        }
        Ok(Step::Ready)
    }

    /// One launch attempt: an instance already tagged for this claim (a launch that happened
    /// just before a restart, or whose answer was lost) is adopted, never launched twice;
    /// otherwise the claim is launched with `class`. `Ok(None)`: nothing tagged and no class.
    async fn adopt_or_launch(
        &self,
        claim: &NodeClaim,
        name: &str,
        class: Option<&EC2NodeClass>,
        now: jiff::Timestamp,
    ) -> Result<Option<Launched>, LaunchError> {
        let tagged = self
            .ec2
            .describe_instances(&[], &[Filter::new("tag:karpenter.sh/nodeclaim", &[name])])
            .await?
            .into_iter()
            .find(|i| {
                !matches!(
                    i.state,
                    InstanceState::ShuttingDown | InstanceState::Terminated
                )
            });
        if let Some(instance) = tagged {
            return Ok(Some(Launched {
                instance_id: instance.instance_id,
                instance_type: instance.instance_type,
                zone: instance.zone,
                capacity_type: instance.capacity_type,
                image_id: instance.image_id,
            }));
        }
        let Some(class) = class else {
            return Ok(None);
        };
        let ctx = LaunchContext {
            ec2: self.ec2.as_ref(),
            catalog: &self.catalog,
            ice: &self.ice,
            now,
            cluster_name: &self.options.cluster_name,
            kubernetes_version: &self.options.kubernetes_version,
        };
        launch::launch(&ctx, claim, class).await.map(Some)
    }

    async fn launch(&self, claim: &NodeClaim) -> Result<Step, LifecycleError> {
        let now = self.clock.now();
        let name = claim.metadata.name.clone().unwrap_or_default();
        let class_name = &claim.spec.node_class_ref.name;
        let class = self
            .kube
            .get(
                &ResourceKind::EC2_NODE_CLASS,
                &ObjectKey::cluster(class_name.clone()),
            )
            .await?
            .and_then(|v| serde_json::from_value::<EC2NodeClass>(v).ok());
        let mut attempt = 1;
        let launched = loop {
            match self
                .adopt_or_launch(claim, &name, class.as_ref(), now)
                .await
            {
                Ok(Some(launched)) => break launched,
                Ok(None) => {
                    self.event(
                        claim,
                        "Warning",
                        "NodeClassNotReady",
                        format!("EC2NodeClass {class_name} not found"),
                    )
                    .await;
                    self.delete(claim).await?;
                    return Ok(Step::DeletedNodeClassNotFound);
                }
                Err(LaunchError::Ec2(err))
                    if err.is_retryable() && attempt < LAUNCH_ATTEMPTS_MAX =>
                {
                    tracing::debug!(claim = %name, %err, attempt, "launch failed; retrying");
                    attempt += 1;
                }
                Err(LaunchError::InsufficientCapacity(message)) => {
                    self.event(
                        claim,
                        "Warning",
                        "InsufficientCapacityError",
                        format!("NodeClaim {name} event: {message}"),
                    )
                    .await;
                    self.delete(claim).await?;
                    return Ok(Step::DeletedInsufficientCapacity);
                }
                Err(err) => {
                    let status = if matches!(err, LaunchError::NodeClass(_)) {
                        ConditionStatus::False
                    } else {
                        ConditionStatus::Unknown
                    };
                    let message = err.to_string();
                    self.write_condition(
                        claim,
                        (cond::LAUNCHED, status, "LaunchFailed", &message),
                        json!({}),
                    )
                    .await?;
                    return Ok(Step::LaunchFailed(err.to_string()));
                }
            }
        };
        let it = self.catalog.get(&launched.instance_type);
        let capacity = it.map(|it| it.capacity.to_list()).unwrap_or_default();
        let allocatable = it.map(|it| it.allocatable.to_list()).unwrap_or_default();
        let mut labels = BTreeMap::from([
            (
                INSTANCE_TYPE_LABEL.to_string(),
                launched.instance_type.clone(),
            ),
            (ZONE_LABEL.to_string(), launched.zone.clone()),
            (
                CAPACITY_TYPE_LABEL.to_string(),
                launched.capacity_type.label().to_string(),
            ),
        ]);
        if let Some(it) = it {
            for (k, v) in &it.labels {
                labels.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        self.kube
            .patch(
                &ResourceKind::NODE_CLAIM,
                &key(claim),
                &Patch::Merge(json!({"metadata": {"labels": labels}})),
            )
            .await?;
        self.write_condition(claim, (cond::LAUNCHED, ConditionStatus::True, "Launched", ""), json!({"providerID": launched.provider_id(), "imageID": launched.image_id, "capacity": capacity, "allocatable": allocatable}))
            .await?;
        Ok(Step::Launched)
    }

    /// The node joined: sync labels and taints onto it, drop the unregistered taint, take
    /// ownership (finalizer, owner reference), mark the claim Registered.
    async fn register(&self, claim: &NodeClaim, node: &Node) -> Result<Step, LifecycleError> {
        let node_name = node.metadata.name.clone().unwrap_or_default();
        let mut labels = claim.metadata.labels.clone().unwrap_or_default();
        labels.insert(REGISTERED_LABEL.to_string(), "true".to_string());
        let mut taints: Vec<Value> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t.key != UNREGISTERED_TAINT_KEY)
            .map(|t| serde_json::to_value(t).unwrap_or_default())
            .collect();
        for taint in &claim.spec.taints {
            let value = serde_json::to_value(taint).unwrap_or_default();
            if !taints
                .iter()
                .any(|t| t["key"] == value["key"] && t["effect"] == value["effect"])
            {
                taints.push(value);
            }
        }
        let mut finalizers = node.metadata.finalizers.clone().unwrap_or_default();
        if !finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
            finalizers.push(TERMINATION_FINALIZER.to_string());
        }
        let owner = json!([{
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "name": claim.metadata.name, "uid": claim.metadata.uid, "blockOwnerDeletion": true
        }]);
        self.kube
            .patch(
                &ResourceKind::NODE,
                &ObjectKey::cluster(node_name.clone()),
                &Patch::Merge(json!({"metadata": {"labels": labels, "finalizers": finalizers, "ownerReferences": owner}, "spec": {"taints": taints}})),
            )
            .await?;
        self.write_condition(
            claim,
            (cond::REGISTERED, ConditionStatus::True, "Registered", ""),
            json!({"nodeName": node_name}),
        )
        .await?;
        Ok(Step::Registered)
    }

    /// Initialized once the node is Ready, its startup taints are gone and every extended
    /// resource the instance type promises is allocatable.
    async fn initialize(&self, claim: &NodeClaim, node: &Node) -> Result<Step, LifecycleError> {
        let status = node.status.clone().unwrap_or_default();
        let ready = status
            .conditions
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let startup_left = claim.spec.startup_taints.iter().any(|s| {
            taints.iter().any(|t| {
                t.key == s.key && t.effect == crate::scheduling::pod::effect_name(s.effect)
            })
        });
        let allocatable: BTreeSet<String> =
            status.allocatable.unwrap_or_default().into_keys().collect();
        let expected: Vec<String> = claim
            .status
            .as_ref()
            .map(|s| {
                s.capacity
                    .keys()
                    .filter(|k| k.contains('/'))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        let resources_ready = expected.iter().all(|r| allocatable.contains(r));
        if !ready || startup_left || !resources_ready {
            return Ok(Step::Waiting);
        }
        let node_name = node.metadata.name.clone().unwrap_or_default();
        self.kube
            .patch(
                &ResourceKind::NODE,
                &ObjectKey::cluster(node_name),
                &Patch::Merge(json!({"metadata": {"labels": {INITIALIZED_LABEL: "true"}}})),
            )
            .await?;
        self.write_condition(
            claim,
            (cond::INITIALIZED, ConditionStatus::True, "Initialized", ""),
            json!({}),
        )
        .await?;
        Ok(Step::Initialized)
    }

    /// A launched claim whose node has not registered within the timeout is deleted.
    async fn check_liveness(&self, claim: &NodeClaim) -> Result<Step, LifecycleError> {
        let created = claim
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0)
            .unwrap_or_else(|| self.clock.now());
        let age = self.clock.now().duration_since(created).unsigned_abs();
        if age >= self.options.registration_timeout {
            self.event(
                claim,
                "Warning",
                "FailedLaunch",
                format!(
                    "node did not register within {:?}",
                    self.options.registration_timeout
                ),
            )
            .await;
            self.delete(claim).await?;
            return Ok(Step::DeletedRegistrationTimeout);
        }
        Ok(Step::Waiting)
    }

    /// Terminates cluster-tagged instances no NodeClaim knows (older than the grace period), and
    /// deletes launched claims whose instance is gone. Returns (instances terminated, claims
    /// deleted).
    pub async fn garbage_collect(&self) -> Result<(usize, usize), LifecycleError> {
        let now = self.clock.now();
        let claims = self.cached_claims().await?;
        let known: BTreeSet<String> = claims
            .iter()
            .filter_map(|c| {
                c.status
                    .as_ref()?
                    .provider_id
                    .as_ref()?
                    .rsplit('/')
                    .next()
                    .map(str::to_string)
            })
            .collect();
        let names: BTreeSet<String> = claims
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        let instances = self
            .ec2
            .describe_instances(
                &[],
                &[Filter::new(
                    format!("tag:kubernetes.io/cluster/{}", self.options.cluster_name),
                    &["owned"],
                )],
            )
            .await?;
        let leaked: Vec<String> = instances
            .iter()
            .filter(|i| {
                !matches!(
                    i.state,
                    InstanceState::ShuttingDown | InstanceState::Terminated
                )
            })
            .filter(|i| !known.contains(&i.instance_id))
            // A claim that just launched this instance may not have written its status yet.
            .filter(|i| {
                i.tags
                    .get("karpenter.sh/nodeclaim")
                    .is_none_or(|n| !names.contains(n))
            })
            .filter(|i| now.duration_since(i.launch_time).unsigned_abs() >= self.options.gc_grace)
            .map(|i| i.instance_id.clone())
            .collect();
        if !leaked.is_empty() {
            self.ec2.terminate_instances(&leaked).await?;
        }
        let by_id: BTreeMap<&str, InstanceState> = instances
            .iter()
            .map(|i| (i.instance_id.as_str(), i.state))
            .collect();
        let mut deleted = 0;
        for claim in &claims {
            let Some(id) = claim
                .status
                .as_ref()
                .and_then(|s| s.provider_id.as_ref())
                .and_then(|p| p.rsplit('/').next())
            else {
                continue;
            };
            let launched_at = conditions::get(
                &claim
                    .status
                    .as_ref()
                    .map(|s| s.conditions.clone())
                    .unwrap_or_default(),
                cond::LAUNCHED,
            )
            .map(|c| c.last_transition_time.0);
            let settled = launched_at
                .is_some_and(|t| now.duration_since(t).unsigned_abs() >= self.options.gc_grace);
            let gone = matches!(by_id.get(id), None | Some(InstanceState::Terminated));
            if settled && gone && claim.metadata.deletion_timestamp.is_none() {
                self.delete(claim).await?;
                deleted += 1;
            }
        }
        Ok((leaked.len(), deleted))
    }

    /// Writes each NodePool's `status.nodes` and `status.resources` (summed claim capacity).
    pub async fn count_nodepools(&self) -> Result<(), KubeError> {
        let pools = self.cached_pools().await?;
        let claims = self.cached_claims().await?;
        for pool in pools {
            let name = pool.metadata.name.clone().unwrap_or_default();
            let mine: Vec<&Arc<NodeClaim>> = claims
                .iter()
                .filter(|c| {
                    c.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(NODEPOOL_LABEL))
                        == Some(&name)
                })
                .collect();
            let mut total = Resources::new();
            for claim in &mine {
                if let Some(status) = &claim.status {
                    total = total.plus(&Resources::from_list(&status.capacity).unwrap_or_default());
                }
            }
            let current = pool.status.clone().unwrap_or_default();
            let resources = total.to_list();
            if current.nodes == mine.len() as i64 && current.resources == resources {
                continue; // unchanged: no write, no watch event
            }
            let status = json!({"status": {"nodes": mine.len(), "resources": resources}});
            self.kube
                .patch_status(
                    &ResourceKind::NODE_POOL,
                    &ObjectKey::cluster(name),
                    &Patch::Merge(status),
                )
                .await?;
        }
        Ok(())
    }

    /// Sets one condition (recomputing `Ready`) and writes it with `extra` status fields, in one
    /// status patch.
    async fn write_condition(
        &self,
        claim: &NodeClaim,
        (type_, status, reason, message): (&str, ConditionStatus, &str, &str),
        mut extra: Value,
    ) -> Result<(), KubeError> {
        let now = self.clock.now();
        let mut list = claim.status.clone().unwrap_or_default().conditions;
        conditions::set(&mut list, type_, status, reason, message, None, now);
        conditions::set_ready(&mut list, &cond::READY_DEPENDENTS, None, now);
        extra["conditions"] = json!(list);
        self.kube
            .patch_status(
                &ResourceKind::NODE_CLAIM,
                &key(claim),
                &Patch::Merge(json!({"status": extra})),
            )
            .await?;
        Ok(())
    }

    async fn delete(&self, claim: &NodeClaim) -> Result<(), KubeError> {
        match self
            .kube
            .delete(
                &ResourceKind::NODE_CLAIM,
                &key(claim),
                &DeleteOptions::default(),
            )
            .await
        {
            Ok(_) | Err(KubeError::NotFound(_)) => Ok(()),
            Err(err) => Err(err),
        }
    }

    async fn event(&self, claim: &NodeClaim, type_: &'static str, reason: &str, message: String) {
        let record = EventRecord {
            involved: ResourceKind::NODE_CLAIM,
            key: key(claim),
            uid: claim.metadata.uid.clone(),
            type_,
            reason: reason.to_string(),
            message,
        };
        if let Err(err) = self.kube.record_event(&record).await {
            tracing::debug!(%err, reason, "event not recorded");
        }
    }
}
