//! The filters that look at other pods: `PodTopologySpread` (`DoNotSchedule` constraints) and
//! `InterPodAffinity` (the pod's required affinity and anti-affinity, and the required
//! anti-affinity of pods already placed). Everything that does not depend on the candidate node is
//! computed once per pod ([`InterPod::new`]), so checking a node is cheap.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::filters::{Candidate, NodeView};
use super::matching::{Labels, selector_matches, term_selects};

pub(crate) const REASON_SPREAD: &str = "node(s) didn't match pod topology spread constraints";
pub(crate) const REASON_SPREAD_LABEL: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";
pub(crate) const REASON_AFFINITY: &str = "node(s) didn't match pod affinity rules";
pub(crate) const REASON_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
pub(crate) const REASON_EXISTING_ANTI_AFFINITY: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

/// A pod bound to a node of the snapshot, as affinity and spread see it.
#[derive(Clone, Debug)]
pub(crate) struct PlacedPod {
    pub namespace: String,
    pub labels: Labels,
    /// Index into the step's node list.
    pub node: usize,
    /// Has a deletionTimestamp (topology spread does not count it; affinity does).
    pub terminating: bool,
    /// Its required anti-affinity terms, which repel newcomers they select.
    pub anti_affinity: Vec<PodAffinityTerm>,
}

impl PlacedPod {
    pub(crate) fn new(pod: &Pod, node: usize) -> Self {
        Self {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            node,
            terminating: pod.metadata.deletion_timestamp.is_some(),
            anti_affinity: required_anti_affinity(pod),
        }
    }
}

/// The cluster as of this point of the step.
pub(crate) struct Cluster<'a> {
    pub nodes: &'a [NodeView],
    pub placed: &'a [PlacedPod],
    /// Labels of every namespace (empty unless some term has a `namespaceSelector`).
    pub namespaces: &'a BTreeMap<String, Labels>,
}

pub(crate) fn required_affinity(pod: &Pod) -> Vec<PodAffinityTerm> {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .clone()
        })
        .unwrap_or_default()
}

pub(crate) fn required_anti_affinity(pod: &Pod) -> Vec<PodAffinityTerm> {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .clone()
        })
        .unwrap_or_default()
}

/// The pod's `DoNotSchedule` constraints (`ScheduleAnyway` only affects scoring).
fn hard_constraints(pod: &Pod) -> Vec<TopologySpreadConstraint> {
    pod.spec
        .as_ref()
        .and_then(|s| s.topology_spread_constraints.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.when_unsatisfiable == "DoNotSchedule")
        .collect()
}

/// Whether any term of the pending pods or of the placed pods selects namespaces by label (then
/// the step lists namespaces).
pub(crate) fn needs_namespace_labels<'a>(
    terms: impl IntoIterator<Item = &'a PodAffinityTerm>,
) -> bool {
    terms.into_iter().any(|t| t.namespace_selector.is_some())
}

/// One `DoNotSchedule` constraint, counted.
#[derive(Clone, Debug)]
struct Spread {
    key: String,
    max_skew: i64,
    /// Matching pods per domain, over the eligible nodes (every eligible domain present).
    counts: BTreeMap<String, i64>,
    /// The global minimum (0 when there are fewer domains than `minDomains`).
    min: i64,
    /// 1 when the pod itself matches the selector.
    self_match: i64,
}

/// The other-pod filters for one pod.
#[derive(Clone, Debug, Default)]
pub(crate) struct InterPod {
    /// Every node must carry all of these to be a candidate (and to count for spreading).
    spread_keys: Vec<String>,
    spreads: Vec<Spread>,
    /// Per required affinity term: its topology key and the domains holding a pod that matches
    /// all of the pod's affinity terms.
    affinity: Vec<(String, BTreeSet<String>)>,
    /// No pod anywhere matches all affinity terms.
    affinity_unmatched: bool,
    /// The pod matches all its own affinity terms (the first pod of a self-affine group).
    affinity_self_match: bool,
    /// Per required anti-affinity term: its topology key and the domains holding a pod it selects.
    anti_affinity: Vec<(String, BTreeSet<String>)>,
    /// Domains (key, value) where a placed pod's required anti-affinity selects this pod.
    existing_anti_affinity: BTreeSet<(String, String)>,
}

impl InterPod {
    pub(crate) fn new(pod: &Pod, candidate: &Candidate, cluster: &Cluster<'_>) -> Self {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let mut out = Self::default();
        out.spread(pod, &namespace, &labels, candidate, cluster);
        out.affinity(pod, &namespace, &labels, cluster);
        out
    }

