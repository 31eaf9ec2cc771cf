//! Drift detection: marks a launched NodeClaim `Drifted=True` (with the reason) when it no
//! longer matches what its NodePool and EC2NodeClass would launch now, and clears the condition
//! when it matches again. The disruption engine replaces drifted claims (budgets, replacement
//! first); this controller only decides.
//!
//! Rules, in upstream's order (the first that applies is the reason): the NodePool's
//! (`kubernetes-sigs/karpenter` `nodeclaim/disruption/drift.go`), then the EC2NodeClass's
//! (`karpenter-provider-aws` `cloudprovider/drift.go`):
//! - `NodePoolDrifted`: the pool's static hash differs from the one stamped on the claim;
//! - `RequirementsDrifted`: a label the claim carries is no longer allowed by the pool's
//!   requirements (a requirement on a label the claim lacks is not evidence);
//! - `NodeClassDrift`: the class's static hash differs from the one stamped on the claim;
//! - `AMIDrift`: the claim's image is not among the class's `status.amis` that serve its
//!   architecture (only while the class has resolved AMIs, so a failed resolution never rolls
//!   the fleet);
//! - `SecurityGroupDrift`: the instance's security groups are not exactly the class's
//!   `status.securityGroups` (only while some are resolved);
//! - `SubnetDrift`: the instance's subnet is not among the class's `status.subnets` (same);
//! - `CapacityReservationDrift`: the instance runs in a reservation the class no longer
//!   selects (confirmed against a fresh `DescribeInstances`, as upstream skips its cache: an
//!   instance whose reservation just ended runs on as on-demand and has not drifted).
//!
//! A hash is compared only when the claim's hash version equals the current one. When the
//! version differs (the hashing rules changed with a controller upgrade) or the claim carries no
//! hash, the claim is re-stamped with the current hash instead: no mass drift after an upgrade.
//! The instance's network placement comes from `DescribeInstances` (one call per pass for the
//! claims not seen within [`PLACEMENT_TTL_S`], at most `BATCH_IDS_MAX` ids a call).
//! Upstream's `InstanceTypeNotFound` (the claim's type left the catalog) is not checked: the
//! catalog here never drops a type while running (README, deliberate differences).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use kube_core::ResourceExt;
use serde_json::json;

use crate::api::conditions::{self, nodeclaim as claim_conditions};
use crate::api::hash::{
    EC2NODECLASS_HASH_VERSION, NODEPOOL_HASH_VERSION, ec2nodeclass_hash, nodepool_hash,
};
use crate::api::labels::{
    EC2NODECLASS_HASH_ANNOTATION, EC2NODECLASS_HASH_VERSION_ANNOTATION, NODEPOOL_HASH_ANNOTATION,
    NODEPOOL_HASH_VERSION_ANNOTATION, NODEPOOL_LABEL,
};
use crate::api::{ConditionStatus, EC2NodeClass, NodeClaim, NodePool, ProviderId};
use crate::context::Context;
use crate::runtime::{PassErrors, gone_is_done};
use crate::scheduling::Requirements;
use crate::seams::KubeError;
use crate::seams::batch::BATCH_IDS_MAX;
use crate::seams::ec2::{Ec2Error, Instance};
use crate::seams::kube::{ObjectKey, Patch, ResourceKind};

/// How long an instance's network placement is trusted before it is described again. Placement
/// changes only when someone edits the instance by hand (`ModifyInstanceAttribute`) or its
/// reservation ends; upstream re-checks drift every 5 minutes (`RequeueAfter: 5 * time.Minute`).
pub const PLACEMENT_TTL_S: u64 = 5 * 60;

/// What drift detection failed on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DriftError {
    #[error(transparent)]
    Kube(#[from] KubeError),
    /// Describing the instances failed: this pass checked hashes, requirements and AMIs only.
    #[error("describing instances for subnet and security-group drift: {0}")]
    Ec2(#[from] Ec2Error),
}

/// Where an instance runs: what subnet, security-group and reservation drift compare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub subnet_id: String,
    /// Sorted.
    pub security_group_ids: Vec<String>,
    pub capacity_reservation_id: Option<String>,
}

impl From<&Instance> for Placement {
    fn from(instance: &Instance) -> Self {
        let mut groups = instance.security_group_ids.clone();
        groups.sort();
        groups.dedup();
        Self {
            subnet_id: instance.subnet_id.clone(),
            security_group_ids: groups,
            capacity_reservation_id: instance.capacity_reservation_id.clone(),
        }
    }
}

