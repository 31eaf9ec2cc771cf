//! The EC2 instance-status health controller (upstream's `interruption.instancestatus`, on without
//! a gate since v1.12). Every [`INSTANCE_STATUS_INTERVAL`] it asks `DescribeInstanceStatus` for
//! running instances that are impaired or have a scheduled event, and acts on the NodeClaims that
//! own them, as upstream does:
//!
//! - an instance or system status check that has failed for at least [`UNHEALTHY_THRESHOLD`]:
//!   forceful termination. `karpenter.sh/nodeclaim-termination-timestamp` is set to now and the
//!   claim deleted, so termination deletes its pods at once (past PodDisruptionBudgets and
//!   do-not-disrupt, as at the end of a terminationGracePeriod): a node that cannot be reached
//!   cannot drain gracefully, and its pods are better rescheduled now;
//! - a scheduled event (`instance-reboot`, `system-reboot`, `system-maintenance`,
//!   `instance-retirement`, `instance-stop`): the claim is deleted and drains gracefully, its
//!   replacement provisioned like any deleting claim's.
//!
//! Instances no NodeClaim owns are left alone (the cluster's other nodes are not ours to act on).
//! Each (instance, category) is counted once in
//! `karpenter_interruption_instance_status_unhealthy_total` while it stays unhealthy. Acting is
//! idempotent: a claim already being deleted is not deleted again, and the annotation is written
//! only once. Without `ec2:DescribeInstanceStatus` in the IAM policy the controller logs the
//! missing permission and does nothing, as upstream.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use kube_core::ResourceExt;
use serde_json::json;

use super::handler::{Acted, interrupt};
use super::messages::Kind;
use crate::api::labels::TERMINATION_TIMESTAMP_ANNOTATION;
use crate::api::{NodeClaim, ProviderId};
use crate::context::Context;
use crate::metrics::CategoryLabels;
use crate::replacement::{Interruption, rfc3339};
use crate::seams::ec2::{Filter, InstanceStatus, StatusCheck};
use crate::seams::kube::{ObjectKey, Patch, ResourceKind};
use crate::seams::{Ec2Error, KubeError};

/// How often EC2 is asked (upstream: every minute).
pub const INSTANCE_STATUS_INTERVAL: Duration = Duration::from_secs(60);

/// How long a status check must have failed before the instance is replaced (upstream: 120 s):
/// EC2 marks a check failed for brief blips that recover on their own.
pub const UNHEALTHY_THRESHOLD: Duration = Duration::from_secs(120);

/// The scheduled events that take an instance away (EC2's `event.code` values).
pub const SCHEDULED_EVENT_CODES: [&str; 5] = [
    "instance-reboot",
    "system-reboot",
    "system-maintenance",
    "instance-retirement",
    "instance-stop",
];

/// Operating errors of one pass; the pass is tried again at the next interval.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HealthError {
    #[error(transparent)]
    Ec2(#[from] Ec2Error),
    #[error(transparent)]
    Kube(#[from] KubeError),
}

/// What one pass found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HealthReport {
    /// (claim, kind) for every claim acted on, in claim order.
    pub acted: Vec<(String, Kind)>,
    /// Unhealthy instances no NodeClaim owns (left alone).
    pub unowned: usize,
}

/// The categories of `DescribeInstanceStatus`, as upstream's metric labels name them.
fn category_label(kind: Kind) -> &'static str {
    match kind {
        Kind::InstanceStatus => "InstanceStatus",
        Kind::SystemStatus => "SystemStatus",
        _ => "EventStatus",
    }
}

/// Whether a check has failed for at least [`UNHEALTHY_THRESHOLD`] at `now` (a failed check
/// without a start time counts, as upstream reads a missing time as long ago).
fn failed_long_enough(checks: &[StatusCheck], now: Timestamp) -> bool {
    checks.iter().any(|c| {
        c.status == "failed"
            && c.impaired_since.is_none_or(|since| {
                now.duration_since(since).unsigned_abs() >= UNHEALTHY_THRESHOLD && since <= now
            })
    })
}

/// The unhealthy categories of one instance at `now`, in a fixed order.
pub fn unhealthy(status: &InstanceStatus, now: Timestamp) -> Vec<Kind> {
    let mut kinds = Vec::new();
    if failed_long_enough(&status.instance_checks, now) {
        kinds.push(Kind::InstanceStatus);
    }
    if failed_long_enough(&status.system_checks, now) {
        kinds.push(Kind::SystemStatus);
    }
    if status
        .events
        .iter()
        .any(|code| SCHEDULED_EVENT_CODES.contains(&code.as_str()))
    {
        kinds.push(Kind::EventStatus);
    }
    kinds
}

