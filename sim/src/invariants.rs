//! Invariants checked after every step, each counted with its first violation:
//! - `nodepool-limits`: no NodePool's NodeClaims together exceed its cpu/memory limits;
//! - `no-leaked-instances`: every live cluster instance belongs to a NodeClaim within the
//!   garbage-collection window;
//! - `pods-fit-nodes`: no node's bound pods request more than it has;
//! - `claims-progress`: no NodeClaim stays un-launched or unregistered past its deadline;
//! - `liveness` (at the end): every pod is running once the workload settles;
//! - the history- and attribution-based ones of [`catalogue`] (`drained-before-terminate`,
//!   `pdb-respected`, `do-not-disrupt-respected`, `claim-storm`, `interruption-rehomed`,
//!   `termination-progress`, `pods-scheduled`), each defined exactly there.
//!
//! `determinism` (the same seed twice gives the same event log) is the swarm's: it needs two runs.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fakecloud::FakeCloud;
use jiff::Timestamp;
use karpenter_core::api::conditions;
use karpenter_core::api::{NodeClaim, NodePool};
use karpenter_core::catalog::CapacityType;
use karpenter_core::resources::Resources;
use karpenter_core::seams::ec2::InstanceState;
use karpenter_core::seams::kube::ResourceKind;
use karpenter_core::seams::{KubeApi, KubeError};
use karpenter_core::state::Reflector;
use serde_json::Value;

use crate::report::InvariantResult;

pub mod catalogue;

pub use catalogue::{Catalogue, Counters, unsettled};

/// Garbage collection's window: grace (30 s) + interval (2 min) + slack for a step.
pub const LEAK_WINDOW: Duration = Duration::from_secs(30 + 120 + 30);
/// Registration timeout (15 min) + slack: a claim older than this must be registered or gone.
pub const CLAIM_DEADLINE: Duration = Duration::from_secs(15 * 60 + 60);

/// What the invariants look at, read once per step.
#[derive(Clone, Debug, Default)]
pub struct Observation {
    pub pods_total: usize,
    pub pods_running: usize,
    pub pods_pending: usize,
    pub pending_names: Vec<String>,
    pub running_names: Vec<String>,
    pub claims: usize,
    pub nodes: usize,
    pub instances_alive: usize,
    /// Live instances by id: (instance type, capacity type).
    pub instances: BTreeMap<String, (String, CapacityType)>,
    /// NodeClaims being deleted.
    pub deleting_claims: usize,
    /// Violations found while reading (named by invariant).
    violations: Vec<(&'static str, String)>,
}

/// The observer's watch-fed view of the API server (the same reflector the controller uses), so
/// a step that changed little costs little to observe.
pub struct ObserverCache {
    pods: Reflector<Value>,
    nodes: Reflector<Value>,
    claims: Reflector<NodeClaim>,
    pools: Reflector<NodePool>,
    summary: Option<ApiSummary>,
}

impl Default for ObserverCache {
    fn default() -> Self {
        Self {
            pods: Reflector::new(ResourceKind::POD),
            nodes: Reflector::new(ResourceKind::NODE),
            claims: Reflector::new(ResourceKind::NODE_CLAIM),
            pools: Reflector::new(ResourceKind::NODE_POOL),
            summary: None,
        }
    }
}

fn res(list: &Value) -> Resources {
    let mut out = Resources::new();
    for (name, q) in list.as_object().into_iter().flatten() {
        let text = q
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| q.to_string());
        if let Ok(v) = karpenter_core::resources::parse_quantity(name, &text) {
            out.add_one(name, v);
        }
    }
    out
}