/// What detection concluded for one claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Drifted, with upstream's reason (`NodePoolDrifted`, `RequirementsDrifted`,
    /// `NodeClassDrift`, `AMIDrift`, `SecurityGroupDrift`, `SubnetDrift`,
    /// `CapacityReservationDrift`).
    Drifted(&'static str, String),
    /// Matches its pool and class.
    Current,
}

/// The annotations a claim should carry but does not (missing, or of another hash version).
pub fn restamp(
    claim: &NodeClaim,
    pool: Option<&NodePool>,
    class: Option<&EC2NodeClass>,
) -> BTreeMap<&'static str, String> {
    let mut out = BTreeMap::new();
    let annotations = claim.annotations();
    let stale = |version_key: &str, version: &str| {
        annotations.get(version_key).map(String::as_str) != Some(version)
    };
    if let Some(pool) = pool
        && stale(NODEPOOL_HASH_VERSION_ANNOTATION, NODEPOOL_HASH_VERSION)
    {
        out.insert(NODEPOOL_HASH_ANNOTATION, nodepool_hash(pool));
        out.insert(
            NODEPOOL_HASH_VERSION_ANNOTATION,
            NODEPOOL_HASH_VERSION.into(),
        );
    }
    if let Some(class) = class
        && stale(
            EC2NODECLASS_HASH_VERSION_ANNOTATION,
            EC2NODECLASS_HASH_VERSION,
        )
    {
        out.insert(EC2NODECLASS_HASH_ANNOTATION, ec2nodeclass_hash(class));
        out.insert(
            EC2NODECLASS_HASH_VERSION_ANNOTATION,
            EC2NODECLASS_HASH_VERSION.into(),
        );
    }
    out
}

/// A label in `labels` that `pool`'s requirements no longer allow, as `RequirementsDrifted`'s
/// message. Only labels present are compared: not every attribute label is copied onto claims
/// and nodes, so a missing one is not evidence of drift.
pub fn requirements_drift(labels: &BTreeMap<String, String>, pool: &NodePool) -> Option<String> {
    let requirements = Requirements::from_api(&pool.spec.template.spec.requirements);
    requirements_drift_in(labels, &requirements)
}

/// [`requirements_drift`] against requirements already read from a pool.
pub fn requirements_drift_in(
    labels: &BTreeMap<String, String>,
    requirements: &Requirements,
) -> Option<String> {
    requirements.iter().find_map(|(key, req)| {
        let value = labels.get(key)?;
        (!req.has(value))
            .then(|| format!("label {key}={value} is no longer allowed by its NodePool"))
    })
}

