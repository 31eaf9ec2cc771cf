//! The run report: what `karpenter-sim run --json` writes. Only `wallSeconds` may differ between
//! two runs of the same seed.

use std::collections::BTreeMap;

use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub seed: u64,
    pub scenario: String,
    pub commit: String,
    /// Every pod is running at the end.
    pub converged: bool,
    pub invariants: Vec<InvariantResult>,
    pub pods: PodsReport,
    pub nodes: NodesReport,
    /// Faults that fired, by their stable names (`karpenter_sim::faults::FAULT_NAMES`; what each
    /// counts is in that module's docs), plus `api-other` for injected API faults of no listed
    /// kind. Only faults that fired appear.
    pub faults_injected: BTreeMap<String, u64>,
    /// EC2 (and SSM) calls the controller made, by action (`CreateFleet`, `DescribeInstances`,
    /// ...): fakecloud's call log, tallied every step. SQS calls are not counted.
    pub ec2_calls: BTreeMap<String, u64>,
    /// [`Report::ec2_calls`] divided by the instances launched (`nodes.launched`), by action,
    /// rounded to the thousandth; empty when nothing launched. Upstream's design is about one
    /// CreateFleet per claim plus amortised Describe calls: this is the figure to hold to it.
    pub ec2_calls_per_launch: BTreeMap<String, f64>,
    /// How fast spot warnings were acted on (none when no claimed instance was warned).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interruption_response: Option<InterruptionResponse>,
    pub cost_dollars: f64,
    /// What Karpenter's nodes cost per hour at the end of the run.
    pub cost_per_hour_end: f64,
    /// What provisioning from scratch for the pods running at the end would cost per hour (the
    /// scheduling simulation over the run's NodePools, no existing nodes): the yardstick for
    /// consolidation.
    pub fresh_cost_per_hour_end: f64,
    pub simulated_seconds: f64,
    pub wall_seconds: f64,
    pub event_log_sha256: String,
    pub event_log_lines: u64,
}

/// Simulated seconds from each spot warning (of an instance a NodeClaim owned) to the
/// interruption handler's deletion of the claim (the drain's start) and to the creation of a
/// replacement claim (only where the pods needed a new node).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InterruptionResponse {
    pub warnings: u64,
    pub claim_deleted_seconds_p50: f64,
    pub claim_deleted_seconds_max: f64,
    pub replacements: usize,
    pub replacement_created_seconds_p50: f64,
    pub replacement_created_seconds_max: f64,
    /// Warnings whose claim was not seen deleted before the reclaim.
    pub unanswered: u64,
}