/// Polls instance status and replaces impaired instances' NodeClaims.
pub struct InstanceHealth {
    ctx: Arc<Context>,
    /// (instance, category) already counted while it stays unhealthy.
    seen: Mutex<BTreeSet<(String, &'static str)>>,
}

impl InstanceHealth {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self {
            ctx,
            seen: Mutex::new(BTreeSet::new()),
        }
    }

    /// One pass: the three `DescribeInstanceStatus` queries upstream makes (impaired instance
    /// checks, impaired system checks, scheduled events), then the actions.
    pub async fn reconcile(&self) -> Result<HealthReport, HealthError> {
        let statuses = match self.statuses().await {
            Ok(statuses) => statuses,
            Err(Ec2Error::Unauthorized { code, message }) => {
                tracing::error!(%code, %message, "ec2:DescribeInstanceStatus is not allowed; add it to the controller's IAM policy to replace impaired instances");
                return Ok(HealthReport::default());
            }
            Err(err) => return Err(err.into()),
        };
        let now = self.ctx.now();
        let unhealthy: Vec<(&String, Vec<Kind>)> = statuses
            .iter()
            .map(|(id, status)| (id, unhealthy(status, now)))
            .filter(|(_, kinds)| !kinds.is_empty())
            .collect();
        let mut report = HealthReport::default();
        let mut current = BTreeSet::new();
        if !unhealthy.is_empty() {
            // From the cache, in name order (see `Reflector::read`).
            let cached = self
                .ctx
                .state
                .lock()
                .await
                .claims
                .read(self.ctx.kube.as_ref())
                .await?;
            let mut claims: Vec<NodeClaim> = cached.iter().map(|c| NodeClaim::clone(c)).collect();
            for (instance, kinds) in unhealthy {
                let owner = claims.iter_mut().find(|c| {
                    c.status
                        .as_ref()
                        .and_then(|s| s.provider_id.as_deref())
                        .and_then(ProviderId::instance_id_of)
                        .is_some_and(|id| &id == instance)
                });
                let Some(claim) = owner else {
                    report.unowned += 1;
                    continue;
                };
                for kind in kinds {
                    current.insert((instance.clone(), category_label(kind)));
                    self.count(instance, kind);
                    if self.act(claim, kind, now).await? {
                        report.acted.push((claim.name_any(), kind));
                    }
                }
            }
        }
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|key| current.contains(key));
        Ok(report)
    }

    /// Running instances that are impaired or have a scheduled event, by id (each once).
    async fn statuses(&self) -> Result<BTreeMap<String, InstanceStatus>, Ec2Error> {
        let queries = [
            vec![Filter::new("instance-status.status", &["impaired"])],
            vec![Filter::new("system-status.status", &["impaired"])],
            vec![Filter::new("event.code", &SCHEDULED_EVENT_CODES)],
        ];
        let mut out = BTreeMap::new();
        for filters in &queries {
            for status in self.ctx.ec2.describe_instance_status(filters).await? {
                out.entry(status.instance_id.clone()).or_insert(status);
            }
        }
        Ok(out)
    }

    /// Counts (instance, category) the first time it is seen unhealthy.
    fn count(&self, instance: &str, kind: Kind) {
        let label = category_label(kind);
        let first = self
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((instance.to_string(), label));
        if first {
            tracing::info!(
                instance,
                category = label,
                "detected an unhealthy instance owned by the cluster"
            );
            self.ctx
                .metrics
                .instance_status_unhealthy
                .get_or_create(&CategoryLabels {
                    category: label.to_string(),
                })
                .inc();
        }
    }

    /// Forceful termination for failed checks, a graceful delete for scheduled events. Whether
    /// the claim was deleted now.
    async fn act(
        &self,
        claim: &mut NodeClaim,
        kind: Kind,
        now: Timestamp,
    ) -> Result<bool, KubeError> {
        let forceful = matches!(kind, Kind::InstanceStatus | Kind::SystemStatus);
        if forceful
            && !claim
                .annotations()
                .contains_key(TERMINATION_TIMESTAMP_ANNOTATION)
        {
            let patch = json!({"metadata": {"annotations": {TERMINATION_TIMESTAMP_ANNOTATION: rfc3339(now)}}});
            match self
                .ctx
                .kube
                .patch(
                    &ResourceKind::NODE_CLAIM,
                    &ObjectKey::cluster(claim.name_any()),
                    &Patch::Merge(patch),
                )
                .await
            {
                Ok(_) => {
                    claim
                        .metadata
                        .annotations
                        .get_or_insert_default()
                        .insert(TERMINATION_TIMESTAMP_ANNOTATION.to_string(), rfc3339(now));
                }
                Err(KubeError::NotFound(_)) => return Ok(false),
                Err(err) => return Err(err),
            }
        }
        let interruption = Interruption {
            kind: kind.label(),
            eviction_deadline: None,
        };
        Ok(matches!(
            interrupt(&self.ctx, claim, kind, &interruption).await?,
            Acted::Deleted
        ))
    }
}
