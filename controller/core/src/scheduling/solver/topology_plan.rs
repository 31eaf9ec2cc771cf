//! Topology for one placement: what spread, affinity and anti-affinity allow per topology key
//! (target-independent, [`TopologyPlan`]), then which domain a given node or claim is pinned to.

use std::collections::BTreeMap;

use super::types::is_type_attribute;
use super::{Constraints, Pool, Solver};
use crate::api::labels::is_well_known;
use crate::scheduling::pod::tolerates;
use crate::scheduling::requirements::{Requirement, Requirements};
use crate::scheduling::topology::{Group, GroupKind};

impl<'a> Solver<'a> {
    /// Per-domain counts of group `g` restricted to the nodes and claims pod `p` could use:
    /// those its node affinity allows (`affinity`: nodeAffinityPolicy Honor) and those whose
    /// taints it tolerates (`taints`: nodeTaintsPolicy Honor). `None` when neither filter removes
    /// anything: the plain counts apply.
    pub(super) fn honored_counts(
        &self,
        p: usize,
        g: usize,
        affinity: bool,
        taints: bool,
    ) -> Option<Vec<u32>> {
        let pod = &self.input.pods[p];
        let affinity = affinity && !(pod.node_selector.is_empty() && pod.required_terms.is_empty());
        if !affinity && !taints {
            return None;
        }
        let k = self.group_key[g]?;
        let group = &self.topology.groups[g];
        let mut counts: Vec<u32> = (0..self.universe[k].len())
            .map(|d| group.count(d))
            .collect();
        let terms: Vec<Requirements> = if pod.required_terms.is_empty() {
            vec![pod.node_selector.clone()]
        } else {
            pod.required_terms
                .iter()
                .map(|t| {
                    let mut r = pod.node_selector.clone();
                    r.add_all(t);
                    r
                })
                .collect()
        };
        for &(slot, d) in group.placements() {
            let allowed = if slot < self.nodes.len() {
                let node = &self.nodes[slot].node;
                (!affinity || terms.iter().any(|t| t.matches_labels(&node.labels)))
                    && (!taints || tolerates(&pod.tolerations, &node.taints).is_ok())
            } else {
                let claim = &self.claims[slot - self.nodes.len()];
                (!affinity
                    || terms
                        .iter()
                        .any(|t| claim.requirements.compatible(t, is_well_known).is_ok()))
                    && (!taints
                        || tolerates(&pod.tolerations, self.pools[claim.pool].taints).is_ok())
            };
            if !allowed && counts[d] > 0 {
                counts[d] -= 1;
            }
        }
        Some(counts)
    }

    /// nodeTaintsPolicy Honor: which domains of key `k` some capacity pod `p` tolerates offers
    /// (a NodePool whose taints it tolerates, or an existing node whose taints it tolerates).
    /// Upstream's `TopologyDomainGroup.ForEachDomain`: a zone reachable only through a tainted
    /// (say GPU) NodePool is no domain for a pod that cannot go there, so it cannot hold the
    /// pod's spread at a skew it can never fix.
    fn tolerated_domains(&self, p: usize, k: usize) -> Vec<bool> {
        let pod = &self.input.pods[p];
        let key = &self.keys[k];
        let mut out = vec![false; self.universe[k].len()];
        let mut mark = |value: &str| {
            if let Some(d) = self.domain_id(k, value) {
                out[d] = true;
            }
        };
        for pool in &self.pools {
            if tolerates(&pod.tolerations, pool.taints).is_err() {
                continue;
            }
            for t in &pool.types {
                for v in t.values(key, &pool.requirements) {
                    if pool.requirements.get(key).is_none_or(|r| r.has(&v)) {
                        mark(&v);
                    }
                }
            }
            if let Some(r) = pool.requirements.get(key) {
                r.values().for_each(&mut mark);
            }
        }
        for node in &self.nodes {
            if tolerates(&pod.tolerations, &node.node.taints).is_ok()
                && let Some(v) = node.node.labels.get(key)
            {
                mark(v);
            }
        }
        out
    }