    fn spread(
        &mut self,
        pod: &Pod,
        namespace: &str,
        labels: &Labels,
        candidate: &Candidate,
        cluster: &Cluster<'_>,
    ) {
        let constraints = hard_constraints(pod);
        let mut keys: Vec<String> = constraints.iter().map(|c| c.topology_key.clone()).collect();
        keys.sort();
        keys.dedup();
        for constraint in &constraints {
            let honor_affinity = constraint.node_affinity_policy.as_deref() != Some("Ignore");
            let honor_taints = constraint.node_taints_policy.as_deref() == Some("Honor");
            let eligible: Vec<bool> = cluster
                .nodes
                .iter()
                .map(|node| {
                    keys.iter().all(|k| node.labels.contains_key(k))
                        && (!honor_affinity || candidate.matches_node_affinity(node))
                        && (!honor_taints || candidate.tolerates_node(node))
                })
                .collect();
            // matchLabelKeys: the pod's own values for those keys narrow the selector.
            let extra: Vec<(String, String)> = constraint
                .match_label_keys
                .iter()
                .flatten()
                .filter_map(|k| labels.get(k).map(|v| (k.clone(), v.clone())))
                .collect();
            let selector: Option<&LabelSelector> = constraint.label_selector.as_ref();
            let mut counts: BTreeMap<String, i64> = BTreeMap::new();
            for (node, _) in cluster.nodes.iter().zip(&eligible).filter(|(_, e)| **e) {
                counts.insert(node.labels[&constraint.topology_key].clone(), 0);
            }
            for placed in cluster.placed {
                let node = &cluster.nodes[placed.node];
                if !eligible[placed.node]
                    || placed.terminating
                    || placed.namespace != namespace
                    || !selector_matches(selector, &extra, &placed.labels)
                {
                    continue;
                }
                *counts
                    .entry(node.labels[&constraint.topology_key].clone())
                    .or_insert(0) += 1;
            }
            let mut min = counts.values().copied().min().unwrap_or(0);
            if let Some(min_domains) = constraint.min_domains
                && counts.len() < usize::try_from(min_domains).unwrap_or(0)
            {
                min = 0;
            }
            self.spreads.push(Spread {
                key: constraint.topology_key.clone(),
                max_skew: i64::from(constraint.max_skew),
                counts,
                min,
                self_match: i64::from(selector_matches(selector, &extra, labels)),
            });
        }
        self.spread_keys = keys;
    }

    fn affinity(&mut self, pod: &Pod, namespace: &str, labels: &Labels, cluster: &Cluster<'_>) {
        let ns = cluster.namespaces;
        let affinity = required_affinity(pod);
        if !affinity.is_empty() {
            let matching: Vec<&PlacedPod> = cluster
                .placed
                .iter()
                .filter(|p| {
                    affinity
                        .iter()
                        .all(|t| term_selects(t, namespace, ns, &p.namespace, &p.labels))
                })
                .collect();
            self.affinity_unmatched = matching.is_empty();
            self.affinity_self_match = affinity
                .iter()
                .all(|t| term_selects(t, namespace, ns, namespace, labels));
            for term in &affinity {
                let domains = matching
                    .iter()
                    .filter_map(|p| cluster.nodes[p.node].labels.get(&term.topology_key))
                    .cloned()
                    .collect();
                self.affinity.push((term.topology_key.clone(), domains));
            }
        }
        for term in required_anti_affinity(pod) {
            let domains = cluster
                .placed
                .iter()
                .filter(|p| term_selects(&term, namespace, ns, &p.namespace, &p.labels))
                .filter_map(|p| cluster.nodes[p.node].labels.get(&term.topology_key))
                .cloned()
                .collect();
            self.anti_affinity
                .push((term.topology_key.clone(), domains));
        }
        for placed in cluster.placed {
            for term in &placed.anti_affinity {
                if !term_selects(term, &placed.namespace, ns, namespace, labels) {
                    continue;
                }
                if let Some(value) = cluster.nodes[placed.node].labels.get(&term.topology_key) {
                    self.existing_anti_affinity
                        .insert((term.topology_key.clone(), value.clone()));
                }
            }
        }
    }

    /// Topology spread, then inter-pod affinity, as upstream orders its filters.
    pub(crate) fn check(&self, node: &NodeView) -> Result<(), Vec<String>> {
        self.check_spread(node)
            .and_then(|()| self.check_affinity(node))
            .map_err(|reason| vec![reason.to_string()])
    }

    fn check_spread(&self, node: &NodeView) -> Result<(), &'static str> {
        if !self.spread_keys.iter().all(|k| node.labels.contains_key(k)) {
            return Err(REASON_SPREAD_LABEL);
        }
        for spread in &self.spreads {
            let domain = &node.labels[&spread.key];
            let count = spread.counts.get(domain).copied().unwrap_or(0);
            if count + spread.self_match - spread.min > spread.max_skew {
                return Err(REASON_SPREAD);
            }
        }
        Ok(())
    }

    fn check_affinity(&self, node: &NodeView) -> Result<(), &'static str> {
        if self
            .existing_anti_affinity
            .iter()
            .any(|(key, value)| node.labels.get(key) == Some(value))
        {
            return Err(REASON_EXISTING_ANTI_AFFINITY);
        }
        for (key, domains) in &self.anti_affinity {
            if node.labels.get(key).is_some_and(|v| domains.contains(v)) {
                return Err(REASON_ANTI_AFFINITY);
            }
        }
        let mut pods_exist = true;
        for (key, domains) in &self.affinity {
            match node.labels.get(key) {
                // Every topology key of the pod's affinity must be on the node.
                None => return Err(REASON_AFFINITY),
                Some(value) => pods_exist &= domains.contains(value),
            }
        }
        // The first pod of a group with affinity to itself may go anywhere the keys exist.
        let first_of_group = self.affinity_unmatched && self.affinity_self_match;
        if pods_exist || first_of_group {
            Ok(())
        } else {
            Err(REASON_AFFINITY)
        }
    }
}
