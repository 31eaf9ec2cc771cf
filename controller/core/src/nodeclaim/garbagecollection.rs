//! Garbage collection (upstream's `nodeclaim/garbagecollection` controller): instances and
//! NodeClaims that lost each other. An instance of ours ([`is_ours`]: Karpenter's three tags, not
//! the `kubernetes.io/cluster` tag node groups share) no NodeClaim knows is terminated
//! once it is older than the grace period (a launch whose claim was deleted, or one a crash left
//! behind); a launched claim whose instance is gone — missing from that list and from a
//! DescribeInstances by its id — is deleted once its launch has settled.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use super::{LifecycleError, delete_claim};
use crate::api::conditions::{self, nodeclaim as cond};
use crate::api::labels::{EC2NODECLASS_TAG, NODECLAIM_TAG, NODEPOOL_LABEL};
use crate::api::{NodeClaim, ProviderId};
use crate::context::Context;
use crate::metrics::CloudMethod;
use crate::seams::ec2::{Filter, Instance, InstanceState};

/// How often a pass runs unless the options say otherwise (upstream: every 2 minutes once
/// settled).
pub const GC_INTERVAL: Duration = Duration::from_secs(120);

/// The wait before the pass after a failed one, doubling with each failure in a row up to the
/// interval. Upstream's collector is a controller-runtime singleton: a reconcile that returns an
/// error is requeued by the workqueue's default controller rate limiter, whose per-item
/// exponential backoff starts at 5 ms and doubles (capped at 1,000 s; here at the interval), not
/// after the next 2 minutes, so an orphaned instance outlives a throttled DescribeInstances or
/// TerminateInstances by about as long as the throttling lasts. (It was 1 s, 200 times upstream's:
/// six failures in a row under `ec2-throttle` and `ec2-5xx` then cost 63 s, and swarm seed 350's
/// orphan, force-deleted 4 s after a pass, outlived the 150 s bound by a second.)
pub const GC_RETRY_BASE: Duration = Duration::from_millis(5);

/// The garbage-collection controller.
pub struct GarbageCollector {
    ctx: Arc<Context>,
    /// When the last pass ran (successful or not).
    last_run: Option<Timestamp>,
    /// Failed passes in a row since the last successful one.
    failures: u32,
}

fn instance_id(claim: &NodeClaim) -> Option<String> {
    ProviderId::instance_id_of(claim.status.as_ref()?.provider_id.as_deref()?)
}

/// Whether an instance with `tags` is Karpenter's in `cluster` (upstream's `instance.List`
/// scope): it carries `karpenter.sh/nodepool`, `karpenter.k8s.aws/ec2nodeclass` and
/// `eks:eks-cluster-name=CLUSTER`. `kubernetes.io/cluster/NAME=owned` alone is not enough: node
/// groups and self-managed nodes carry it too, and GC must never touch them.
pub fn is_ours(tags: &BTreeMap<String, String>, cluster: &str) -> bool {
    tags.contains_key(NODEPOOL_LABEL)
        && tags.contains_key(EC2NODECLASS_TAG)
        && tags.get(EKS_CLUSTER_NAME_TAG).is_some_and(|c| c == cluster)
}

/// The DescribeInstances filters selecting [`is_ours`] instances.
pub fn ours_filters(cluster: &str) -> Vec<Filter> {
    vec![
        Filter::new("tag-key", &[NODEPOOL_LABEL]),
        Filter::new("tag-key", &[EC2NODECLASS_TAG]),
        Filter::new(format!("tag:{EKS_CLUSTER_NAME_TAG}"), &[cluster]),
    ]
}