    /// The target-independent part of the pod's topology: for every non-hostname key it touches,
    /// which domains it may use and how to choose among them. Every such key is pinned to one
    /// domain at placement, so the pod is recorded exactly where it lands.
    pub(super) fn plan_topology(
        &self,
        pod_index: usize,
        constraints: &Constraints,
    ) -> Result<TopologyPlan, String> {
        let mut plan = TopologyPlan::default();
        for reference in &constraints.spread {
            self.plan_spread(pod_index, reference.group, &mut plan)?;
        }
        for reference in &constraints.affinity {
            self.plan_affinity(pod_index, reference.group, &mut plan)?;
        }
        let pod = &self.input.pods[pod_index];
        // Required anti-affinity of the pod blocks the domains its selector's pods are in; that
        // of existing pods blocks the domains they are in for the pods they select.
        for reference in &constraints.anti {
            self.block_domains(reference.group, &mut plan, |group, domain| {
                group.count(domain) > 0
            });
        }
        for group_index in &self.topology.anti_groups {
            let group = &self.topology.groups[*group_index];
            if group.has_owners() && group.counts_pod(&pod.namespace, &pod.labels) {
                self.block_domains(*group_index, &mut plan, |group, domain| {
                    group.owner_count(domain) > 0
                });
            }
        }
        // Groups that count the pod prefer the domain where they count the fewest.
        for group_index in &self.counted_by[pod_index] {
            let Some(key_id) = self.group_key[*group_index] else {
                continue;
            };
            let key_plan = plan.key(key_id, self.universe[key_id].len());
            match &mut key_plan.order {
                Some(Order::Fewest(groups)) if !groups.contains(group_index) => {
                    groups.push(*group_index)
                }
                Some(_) => {}
                None => key_plan.order = Some(Order::Fewest(vec![*group_index])),
            }
        }
        for (key_id, key_plan) in &plan.keys {
            if !(0..self.universe[*key_id].len()).any(|domain| key_plan.permits(domain)) {
                return Err(format!(
                    "no {} domain is left: spread, affinity and anti-affinity rule them all out",
                    self.keys[*key_id]
                ));
            }
        }
        Ok(plan)
    }

    /// A topology spread constraint (group `group_index`): the domains where one more matching
    /// pod keeps the skew within `maxSkew` (with `minDomains` and, under nodeAffinityPolicy
    /// Honor, only the domains and pods the pod's node affinity allows), fewest pods first.
    fn plan_spread(
        &self,
        pod_index: usize,
        group_index: usize,
        plan: &mut TopologyPlan,
    ) -> Result<(), String> {
        let pod = &self.input.pods[pod_index];
        let group = &self.topology.groups[group_index];
        let GroupKind::Spread {
            max_skew,
            min_domains,
        } = group.kind
        else {
            return Ok(());
        };
        let Some(key_id) = self.group_key[group_index] else {
            return Ok(());
        };
        let key = &self.keys[key_id];
        let universe = &self.universe[key_id];
        let constraint = pod.spread.iter().find(|s| &s.topology_key == key);
        let honor = constraint.is_some_and(|s| s.honor_node_affinity);
        let honor_taints = constraint.is_some_and(|s| s.honor_node_taints);
        let tolerated = honor_taints.then(|| self.tolerated_domains(pod_index, key_id));
        // nodeAffinityPolicy Honor: domains and counted pods are limited to nodes the pod's
        // whole node affinity (nodeSelector and every OR term, relaxed or not) allows.
        let affinity_allows = |domain: &str| {
            pod.node_selector.get(key).is_none_or(|q| q.has(domain))
                && (pod.required_terms.is_empty()
                    || pod
                        .required_terms
                        .iter()
                        .any(|t| t.get(key).is_none_or(|q| q.has(domain))))
        };
        let honored = self.honored_counts(pod_index, group_index, honor, honor_taints);
        let count = |domain: usize| {
            honored
                .as_ref()
                .map_or_else(|| group.count(domain), |counts| counts[domain])
        };
        let eligible: Vec<usize> = (0..universe.len())
            .filter(|domain| !honor || affinity_allows(&universe[*domain]))
            .filter(|domain| tolerated.as_ref().is_none_or(|t| t[*domain]))
            .collect();
        let mut min = eligible.iter().map(|d| count(*d)).min().unwrap_or(0) as i64;
        if min_domains.is_some_and(|m| (eligible.len() as i64) < m as i64) {
            min = 0;
        }
        let own = i64::from(group.counts_pod(&pod.namespace, &pod.labels));
        let allowed: Vec<bool> = (0..universe.len())
            .map(|domain| count(domain) as i64 + own - min <= max_skew as i64)
            .collect();
        if !allowed.iter().any(|a| *a) {
            return Err(format!(
                "topology spread on {key} (maxSkew {max_skew}) cannot be met"
            ));
        }
        let key_plan = plan.key(key_id, universe.len());
        key_plan.restrict(&allowed);
        key_plan
            .order
            .get_or_insert(Order::Fewest(vec![group_index]));
        Ok(())
    }

