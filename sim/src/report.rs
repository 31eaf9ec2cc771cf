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
    pub cost_dollars: f64,
    pub simulated_seconds: f64,
    pub wall_seconds: f64,
    pub event_log_sha256: String,
    pub event_log_lines: u64,
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
}

impl Report {
    pub fn passed(&self) -> bool {
        self.invariants.iter().all(|i| i.held)
    }
}
