//! The command queue, kept in the API server: starting a command, following it, finishing or
//! undoing it.
//!
//! Starting writes, in order: the `karpenter.sh/disruption-command` annotation and the
//! `DisruptionReason` condition on every claim; the `karpenter.sh/disrupted:NoSchedule` taint on
//! every node; the replacement NodeClaims (annotated `karpenter.sh/replaces` with the claims they
//! replace). A delete (no replacements) then deletes the claims at once; a replace waits until
//! every replacement is `Initialized`, then deletes them (termination drains). A replacement that
//! disappears, fails to be created, or does not initialize within [`COMMAND_TIMEOUT`] abandons
//! the command: taints and annotations come off, uninitialized replacements are deleted, and the
//! nodes are not tried again for [`FAILED_COMMAND_BACKOFF`].
//!
//! Because every step is in the API server, [`Queue::progress`] run after a restart finds each
//! half-done command by its annotation and carries it on (or undoes it), and removes disrupted
//! taints no command or termination accounts for.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Node;
use kube_core::ResourceExt;
use serde_json::{Value, json};

use super::Command;
use crate::api::conditions::{self, nodeclaim as cond};
use crate::api::labels::{
    DISRUPTED_TAINT_KEY, DISRUPTION_COMMAND_ANNOTATION, DISRUPTION_REPLACEMENT_ANNOTATION,
};
use crate::api::{ConditionStatus, NodeClaim, NodePool};
use crate::context::Context;
use crate::events::{EventType, Reference};
use crate::provisioning::nodeclaim_for;
use crate::replacement::{self, rfc3339};
use crate::seams::KubeError;
use crate::seams::kube::{DeleteOptions, ObjectKey, Patch, ResourceKind};

/// Longest a command waits for its replacements to initialize (upstream: at least 10 minutes).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// How long the nodes of an abandoned command are left alone before they are candidates again.
pub const FAILED_COMMAND_BACKOFF: Duration = Duration::from_secs(5 * 60);

/// A command's record on each of its claims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub method: String,
    pub replacements: usize,
    /// `<first claim>@<start time>`.
    pub id: String,
    pub started: Timestamp,
}

impl Record {
    pub fn encode(&self) -> String {
        format!("{} {} {}", self.method, self.replacements, self.id)
    }

    pub fn decode(text: &str) -> Option<Self> {
        let mut parts = text.split_whitespace();
        let method = parts.next()?.to_string();
        let replacements = parts.next()?.parse().ok()?;
        let id = parts.next()?.to_string();
        let started = id.rsplit_once('@')?.1.parse().ok()?;
        Some(Self {
            method,
            replacements,
            id,
            started,
        })
    }

    pub fn of(claim: &NodeClaim) -> Option<Self> {
        Self::decode(claim.annotations().get(DISRUPTION_COMMAND_ANNOTATION)?)
    }
}

/// What following one command did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Waiting for replacements to initialize.
    Waiting { id: String },
    /// Its claims were deleted (termination takes over).
    Terminated { id: String, claims: Vec<String> },
    /// Undone, with why.
    Abandoned { id: String, reason: String },
}

/// The writes of the queue over the context.
pub(crate) struct Queue<'c> {
    pub ctx: &'c Context,
}

fn claim_key(name: &str) -> ObjectKey {
    ObjectKey::cluster(name)
}

