//! NodePool status conditions, as upstream's `nodepool/{validation,readiness,registrationhealth}`
//! controllers write them:
//!
//! - `ValidationSucceeded`: the NodePool passes the runtime rules (`validation::validate_nodepool`);
//!   `False` with the violations otherwise. The provisioner skips an invalid NodePool; this is
//!   where the user sees why (`kubectl get nodepools` READY, `kubectl describe`).
//! - `NodeClassReady`: its EC2NodeClass's `Ready` copied (`False` with `NodeClassNotFound` or
//!   `NodeClassTerminating` when there is none to copy; `Unknown` while the class has not been
//!   resolved yet).
//! - `NodeRegistrationHealthy` (informational, not part of `Ready`): reset to `Unknown` when the
//!   NodePool or its EC2NodeClass changes (their generations); the NodeClaim lifecycle sets it
//!   `True` when a node registers and `False` when one times out ([`record_registration`]).
//! - `Ready`: `True` when `ValidationSucceeded` and `NodeClassReady` are.
//!
//! Written only when something changed (no write, no watch event on an idle pass), with the
//! NodePool's resourceVersion, so a concurrent status write makes this one fail (retried on the
//! next pass) instead of overwriting it.

use std::sync::Arc;

use jiff::Timestamp;
use kube_core::ResourceExt;
use serde_json::json;

use crate::api::conditions::{self, nodepool as cond};
use crate::api::{Condition, ConditionStatus, EC2NodeClass, NodePool};
use crate::context::Context;
use crate::seams::KubeError;
use crate::seams::kube::{ObjectKey, Patch, ResourceKind};
use crate::validation::validate_nodepool;

/// Reasons this controller writes (upstream's, where upstream has one).
pub mod reason {
    pub const VALIDATION_FAILED: &str = "NodePoolValidationFailed";
    pub const NODE_CLASS_NOT_FOUND: &str = "NodeClassNotFound";
    pub const NODE_CLASS_TERMINATING: &str = "NodeClassTerminating";
    pub const NODE_CLASS_READINESS_UNKNOWN: &str = "NodeClassReadinessUnknown";
    pub const AWAITING_RECONCILIATION: &str = "AwaitingReconciliation";
    pub const REGISTRATION_FAILED: &str = "RegistrationFailed";
}

/// The NodePool readiness controller.
pub struct Readiness {
    ctx: Arc<Context>,
}

impl Readiness {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self { ctx }
    }

    /// Recomputes every NodePool's conditions and writes those that changed.
    pub async fn reconcile_all(&self) -> Result<(), KubeError> {
        let (pools, classes) = {
            let mut state = self.ctx.state.lock().await;
            state.pools.sync(self.ctx.kube.as_ref()).await?;
            state.node_classes.sync(self.ctx.kube.as_ref()).await?;
            (state.pools.to_vec(), state.node_classes.to_vec())
        };
        let now = self.ctx.now();
        let mut errors = crate::runtime::PassErrors::default();
        for pool in pools {
            if pool.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let class_ref = &pool.spec.template.spec.node_class_ref;
            let class = classes
                .iter()
                .find(|c| c.name_any() == class_ref.name)
                .map(|c| &**c);
            let Some(status) = conditions_of(&pool, class, now) else {
                continue;
            };
            let key = ObjectKey::cluster(pool.name_any());
            let patch = json!({
                "metadata": {"resourceVersion": pool.metadata.resource_version},
                "status": status,
            });
            match self
                .ctx
                .kube
                .patch_status(&ResourceKind::NODE_POOL, &key, &Patch::Merge(patch))
                .await
            {
                Ok(_) | Err(KubeError::NotFound(_)) | Err(KubeError::Conflict(_)) => {}
                // The other pools are still written ([`crate::runtime::pass`]).
                Err(err) => {
                    errors.keep::<()>(Err(err));
                }
            }
        }
        errors.finish(())
    }
}