/// What a claim is compared with: its NodePool and EC2NodeClass, with their hashes and the
/// pool's requirements computed once (a pass compares every claim of a pool with the same).
pub struct Target<'a> {
    pool: Option<(&'a NodePool, String, Requirements)>,
    class: Option<(&'a EC2NodeClass, String)>,
}

impl<'a> Target<'a> {
    pub fn new(pool: Option<&'a NodePool>, class: Option<&'a EC2NodeClass>) -> Self {
        Self::hashed(pool, class, &HashMemo::default())
    }

    /// [`Target::new`] with the hashes from `memo` where the objects did not change.
    fn hashed(
        pool: Option<&'a NodePool>,
        class: Option<&'a EC2NodeClass>,
        memo: &HashMemo,
    ) -> Self {
        Self {
            pool: pool.map(|p| {
                let requirements = Requirements::from_api(&p.spec.template.spec.requirements);
                (p, memo.get("NodePool", p, nodepool_hash), requirements)
            }),
            class: class.map(|c| (c, memo.get("EC2NodeClass", c, ec2nodeclass_hash))),
        }
    }
}

/// Static hashes by object (kind and name), each kept while the object's `resourceVersion` is
/// the one it was computed for: a pass compares every claim with its pool's and class's hash,
/// and hashing them again on every pass was most of drift detection's cost (issue 13).
#[derive(Debug, Default)]
struct HashMemo(Mutex<BTreeMap<(&'static str, String), Hashed>>);

/// The `resourceVersion` a hash was computed at, and the hash.
type Hashed = (Option<String>, String);

impl HashMemo {
    fn get<T: ResourceExt>(
        &self,
        kind: &'static str,
        object: &T,
        hash: fn(&T) -> String,
    ) -> String {
        let mut memo = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let version = object.meta().resource_version.clone();
        let key = (kind, object.name_any());
        if let Some((seen, hashed)) = memo.get(&key)
            && *seen == version
            && version.is_some()
        {
            return hashed.clone();
        }
        let hashed = hash(object);
        memo.insert(key, (version, hashed.clone()));
        hashed
    }

    /// Forgets the objects gone from `inputs` (the memo holds at most the live pools and
    /// classes).
    fn retain(&self, inputs: &Inputs) {
        let mut memo = self.0.lock().unwrap_or_else(|e| e.into_inner());
        memo.retain(|(kind, name), _| match *kind {
            "NodePool" => inputs.pools.contains_key(name),
            _ => inputs.classes.contains_key(name),
        });
    }
}

/// Whether `claim` drifted from `pool` and `class` (hashes compared only at equal versions;
/// subnet, security-group and reservation rules only with the instance's `placement`).
pub fn detect(
    claim: &NodeClaim,
    pool: Option<&NodePool>,
    class: Option<&EC2NodeClass>,
    placement: Option<&Placement>,
) -> Verdict {
    detect_against(claim, &Target::new(pool, class), placement)
}

/// [`detect`] against a [`Target`] built once for many claims.
pub fn detect_against(
    claim: &NodeClaim,
    target: &Target<'_>,
    placement: Option<&Placement>,
) -> Verdict {
    let annotations = claim.annotations();
    let same = |key: &str, version_key: &str, version: &str, current: &str| {
        annotations.get(version_key).map(String::as_str) == Some(version)
            && annotations.get(key).is_some_and(|h| h != current)
    };
    if let Some((_, hash, requirements)) = &target.pool {
        if same(
            NODEPOOL_HASH_ANNOTATION,
            NODEPOOL_HASH_VERSION_ANNOTATION,
            NODEPOOL_HASH_VERSION,
            hash,
        ) {
            return Verdict::Drifted("NodePoolDrifted", "NodePool template changed".into());
        }
        if let Some(why) = requirements_drift_in(claim.labels(), requirements) {
            return Verdict::Drifted("RequirementsDrifted", why);
        }
    }
    let Some((class, class_hash)) = &target.class else {
        return Verdict::Current;
    };
    if same(
        EC2NODECLASS_HASH_ANNOTATION,
        EC2NODECLASS_HASH_VERSION_ANNOTATION,
        EC2NODECLASS_HASH_VERSION,
        class_hash,
    ) {
        return Verdict::Drifted(
            "NodeClassDrift",
            "EC2NodeClass static fields changed".into(),
        );
    }
    let Some(status) = class.status.as_ref() else {
        return Verdict::Current;
    };
    let image = claim.status.as_ref().and_then(|s| s.image_id.as_ref());
    let serving: Vec<&str> = status
        .amis
        .iter()
        .filter(|ami| serves(&ami.requirements, claim.labels()))
        .map(|ami| ami.id.as_str())
        .collect();
    if let Some(image) = image
        && !status.amis.is_empty()
        && !serving.contains(&image.as_str())
    {
        return Verdict::Drifted(
            "AMIDrift",
            format!("image {image} is no longer among the EC2NodeClass's AMIs"),
        );
    }
    match placement {
        Some(placement) => placement_drift(status, placement),
        None => Verdict::Current,
    }
}

/// The subnet, security-group and reservation rules, against the class's resolved `status`.
fn placement_drift(status: &crate::api::EC2NodeClassStatus, placement: &Placement) -> Verdict {
    let groups: BTreeSet<&str> = status
        .security_groups
        .iter()
        .map(|g| g.id.as_str())
        .collect();
    let instance_groups: BTreeSet<&str> = placement
        .security_group_ids
        .iter()
        .map(String::as_str)
        .collect();
    if !groups.is_empty() && groups != instance_groups {
        return Verdict::Drifted(
            "SecurityGroupDrift",
            format!(
                "instance security groups [{}] are not the EC2NodeClass's [{}]",
                placement.security_group_ids.join(","),
                groups.into_iter().collect::<Vec<_>>().join(",")
            ),
        );
    }
    if !status.subnets.is_empty() && !status.subnets.iter().any(|s| s.id == placement.subnet_id) {
        return Verdict::Drifted(
            "SubnetDrift",
            format!(
                "subnet {} is no longer among the EC2NodeClass's subnets",
                placement.subnet_id
            ),
        );
    }
    if let Some(reservation) = &placement.capacity_reservation_id
        && !status
            .capacity_reservations
            .iter()
            .any(|r| &r.id == reservation)
    {
        return Verdict::Drifted(
            "CapacityReservationDrift",
            format!("capacity reservation {reservation} is no longer selected by the EC2NodeClass"),
        );
    }
    Verdict::Current
}

/// Whether an AMI's requirements allow a claim's labels: each `In`/`NotIn` on a label the claim
/// carries (its architecture) must hold; the variant's `Exists` rules are left to the launch.
fn serves(
    requirements: &[crate::api::ec2nodeclass::AmiRequirement],
    labels: &BTreeMap<String, String>,
) -> bool {
    requirements
        .iter()
        .all(|r| match (r.operator.as_str(), labels.get(&r.key)) {
            ("In", Some(value)) => r.values.contains(value),
            ("NotIn", Some(value)) => !r.values.contains(value),
            _ => true,
        })
}

/// The drift detection controller.
pub struct DriftDetection {
    ctx: Arc<Context>,
    /// Each live instance's placement and when it was described, by instance id; entries of
    /// instances no longer behind a claim are dropped every pass (bounded by the claims).
    /// Shared, copied on write: a pass reads it twice, and copying it each time was a
    /// measurable part of a simulated step.
    placements: Mutex<Arc<Placements>>,
    /// The pools' and classes' static hashes.
    hashes: HashMemo,
    /// The caches' revision the last fully successful pass decided on, and when it ran.
    last: Mutex<Option<(Revision, Timestamp)>>,
}

/// The NodePool, EC2NodeClass and NodeClaim caches' change counts.
type Revision = [u64; 3];

/// How long a pass stands while no NodePool, EC2NodeClass or NodeClaim changed: drift reads
/// only those (a new AMI release reaches it through the class's status) and the instances'
/// placements, refreshed on their own TTL. The running controller's drift loop passes on the
/// same triggers and minute (`operator::loops::NODECLASS_REFRESH`); the simulation's stepped
/// operator passed every second, a twentieth of a swarm seed's CPU (issue 13).
pub const DRIFT_REFRESH: std::time::Duration = std::time::Duration::from_secs(60);

/// Instance id → when it was described, and its placement.
type Placements = BTreeMap<String, (Timestamp, Placement)>;

/// The claims, pools and classes one pass decides on.
struct Inputs {
    pools: BTreeMap<String, Arc<NodePool>>,
    classes: BTreeMap<String, Arc<EC2NodeClass>>,
    claims: Vec<Arc<NodeClaim>>,
}

impl Inputs {
    fn pool(&self, claim: &NodeClaim) -> Option<&NodePool> {
        claim
            .labels()
            .get(NODEPOOL_LABEL)
            .and_then(|p| self.pools.get(p))
            .map(|p| &**p)
    }

    /// The pool and class names a claim is compared with.
    /// Borrowed from the claim: a pass looks every claim up twice, and copying the names was
    /// a twenty-fifth of a simulated burst.
    fn target_key<'c>(&self, claim: &'c NodeClaim) -> (Option<&'c str>, &'c str) {
        (
            claim.labels().get(NODEPOOL_LABEL).map(String::as_str),
            claim.spec.node_class_ref.name.as_str(),
        )
    }

    fn class(&self, claim: &NodeClaim) -> Option<&EC2NodeClass> {
        self.classes
            .get(&claim.spec.node_class_ref.name)
            .map(|c| &**c)
    }
}

fn is_launched(claim: &NodeClaim) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| conditions::is_true(&s.conditions, claim_conditions::LAUNCHED))
}