    /// A pod affinity term (group `group_index`): the domains its selector's pods are in, most
    /// first; with no such pod, only a pod its own selector matches may start one anywhere.
    fn plan_affinity(
        &self,
        pod_index: usize,
        group_index: usize,
        plan: &mut TopologyPlan,
    ) -> Result<(), String> {
        let pod = &self.input.pods[pod_index];
        let group = &self.topology.groups[group_index];
        let Some(key_id) = self.group_key[group_index] else {
            return Ok(());
        };
        let width = self.universe[key_id].len();
        let occupied: Vec<bool> = (0..width).map(|domain| group.count(domain) > 0).collect();
        let self_match = group.counts_pod(&pod.namespace, &pod.labels);
        let key_plan = plan.key(key_id, width);
        if !occupied.iter().any(|o| *o) {
            if !self_match {
                return Err(format!(
                    "pod affinity on {}: no pod matches its selector",
                    self.keys[key_id]
                ));
            }
            // Self-affinity with no peers yet: any domain, chosen by name.
            key_plan.order.get_or_insert(Order::Fewest(Vec::new()));
        } else {
            key_plan.restrict(&occupied);
            key_plan.order.get_or_insert(Order::Most(group_index));
        }
        Ok(())
    }

    /// Blocks, on group `group_index`'s key, every domain `blocked` says.
    fn block_domains(
        &self,
        group_index: usize,
        plan: &mut TopologyPlan,
        blocked: impl Fn(&Group, usize) -> bool,
    ) {
        let group = &self.topology.groups[group_index];
        let Some(key_id) = self.group_key[group_index] else {
            return;
        };
        let width = self.universe[key_id].len();
        let key_plan = plan.key(key_id, width);
        for domain in 0..width {
            if blocked(group, domain) {
                key_plan.blocked[domain] = true;
            }
        }
    }

    /// Pins each planned key to one domain the target can be in, or `None` if it cannot. A key
    /// the target is already pinned to adds nothing.
    pub(super) fn target_topology(
        &self,
        plan: &TopologyPlan,
        target: &TargetView,
        reqs: &Requirements,
    ) -> Option<Requirements> {
        let mut extra = Requirements::new();
        for (k, kp) in &plan.keys {
            if let Some(pinned) = target.pinned(*k) {
                if !kp.permits(pinned) {
                    return None;
                }
                continue;
            }
            let candidates = self.possible(target, *k, reqs, &extra, kp).into_iter();
            let choice = match &kp.order {
                Some(Order::Most(g)) => {
                    let g = &self.topology.groups[*g];
                    candidates.max_by_key(|d| (g.count(*d), std::cmp::Reverse(*d)))
                }
                Some(Order::Fewest(groups)) => candidates.min_by_key(|d| {
                    (
                        groups
                            .iter()
                            .map(|g| self.topology.groups[*g].count(*d))
                            .sum::<u32>(),
                        *d,
                    )
                }),
                None => candidates.min(),
            }?;
            extra.add(
                &self.keys[*k],
                Requirement::single(&self.universe[*k][choice]),
            );
        }
        Some(extra)
    }