impl InterruptionResponse {
    /// The figures of `responses`, `None` when there were no warnings.
    pub fn of(responses: &crate::invariants::rehome::Responses) -> Option<Self> {
        if responses.warnings == 0 {
            return None;
        }
        let sorted = |values: &[f64]| {
            let mut values = values.to_vec();
            values.sort_by(f64::total_cmp);
            values
        };
        let deleted = sorted(&responses.deleted_after);
        let replaced = sorted(&responses.replaced_after);
        let p50 = |v: &[f64]| v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0.0);
        let max = |v: &[f64]| v.last().copied().unwrap_or(0.0);
        Some(Self {
            warnings: responses.warnings,
            claim_deleted_seconds_p50: p50(&deleted),
            claim_deleted_seconds_max: max(&deleted),
            replacements: replaced.len(),
            replacement_created_seconds_p50: p50(&replaced),
            replacement_created_seconds_max: max(&replaced),
            unanswered: responses.unanswered,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InvariantResult {
    /// The invariant's stable name ([`crate::invariants::Invariant::name`]).
    pub name: String,
    pub held: bool,
    pub violations: u64,
    /// The first violation, for the replay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodsReport {
    pub total: usize,
    pub running: usize,
    /// Simulated seconds from first seen pending to running.
    pub pending_seconds_p50: f64,
    pub pending_seconds_p99: f64,
    /// Simulated seconds until every pod first ran (none pending); none if that never happened.
    pub settled_seconds: Option<f64>,
    /// Most pods pending at once after that: the rescheduling window of drains, rolls and
    /// interruptions (and any new demand).
    pub pending_max_after_settled: usize,
    /// The longest wait of a pod that went pending after that, in simulated seconds.
    pub pending_seconds_max_after_settled: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodesReport {
    pub launched: usize,
    pub terminated: usize,
    /// Instances launched by `type/capacity-type`.
    pub launched_by_type: BTreeMap<String, usize>,
    /// Instances launched during the run and gone (shutting down or terminated) at its end, by
    /// `type/capacity-type`.
    pub terminated_by_type: BTreeMap<String, usize>,
    /// Karpenter's live instances at the end by `nodepool/image-id` (where an AMI roll stands).
    pub live_by_pool_and_image: BTreeMap<String, usize>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.invariants.iter().all(|i| i.held)
    }
}

/// Calls per launched instance, by action, rounded to the thousandth (none when `launched` is 0).
pub fn calls_per_launch(calls: &BTreeMap<String, u64>, launched: usize) -> BTreeMap<String, f64> {
    if launched == 0 {
        return BTreeMap::new();
    }
    calls
        .iter()
        .map(|(action, n)| {
            let per = *n as f64 / launched as f64;
            (action.clone(), (per * 1e3).round() / 1e3)
        })
        .collect()
}

/// What provisioning from scratch would cost per hour for the pods running now: the scheduling
/// simulation over the API server's NodePools and DaemonSets, with every running pod (not a
/// DaemonSet's) pending and no node yet, priced at each planned node's cheapest offering.
pub fn fresh_cost_per_hour(api: &fakekube::ApiServer) -> f64 {
    use k8s_openapi::api::core::v1::Pod;
    use karpenter_core::api::NodePool;
    use karpenter_core::catalog::Catalog;
    use karpenter_core::scheduling::{Input, Options, PodInfo, solve};
    use karpenter_core::seams::kube::ResourceKind;
    let pools: Vec<NodePool> = api
        .objects(&ResourceKind::NODE_POOL)
        .into_iter()
        .filter_map(|p| serde::Deserialize::deserialize(&*p).ok())
        .collect();
    let daemonsets: Vec<PodInfo> = api
        .objects(&ResourceKind::DAEMON_SET)
        .into_iter()
        .filter_map(|ds| {
            let template = ds["spec"]["template"].clone();
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": template["metadata"], "spec": template["spec"]
            }))
            .ok()?;
            PodInfo::from_pod(&pod, Vec::new()).ok()
        })
        .collect();
    let mut pods: Vec<PodInfo> = api
        .objects(&ResourceKind::POD)
        .into_iter()
        .filter(|p| {
            p["status"]["phase"] == "Running" && p["metadata"]["deletionTimestamp"].is_null()
        })
        .filter_map(|p| {
            let mut p = serde_json::Value::clone(&p);
            p["spec"]["nodeName"] = serde_json::Value::Null;
            let pod: Pod = serde_json::from_value(p).ok()?;
            PodInfo::from_pod(&pod, Vec::new()).ok()
        })
        .filter(|p| !p.daemonset_owned)
        .collect();
    pods.sort_by(|a, b| a.key.cmp(&b.key));
    let namespaces = BTreeMap::new();
    let results = solve(Input {
        node_pools: &pools,
        catalog: Catalog::builtin_ref(),
        pool_catalogs: &karpenter_core::scheduling::NO_POOL_CATALOGS,
        nodes: &[],
        daemonsets: &daemonsets,
        pods: &pods,
        namespaces: &namespaces,
        options: Options::default(),
    });
    results
        .new_claims
        .iter()
        .fold(0.0, |total, c| total + c.price)
}
