//! The EC2NodeClass status controller: resolves each class's selector terms once per pass and
//! writes what they select to `status.subnets`, `status.securityGroups`, `status.amis` and
//! `status.capacityReservations` ([`super::capacityreservation`]), with the conditions
//! `SubnetsReady`, `SecurityGroupsReady`, `AMIsReady`, `CapacityReservationsReady` and `Ready`
//! (each with the
//! `observedGeneration` it was computed for). It also stamps the class's static hash
//! (`karpenter.k8s.aws/ec2nodeclass-hash` + version) on the class.
//!
//! Drift reads the resolved status (a claim whose image is no longer among `status.amis` has
//! drifted), so an `@latest` alias moving to a new release drifts the fleet within one pass,
//! while a pinned alias never moves. Provisioning skips a class whose `Ready` is `False`.
//!
//! `Ready` is computed over the conditions this controller writes plus `InstanceProfileReady`
//! when another step has written it (the instance-profile step of the launch path), so that
//! step can be added without changing this file's rules.
//!
//! A failed EC2 call leaves the last resolved value and its condition in place (a transient
//! error must not stop launches) and is retried on the next pass; a class whose terms match
//! nothing gets the condition `False` with the reason.
//!
//! A class is resolved again when it changed (its `resourceVersion` is not the one this
//! controller last read or wrote), when its last resolution failed, or
//! [`STATUS_REFRESH`] after its last one — not on every pass: upstream's reconcilers requeue
//! a class after a minute (subnets) to five (AMIs, security groups), and resolving every class
//! on every pass of the simulation's one-second step was a fourteenth of a swarm seed's CPU.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube_core::ResourceExt;
use serde_json::{Value, json};

use crate::api::conditions::{self, ec2nodeclass as cond};
use crate::api::ec2nodeclass::{SecurityGroupStatus, SubnetStatus};
use crate::api::hash::{EC2NODECLASS_HASH_VERSION, ec2nodeclass_hash};
use crate::api::labels::{EC2NODECLASS_HASH_ANNOTATION, EC2NODECLASS_HASH_VERSION_ANNOTATION};
use crate::api::{ConditionStatus, EC2NodeClass, EC2NodeClassStatus};
use crate::catalog::ReservationAvailability;
use crate::context::Context;
use crate::runtime::{PassErrors, gone_is_done};
use crate::seams::KubeError;
use crate::seams::ec2::{Ec2, Filter};
use crate::seams::kube::{ObjectKey, Patch, ResourceKind};

use super::ResolveError;
use super::instanceprofile::{self, InstanceProfileError};
use super::resolve::term_filters;
use super::{garbagecollection, termination};
use crate::seams::Retryable;

/// How long a class's resolution stands without a change to the class (upstream's subnet
/// reconciler requeues a class after a minute, the shortest of its reconcilers; the drift loop
/// runs on the same minute, `operator::loops::NODECLASS_REFRESH`): a new AMI release, subnet
/// or security group is seen within it.
pub const STATUS_REFRESH: Duration = Duration::from_secs(60);

/// The last resolution of a class: the version it left the class at, when, and whether an EC2
/// or IAM call failed in it.
#[derive(Clone, Debug)]
struct Resolved {
    version: Option<String>,
    at: jiff::Timestamp,
    failed: bool,
}

/// What one pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusPass {
    /// Classes whose status or hash annotations were written.
    pub written: usize,
    /// Classes whose resolution hit an EC2 error (kept their last status; retried next pass),
    /// plus failed finalizations and template collections (retried next pass).
    pub ec2_errors: usize,
    /// Deleted classes whose finalizer was removed this pass.
    pub finalized: usize,
    /// Launch templates deleted (unused, or of a deleted class).
    pub templates_deleted: usize,
}

/// The EC2NodeClass status controller.
pub struct NodeClassStatus {
    ctx: Arc<Context>,
    /// Each class's last resolution, by name.
    resolved: Mutex<BTreeMap<String, Resolved>>,
}

