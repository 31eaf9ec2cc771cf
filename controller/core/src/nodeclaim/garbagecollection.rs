//! Garbage collection (upstream's `nodeclaim/garbagecollection` controller): instances and
//! NodeClaims that lost each other. A cluster-tagged instance no NodeClaim knows is terminated
//! once it is older than the grace period (a launch whose claim was deleted, or one a crash left
//! behind); a launched claim whose instance is gone is deleted once its launch has settled.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use super::{LifecycleError, delete_claim};
use crate::api::conditions::{self, nodeclaim as cond};
use crate::api::labels::NODECLAIM_TAG;
use crate::api::{NodeClaim, ProviderId};
use crate::context::Context;
use crate::seams::ec2::{Filter, Instance, InstanceState};

/// How often a pass runs unless the options say otherwise (upstream: every 2 minutes once
/// settled).
pub const GC_INTERVAL: Duration = Duration::from_secs(120);

/// The garbage-collection controller.
pub struct GarbageCollector {
    ctx: Arc<Context>,
    /// When the last pass ran (successful or not).
    last_run: Option<Timestamp>,
}

fn instance_id(claim: &NodeClaim) -> Option<String> {
    ProviderId::instance_id_of(claim.status.as_ref()?.provider_id.as_deref()?)
}

fn gone_for_good(state: InstanceState) -> bool {
    matches!(
        state,
        InstanceState::ShuttingDown | InstanceState::Terminated
    )
}

impl GarbageCollector {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self {
            ctx,
            last_run: None,
        }
    }

    /// Runs a pass if none ran yet or the interval has passed since the last one; `None` when
    /// it is not due.
    pub async fn collect_if_due(&mut self) -> Option<Result<(usize, usize), LifecycleError>> {
        let now = self.ctx.now();
        let interval = self.ctx.options.gc_interval.unwrap_or(GC_INTERVAL);
        let due = self
            .last_run
            .is_none_or(|t| now.duration_since(t).unsigned_abs() >= interval);
        if !due {
            return None;
        }
        let collected = self.collect().await;
        self.last_run = Some(now);
        Some(collected)
    }

    /// One pass. Returns (instances terminated, claims deleted).
    pub async fn collect(&self) -> Result<(usize, usize), LifecycleError> {
        let now = self.ctx.now();
        let claims = {
            let mut state = self.ctx.state.lock().await;
            state.claims.sync(self.ctx.kube.as_ref()).await?;
            state.claims.to_vec()
        };
        let cluster_tag = format!(
            "tag:kubernetes.io/cluster/{}",
            self.ctx.options.lifecycle.cluster_name
        );
        let instances = self
            .ctx
            .ec2
            .describe_instances(&[], &[Filter::new(cluster_tag, &["owned"])])
            .await?;
        let leaked = self.leaked(&claims, &instances, now);
        if !leaked.is_empty() {
            self.ctx.ec2.terminate_instances(&leaked).await?;
        }
        let states: BTreeMap<&str, InstanceState> = instances
            .iter()
            .map(|i| (i.instance_id.as_str(), i.state))
            .collect();
        let mut deleted = 0;
        for claim in &claims {
            let Some(id) = instance_id(claim) else {
                continue;
            };
            let launched_at = claim
                .status
                .as_ref()
                .and_then(|s| conditions::get(&s.conditions, cond::LAUNCHED))
                .map(|c| c.last_transition_time.0);
            let settled = launched_at.is_some_and(|t| {
                now.duration_since(t).unsigned_abs() >= self.ctx.options.lifecycle.gc_grace
            });
            let gone = matches!(
                states.get(id.as_str()),
                None | Some(InstanceState::Terminated)
            );
            if settled && gone && claim.metadata.deletion_timestamp.is_none() {
                delete_claim(&self.ctx, claim).await?;
                deleted += 1;
            }
        }
        Ok((leaked.len(), deleted))
    }

    /// Live instances no claim knows by provider id, nor by the claim-name tag (a claim that
    /// just launched one may not have written its status yet), older than the grace period.
    fn leaked(
        &self,
        claims: &[Arc<NodeClaim>],
        instances: &[Instance],
        now: Timestamp,
    ) -> Vec<String> {
        let known: BTreeSet<String> = claims.iter().filter_map(|c| instance_id(c)).collect();
        let names: BTreeSet<String> = claims
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        instances
            .iter()
            .filter(|i| !gone_for_good(i.state))
            .filter(|i| !known.contains(&i.instance_id))
            .filter(|i| i.tags.get(NODECLAIM_TAG).is_none_or(|n| !names.contains(n)))
            .filter(|i| {
                now.duration_since(i.launch_time).unsigned_abs()
                    >= self.ctx.options.lifecycle.gc_grace
            })
            .map(|i| i.instance_id.clone())
            .collect()
    }
}