/// What the observer derives from the API server alone; recomputed only when a cache changed.
#[derive(Clone, Debug, Default)]
struct ApiSummary {
    pods_total: usize,
    pods_running: usize,
    pods_pending: usize,
    pending_names: Vec<String>,
    running_names: Vec<String>,
    claims: usize,
    nodes: usize,
    deleting_claims: usize,
    violations: Vec<(&'static str, String)>,
    /// Instance ids in claims' `status.providerID`.
    known_instances: BTreeSet<String>,
    claim_names: BTreeSet<String>,
    /// Claims neither registered nor deleting, with their creation time.
    unregistered: Vec<(String, Option<Timestamp>)>,
}

impl ApiSummary {
    fn of(pods: &[&Value], nodes: &[&Value], claims: &[&NodeClaim], pools: &[&NodePool]) -> Self {
        let mut o = ApiSummary {
            claims: claims.len(),
            nodes: nodes.len(),
            ..Default::default()
        };
        let mut used: BTreeMap<String, Resources> = BTreeMap::new();
        for pod in pods {
            let name = pod["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if pod["metadata"]["deletionTimestamp"].is_string() {
                continue;
            }
            o.pods_total += 1;
            match pod["status"]["phase"].as_str() {
                Some("Running") => {
                    o.pods_running += 1;
                    o.running_names.push(name.clone());
                }
                Some("Succeeded") | Some("Failed") => {}
                _ => {
                    o.pods_pending += 1;
                    o.pending_names.push(name.clone());
                }
            }
            if let Some(node) = pod["spec"]["nodeName"].as_str() {
                let mut requests = Resources::new();
                for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
                    requests = requests.plus(&res(&c["resources"]["requests"]));
                }
                requests.add_one("pods", 1);
                let slot = used.entry(node.to_string()).or_default();
                *slot = slot.plus(&requests);
            }
        }
        for node in nodes {
            let name = node["metadata"]["name"].as_str().unwrap_or_default();
            let allocatable = res(&node["status"]["allocatable"]);
            if let Some(requests) = used.get(name)
                && let Some((resource, want, have)) = requests.first_excess(&allocatable)
            {
                o.violations.push((
                    "pods-fit-nodes",
                    format!("node {name}: {resource} requested {want} > allocatable {have}"),
                ));
            }
        }
        // Limits: each pool's claims' capacity.
        for pool in pools {
            let name = pool.metadata.name.clone().unwrap_or_default();
            let Some(limits) = &pool.spec.limits else {
                continue;
            };
            let limits = Resources::from_list(limits).unwrap_or_default();
            let mut total = Resources::new();
            for claim in claims.iter().filter(|c| {
                c.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("karpenter.sh/nodepool"))
                    == Some(&name)
            }) {
                if let Some(status) = &claim.status {
                    total = total.plus(&Resources::from_list(&status.capacity).unwrap_or_default());
                }
            }
            for resource in ["cpu", "memory"] {
                if limits.get(resource) > 0 && total.get(resource) > limits.get(resource) {
                    o.violations.push((
                        "nodepool-limits",
                        format!(
                            "NodePool {name}: {resource} {} > limit {}",
                            total.get(resource),
                            limits.get(resource)
                        ),
                    ));
                }
            }
        }
        o.known_instances = claims
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
        o.claim_names = claims
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        o.deleting_claims = claims
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_some())
            .count();
        for claim in claims {
            let registered = claim
                .status
                .as_ref()
                .is_some_and(|s| conditions::is_true(&s.conditions, "Registered"));
            if !registered && claim.metadata.deletion_timestamp.is_none() {
                o.unregistered.push((
                    claim.metadata.name.clone().unwrap_or_default(),
                    claim.metadata.creation_timestamp.as_ref().map(|t| t.0),
                ));
            }
        }
        o
    }
}

