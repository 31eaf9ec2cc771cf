//! Expiration: a NodeClaim older than its `expireAfter` is deleted, forcefully — outside budgets
//! and `do-not-disrupt`, with no replacement launched first (the provisioner provisions for its
//! pods as they are displaced); its `terminationGracePeriod` bounds the drain. Upstream runs this
//! as its own controller; so does this crate ([`Expiration::pass`]).

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use kube_core::ResourceExt;

use super::view::{ClusterView, NodeFacts};
use super::{Command, CommandNode, Method, candidates};
use crate::api::NodeClaim;
use crate::api::common::parse_duration;
use crate::catalog::Catalog;
use crate::context::Context;
use crate::events::{EventType, Reference};
use crate::seams::KubeError;
use crate::seams::kube::{DeleteOptions, ObjectKey, ResourceKind};

/// When a claim created at `created` with `expire_after` (`Never` or a duration) expires.
pub fn expires_at(created: Timestamp, expire_after: &str) -> Option<Timestamp> {
    if expire_after == "Never" {
        return None;
    }
    let duration = SignedDuration::try_from(parse_duration(expire_after).ok()?).ok()?;
    created.checked_add(duration).ok()
}

/// Whether `claim` is past its `expireAfter` at `now` (and not already being deleted).
pub fn is_expired(claim: &NodeClaim, now: Timestamp) -> bool {
    claim.metadata.deletion_timestamp.is_none()
        && claim
            .metadata
            .creation_timestamp
            .as_ref()
            .and_then(|t| expires_at(t.0, &claim.spec.expire_after))
            .is_some_and(|at| at <= now)
}

fn node_expired(facts: &NodeFacts, now: Timestamp) -> bool {
    !facts.deleting
        && match (facts.created, facts.expire_after) {
            (Some(created), Some(after)) => SignedDuration::try_from(after)
                .ok()
                .and_then(|d| created.checked_add(d).ok())
                .is_some_and(|at| at <= now),
            _ => false,
        }
}

/// One `Expired` command per managed node past its `expireAfter`, by node name (for the dry
/// run; the controller deletes the claims directly).
pub fn commands(view: &ClusterView, catalog: &Catalog) -> Vec<Command> {
    view.facts
        .values()
        .filter(|f| node_expired(f, view.now))
        .map(|f| Command {
            method: Method::Expired,
            nodes: vec![CommandNode {
                node: f.node.clone(),
                claim: f.claim.clone(),
                pool: f.pool.clone(),
            }],
            replacements: Vec::new(),
            savings_per_hour: candidates::price(f, catalog).unwrap_or(0.0),
        })
        .collect()
}

/// The expiration controller.
pub struct Expiration {
    ctx: Arc<Context>,
}

impl Expiration {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self { ctx }
    }

    /// Deletes every expired NodeClaim; returns their names. A failed delete is retried on the
    /// next pass (the claim is still expired then).
    pub async fn pass(&self) -> Result<Vec<String>, KubeError> {
        let now = self.ctx.now();
        let expired: Vec<Arc<NodeClaim>> = {
            let mut state = self.ctx.state.lock().await;
            state.claims.sync(self.ctx.kube.as_ref()).await?;
            state
                .claims
                .iter()
                .filter(|c| is_expired(c, now))
                .cloned()
                .collect()
        };
        let mut deleted = Vec::new();
        for claim in expired {
            let name = claim.name_any();
            let options = DeleteOptions {
                precondition_uid: claim.uid(),
                ..Default::default()
            };
            match self
                .ctx
                .kube
                .delete(
                    &ResourceKind::NODE_CLAIM,
                    &ObjectKey::cluster(&name),
                    &options,
                )
                .await
            {
                Ok(_) => {
                    let message = format!("expireAfter {} reached", claim.spec.expire_after);
                    self.ctx
                        .recorder
                        .publish(
                            Reference::claim(&claim),
                            EventType::Normal,
                            "Expired",
                            message,
                        )
                        .await;
                    deleted.push(name);
                }
                Err(err) => {
                    tracing::warn!(claim = %name, %err, "deleting an expired claim failed; retrying next pass")
                }
            }
        }
        Ok(deleted)
    }
}