fn instance_id(claim: &NodeClaim) -> Option<String> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .and_then(ProviderId::instance_id_of)
}

impl DriftDetection {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self {
            ctx,
            placements: Mutex::new(Arc::new(BTreeMap::new())),
            hashes: HashMemo::default(),
            last: Mutex::new(None),
        }
    }

    /// The pass's inputs, or `None` when the last pass stands (see [`DRIFT_REFRESH`]).
    async fn inputs(&self, now: Timestamp) -> Result<Option<(Inputs, Revision)>, KubeError> {
        let mut state = self.ctx.state.lock().await;
        let kube = self.ctx.kube.as_ref();
        state.pools.sync(kube).await?;
        state.node_classes.sync(kube).await?;
        state.claims.sync(kube).await?;
        let revision = [
            state.pools.changes(),
            state.node_classes.changes(),
            state.claims.changes(),
        ];
        let stands = self
            .last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|(seen, at)| {
                seen == revision && now.duration_since(at).unsigned_abs() < DRIFT_REFRESH
            });
        if stands {
            return Ok(None);
        }
        Ok(Some((
            Inputs {
                pools: state
                    .pools
                    .to_vec()
                    .into_iter()
                    .map(|p| (p.name_any(), p))
                    .collect(),
                classes: state
                    .node_classes
                    .to_vec()
                    .into_iter()
                    .map(|c| (c.name_any(), c))
                    .collect(),
                claims: state
                    .claims
                    .to_vec()
                    .into_iter()
                    .filter(|c| c.metadata.deletion_timestamp.is_none())
                    .collect(),
            },
            revision,
        )))
    }

    /// One pass over every launched claim not being deleted; returns how many claims changed.
    /// When describing the instances fails, the other rules still run and the error is
    /// returned after them (the loop retries); a claim whose write fails does not stop the
    /// others ([`crate::runtime::pass`]), and one deleted since the cache saw it is skipped.
    pub async fn pass(&self) -> Result<usize, DriftError> {
        let started = self.ctx.clock.now();
        let Some((inputs, revision)) = self.inputs(started).await? else {
            return Ok(0);
        };
        self.hashes.retain(&inputs);
        // Recorded only for a pass that fully succeeded: a failed one runs again next time.
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let live: BTreeSet<String> = inputs
            .claims
            .iter()
            .filter(|c| is_launched(c))
            .filter_map(|c| instance_id(c))
            .collect();
        let stale_before = started - Duration::from_secs(PLACEMENT_TTL_S);
        let mut targets: BTreeMap<(Option<&str>, &str), Target<'_>> = BTreeMap::new();
        for claim in &inputs.claims {
            targets.entry(inputs.target_key(claim)).or_insert_with(|| {
                Target::hashed(inputs.pool(claim), inputs.class(claim), &self.hashes)
            });
        }
        // Each claim's target, in the claims' order.
        let claim_targets: Vec<&Target<'_>> = inputs
            .claims
            .iter()
            .map(|claim| &targets[&inputs.target_key(claim)])
            .collect();
        let mut described = self.refresh(&live, |fetched| fetched <= stale_before).await;
        let placements = self.placements_now();
        // A reservation rule decided on an entry older than this pass is confirmed first.
        let confirm: BTreeSet<String> = inputs
            .claims
            .iter()
            .zip(&claim_targets)
            .filter_map(|(claim, target)| {
                let id = instance_id(claim)?;
                let (fetched, placement) = placements.get(&id)?;
                let verdict = detect_against(claim, target, Some(placement));
                (*fetched < started
                    && matches!(verdict, Verdict::Drifted("CapacityReservationDrift", _)))
                .then_some(id)
            })
            .collect();
        if !confirm.is_empty() && described.is_ok() {
            described = self.refresh(&confirm, |_| true).await;
        }
        let placements = self.placements_now();
        let mut changed = 0;
        // A claim that fails (a conflict: lifecycle, disruption and termination write claims
        // too) is retried next pass; the claims after it are still looked at.
        let mut errors = PassErrors::default();
        for (claim, target) in inputs.claims.iter().zip(&claim_targets) {
            let placement = instance_id(claim).and_then(|id| placements.get(&id).map(|(_, p)| p));
            let reconciled = self
                .reconcile(
                    claim,
                    (inputs.pool(claim), inputs.class(claim)),
                    target,
                    placement,
                )
                .await;
            changed += usize::from(errors.keep(gone_is_done(reconciled)).unwrap_or(false));
        }
        described?;
        let changed = errors.finish(changed)?;
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some((revision, started));
        Ok(changed)
    }

    fn placements_now(&self) -> Arc<Placements> {
        self.placements
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Describes the instances of `live` not cached or whose entry `stale` says is too old (in
    /// calls of at most `BATCH_IDS_MAX` ids) and forgets instances not in `live`. An instance
    /// EC2 does not show (not visible yet, or gone) keeps no entry.
    async fn refresh(
        &self,
        live: &BTreeSet<String>,
        stale: impl Fn(Timestamp) -> bool,
    ) -> Result<(), Ec2Error> {
        let wanted: Vec<String> = {
            let mut cache = self
                .placements
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if cache.keys().any(|id| !live.contains(id)) {
                Arc::make_mut(&mut cache).retain(|id, _| live.contains(id));
            }
            live.iter()
                .filter(|id| cache.get(*id).is_none_or(|(fetched, _)| stale(*fetched)))
                .cloned()
                .collect()
        };
        for chunk in wanted.chunks(BATCH_IDS_MAX) {
            // The EC2 part of upstream's `IsDrifted` (its rules against the class's status are
            // pure and not timed).
            let call = self.ctx.ec2.describe_instances(chunk, &[]);
            let metrics = &self.ctx.metrics;
            let instances = metrics
                .cloud_call(
                    "nodeclaim.disruption",
                    crate::metrics::CloudMethod::IsDrifted,
                    call,
                )
                .await?;
            let now = self.ctx.clock.now();
            let mut cache = self
                .placements
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let cache = Arc::make_mut(&mut cache);
            for id in chunk {
                cache.remove(id);
            }
            for instance in &instances {
                cache.insert(
                    instance.instance_id.clone(),
                    (now, Placement::from(instance)),
                );
            }
        }
        Ok(())
    }

    async fn reconcile(
        &self,
        claim: &NodeClaim,
        (pool, class): (Option<&NodePool>, Option<&EC2NodeClass>),
        target: &Target<'_>,
        placement: Option<&Placement>,
    ) -> Result<bool, KubeError> {
        let key = ObjectKey::cluster(claim.name_any());
        let stamps = restamp(claim, pool, class);
        if !stamps.is_empty() {
            let patch = json!({"metadata": {"annotations": stamps}});
            self.ctx
                .kube
                .patch(&ResourceKind::NODE_CLAIM, &key, &Patch::Merge(patch))
                .await?;
            return Ok(true); // compared on the next pass, against the stamped hashes
        }
        if !is_launched(claim) {
            return Ok(false);
        }
        let mut conds = claim
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        let now = self.ctx.clock.now();
        let changed = match detect_against(claim, target, placement) {
            Verdict::Drifted(reason, message) => conditions::set(
                &mut conds,
                claim_conditions::DRIFTED,
                ConditionStatus::True,
                reason,
                &message,
                claim.metadata.generation,
                now,
            ),
            Verdict::Current => {
                let before = conds.len();
                conds.retain(|c| c.type_ != claim_conditions::DRIFTED);
                conds.len() != before
            }
        };
        if changed {
            // The list is written whole: conditional on the version it was computed from.
            let patch = json!({
                "metadata": {"resourceVersion": claim.metadata.resource_version},
                "status": {"conditions": conds},
            });
            self.ctx
                .kube
                .patch_status(&ResourceKind::NODE_CLAIM, &key, &Patch::Merge(patch))
                .await?;
        }
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ec2nodeclass::AmiStatus;

    fn pool() -> NodePool {
        serde_yaml::from_str(
            r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    metadata: {labels: {team: a}}
    spec:
      requirements: []
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"#,
        )
        .expect("pool parses")
    }

    fn class(amis: &[&str]) -> EC2NodeClass {
        let mut class: EC2NodeClass = serde_yaml::from_str(
            r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: r
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {a: b}}]
  securityGroupSelectorTerms: [{tags: {a: b}}]
"#,
        )
        .expect("class parses");
        let status = crate::api::EC2NodeClassStatus {
            amis: amis
                .iter()
                .map(|id| AmiStatus {
                    id: id.to_string(),
                    name: None,
                    deprecated: None,
                    requirements: vec![],
                })
                .collect(),
            ..Default::default()
        };
        class.status = Some(status);
        class
    }

    fn claim(pool: &NodePool, class: &EC2NodeClass, image: &str) -> NodeClaim {
        let mut claim: NodeClaim = serde_yaml::from_str(
            r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: c, labels: {karpenter.sh/nodepool: default}}
spec:
  requirements: []
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"#,
        )
        .expect("claim parses");
        let stamps = restamp(&claim, Some(pool), Some(class));
        claim.metadata.annotations = Some(
            stamps
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        );
        claim.status = Some(crate::api::NodeClaimStatus {
            image_id: Some(image.into()),
            ..Default::default()
        });
        claim
    }

    #[test]
    fn a_claim_on_one_of_the_class_amis_has_not_drifted() {
        let (p, c) = (pool(), class(&["ami-old", "ami-arm"]));
        assert_eq!(
            detect(&claim(&p, &c, "ami-old"), Some(&p), Some(&c), None),
            Verdict::Current
        );
    }

    #[test]
    fn a_claim_whose_image_left_the_class_amis_drifted_with_ami_drift() {
        let p = pool();
        let claim = claim(&p, &class(&["ami-old"]), "ami-old");
        let released = class(&["ami-new"]);
        assert!(matches!(
            detect(&claim, Some(&p), Some(&released), None),
            Verdict::Drifted("AMIDrift", _)
        ));
    }

    #[test]
    fn a_class_with_no_resolved_amis_never_drifts_a_claim_on_its_image() {
        let p = pool();
        let claim = claim(&p, &class(&["ami-old"]), "ami-old");
        assert_eq!(
            detect(&claim, Some(&p), Some(&class(&[])), None),
            Verdict::Current
        );
    }

    #[test]
    fn a_template_label_change_drifts_with_nodepool_drifted() {
        let (p, c) = (pool(), class(&["ami-old"]));
        let claim = claim(&p, &c, "ami-old");
        let mut changed = p.clone();
        changed
            .spec
            .template
            .metadata
            .as_mut()
            .expect("metadata")
            .labels
            .insert("team".into(), "b".into());
        assert!(matches!(
            detect(&claim, Some(&changed), Some(&c), None),
            Verdict::Drifted("NodePoolDrifted", _)
        ));
    }

    #[test]
    fn a_weight_change_does_not_drift() {
        let (p, c) = (pool(), class(&["ami-old"]));
        let claim = claim(&p, &c, "ami-old");
        let mut changed = p.clone();
        changed.spec.weight = Some(50);
        assert_eq!(
            detect(&claim, Some(&changed), Some(&c), None),
            Verdict::Current
        );
    }

    #[test]
    fn a_class_tag_change_drifts_with_node_class_drift() {
        let (p, c) = (pool(), class(&["ami-old"]));
        let claim = claim(&p, &c, "ami-old");
        let mut changed = c.clone();
        changed.spec.tags.insert("team".into(), "b".into());
        assert!(matches!(
            detect(&claim, Some(&p), Some(&changed), None),
            Verdict::Drifted("NodeClassDrift", _)
        ));
    }

    #[test]
    fn a_claim_of_an_older_hash_version_is_restamped_not_drifted() {
        let (p, c) = (pool(), class(&["ami-old"]));
        let mut claim = claim(&p, &c, "ami-old");
        let annotations = claim.metadata.annotations.as_mut().expect("stamped");
        annotations.insert(NODEPOOL_HASH_ANNOTATION.into(), "12345".into());
        annotations.insert(NODEPOOL_HASH_VERSION_ANNOTATION.into(), "v2".into());
        assert_eq!(detect(&claim, Some(&p), Some(&c), None), Verdict::Current);
        let stamps = restamp(&claim, Some(&p), Some(&c));
        assert_eq!(
            stamps.get(NODEPOOL_HASH_ANNOTATION),
            Some(&nodepool_hash(&p))
        );
        assert_eq!(
            stamps
                .get(NODEPOOL_HASH_VERSION_ANNOTATION)
                .map(String::as_str),
            Some(NODEPOOL_HASH_VERSION)
        );
    }
    fn with_network(mut class: EC2NodeClass, subnets: &[&str], groups: &[&str]) -> EC2NodeClass {
        use crate::api::ec2nodeclass::{SecurityGroupStatus, SubnetStatus};
        let status = class.status.as_mut().expect("status");
        status.subnets = subnets
            .iter()
            .map(|id| SubnetStatus {
                id: id.to_string(),
                zone: "us-west-2a".into(),
                zone_id: None,
            })
            .collect();
        status.security_groups = groups
            .iter()
            .map(|id| SecurityGroupStatus {
                id: id.to_string(),
                name: None,
            })
            .collect();
        class
    }

    fn placement(subnet: &str, groups: &[&str], reservation: Option<&str>) -> Placement {
        Placement {
            subnet_id: subnet.into(),
            security_group_ids: groups.iter().map(|g| g.to_string()).collect(),
            capacity_reservation_id: reservation.map(String::from),
        }
    }

    #[test]
    fn an_instance_whose_security_groups_are_not_exactly_the_class_groups_drifted() {
        let p = pool();
        let c = with_network(class(&["ami-old"]), &["subnet-a"], &["sg-1", "sg-2"]);
        let claim = claim(&p, &c, "ami-old");
        let same = placement("subnet-a", &["sg-1", "sg-2"], None);
        assert_eq!(
            detect(&claim, Some(&p), Some(&c), Some(&same)),
            Verdict::Current
        );
        let fewer = placement("subnet-a", &["sg-1"], None);
        assert!(matches!(
            detect(&claim, Some(&p), Some(&c), Some(&fewer)),
            Verdict::Drifted("SecurityGroupDrift", _)
        ));
    }

    #[test]
    fn an_instance_in_a_subnet_the_class_no_longer_selects_drifted() {
        let p = pool();
        let c = with_network(class(&["ami-old"]), &["subnet-b"], &["sg-1"]);
        let claim = claim(&p, &c, "ami-old");
        assert!(matches!(
            detect(
                &claim,
                Some(&p),
                Some(&c),
                Some(&placement("subnet-a", &["sg-1"], None))
            ),
            Verdict::Drifted("SubnetDrift", _)
        ));
    }

    #[test]
    fn a_class_with_no_resolved_network_never_drifts_on_placement() {
        let p = pool();
        let c = with_network(class(&["ami-old"]), &[], &[]);
        let claim = claim(&p, &c, "ami-old");
        let anywhere = placement("subnet-z", &["sg-z"], None);
        assert_eq!(
            detect(&claim, Some(&p), Some(&c), Some(&anywhere)),
            Verdict::Current
        );
    }

    #[test]
    fn an_instance_in_a_reservation_the_class_no_longer_selects_drifted_and_one_without_did_not() {
        let p = pool();
        let c = with_network(class(&["ami-old"]), &["subnet-a"], &["sg-1"]);
        let claim = claim(&p, &c, "ami-old");
        let reserved = placement("subnet-a", &["sg-1"], Some("cr-0abc"));
        assert!(matches!(
            detect(&claim, Some(&p), Some(&c), Some(&reserved)),
            Verdict::Drifted("CapacityReservationDrift", _)
        ));
        let fell_back = placement("subnet-a", &["sg-1"], None);
        assert_eq!(
            detect(&claim, Some(&p), Some(&c), Some(&fell_back)),
            Verdict::Current
        );
    }

    #[test]
    fn a_label_the_pool_no_longer_allows_drifts_with_requirements_drifted_before_the_class_rules() {
        let (mut p, c) = (pool(), class(&["ami-new"]));
        let mut claim = claim(&p, &c, "ami-old");
        claim
            .metadata
            .labels
            .get_or_insert_default()
            .insert("karpenter.sh/capacity-type".into(), "spot".into());
        p.spec.template.spec.requirements = serde_json::from_value(serde_json::json!([
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
        ]))
        .expect("requirements");
        // The hash covers requirements too: restamp so only the requirement rule can fire.
        claim.annotations_mut().clear();
        for (k, v) in restamp(&claim.clone(), Some(&p), None) {
            claim.annotations_mut().insert(k.into(), v);
        }
        assert!(matches!(
            detect(&claim, Some(&p), Some(&c), None),
            Verdict::Drifted("RequirementsDrifted", _)
        ));
    }

    #[test]
    fn an_ami_of_another_architecture_does_not_keep_a_claim_current() {
        use crate::api::ec2nodeclass::AmiRequirement;
        let p = pool();
        let mut c = class(&["ami-arm"]);
        c.status.as_mut().expect("status").amis[0].requirements = vec![AmiRequirement {
            key: "kubernetes.io/arch".into(),
            operator: "In".into(),
            values: vec!["arm64".into()],
        }];
        let mut claim = claim(&p, &c, "ami-arm");
        claim
            .metadata
            .labels
            .get_or_insert_default()
            .insert("kubernetes.io/arch".into(), "amd64".into());
        assert!(matches!(
            detect(&claim, Some(&p), Some(&c), None),
            Verdict::Drifted("AMIDrift", _)
        ));
    }
}