    /// Domain ids of key `k` the target can still be in, given `reqs` and `extra`, that the
    /// key's plan `kp` permits, ascending.
    ///
    /// For a claim, the scan over its types stops as soon as every domain `kp` and the
    /// requirements leave has been found, and does not start when they leave none: a pod whose
    /// anti-affinity blocks the only zone its node affinity allows (upstream's preference
    /// benchmark, before relaxation) fails here without touching its hundreds of types.
    pub(super) fn possible(
        &self,
        target: &TargetView,
        k: usize,
        reqs: &Requirements,
        extra: &Requirements,
        kp: &KeyPlan,
    ) -> Vec<usize> {
        let key = &self.keys[k];
        let allowed = |v: &str| {
            reqs.get(key).is_none_or(|r| r.has(v)) && extra.get(key).is_none_or(|r| r.has(v))
        };
        match target {
            TargetView::Node { labels, .. } => labels
                .get(key)
                .filter(|v| allowed(v))
                .and_then(|v| self.domain_id(k, v))
                .filter(|d| kp.permits(*d))
                .into_iter()
                .collect(),
            TargetView::Claim { pool, types, .. } => {
                let universe = &self.universe[k];
                // The domains worth finding: permitted by the plan and the requirements.
                let wanted: Vec<bool> = (0..universe.len())
                    .map(|d| kp.permits(d) && allowed(&universe[d]))
                    .collect();
                let mut left = wanted.iter().filter(|w| **w).count();
                if left == 0 {
                    return Vec::new();
                }
                let merged_owned;
                let merged: &Requirements = if extra.is_empty() {
                    reqs
                } else {
                    let mut m = reqs.clone();
                    m.add_all(extra);
                    merged_owned = m;
                    &merged_owned
                };
                let type_key = super::types::is_offering_key(key) || is_type_attribute(key);
                if !type_key {
                    return (0..universe.len()).filter(|d| wanted[*d]).collect();
                }
                let mut found = vec![false; universe.len()];
                for t in *types {
                    pool.types[*t as usize].each_value(key, merged, &mut |v| {
                        if let Some(d) = self.domain_id(k, v)
                            && wanted[d]
                            && !found[d]
                        {
                            found[d] = true;
                            left -= 1;
                        }
                        left > 0
                    });
                    if left == 0 {
                        break;
                    }
                }
                (0..universe.len()).filter(|d| found[*d]).collect()
            }
        }
    }
}

/// What topology evaluation needs to know about a target.
pub(super) enum TargetView<'b, 'a> {
    Node {
        labels: &'b BTreeMap<String, String>,
        solver: &'b Solver<'a>,
    },
    Claim {
        pool: &'b Pool<'a>,
        types: &'b [u32],
        pinned: &'b [Option<usize>],
    },
}

impl TargetView<'_, '_> {
    /// The domain of key `k` the target is fixed to, if any.
    pub(super) fn pinned(&self, k: usize) -> Option<usize> {
        match self {
            TargetView::Node { labels, solver } => labels
                .get(&solver.keys[k])
                .and_then(|v| solver.domain_id(k, v)),
            TargetView::Claim { pinned, .. } => pinned.get(k).copied().flatten(),
        }
    }
}

/// How to choose among a key's permitted domains.
#[derive(Clone, Debug)]
pub(super) enum Order {
    /// The domain where these groups count the fewest pods (spread, and pinning counted pods).
    Fewest(Vec<usize>),
    /// The domain where this group counts the most pods (affinity).
    Most(usize),
}

/// What one topology key allows for a pod, by domain id.
#[derive(Clone, Debug, Default)]
pub(super) struct KeyPlan {
    /// `None`: any domain.
    allowed: Option<Vec<bool>>,
    blocked: Vec<bool>,
    order: Option<Order>,
}

impl KeyPlan {
    pub(super) fn restrict(&mut self, to: &[bool]) {
        self.allowed = Some(match self.allowed.take() {
            Some(current) => current.iter().zip(to).map(|(a, b)| *a && *b).collect(),
            None => to.to_vec(),
        });
    }

    pub(super) fn permits(&self, domain: usize) -> bool {
        self.allowed
            .as_ref()
            .is_none_or(|a| a.get(domain).copied().unwrap_or(false))
            && !self.blocked.get(domain).copied().unwrap_or(false)
    }
}

/// The target-independent topology decisions for one pod placement, by key id.
#[derive(Clone, Debug, Default)]
pub(super) struct TopologyPlan {
    pub(super) keys: BTreeMap<usize, KeyPlan>,
}

impl TopologyPlan {
    pub(super) fn key(&mut self, k: usize, width: usize) -> &mut KeyPlan {
        self.keys.entry(k).or_insert_with(|| KeyPlan {
            allowed: None,
            blocked: vec![false; width],
            order: None,
        })
    }
}
