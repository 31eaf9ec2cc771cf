//! Which managed nodes may be disrupted, and in which order.
//!
//! The checks every graceful method shares run first, and the first that fails is the node's one
//! blocker ([`check`]): NodePool known, initialized, not already going away, not in a recently
//! failed command, not nominated for pending pods, no active `karpenter.sh/do-not-disrupt` on the
//! node or on one of its pods (`"true"`, or a duration such as `"30m"` counted from the object's
//! creation), no PDB that forbids evicting one of its pods, priced (instance type, zone and
//! capacity type known). Consolidation adds [`consolidatable`]: `consolidateAfter` has passed
//! since the node's last pod event.
//!
//! Candidates are ordered as upstream orders them: by savings relative to disruption cost,
//! `price / (1 + cost)`, highest first, where the cost sums the pods' eviction costs
//! (pod-deletion-cost, priority) scaled by the fraction of the node's `expireAfter` still left.

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};

use super::pdb;
use super::view::{ClusterView, NodeFacts};
use crate::api::NodePool;
use crate::api::common::parse_duration;
use crate::api::labels::DO_NOT_DISRUPT_ANNOTATION;
use crate::catalog::Catalog;

/// A node a method may disrupt.
#[derive(Clone, Debug)]
pub struct Candidate<'v> {
    pub facts: &'v NodeFacts,
    pub pool: &'v NodePool,
    /// Hourly price of its offering (instance type, zone, capacity type).
    pub price: f64,
    /// Sum of its reschedulable pods' eviction costs, scaled by lifetime remaining.
    pub disruption_cost: f64,
}

impl Candidate<'_> {
    /// Upstream's consolidation order key: savings per unit of disruption.
    pub fn savings_ratio(&self) -> f64 {
        self.price / (1.0 + self.disruption_cost.max(0.0))
    }
}

/// Orders candidates by savings ratio, highest first (ties by node name).
pub fn sort(candidates: &mut [Candidate<'_>]) {
    candidates.sort_by(|a, b| {
        b.savings_ratio()
            .total_cmp(&a.savings_ratio())
            .then_with(|| a.facts.node.cmp(&b.facts.node))
    });
}

/// Whether a `karpenter.sh/do-not-disrupt` value protects an object created at `created` now:
/// `"true"` always; a duration until the object is that old; anything else not at all (upstream
/// treats an invalid value as absent).
pub fn do_not_disrupt_active(value: &str, created: Option<Timestamp>, now: Timestamp) -> bool {
    if value == "true" {
        return true;
    }
    let Ok(duration) = parse_duration(value) else {
        return false;
    };
    let Some(created) = created else {
        return true;
    };
    SignedDuration::try_from(duration)
        .ok()
        .and_then(|d| created.checked_add(d).ok())
        .is_none_or(|until| now < until)
}

/// What the engine is told besides the view.
#[derive(Clone, Debug, Default)]
pub struct Exclusions {
    /// Nodes of recently failed commands, with why (they are not retried at once).
    pub failed: BTreeMap<String, String>,
    /// Nodes pending pods are about to land on: the live provisioner's nominations
    /// ([`crate::provisioning::Nominations`], as upstream's disruption reads them), or `None`
    /// where no provisioner runs (`karpenter plan`, benchmarks, tests): the engine then solves
    /// the view's pending pods itself to find them.
    pub nominated: Option<BTreeSet<String>>,
}

/// The hourly price of a node's offering.
pub fn price(facts: &NodeFacts, catalog: &Catalog) -> Option<f64> {
    let it = catalog.get(facts.instance_type.as_deref()?)?;
    let zone = facts.zone.as_deref()?;
    let capacity_type = facts.capacity_type.as_deref()?;
    it.offerings
        .iter()
        .find(|o| o.zone == zone && o.capacity_type.label() == capacity_type)
        .map(|o| o.price)
}

/// Fraction of the node's `expireAfter` still ahead (1 without one).
fn lifetime_remaining(facts: &NodeFacts, now: Timestamp) -> f64 {
    match (facts.expire_after, facts.created) {
        (Some(expire), Some(created)) if !expire.is_zero() => {
            let age = now.duration_since(created).as_secs_f64().max(0.0);
            ((expire.as_secs_f64() - age) / expire.as_secs_f64()).clamp(0.0, 1.0)
        }
        _ => 1.0,
    }
}

/// The pod-level blocker of `facts`, if any: an active do-not-disrupt pod or a PDB.
pub fn pod_blocker(view: &ClusterView, facts: &NodeFacts) -> Option<String> {
    for pod in facts.pods.iter().filter(|p| p.reschedulable) {
        if let Some(value) = &pod.do_not_disrupt
            && do_not_disrupt_active(value, pod.created, view.now)
        {
            return Some(format!(
                "pod {} has {DO_NOT_DISRUPT_ANNOTATION}={value:?}",
                pod.key
            ));
        }
        if let Some(reason) = pdb::blocks(&view.pdbs, &pod.key) {
            return Some(reason);
        }
    }
    None
}

/// The checks every graceful method shares (see the module docs); `Err` names the blocker.
/// `pod_blockers`: whether pod-level blockers count (drift ignores them when the claim has a
/// terminationGracePeriod, as upstream).
pub fn check<'v>(
    view: &'v ClusterView,
    catalog: &Catalog,
    facts: &'v NodeFacts,
    exclusions: &Exclusions,
    pod_blockers: bool,
) -> Result<Candidate<'v>, String> {
    let pool = view
        .pool(&facts.pool)
        .ok_or_else(|| format!("nodepool {} is not found or not usable", facts.pool))?;
    if facts.deleting {
        return Err("is being deleted".into());
    }
    if facts.disrupting {
        return Err("is being disrupted by a command in progress".into());
    }
    if !facts.initialized {
        return Err("is not initialized".into());
    }
    if let Some(why) = exclusions.failed.get(&facts.node) {
        return Err(format!(
            "a recent disruption command failed ({why}); not retried yet"
        ));
    }
    if exclusions
        .nominated
        .as_ref()
        .is_some_and(|n| n.contains(&facts.node))
    {
        return Err("is nominated for pending pods".into());
    }
    if let Some(value) = &facts.do_not_disrupt
        && do_not_disrupt_active(value, facts.created, view.now)
    {
        return Err(format!("node has {DO_NOT_DISRUPT_ANNOTATION}={value:?}"));
    }
    if pod_blockers && let Some(reason) = pod_blocker(view, facts) {
        return Err(reason);
    }
    let price = price(facts, catalog).ok_or_else(|| {
        "its instance type, zone or capacity type is unknown, so it cannot be priced".to_string()
    })?;
    let remaining = lifetime_remaining(facts, view.now);
    let disruption_cost = facts
        .pods
        .iter()
        .filter(|p| p.reschedulable)
        .map(|p| p.eviction_cost * remaining)
        .sum();
    Ok(Candidate {
        facts,
        pool,
        price,
        disruption_cost,
    })
}

