//! Placing one pod: on an existing node, else on a claim planned in this run (fewest pods first,
//! scanning only the claims its constraints leave), else on a new claim from the first NodePool
//! that can take it; then committing the placement (resources, host ports, limits, topology
//! counts, the claim indices).

use std::collections::BTreeSet;

use super::dense::{add, fits};
use super::topology_plan::{TargetView, TopologyPlan};
use super::{Attempt, Claim, Constraints, Failure, Relaxation, Solver};
use crate::api::labels::is_well_known;
use crate::scheduling::pod::Strength;
use crate::scheduling::pod::effect_name;
use crate::scheduling::requirements::Requirements;
use crate::scheduling::topology::GroupKind;

impl Solver<'_> {
    pub(super) fn place(&mut self, p: usize, relax: &Relaxation) -> Result<(), Failure> {
        let pod = &self.input.pods[p];
        let base = self.pod_requirements(p, relax);
        let topo = &self.pod_topology[p];
        let constraints = Constraints {
            spread: self.active(&topo.spread, relax.dropped_spread),
            affinity: self.active(&topo.affinity, relax.dropped_affinity),
            anti: self.active(&topo.anti_affinity, relax.dropped_anti_affinity),
            prefer_no_schedule_relaxed: relax.prefer_no_schedule_relaxed,
        };
        let alternatives: Vec<Requirements> = if pod.volume_terms.is_empty() {
            vec![base]
        } else {
            pod.volume_terms
                .iter()
                .map(|v| {
                    let mut r = base.clone();
                    r.add_all(v);
                    r
                })
                .collect()
        };
        let mut reasons = Vec::new();
        let mut plans = Vec::new();
        for reqs in alternatives {
            match self.plan_topology(p, &constraints) {
                Ok(plan) => plans.push((reqs, plan)),
                Err(reason) => reasons.push(reason),
            }
        }
        for (reqs, plan) in &plans {
            let found = (0..self.nodes.len()).find_map(|n| {
                self.try_node(p, n, reqs, &constraints, plan)
                    .map(|extra| (n, extra))
            });
            if let Some((n, _)) = found {
                self.commit_node(p, n, &constraints);
                return Ok(());
            }
        }
        for (reqs, plan) in &plans {
            let sets = self.candidates(p, &constraints, plan);
            let found = Merge::new(&sets).find_map(|(_, c)| {
                self.try_claim(p, c, reqs, &constraints, plan)
                    .map(|a| (c, a))
            });
            if let Some((c, attempt)) = found {
                self.commit_claim(p, c, attempt, &constraints);
                return Ok(());
            }
        }
        let mut awaiting_reservation = false;
        'alternatives: for (reqs, plan) in &plans {
            for pool in 0..self.pools.len() {
                match self.try_new_claim(p, pool, reqs, &constraints, plan) {
                    Ok((claim, reserved)) => {
                        self.claims.push(claim);
                        let c = self.claims.len() - 1;
                        let attempt = Attempt {
                            requirements: None,
                            types: self.claims[c].types.clone(),
                            reserved,
                        };
                        self.commit_claim(p, c, attempt, &constraints);
                        return Ok(());
                    }
                    Err(failure) => {
                        reasons.push(format!(
                            "NodePool {:?}: {}",
                            self.pools[pool].name, failure.reason
                        ));
                        // A pod that could use this NodePool's reserved capacity does not fall
                        // back to NodePools of lower weight (upstream's rule).
                        if failure.awaiting_reservation {
                            awaiting_reservation = true;
                            break 'alternatives;
                        }
                    }
                }
            }
        }
        if self.pools.is_empty() {
            reasons.push("no NodePool is ready".to_string());
        }
        reasons.dedup();
        Err(Failure {
            reason: reasons.join("; "),
            awaiting_reservation,
        })
    }

    /// The planned claims a pod may go to, fewest pods first: a free set when one of the pod's
    /// hostname constraints admits only claims without a matching pod, else every claim.
    /// The planned claims a pod may go to, as ordered sets whose union holds every claim it could
    /// fit (fewest pods first): every claim; or the claims free of a one-per-host group that
    /// binds the pod; or the claims pinned to (or still open for) the domains its topology
    /// permits — whichever is smallest. Scanning a superset in the same order keeps first-fit
    /// exactly as if every claim were tried.
    pub(super) fn candidates<'s>(
        &'s self,
        p: usize,
        c: &Constraints,
        plan: &TopologyPlan,
    ) -> Vec<&'s BTreeSet<(usize, usize)>> {
        let pod = &self.input.pods[p];
        let mut best: Vec<&BTreeSet<(usize, usize)>> = vec![&self.claim_order];
        let mut best_len = self.claim_order.len();
        let restricting = c.anti.iter().chain(c.spread.iter()).filter(|r| {
            let g = &self.topology.groups[r.group];
            match g.kind {
                GroupKind::AntiAffinity => true,
                GroupKind::Spread { max_skew, .. } => {
                    max_skew == 1 && g.counts_pod(&pod.namespace, &pod.labels)
                }
                GroupKind::Affinity => false,
            }
        });
        for r in restricting {
            if let Some(set) = self.free.get(&r.group)
                && set.len() < best_len
            {
                best_len = set.len();
                best = vec![set];
            }
        }
        for (k, kp) in &plan.keys {
            let mut sets: Vec<&BTreeSet<(usize, usize)>> = vec![&self.unpinned[*k]];
            sets.extend(
                (0..self.universe[*k].len())
                    .filter(|d| kp.permits(*d))
                    .map(|d| &self.by_pin[*k][d]),
            );
            let len: usize = sets.iter().map(|s| s.len()).sum();
            if len < best_len {
                best_len = len;
                best = sets;
            }
        }
        best
    }

    pub(super) fn try_node(
        &self,
        p: usize,
        n: usize,
        reqs: &Requirements,
        c: &Constraints,
        plan: &TopologyPlan,
    ) -> Option<Requirements> {
        let node = &self.nodes[n];
        let pod = &self.input.pods[p];
        if !fits(&node.used, &self.requests[p], &node.alloc) {
            return None;
        }
        if pod
            .tolerates(&node.node.taints, c.prefer_no_schedule_relaxed)
            .is_err()
            || !reqs.matches_labels(&node.node.labels)
        {
            return None;
        }
        if pod
            .host_ports
            .iter()
            .any(|h| node.host_ports.iter().any(|o| o.conflicts(h)))
        {
            return None;
        }
        if !self.hostname_ok(p, n, c) {
            return None;
        }
        if !within_attach_limits(node, pod) {
            return None;
        }
        let view = TargetView::Node {
            labels: &node.node.labels,
            solver: self,
        };
        let extra = self.target_topology(plan, &view, reqs)?;
        extra.matches_labels(&node.node.labels).then_some(extra)
    }

    pub(super) fn try_claim(
        &self,
        p: usize,
        c: usize,
        reqs: &Requirements,
        constraints: &Constraints,
        plan: &TopologyPlan,
    ) -> Option<Attempt> {
        let claim = &self.claims[c];
        let pod = &self.input.pods[p];
        let pool = &self.pools[claim.pool];
        let request = &self.requests[p];
        if !fits(&claim.used, request, &claim.max_alloc) {
            return None;
        }
        if pod
            .tolerates(pool.taints, constraints.prefer_no_schedule_relaxed)
            .is_err()
        {
            return None;
        }
        if pod
            .host_ports
            .iter()
            .any(|h| claim.host_ports.iter().any(|o| o.conflicts(h)))
        {
            return None;
        }
        if !self.hostname_ok(p, self.nodes.len() + c, constraints) {
            return None;
        }
        // A claim already pinned to a domain the plan rules out: reject before requirement work.
        for (k, kp) in &plan.keys {
            if let Some(d) = claim.pinned[*k]
                && !kp.permits(d)
            {
                return None;
            }
        }
        claim.requirements.compatible(reqs, is_well_known).ok()?;
        // Most pods add no node requirements: borrow the claim's until something changes.
        let narrowed_owned;
        let narrowed: &Requirements = if reqs.is_empty() {
            &claim.requirements
        } else {
            let mut r = claim.requirements.clone();
            r.add_all(reqs);
            narrowed_owned = r;
            &narrowed_owned
        };
        let target = TargetView::Claim {
            pool,
            types: &claim.types,
            pinned: &claim.pinned,
        };
        let extra = self.target_topology(plan, &target, narrowed)?;
        // Pins that repeat what the claim already is change nothing: skip re-filtering types.
        let changed = !reqs.is_empty()
            || extra
                .iter()
                .any(|(k, r)| claim.requirements.get(k) != Some(r));
        let requirements = if changed {
            let mut r = narrowed.clone();
            r.add_all(&extra);
            Some(r)
        } else {
            None
        };
        let final_reqs = requirements.as_ref().unwrap_or(&claim.requirements);
        let compat = changed.then(|| self.compatible_types(claim.pool, final_reqs));
        let types: Vec<u32> = claim
            .types
            .iter()
            .copied()
            .filter(|t| {
                let view = &pool.types[*t as usize];
                fits(&claim.used, request, &view.alloc)
                    && compat.as_ref().is_none_or(|c| c[*t as usize])
            })
            .collect();
        if types.is_empty() {
            return None;
        }
        // Fewer types (by requirements or by fit) may no longer cover a requirement's minValues.
        if changed || types.len() != claim.types.len() {
            self.check_min_values(claim.pool, final_reqs, &types).ok()?;
        }
        let reserved = self
            .reservations_for(claim.pool, &types, final_reqs, &claim.reserved)
            .ok()?;
        Some(Attempt {
            requirements,
            types,
            reserved,
        })
    }

    pub(super) fn try_new_claim(
        &self,
        p: usize,
        pool_index: usize,
        reqs: &Requirements,
        constraints: &Constraints,
        plan: &TopologyPlan,
    ) -> Result<(Claim, BTreeSet<String>), Failure> {
        let pool = &self.pools[pool_index];
        let pod = &self.input.pods[p];
        if let Err(taint) = pod.tolerates(pool.taints, constraints.prefer_no_schedule_relaxed) {
            return Err(format!(
                "does not tolerate taint {}={}:{}",
                taint.key,
                taint.value.as_deref().unwrap_or_default(),
                effect_name(taint.effect)
            )
            .into());
        }
        pool.requirements
            .compatible(reqs, is_well_known)
            .map_err(|e| format!("incompatible requirements, {e}"))?;
        if let Some(port) = pod
            .host_ports
            .iter()
            .find(|h| pool.daemon_host_ports.iter().any(|d| d.conflicts(h)))
        {
            return Err(format!(
                "host port {}/{} is bound by a DaemonSet pod on every new node",
                port.port, port.protocol
            )
            .into());
        }
        if let Some(limit) = pool.nodes_limit
            && pool.node_count >= limit
        {
            return Err(format!("limit nodes={limit} reached").into());
        }
        let mut narrowed = pool.requirements.clone();
        narrowed.add_all(reqs);
        let within_limits = self.types_within_limits(p, pool_index, &narrowed)?;
        let slot = self.nodes.len() + self.claims.len();
        if !self.hostname_ok(p, slot, constraints) {
            return Err(
                "pod affinity on kubernetes.io/hostname cannot be met by a new node"
                    .to_string()
                    .into(),
            );
        }
        let unpinned = vec![None; self.keys.len()];
        let target = TargetView::Claim {
            pool,
            types: &within_limits,
            pinned: &unpinned,
        };
        let extra = self
            .target_topology(plan, &target, &narrowed)
            .ok_or_else(|| {
                "no topology domain satisfies the pod's spread and affinity".to_string()
            })?;
        let types = if extra.is_empty() {
            within_limits
        } else {
            narrowed.add_all(&extra);
            let compat = self.compatible_types(pool_index, &narrowed);
            within_limits
                .into_iter()
                .filter(|t| compat[*t as usize])
                .collect()
        };
        if types.is_empty() {
            return Err("no instance type offers the topology domain the pod needs"
                .to_string()
                .into());
        }
        self.check_min_values(pool_index, &narrowed, &types)?;
        let reserved = self.reservations_for(pool_index, &types, &narrowed, &BTreeSet::new())?;
        let width = self.space.names.len();
        let mut claim = Claim {
            pool: pool_index,
            requirements: narrowed,
            types,
            used: vec![0; width],
            max_alloc: vec![0; width],
            max_capacity: vec![0; width],
            pods: Vec::new(),
            host_ports: pool.daemon_host_ports.clone(),
            pinned: vec![None; self.keys.len()],
            reserved: BTreeSet::new(),
        };
        self.refresh_maxima(&mut claim);
        Ok((claim, reserved))
    }

    /// The types of the pool that satisfy `narrowed`, fit pod `p`'s requests and keep the pool
    /// within its limits; if none, why (the most specific reason).
    fn types_within_limits(
        &self,
        p: usize,
        pool_index: usize,
        narrowed: &Requirements,
    ) -> Result<Vec<u32>, String> {
        let pool = &self.pools[pool_index];
        let request = &self.requests[p];
        let zero = vec![0; self.space.names.len()];
        let (mut compatible, mut fitting) = (0, 0);
        let mut within_limits = Vec::new();
        let compat = self.compatible_types(pool_index, narrowed);
        for (t, view) in pool.types.iter().enumerate() {
            if !compat[t] {
                continue;
            }
            compatible += 1;
            if !fits(&zero, request, &view.alloc) {
                continue;
            }
            fitting += 1;
            if pool
                .limits
                .iter()
                .all(|(dim, limit)| pool.used[*dim] + view.capacity[*dim] <= *limit)
            {
                within_limits.push(t as u32);
            }
        }
        if !within_limits.is_empty() {
            return Ok(within_limits);
        }
        Err(if pool.types.is_empty() {
            "no instance type satisfies the NodePool's requirements".to_string()
        } else if compatible == 0 {
            format!("no instance type satisfies requirements {narrowed}")
        } else if fitting == 0 {
            format!(
                "no instance type has enough resources for requests {} (plus daemonset overhead)",
                self.space.sparse(request)
            )
        } else {
            let limits: Vec<String> = pool
                .limits
                .iter()
                .map(|(d, l)| format!("{}={l}", self.space.names[*d]))
                .collect();
            format!("limits {} would be exceeded", limits.join(", "))
        })
    }

    pub(super) fn refresh_maxima(&self, claim: &mut Claim) {
        let pool = &self.pools[claim.pool];
        claim.max_alloc.iter_mut().for_each(|v| *v = i64::MIN);
        claim.max_capacity.iter_mut().for_each(|v| *v = 0);
        for t in &claim.types {
            let view = &pool.types[*t as usize];
            for (i, v) in view.alloc.iter().enumerate() {
                claim.max_alloc[i] = claim.max_alloc[i].max(*v);
            }
            for (i, v) in view.capacity.iter().enumerate() {
                claim.max_capacity[i] = claim.max_capacity[i].max(*v);
            }
        }
    }

    /// Hostname-keyed checks (each node or claim is its own domain), cheap enough to run before
    /// any requirement work.
    pub(super) fn hostname_ok(&self, p: usize, slot: usize, c: &Constraints) -> bool {
        let pod = &self.input.pods[p];
        for r in &c.spread {
            let g = &self.topology.groups[r.group];
            if let GroupKind::Spread { max_skew, .. } = g.kind
                && g.is_hostname()
                && g.counts_pod(&pod.namespace, &pod.labels)
                && g.count(slot) as i64 + 1 > max_skew as i64
            {
                return false;
            }
        }
        for r in &c.affinity {
            let g = &self.topology.groups[r.group];
            if g.is_hostname()
                && g.count(slot) == 0
                && (g.total() > 0 || !g.counts_pod(&pod.namespace, &pod.labels))
            {
                return false;
            }
        }
        for r in &c.anti {
            let g = &self.topology.groups[r.group];
            if g.is_hostname() && g.count(slot) > 0 {
                return false;
            }
        }
        for g in &self.topology.anti_groups {
            let g = &self.topology.groups[*g];
            if g.is_hostname()
                && g.has_owners()
                && g.owner_count(slot) > 0
                && g.counts_pod(&pod.namespace, &pod.labels)
            {
                return false;
            }
        }
        true
    }

    /// Counts the pod in every group that selects it, and as an owner of its anti-affinity
    /// terms, in the domains of the target (`domain_of(group)`).
    pub(super) fn record(
        &mut self,
        p: usize,
        slot: usize,
        domain_of: &dyn Fn(&Self, usize) -> Option<usize>,
        c: &Constraints,
    ) {
        for i in 0..self.counted_by[p].len() {
            let g = self.counted_by[p][i];
            if let Some(d) = domain_of(self, g) {
                if self.group_key[g].is_some() {
                    self.topology.groups[g].record_at(d, slot);
                } else {
                    self.topology.groups[g].record(d);
                }
            }
        }
        // Only required terms keep other pods away (inverse anti-affinity), as upstream's
        // `updateInverseAntiAffinity`: a preferred term binds only the pod that has it, so a peer
        // relaxing its own copy of the term is not still blocked by this pod's.
        for r in c.anti.iter().filter(|r| r.strength == Strength::Required) {
            if let Some(d) = domain_of(self, r.group) {
                self.topology.groups[r.group].record_owner(d);
            }
        }
    }

    pub(super) fn commit_node(&mut self, p: usize, n: usize, c: &Constraints) {
        let request = self.requests[p].clone();
        let node = &mut self.nodes[n];
        add(&mut node.used, &request);
        node.host_ports
            .extend(self.input.pods[p].host_ports.iter().cloned());
        for (driver, ids) in &self.input.pods[p].csi_volumes {
            node.volumes
                .entry(driver.clone())
                .or_default()
                .extend(ids.iter().cloned());
        }
        node.placed.push(p);
        self.record(p, n, &|solver, g| solver.node_domain(n, g), c);
    }

    pub(super) fn commit_claim(
        &mut self,
        p: usize,
        c: usize,
        attempt: Attempt,
        constraints: &Constraints,
    ) {
        let request = self.requests[p].clone();
        let old_pods = self.claims[c].pods.len();
        let held = std::mem::take(&mut self.claims[c].reserved);
        self.hold(&held, &attempt.reserved);
        self.claims[c].reserved = attempt.reserved.clone();
        let is_new = old_pods == 0;
        let types_changed = attempt.types.len() != self.claims[c].types.len() || is_new;
        {
            let claim = &mut self.claims[c];
            if let Some(requirements) = attempt.requirements {
                claim.requirements = requirements;
            }
            claim.types = attempt.types;
            add(&mut claim.used, &request);
            claim
                .host_ports
                .extend(self.input.pods[p].host_ports.iter().cloned());
            claim.pods.push(p);
        }
        if types_changed {
            // Limits: swap this claim's old worst case for the new one.
            let old_capacity = self.claims[c].max_capacity.clone();
            let mut claim = std::mem::replace(&mut self.claims[c], placeholder());
            self.refresh_maxima(&mut claim);
            let pool = &mut self.pools[claim.pool];
            if is_new {
                pool.node_count += 1;
            } else {
                pool.used
                    .iter_mut()
                    .zip(&old_capacity)
                    .for_each(|(u, o)| *u -= o);
            }
            add(&mut pool.used, &claim.max_capacity);
            self.claims[c] = claim;
        }
        self.claim_order.remove(&(old_pods, c));
        self.claim_order.insert((old_pods + 1, c));
        let slot = self.nodes.len() + c;
        // Keys the claim is now pinned to; the pin indices follow.
        for k in 0..self.keys.len() {
            match self.claims[c].pinned[k] {
                Some(d) => self.by_pin[k][d].remove(&(old_pods, c)),
                None => self.unpinned[k].remove(&(old_pods, c)),
            };
            if self.claims[c].pinned[k].is_some() {
                self.by_pin[k][self.claims[c].pinned[k].unwrap_or_default()]
                    .insert((old_pods + 1, c));
                continue;
            }
            let pin = self.claims[c]
                .requirements
                .get(&self.keys[k])
                .filter(|r| r.len() == 1)
                .and_then(|r| r.values().next().and_then(|v| self.domain_id(k, v)));
            self.claims[c].pinned[k] = pin;
            match pin {
                Some(d) => self.by_pin[k][d].insert((old_pods + 1, c)),
                None => self.unpinned[k].insert((old_pods + 1, c)),
            };
        }
        for (g, set) in self.free.iter_mut() {
            let was_free = set.remove(&(old_pods, c)) || is_new;
            let counted = self.counted_by[p].contains(g);
            if was_free && !counted {
                set.insert((old_pods + 1, c));
            }
        }
        self.record(
            p,
            slot,
            &|solver, g| match solver.group_key[g] {
                None => Some(slot),
                Some(k) => solver.claims[c].pinned[k],
            },
            constraints,
        );
    }
}

