//! `draining-nodes-closed`: a node the controller drains is closed to new pods.
//!
//! 1. Every pod the controller takes off a node (an eviction or a delete, as the audited seam
//!    saw it succeed) leaves a node that carries `karpenter.sh/disrupted:NoSchedule` at that
//!    moment. Upstream taints first on every path: disruption taints the candidates before it
//!    deletes their claims, and the terminator taints the node before its first eviction (for
//!    interruption, expiration and user deletions, which come with no disruption command).
//! 2. Once the controller took a pod off a node, no pod is newly bound to that node (bound there
//!    since the previous step's look) unless it tolerates the taint: a pod evicted from a
//!    draining node must not land back on it. Pods that tolerate the taint may land, and are not
//!    evicted, as upstream.
//!
//! A removal whose node is already gone is not checked (nothing to close). A node leaves the
//! watch when it is deleted.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::pod_facts::{is_mirror, is_terminal, name_of, tolerates_disrupted};
use super::{Check, Invariant, StepView, Violation};
use karpenter_core::api::labels::DISRUPTED_TAINT_KEY;

/// The `draining-nodes-closed` checker.
#[derive(Debug, Default)]
pub struct DrainingClosed {
    /// Nodes the controller took a pod off, and the pods (uids) bound to each at the last look.
    draining: BTreeMap<String, BTreeSet<String>>,
}

/// Whether `node` carries `karpenter.sh/disrupted:NoSchedule`.
pub fn has_disrupted_taint(node: &Value) -> bool {
    node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["key"] == DISRUPTED_TAINT_KEY && t["effect"] == "NoSchedule")
}

fn uid_of(pod: &Value) -> String {
    pod["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn pod_name(pod: &Value) -> String {
    format!(
        "{}/{}",
        pod["metadata"]["namespace"].as_str().unwrap_or_default(),
        name_of(pod)
    )
}

impl DrainingClosed {
    /// Part 2: pods bound to a draining node since the last look; then the look is updated.
    fn check_bindings(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let mut out = Vec::new();
        let live: BTreeSet<&str> = step.nodes().iter().map(|o| name_of(o)).collect();
        self.draining.retain(|node, _| live.contains(node.as_str()));
        let mut now: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for pod in step.pods() {
            let Some(node) = pod["spec"]["nodeName"].as_str() else {
                continue;
            };
            let Some(seen) = self.draining.get(node) else {
                continue;
            };
            let uid = uid_of(pod);
            let new = !seen.contains(&uid);
            if new && !is_terminal(pod) && !is_mirror(pod) && !tolerates_disrupted(pod) {
                out.push(Violation::at(
                    step.now,
                    format!(
                        "pod {} bound to node {node} after the controller started draining it",
                        pod_name(pod)
                    ),
                ));
            }
            now.entry(node).or_default().insert(uid);
        }
        for (node, pods) in &mut self.draining {
            *pods = now.remove(node.as_str()).unwrap_or_default();
        }
        out
    }

    /// Part 1: each removal's node carried the taint; its node starts being watched (with the
    /// pods bound to it now, which may stay).
    fn check_removals(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let mut out = Vec::new();
        for removal in &step.audit.pod_removals {
            let Some(node) = &removal.node else {
                continue;
            };
            let node_name = name_of(node).to_string();
            if !has_disrupted_taint(node) {
                out.push(Violation::at(
                    removal.at,
                    format!(
                        "pod {} {} by the controller from node {node_name}, which does not carry {DISRUPTED_TAINT_KEY}:NoSchedule",
                        pod_name(&removal.pod),
                        if removal.evicted { "evicted" } else { "deleted" }
                    ),
                ));
            }
            self.draining.entry(node_name).or_insert_with_key(|name| {
                step.pods()
                    .iter()
                    .filter(|p| p["spec"]["nodeName"].as_str() == Some(name.as_str()))
                    .map(|o| uid_of(o))
                    .collect()
            });
        }
        out
    }
}

impl Check for DrainingClosed {
    fn invariant(&self) -> Invariant {
        Invariant::DrainingNodesClosed
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let mut out = Vec::new();
        if !self.draining.is_empty() {
            out = self.check_bindings(step);
        }
        out.extend(self.check_removals(step));
        out
    }
}