impl Queue<'_> {
    /// Starts `command` (see the module docs). `Err` after undoing what was written.
    pub async fn start(
        &self,
        command: &Command,
        claims: &BTreeMap<String, std::sync::Arc<NodeClaim>>,
        nodes: &BTreeMap<String, std::sync::Arc<Node>>,
        pools: &[NodePool],
        now: Timestamp,
    ) -> Result<Vec<String>, String> {
        let members: Vec<&NodeClaim> = command
            .nodes
            .iter()
            .filter_map(|n| claims.get(n.claim.as_deref()?).map(|c| &**c))
            .collect();
        let first = members.first().map(|c| c.name_any()).unwrap_or_default();
        let record = Record {
            method: command.method.as_str().to_string(),
            replacements: command.replacements.len(),
            id: format!("{first}@{}", rfc3339(now)),
            started: now,
        };
        let written = self.mark(&members, &record, command, now).await;
        let written = match written {
            Ok(()) => self.taint_all(command, nodes).await,
            Err(err) => Err(err),
        };
        if let Err(err) = written {
            let reason = format!("starting the command failed: {err}");
            self.undo(&members, nodes, &reason).await;
            return Err(reason);
        }
        let mut created = Vec::new();
        let replaced: std::collections::BTreeSet<String> =
            members.iter().map(|c| c.name_any()).collect();
        for r in &command.replacements {
            let Some(pool) = pools
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(r.planned.node_pool.as_str()))
            else {
                continue;
            };
            let mut claim = nodeclaim_for(pool, &r.planned);
            replacement::set_replaces(&mut claim, &replaced);
            claim
                .annotations_mut()
                .insert(DISRUPTION_REPLACEMENT_ANNOTATION.into(), record.id.clone());
            let value = serde_json::to_value(&claim).map_err(|e| e.to_string());
            let result = match value {
                Ok(v) => self.ctx.kube.create(&ResourceKind::NODE_CLAIM, v).await,
                Err(e) => Err(KubeError::Decode(e)),
            };
            match result {
                Ok(object) => {
                    self.ctx
                        .metrics
                        .record_created(&command.method.as_str().to_lowercase(), &object);
                    self.ctx.state.lock().await.claims.observe(object.clone());
                    created.push(
                        object["metadata"]["name"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                    );
                }
                Err(err) => {
                    let reason = format!("creating a replacement failed: {err}");
                    self.undo(&members, nodes, &reason).await;
                    return Err(reason);
                }
            }
        }
        for claim in &members {
            let message = match command.replacements.len() {
                0 => format!(
                    "Disrupting NodeClaim: {} (deleting)",
                    command.method.as_str()
                ),
                n => format!(
                    "Disrupting NodeClaim: {}, launching {n} replacement(s)",
                    command.method.as_str()
                ),
            };
            self.ctx
                .recorder
                .publish(
                    Reference::claim(claim),
                    EventType::Normal,
                    "DisruptionLaunching",
                    message,
                )
                .await;
        }
        if command.replacements.is_empty() {
            self.terminate(&members).await;
        }
        Ok(created)
    }

    /// Annotates every claim with the command and sets its `DisruptionReason` condition.
    async fn mark(
        &self,
        members: &[&NodeClaim],
        record: &Record,
        command: &Command,
        now: Timestamp,
    ) -> Result<(), KubeError> {
        for claim in members {
            let key = claim_key(&claim.name_any());
            let annotated = self
                .ctx
                .kube
                .patch(
                    &ResourceKind::NODE_CLAIM,
                    &key,
                    &Patch::Merge(json!({"metadata": {"annotations": {
                        DISRUPTION_COMMAND_ANNOTATION: record.encode()
                    }}})),
                )
                .await?;
            let message = format!(
                "{} with {} replacement(s), saving ${:.4}/h",
                command.method.as_str(),
                command.replacements.len(),
                command.savings_per_hour
            );
            self.set_condition(
                claim,
                version_of(&annotated),
                ConditionStatus::True,
                command.method.as_str(),
                &message,
                now,
            )
            .await?;
        }
        Ok(())
    }

    /// Writes the claim's condition list, conditional on `version` (the claim's as this pass last
    /// wrote it): a concurrent edit is a conflict, not overwritten.
    async fn set_condition(
        &self,
        claim: &NodeClaim,
        version: Option<String>,
        status: ConditionStatus,
        reason: &str,
        message: &str,
        now: Timestamp,
    ) -> Result<(), KubeError> {
        let mut list = claim.status.clone().unwrap_or_default().conditions;
        if !conditions::set(
            &mut list,
            cond::DISRUPTION_REASON,
            status,
            reason,
            message,
            None,
            now,
        ) {
            return Ok(());
        }
        self.ctx
            .kube
            .patch_status(
                &ResourceKind::NODE_CLAIM,
                &claim_key(&claim.name_any()),
                &Patch::Merge(json!({
                    "metadata": {"resourceVersion": version},
                    "status": {"conditions": list},
                })),
            )
            .await
            .map(|_| ())
    }

    async fn taint_all(
        &self,
        command: &Command,
        nodes: &BTreeMap<String, std::sync::Arc<Node>>,
    ) -> Result<(), KubeError> {
        for n in &command.nodes {
            if let Some(node) = nodes.get(&n.node) {
                set_taint(self.ctx, node, true).await?;
            }
        }
        Ok(())
    }

    /// Deletes the command's claims: termination drains and terminates them.
    pub async fn terminate(&self, members: &[&NodeClaim]) {
        for claim in members {
            let options = DeleteOptions {
                precondition_uid: claim.uid(),
                ..Default::default()
            };
            match self
                .ctx
                .kube
                .delete(
                    &ResourceKind::NODE_CLAIM,
                    &claim_key(&claim.name_any()),
                    &options,
                )
                .await
            {
                Ok(_) => {
                    self.ctx
                        .recorder
                        .publish(
                            Reference::claim(claim),
                            EventType::Normal,
                            "DisruptionTerminating",
                            "Disrupting NodeClaim: deleting",
                        )
                        .await;
                }
                Err(err) => {
                    tracing::warn!(claim = %claim.name_any(), %err, "deleting a disrupted claim failed; retried next pass");
                }
            }
        }
    }

    /// Undoes a command on its claims: the taint comes off, the annotation goes, the condition
    /// turns `False` with `reason`. Best effort per claim; what fails is retried by the stale-taint
    /// sweep and the next progress pass.
    pub async fn undo(
        &self,
        members: &[&NodeClaim],
        nodes: &BTreeMap<String, std::sync::Arc<Node>>,
        reason: &str,
    ) {
        let now = self.ctx.now();
        for claim in members {
            let node = claim
                .status
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .and_then(|n| nodes.get(n));
            if let Some(node) = node
                && let Err(err) = set_taint(self.ctx, node, false).await
            {
                tracing::warn!(node = %node.name_any(), %err, "removing the disrupted taint failed");
            }
            let cleared = self
                .ctx
                .kube
                .patch(
                    &ResourceKind::NODE_CLAIM,
                    &claim_key(&claim.name_any()),
                    &Patch::Merge(json!({"metadata": {"annotations": {
                        DISRUPTION_COMMAND_ANNOTATION: Value::Null
                    }}})),
                )
                .await;
            let version = match &cleared {
                Ok(written) => version_of(written),
                Err(err) => {
                    tracing::warn!(claim = %claim.name_any(), %err, "clearing a disruption command failed");
                    claim.metadata.resource_version.clone()
                }
            };
            let _ = self
                .set_condition(
                    claim,
                    version,
                    ConditionStatus::False,
                    "Abandoned",
                    reason,
                    now,
                )
                .await;
            self.ctx
                .recorder
                .publish(
                    Reference::claim(claim),
                    EventType::Warning,
                    "DisruptionAbandoned",
                    format!("Disruption command abandoned: {reason}"),
                )
                .await;
        }
    }
}