/// The status fields to write for `pool` (its conditions and the class generation it saw), or
/// `None` when nothing changed.
pub fn conditions_of(
    pool: &NodePool,
    class: Option<&EC2NodeClass>,
    now: Timestamp,
) -> Option<serde_json::Value> {
    let status = pool.status.clone().unwrap_or_default();
    let mut list: Vec<Condition> = status.conditions.clone();
    let generation = pool.metadata.generation;
    let mut changed = false;
    // The verdict this generation already got, if the condition records one: the spec is what
    // is validated, and the API server bumps the generation whenever it changes. Re-validating
    // (serializing the pool, looking up its remembered verdict) on every pass was 5 % of a swarm
    // seed's time.
    let recorded = list.iter().find(|c| {
        c.type_ == cond::VALIDATION_SUCCEEDED
            && generation.is_some()
            && c.observed_generation == generation
            && matches!(c.status, ConditionStatus::True | ConditionStatus::False)
    });
    let validation = match recorded {
        Some(c) => (c.status, c.reason.clone(), c.message.clone()),
        None => match validate_nodepool(pool) {
            Ok(()) => (
                ConditionStatus::True,
                cond::VALIDATION_SUCCEEDED.to_string(),
                String::new(),
            ),
            Err(violations) => (
                ConditionStatus::False,
                reason::VALIDATION_FAILED.to_string(),
                violations.to_string(),
            ),
        },
    };
    changed |= conditions::set(
        &mut list,
        cond::VALIDATION_SUCCEEDED,
        validation.0,
        &validation.1,
        &validation.2,
        generation,
        now,
    );
    let (class_status, class_reason, class_message) = node_class_readiness(class);
    changed |= conditions::set(
        &mut list,
        cond::NODE_CLASS_READY,
        class_status,
        &class_reason,
        &class_message,
        generation,
        now,
    );
    let class_generation = class.and_then(|c| c.metadata.generation);
    let registration = conditions::get(&list, cond::NODE_REGISTRATION_HEALTHY);
    let stale = registration.is_none_or(|c| c.observed_generation != generation)
        || (class.is_some() && status.node_class_observed_generation != class_generation);
    if stale {
        changed |= conditions::set(
            &mut list,
            cond::NODE_REGISTRATION_HEALTHY,
            ConditionStatus::Unknown,
            reason::AWAITING_RECONCILIATION,
            "the NodePool or its NodeClass changed; no node has registered since",
            generation,
            now,
        );
    }
    changed |= conditions::set_ready(&mut list, &cond::READY_DEPENDENTS, generation, now);
    let observed_changed =
        class.is_some() && status.node_class_observed_generation != class_generation;
    if !changed && !observed_changed {
        return None;
    }
    let mut out = json!({ "conditions": list });
    if class.is_some() {
        out["nodeClassObservedGeneration"] = json!(class_generation);
    }
    Some(out)
}

/// `NodeClassReady` from the class: its `Ready`, or why there is none.
fn node_class_readiness(class: Option<&EC2NodeClass>) -> (ConditionStatus, String, String) {
    let Some(class) = class else {
        return (
            ConditionStatus::False,
            reason::NODE_CLASS_NOT_FOUND.into(),
            "NodeClass not found on cluster".into(),
        );
    };
    if class.metadata.deletion_timestamp.is_some() {
        return (
            ConditionStatus::False,
            reason::NODE_CLASS_TERMINATING.into(),
            "NodeClass is terminating".into(),
        );
    }
    let ready = class
        .status
        .as_ref()
        .and_then(|s| conditions::get(&s.conditions, conditions::READY));
    match ready {
        Some(c) if c.status == ConditionStatus::True => (
            ConditionStatus::True,
            cond::NODE_CLASS_READY.into(),
            String::new(),
        ),
        Some(c) if c.status == ConditionStatus::False => {
            (ConditionStatus::False, c.reason.clone(), c.message.clone())
        }
        _ => (
            ConditionStatus::Unknown,
            reason::NODE_CLASS_READINESS_UNKNOWN.into(),
            "NodeClass readiness unknown".into(),
        ),
    }
}

/// The NodeClaim lifecycle's side of `NodeRegistrationHealthy`: a node of `pool` registered
/// (`True`) or one timed out without registering (`False`, `RegistrationFailed`). Written only on
/// a change; a failed write is logged and left for the next registration (the condition is
/// informational).
pub async fn record_registration(ctx: &Context, pool: &str, registered: bool) {
    let key = ObjectKey::cluster(pool);
    let found = match ctx.kube.get(&ResourceKind::NODE_POOL, &key).await {
        Ok(Some(value)) => match serde_json::from_value::<NodePool>(value) {
            Ok(found) => found,
            Err(_) => return,
        },
        Ok(None) => return,
        Err(err) => {
            tracing::debug!(%pool, %err, "NodeRegistrationHealthy not written; the next registration retries");
            return;
        }
    };
    let mut list = found.status.clone().unwrap_or_default().conditions;
    let (status, reason, message) = if registered {
        (ConditionStatus::True, cond::NODE_REGISTRATION_HEALTHY, "")
    } else {
        (
            ConditionStatus::False,
            reason::REGISTRATION_FAILED,
            "a node launched for this NodePool did not register within the registration timeout",
        )
    };
    let already =
        conditions::get(&list, cond::NODE_REGISTRATION_HEALTHY).is_some_and(|c| c.status == status);
    if already {
        return;
    }
    conditions::set(
        &mut list,
        cond::NODE_REGISTRATION_HEALTHY,
        status,
        reason,
        message,
        found.metadata.generation,
        ctx.now(),
    );
    let patch = json!({
        "metadata": {"resourceVersion": found.metadata.resource_version},
        "status": {"conditions": list},
    });
    if let Err(err) = ctx
        .kube
        .patch_status(&ResourceKind::NODE_POOL, &key, &Patch::Merge(patch))
        .await
    {
        tracing::debug!(%pool, %err, "NodeRegistrationHealthy not written; the next registration retries");
    }
}