impl Observation {
    pub async fn read(
        cache: &mut ObserverCache,
        kube: &dyn KubeApi,
        cloud: &FakeCloud,
        now: Timestamp,
    ) -> Result<Self, KubeError> {
        let mut changed = cache.pods.sync(kube).await?;
        changed |= cache.nodes.sync(kube).await?;
        changed |= cache.claims.sync(kube).await?;
        changed |= cache.pools.sync(kube).await?;
        if changed || cache.summary.is_none() {
            let pods: Vec<&Value> = cache.pods.iter().map(|p| &**p).collect();
            let nodes: Vec<&Value> = cache.nodes.iter().map(|n| &**n).collect();
            let claims: Vec<&NodeClaim> = cache.claims.iter().map(|c| &**c).collect();
            let pools: Vec<&NodePool> = cache.pools.iter().map(|p| &**p).collect();
            cache.summary = Some(ApiSummary::of(&pods, &nodes, &claims, &pools));
        }
        let summary = cache.summary.clone().unwrap_or_default();
        let mut o = Observation {
            pods_total: summary.pods_total,
            pods_running: summary.pods_running,
            pods_pending: summary.pods_pending,
            pending_names: summary.pending_names,
            running_names: summary.running_names,
            claims: summary.claims,
            nodes: summary.nodes,
            deleting_claims: summary.deleting_claims,
            violations: summary.violations,
            ..Default::default()
        };
        // Leaks: live instances without a claim past the GC window.
        for instance in cloud.instances() {
            if matches!(
                instance.state,
                InstanceState::ShuttingDown | InstanceState::Terminated
            ) {
                continue;
            }
            o.instances_alive += 1;
            let owned = summary.known_instances.contains(&instance.instance_id)
                || instance
                    .tags
                    .get("karpenter.sh/nodeclaim")
                    .is_some_and(|n| summary.claim_names.contains(n));
            let age = now.duration_since(instance.launch_time).unsigned_abs();
            if !owned && age > LEAK_WINDOW {
                o.violations.push((
                    "no-leaked-instances",
                    format!(
                        "instance {} ({}s old) has no NodeClaim",
                        instance.instance_id,
                        age.as_secs()
                    ),
                ));
            }
            o.instances.insert(
                instance.instance_id,
                (instance.instance_type, instance.capacity_type),
            );
        }
        for (name, created) in &summary.unregistered {
            let age = now.duration_since(created.unwrap_or(now)).unsigned_abs();
            if age > CLAIM_DEADLINE {
                o.violations.push((
                    "claims-progress",
                    format!("NodeClaim {name} unregistered after {}s", age.as_secs()),
                ));
            }
        }
        Ok(o)
    }
}

/// Running tallies of every invariant.
#[derive(Clone, Debug, Default)]
pub struct Invariants {
    tallies: BTreeMap<&'static str, (u64, Option<String>)>,
}

/// Every invariant a run checks, in report order: safety first, then progress.
pub const NAMES: [&str; 13] = [
    "nodepool-limits",
    "no-leaked-instances",
    "pods-fit-nodes",
    "drained-before-terminate",
    "pdb-respected",
    "do-not-disrupt-respected",
    "claim-storm",
    "interruption-rehomed",
    "claims-progress",
    "termination-progress",
    "pods-scheduled",
    "single-leader",
    "liveness",
];

impl Invariants {
    pub fn check(&mut self, observation: &Observation, now: Timestamp) {
        for (name, message) in &observation.violations {
            self.record(name, message.clone(), now);
        }
    }

    /// Counts one violation of `name`; the first one's message is kept for the report.
    pub fn record(&mut self, name: &'static str, message: String, now: Timestamp) {
        let tally = self.tallies.entry(name).or_default();
        tally.0 += 1;
        tally.1.get_or_insert_with(|| format!("{now}: {message}"));
    }

    /// The first violation of `name`, if any.
    pub fn first(&self, name: &str) -> Option<&str> {
        self.tallies.get(name).and_then(|t| t.1.as_deref())
    }

    /// End-of-run checks (liveness).
    pub fn finish(&mut self, observation: &Observation) {
        if observation.pods_pending > 0 {
            let tally = self.tallies.entry("liveness").or_default();
            tally.0 += observation.pods_pending as u64;
            tally.1.get_or_insert_with(|| {
                format!(
                    "{} pods still pending at the end: {:?}",
                    observation.pods_pending,
                    &observation.pending_names[..observation.pending_names.len().min(5)]
                )
            });
        }
    }

    pub fn results(&self) -> Vec<InvariantResult> {
        NAMES
            .iter()
            .map(|name| {
                let (violations, first) = self.tallies.get(name).cloned().unwrap_or_default();
                InvariantResult {
                    name: name.to_string(),
                    held: violations == 0,
                    violations,
                    first,
                }
            })
            .collect()
    }
}