/// Adds (`on`) or removes the `karpenter.sh/disrupted:NoSchedule` taint, guarded by the node's
/// resourceVersion so a concurrent taint change is retried instead of overwritten.
/// The resourceVersion of an object a write returned.
fn version_of(written: &Value) -> Option<String> {
    written["metadata"]["resourceVersion"]
        .as_str()
        .map(String::from)
}

pub(crate) async fn set_taint(ctx: &Context, node: &Node, on: bool) -> Result<(), KubeError> {
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let has = taints.iter().any(|t| t.key == DISRUPTED_TAINT_KEY);
    if has == on {
        return Ok(());
    }
    let mut list: Vec<Value> = taints
        .into_iter()
        .filter(|t| t.key != DISRUPTED_TAINT_KEY)
        .map(|t| serde_json::to_value(t).unwrap_or_default())
        .collect();
    if on {
        list.push(json!({"key": DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}));
    }
    ctx.kube
        .patch(
            &ResourceKind::NODE,
            &ObjectKey::cluster(node.name_any()),
            &Patch::Merge(json!({
                "metadata": {"resourceVersion": node.metadata.resource_version},
                "spec": {"taints": list},
            })),
        )
        .await
        .map(|_| ())
}

/// Whether `now` is past a command's timeout.
pub fn timed_out(record: &Record, now: Timestamp) -> bool {
    SignedDuration::try_from(COMMAND_TIMEOUT)
        .ok()
        .and_then(|d| record.started.checked_add(d).ok())
        .is_some_and(|deadline| now >= deadline)
}