/// The tag EKS and Karpenter put on a cluster's instances, naming the cluster.
pub const EKS_CLUSTER_NAME_TAG: &str = "eks:eks-cluster-name";

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
            failures: 0,
        }
    }

    /// How long after the last pass the next is due: the interval, or after a failed pass
    /// [`GC_RETRY_BASE`] doubled per failure in a row, at most the interval.
    pub fn next_pass_after(&self) -> Duration {
        let configured = self.ctx.options.gc_interval.unwrap_or(GC_INTERVAL);
        match self.failures {
            0 => configured,
            n => GC_RETRY_BASE
                .saturating_mul(1u32 << (n - 1).min(16))
                .min(configured),
        }
    }

    /// Runs a pass if none ran yet or [`GarbageCollector::next_pass_after`] has passed since
    /// the last one; `None` when it is not due.
    pub async fn collect_if_due(&mut self) -> Option<Result<(usize, usize), LifecycleError>> {
        let now = self.ctx.now();
        let interval = self.next_pass_after();
        let due = self
            .last_run
            .is_none_or(|t| now.duration_since(t).unsigned_abs() >= interval);
        if !due {
            return None;
        }
        let collected = self.collect().await;
        self.last_run = Some(now);
        self.failures = match collected {
            Ok(_) => 0,
            Err(_) => self.failures.saturating_add(1),
        };
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
        let cluster = &self.ctx.options.lifecycle.cluster_name;
        let metrics = &self.ctx.metrics;
        // Upstream's `List` (core's claim GC) and `Delete` (the AWS provider's instance GC).
        let filters = ours_filters(cluster);
        let list = self.ctx.ec2.describe_instances(&[], &filters);
        let instances: Vec<Instance> = metrics
            .cloud_call("nodeclaim.garbagecollection", CloudMethod::List, list)
            .await?
            .into_iter()
            .filter(|i| is_ours(&i.tags, cluster))
            .collect();
        let leaked = self.leaked(&claims, &instances, now);
        if !leaked.is_empty() {
            let delete = self.ctx.ec2.terminate_instances(&leaked);
            metrics
                .cloud_call("instance.garbagecollection", CloudMethod::Delete, delete)
                .await?;
        }
        let states: BTreeMap<&str, InstanceState> = instances
            .iter()
            .map(|i| (i.instance_id.as_str(), i.state))
            .collect();
        let deleted = self.collect_claims(&claims, &states, now).await?;
        Ok((leaked.len(), deleted))
    }

    /// Deletes launched claims (past the grace period, not deleting) whose instance is gone:
    /// missing from the tag-scoped list (`listed`) or terminated, *and* confirmed so by a
    /// DescribeInstances by id. The list finds instances by Karpenter's tags only, and tags can be
    /// deleted by someone else (a tag-policy clean-up: the `tags-lost` fault); upstream guards the
    /// same gap by sparing a claim whose Node is still Ready, and its `Get` addresses an instance
    /// by id. Asking EC2 by id is exact: a stripped instance that runs is not gone, and its claim
    /// keeps serving (deleting it would drain a healthy node, and a do-not-disrupt pod would hold
    /// that drain forever). Returns the claims deleted.
    async fn collect_claims(
        &self,
        claims: &[Arc<NodeClaim>],
        listed: &BTreeMap<&str, InstanceState>,
        now: Timestamp,
    ) -> Result<usize, LifecycleError> {
        let grace = self.ctx.options.lifecycle.gc_grace;
        let suspects: Vec<(&Arc<NodeClaim>, String)> = claims
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .filter_map(|c| Some((c, instance_id(c)?)))
            .filter(|(c, _)| {
                c.status
                    .as_ref()
                    .and_then(|s| conditions::get(&s.conditions, cond::LAUNCHED))
                    .is_some_and(|l| {
                        now.duration_since(l.last_transition_time.0).unsigned_abs() >= grace
                    })
            })
            .filter(|(_, id)| {
                matches!(
                    listed.get(id.as_str()),
                    None | Some(InstanceState::Terminated)
                )
            })
            .collect();
        if suspects.is_empty() {
            return Ok(0);
        }
        let ids: Vec<String> = suspects
            .iter()
            .map(|(_, id)| id.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let get = self.ctx.ec2.describe_instances(&ids, &[]);
        let alive: BTreeSet<String> = self
            .ctx
            .metrics
            .cloud_call("nodeclaim.garbagecollection", CloudMethod::Get, get)
            .await?
            .into_iter()
            .filter(|i| i.state != InstanceState::Terminated)
            .map(|i| i.instance_id)
            .collect();
        let mut deleted = 0;
        for (claim, id) in suspects {
            if !alive.contains(&id) {
                delete_claim(&self.ctx, claim).await?;
                deleted += 1;
            }
        }
        Ok(deleted)
    }

    /// Live instances no claim knows by provider id, nor by the claim-name tag of a claim with no
    /// instance yet (one that just launched may not have written its status), older than the
    /// grace period. An instance tagged with a claim that records another instance is a
    /// duplicate (a launch retried after its answer was lost) and is collected: the name alone
    /// would keep it running, unowned, for as long as the claim lives.
    fn leaked(
        &self,
        claims: &[Arc<NodeClaim>],
        instances: &[Instance],
        now: Timestamp,
    ) -> Vec<String> {
        let known: BTreeSet<String> = claims.iter().filter_map(|c| instance_id(c)).collect();
        let names: BTreeSet<String> = claims
            .iter()
            .filter(|c| instance_id(c).is_none())
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