impl NodeClassStatus {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self {
            ctx,
            resolved: Mutex::default(),
        }
    }

    fn resolved(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Resolved>> {
        self.resolved.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `class`'s last resolution still stands at `now` (see the module docs).
    fn stands(&self, class: &EC2NodeClass, now: jiff::Timestamp) -> bool {
        self.resolved().get(&class.name_any()).is_some_and(|r| {
            !r.failed
                && r.version == class.metadata.resource_version
                && now.duration_since(r.at).unsigned_abs() < STATUS_REFRESH
        })
    }

    /// Resolves every class not being deleted and writes what changed.
    pub async fn reconcile_all(&self) -> Result<StatusPass, KubeError> {
        let classes = {
            let mut state = self.ctx.state.lock().await;
            state.node_classes.sync(self.ctx.kube.as_ref()).await?;
            state.node_classes.to_vec()
        };
        let mut pass = StatusPass::default();
        let mut claims = None;
        // One class's failed write (a conflict, or a class deleted since the cache saw it) must
        // not keep the others unresolved, nor drift detection, which runs after this pass.
        let mut errors = PassErrors::default();
        for class in classes {
            if class.metadata.deletion_timestamp.is_some() {
                if claims.is_none() {
                    let mut state = self.ctx.state.lock().await;
                    state.claims.sync(self.ctx.kube.as_ref()).await?;
                    claims = Some(state.claims.to_vec());
                }
                let claims = claims.as_deref().unwrap_or_default();
                errors.keep(gone_is_done(self.finalize(&class, claims, &mut pass).await));
                continue;
            }
            if self.stands(&class, self.ctx.clock.now()) {
                continue;
            }
            if let Some((written, ec2_error)) =
                errors.keep(gone_is_done(self.reconcile(&class).await))
            {
                pass.written += usize::from(written);
                pass.ec2_errors += usize::from(ec2_error);
            }
        }
        match garbagecollection::collect_unused_templates(&self.ctx).await {
            Ok(deleted) => pass.templates_deleted += deleted,
            Err(err) => {
                tracing::warn!(%err, "deleting unused launch templates failed; retrying at the next collection");
                pass.ec2_errors += 1;
            }
        }
        errors.finish(pass)
    }

    /// One pass of a deleting class's finalizer; EC2 and IAM errors are logged and retried next
    /// pass, Kubernetes errors end the pass.
    async fn finalize(
        &self,
        class: &EC2NodeClass,
        claims: &[Arc<crate::api::NodeClaim>],
        pass: &mut StatusPass,
    ) -> Result<(), KubeError> {
        match termination::finalize(&self.ctx, class, claims).await {
            Ok(termination::Finalized::Done { templates }) => {
                pass.finalized += 1;
                pass.templates_deleted += templates;
                Ok(())
            }
            Ok(_) => Ok(()),
            Err(termination::FinalizeError::Kube(err)) => Err(err),
            Err(err) => {
                tracing::warn!(class = %class.name_any(), %err, "finalizing the EC2NodeClass failed; retrying next pass");
                pass.ec2_errors += 1;
                Ok(())
            }
        }
    }

    /// One class: returns (anything written, an EC2 call failed).
    async fn reconcile(&self, class: &EC2NodeClass) -> Result<(bool, bool), KubeError> {
        let name = class.name_any();
        let key = ObjectKey::cluster(name.clone());
        let mut written_any = false;
        let mut version = class.metadata.resource_version.clone();
        if let Some(written) = termination::ensure_finalizer(&self.ctx, class).await? {
            version = written;
            written_any = true;
        }
        let hash = ec2nodeclass_hash(class);
        let annotations = class.annotations();
        if annotations.get(EC2NODECLASS_HASH_ANNOTATION) != Some(&hash)
            || annotations
                .get(EC2NODECLASS_HASH_VERSION_ANNOTATION)
                .map(String::as_str)
                != Some(EC2NODECLASS_HASH_VERSION)
        {
            let patch = json!({"metadata": {"annotations": {
                EC2NODECLASS_HASH_ANNOTATION: hash,
                EC2NODECLASS_HASH_VERSION_ANNOTATION: EC2NODECLASS_HASH_VERSION,
            }}});
            let annotated = self
                .ctx
                .kube
                .patch(&ResourceKind::EC2_NODE_CLASS, &key, &Patch::Merge(patch))
                .await?;
            version = annotated["metadata"]["resourceVersion"]
                .as_str()
                .map(String::from);
            written_any = true;
        }
        let before = class.status.clone().unwrap_or_default();
        let mut with_profile = before.clone();
        let iam_error = self.instance_profile(class, &mut with_profile).await;
        let (after, ec2_errors) = resolve_status(
            self.ctx.ec2.as_ref(),
            class,
            &with_profile,
            &self.ctx.reservations,
            &self.ctx.options.lifecycle.kubernetes_version,
            self.ctx.clock.now(),
        )
        .await;
        let ec2_error = !ec2_errors.is_empty();
        if ec2_error {
            let errors = ec2_errors.join("; ");
            tracing::warn!(class = %name, %errors, "resolving the EC2NodeClass failed; kept its last status, retrying next pass");
        }
        if after != before {
            // Conditions and resolved lists are written whole: conditional on the version read
            // (or this pass's annotation write), so a concurrent edit is a retry, not lost.
            let mut patch = status_patch(&after);
            patch["metadata"] = json!({"resourceVersion": version});
            let written = self
                .ctx
                .kube
                .patch_status(&ResourceKind::EC2_NODE_CLASS, &key, &Patch::Merge(patch))
                .await?;
            version = written["metadata"]["resourceVersion"]
                .as_str()
                .map(String::from);
            written_any = true;
        }
        // A write that failed above returned early: nothing is recorded, so the next pass
        // resolves the class again.
        self.resolved().insert(
            name,
            Resolved {
                version,
                at: self.ctx.clock.now(),
                failed: ec2_error || iam_error,
            },
        );
        Ok((written_any, ec2_error || iam_error))
    }

    /// The instance-profile step: makes sure the class's profile exists and holds its role
    /// (`instanceprofile::ensure`), writing `status.instanceProfile` and `InstanceProfileReady`.
    /// A retryable IAM error keeps the last value and condition (returns `true`); without an IAM
    /// seam nothing is written and `Ready` is computed without the condition.
    async fn instance_profile(
        &self,
        class: &EC2NodeClass,
        status: &mut EC2NodeClassStatus,
    ) -> bool {
        let Some(iam) = &self.ctx.iam else {
            return false;
        };
        let cluster = &self.ctx.options.lifecycle.cluster_name;
        let outcome =
            instanceprofile::ensure(iam.as_ref(), &self.ctx.profiles, class, cluster).await;
        let now = self.ctx.clock.now();
        let generation = class.metadata.generation;
        let (ready, reason, message) = match outcome {
            Ok(name) => {
                status.instance_profile = Some(name);
                (
                    ConditionStatus::True,
                    cond::INSTANCE_PROFILE_READY,
                    String::new(),
                )
            }
            Err(InstanceProfileError::Iam(error)) if error.is_retryable() => {
                tracing::warn!(class = %class.name_any(), %error, "IAM failed; kept the class's instance profile status, retrying next pass");
                return true;
            }
            Err(error) => {
                status.instance_profile = None;
                let reason = match error {
                    InstanceProfileError::Iam(_) => "InstanceProfileReconcileFailed",
                    _ => "InstanceProfileNotFound",
                };
                (ConditionStatus::False, reason, error.to_string())
            }
        };
        conditions::set(
            &mut status.conditions,
            cond::INSTANCE_PROFILE_READY,
            ready,
            reason,
            &message,
            generation,
            now,
        );
        false
    }
}

/// A merge patch that replaces the resolved lists (an emptied list is removed, not kept).
fn status_patch(status: &EC2NodeClassStatus) -> Value {
    let mut value = serde_json::to_value(status).unwrap_or_else(|_| json!({}));
    if let Some(fields) = value.as_object_mut() {
        for key in [
            "subnets",
            "securityGroups",
            "amis",
            "capacityReservations",
            "instanceProfile",
            "conditions",
        ] {
            fields.entry(key).or_insert(Value::Null);
        }
    }
    json!({ "status": value })
}

/// How one resolution step ended.
enum Outcome<T> {
    Resolved(T),
    /// Nothing matches the terms: the condition goes `False` with this message.
    NotFound(String),
    /// An EC2 call failed (its message): keep the last value and condition.
    Failed(String),
}

impl<T> From<Result<T, ResolveError>> for Outcome<T> {
    fn from(result: Result<T, ResolveError>) -> Self {
        match result {
            Ok(value) => Outcome::Resolved(value),
            Err(ResolveError::Unresolvable(message)) => Outcome::NotFound(message),
            Err(ResolveError::Ec2(err)) => Outcome::Failed(err.to_string()),
        }
    }
}

/// The class's new status from `before`: the three resolutions, their conditions and `Ready`.
/// Returns the status and the EC2 errors met (empty when every call answered). Time and
/// generation are inputs, so the same world gives the same status.
pub async fn resolve_status(
    ec2: &dyn Ec2,
    class: &EC2NodeClass,
    before: &EC2NodeClassStatus,
    reservations: &ReservationAvailability,
    kubernetes_version: &str,
    now: jiff::Timestamp,
) -> (EC2NodeClassStatus, Vec<String>) {
    let generation = class.metadata.generation;
    let mut status = before.clone();
    let mut failed = Vec::new();
    let mut apply =
        |conditions: &mut Vec<_>, type_: &str, reason: &str, outcome: &Outcome<()>| match outcome {
            Outcome::Resolved(()) => {
                conditions::set(
                    conditions,
                    type_,
                    ConditionStatus::True,
                    type_,
                    "",
                    generation,
                    now,
                );
            }
            Outcome::NotFound(message) => {
                conditions::set(
                    conditions,
                    type_,
                    ConditionStatus::False,
                    reason,
                    message,
                    generation,
                    now,
                );
            }
            Outcome::Failed(message) => failed.push(format!("{type_}: {message}")),
        };
    let subnets = Outcome::from(subnets(ec2, class).await);
    let subnets = take(subnets, &mut status.subnets);
    apply(
        &mut status.conditions,
        cond::SUBNETS_READY,
        "SubnetsNotFound",
        &subnets,
    );
    let groups = Outcome::from(security_groups(ec2, class).await);
    let groups = take(groups, &mut status.security_groups);
    apply(
        &mut status.conditions,
        cond::SECURITY_GROUPS_READY,
        "SecurityGroupsNotFound",
        &groups,
    );
    let amis = Outcome::from(super::ami::resolve(ec2, class, kubernetes_version).await);
    let amis = take(amis, &mut status.amis);
    apply(
        &mut status.conditions,
        cond::AMIS_READY,
        "AMINotFound",
        &amis,
    );
    // Reservations: an empty selection is ready too (upstream); only an EC2 error keeps the
    // last list.
    let reserved =
        Outcome::from(super::capacityreservation::resolve(ec2, class, reservations, now).await);
    let reserved = take(reserved, &mut status.capacity_reservations);
    apply(
        &mut status.conditions,
        cond::CAPACITY_RESERVATIONS_READY,
        "CapacityReservationsNotFound",
        &reserved,
    );
    let mut dependents = vec![
        cond::SUBNETS_READY,
        cond::SECURITY_GROUPS_READY,
        cond::AMIS_READY,
        cond::CAPACITY_RESERVATIONS_READY,
    ];
    if conditions::get(&status.conditions, cond::INSTANCE_PROFILE_READY).is_some() {
        dependents.push(cond::INSTANCE_PROFILE_READY);
    }
    conditions::set_ready(&mut status.conditions, &dependents, generation, now);
    (status, failed)
}

/// Stores a resolved value (clearing it when nothing matched) and keeps only the outcome.
fn take<T: Default>(outcome: Outcome<T>, slot: &mut T) -> Outcome<()> {
    match outcome {
        Outcome::Resolved(value) => {
            *slot = value;
            Outcome::Resolved(())
        }
        Outcome::NotFound(message) => {
            *slot = T::default();
            Outcome::NotFound(message)
        }
        Outcome::Failed(message) => Outcome::Failed(message),
    }
}

/// Every subnet the terms select, most free addresses first (then by id).
async fn subnets(ec2: &dyn Ec2, class: &EC2NodeClass) -> Result<Vec<SubnetStatus>, ResolveError> {
    let mut found = BTreeMap::new();
    for term in &class.spec.subnet_selector_terms {
        let filters = term_filters(term.tags.as_ref(), term.id.as_ref(), "subnet-id");
        for subnet in ec2.describe_subnets(&filters).await? {
            found.insert(subnet.subnet_id.clone(), subnet);
        }
    }
    if found.is_empty() {
        return Err(ResolveError::Unresolvable(
            "no subnet matches subnetSelectorTerms".into(),
        ));
    }
    let mut subnets: Vec<_> = found.into_values().collect();
    subnets.sort_by(|a, b| {
        (b.available_ip_address_count, &a.subnet_id)
            .cmp(&(a.available_ip_address_count, &b.subnet_id))
    });
    Ok(subnets
        .into_iter()
        .map(|s| SubnetStatus {
            id: s.subnet_id,
            zone: s.zone,
            zone_id: Some(s.zone_id).filter(|z| !z.is_empty()),
        })
        .collect())
}

/// Every security group the terms select, by id.
async fn security_groups(
    ec2: &dyn Ec2,
    class: &EC2NodeClass,
) -> Result<Vec<SecurityGroupStatus>, ResolveError> {
    let mut found = BTreeMap::new();
    for term in &class.spec.security_group_selector_terms {
        let mut filters = term_filters(term.tags.as_ref(), term.id.as_ref(), "group-id");
        if let Some(name) = &term.name {
            filters.push(Filter::new("group-name", &[name.as_str()]));
        }
        for group in ec2.describe_security_groups(&filters).await? {
            found.insert(
                group.group_id.clone(),
                SecurityGroupStatus {
                    id: group.group_id,
                    name: Some(group.group_name).filter(|n| !n.is_empty()),
                },
            );
        }
    }
    if found.is_empty() {
        return Err(ResolveError::Unresolvable(
            "no security group matches securityGroupSelectorTerms".into(),
        ));
    }
    Ok(found.into_values().collect())
}