/// The first moment after `now` at which a time-based gate of a node opens or closes:
/// `consolidateAfter` passing since it went quiet (or since a replacement launched, plus
/// [`REPLACEMENT_SETTLE`]), a `do-not-disrupt` duration of the node or one of its pods ending,
/// or, with a scheduled budget in any pool, the next minute (cron's granularity). Until then a
/// pass over an unchanged cluster decides what the last one did (candidate order aside, which
/// follows the nodes' ages); the orchestration skips such passes as upstream's consolidated
/// state does.
pub fn next_gate_change(view: &ClusterView, now: Timestamp) -> Option<Timestamp> {
    let plus = |t: Timestamp, d: std::time::Duration| {
        SignedDuration::try_from(d)
            .ok()
            .and_then(|d| t.checked_add(d).ok())
    };
    let until = |value: &str, created: Option<Timestamp>| match (value, created) {
        ("true", _) | (_, None) => None,
        (value, Some(created)) => parse_duration(value).ok().and_then(|d| plus(created, d)),
    };
    let mut times: Vec<Timestamp> = Vec::new();
    for facts in view.facts.values() {
        let after = view
            .pool(&facts.pool)
            .and_then(|pool| parse_duration(&pool.spec.disruption.consolidate_after).ok());
        if let Some(after) = after {
            times.extend(facts.quiet_since.and_then(|t| plus(t, after)));
            times.extend(
                facts
                    .replacement_since
                    .and_then(|t| plus(t, after + REPLACEMENT_SETTLE)),
            );
        }
        times.extend(
            facts
                .do_not_disrupt
                .as_deref()
                .and_then(|v| until(v, facts.created)),
        );
        for pod in &facts.pods {
            times.extend(
                pod.do_not_disrupt
                    .as_deref()
                    .and_then(|v| until(v, pod.created)),
            );
        }
    }
    let scheduled = view.pools.iter().any(|p| {
        p.spec
            .disruption
            .budgets
            .iter()
            .any(|b| b.schedule.is_some())
    });
    if scheduled {
        times.extend(plus(now, std::time::Duration::from_secs(60)));
    }
    times.into_iter().filter(|t| *t > now).min()
}

/// How long after its launch a replacement node is left alone by consolidation, on top of its
/// NodePool's `consolidateAfter` (the `consolidation-churn` invariant's bound): a node launched
/// to replace others is not itself replaced while the cluster is still settling around it.
pub const REPLACEMENT_SETTLE: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// Consolidation's own gate: `consolidateAfter` is not `Never` and has passed since the node
/// went quiet; a node launched as a replacement also waits `consolidateAfter` +
/// [`REPLACEMENT_SETTLE`] from its launch.
pub fn consolidatable(candidate: &Candidate<'_>, now: Timestamp) -> Result<(), String> {
    let after = &candidate.pool.spec.disruption.consolidate_after;
    if after == "Never" {
        return Err(format!(
            "consolidateAfter is Never on nodepool {}",
            candidate.facts.pool
        ));
    }
    let duration =
        parse_duration(after).map_err(|err| format!("consolidateAfter does not parse ({err})"))?;
    if let Some(launched) = candidate.facts.replacement_since {
        let settled = SignedDuration::try_from(duration + REPLACEMENT_SETTLE)
            .ok()
            .and_then(|d| launched.checked_add(d).ok());
        if let Some(settled) = settled
            && now < settled
        {
            return Err(format!(
                "launched as a replacement at {}: consolidateAfter {after} plus {}m must pass before it is consolidated (until {})",
                crate::replacement::rfc3339(launched),
                REPLACEMENT_SETTLE.as_secs() / 60,
                crate::replacement::rfc3339(settled)
            ));
        }
    }
    let Some(since) = candidate.facts.quiet_since else {
        return Ok(());
    };
    let until = SignedDuration::try_from(duration)
        .ok()
        .and_then(|d| since.checked_add(d).ok());
    match until {
        Some(until) if now < until => Err(format!(
            "consolidateAfter {after} has not passed since its last pod event (until {})",
            crate::replacement::rfc3339(until)
        )),
        _ => Ok(()),
    }
}