fn placeholder() -> Claim {
    Claim {
        pool: 0,
        requirements: Requirements::new(),
        types: Vec::new(),
        used: Vec::new(),
        max_alloc: Vec::new(),
        max_capacity: Vec::new(),
        pods: Vec::new(),
        host_ports: Vec::new(),
        pinned: Vec::new(),
        reserved: BTreeSet::new(),
    }
}

/// Merges ordered sets of `(pod count, claim)` into one ascending sequence.
struct Merge<'s> {
    heads: Vec<std::iter::Peekable<std::collections::btree_set::Iter<'s, (usize, usize)>>>,
}

impl<'s> Merge<'s> {
    fn new(sets: &[&'s BTreeSet<(usize, usize)>]) -> Self {
        Self {
            heads: sets.iter().map(|s| s.iter().peekable()).collect(),
        }
    }
}

impl Iterator for Merge<'_> {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<Self::Item> {
        let mut best: Option<(usize, (usize, usize))> = None;
        for (i, head) in self.heads.iter_mut().enumerate() {
            if let Some(&&item) = head.peek()
                && best.is_none_or(|(_, b)| item < b)
            {
                best = Some((i, item));
            }
        }
        let (i, item) = best?;
        self.heads[i].next();
        Some(item)
    }
}

/// Whether the pod's volumes still fit the node's CSI attach limits: for each driver with a
/// limit, the distinct volumes attached (a volume shared with a pod already there counts once)
/// stay at or under it. Upstream's `volumeusage.go`.
fn within_attach_limits(node: &super::Node<'_>, pod: &crate::scheduling::PodInfo) -> bool {
    pod.csi_volumes.iter().all(|(driver, ids)| {
        let Some(&limit) = node.node.volume_limits.get(driver) else {
            return true;
        };
        let attached = node.volumes.get(driver);
        let new = ids
            .iter()
            .filter(|id| attached.is_none_or(|a| !a.contains(*id)))
            .count() as i64;
        attached.map_or(0, |a| a.len() as i64) + new <= limit
    })
}
