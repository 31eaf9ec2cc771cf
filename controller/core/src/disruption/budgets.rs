//! Disruption budgets, counted at one choke point for every method.
//!
//! Per NodePool and reason: the nodes counted are its managed, initialized nodes; those already
//! going away (deleting, tainted by a command, or not Ready) use budget up. A budget is active
//! when it has no schedule, or when its cron schedule (UTC) last fired less than `duration` ago.
//! The allowed count is the smallest over the active budgets that name the reason (or name
//! none): `nodes` as a count, or a percentage of the pool's nodes rounded up; a budget that does
//! not parse allows nothing (as upstream). Every method takes from the same [`Budgets`], so a
//! command's nodes count against every later decision of the pass.

use std::collections::BTreeMap;

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::view::ClusterView;
use crate::api::NodePool;
use crate::api::common::parse_duration;
use crate::api::nodepool::{Budget, DisruptionReason, parse_schedule};

/// One pool's node counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolCount {
    /// Managed, initialized nodes (including those going away).
    pub total: u64,
    /// Of those, nodes already going away.
    pub disrupting: u64,
}

/// What the budgets allow, and what this pass has taken.
#[derive(Clone, Debug, Default)]
pub struct Budgets {
    now: Timestamp,
    counts: BTreeMap<String, PoolCount>,
    budgets: BTreeMap<String, Vec<Budget>>,
    /// Nodes taken this pass, per pool (every reason).
    taken: BTreeMap<String, u64>,
}

/// Whether `budget` is active at `now` (`Err`: it does not parse).
pub fn is_active(budget: &Budget, now: Timestamp) -> Result<bool, String> {
    let (Some(schedule), Some(duration)) = (&budget.schedule, &budget.duration) else {
        return Ok(true);
    };
    let cron = parse_schedule(schedule)?;
    let duration = parse_duration(duration)?;
    let zoned = now.to_zoned(TimeZone::UTC);
    let Ok(fired) = cron.find_previous_occurrence(&zoned, true) else {
        return Ok(false);
    };
    let elapsed = now.duration_since(fired.timestamp());
    Ok(!elapsed.is_negative() && elapsed.unsigned_abs() < duration)
}

/// The nodes `budget` allows out of `total` (`Err`: `nodes` does not parse).
pub fn nodes_allowed(budget: &Budget, total: u64) -> Result<u64, String> {
    let nodes = budget.nodes.trim();
    match nodes.strip_suffix('%') {
        Some(percent) => {
            let percent: u64 = percent
                .parse()
                .map_err(|_| format!("budget nodes {nodes:?} is not a count or a percentage"))?;
            Ok((total * percent.min(100)).div_ceil(100))
        }
        None => nodes
            .parse()
            .map_err(|_| format!("budget nodes {nodes:?} is not a count or a percentage")),
    }
}

fn applies(budget: &Budget, reason: DisruptionReason) -> bool {
    budget
        .reasons
        .as_ref()
        .is_none_or(|r| r.is_empty() || r.contains(&reason))
}

impl Budgets {
    /// The budgets of `view`'s pools over its managed nodes.
    pub fn new(view: &ClusterView) -> Self {
        let mut counts: BTreeMap<String, PoolCount> = BTreeMap::new();
        for facts in view.facts.values() {
            if !facts.initialized && !facts.deleting && !facts.disrupting {
                continue;
            }
            let count = counts.entry(facts.pool.clone()).or_default();
            count.total += 1;
            if facts.deleting || facts.disrupting || !facts.ready {
                count.disrupting += 1;
            }
        }
        Self {
            now: view.now,
            counts,
            budgets: view
                .pools
                .iter()
                .map(|p: &NodePool| {
                    (
                        p.metadata.name.clone().unwrap_or_default(),
                        p.spec.disruption.budgets.clone(),
                    )
                })
                .collect(),
            taken: BTreeMap::new(),
        }
    }

    /// What `pool`'s active budgets allow for `reason` over its nodes, before those already
    /// disrupting are subtracted (upstream's `GetAllowedDisruptionsByReason`, the
    /// `nodepools_allowed_disruptions` gauge): `i32::MAX` when no budget applies (as upstream),
    /// 0 when one is misconfigured.
    pub fn limit(&self, pool: &str, reason: DisruptionReason) -> u64 {
        match self.tightest(pool, reason) {
            Ok(Some((allowed, _))) => allowed,
            Ok(None) => i32::MAX as u64,
            Err(_) => 0,
        }
    }

    /// The tightest active budget of `pool` for `reason`: how many nodes it allows and which it
    /// is; `None` when none applies, `Err` when one is misconfigured.
    fn tightest(
        &self,
        pool: &str,
        reason: DisruptionReason,
    ) -> Result<Option<(u64, String)>, String> {
        let count = self.counts.get(pool).copied().unwrap_or_default();
        let mut limit: Option<(u64, String)> = None;
        for budget in self.budgets.get(pool).into_iter().flatten() {
            if !applies(budget, reason) {
                continue;
            }
            let allowed = match is_active(budget, self.now)
                .and_then(|active| Ok((active, nodes_allowed(budget, count.total)?)))
            {
                Ok((false, _)) => continue,
                Ok((true, n)) => n,
                Err(err) => {
                    return Err(format!(
                        "budget of nodepool {pool} is misconfigured ({err}), which allows no disruption"
                    ));
                }
            };
            if limit.as_ref().is_none_or(|(n, _)| allowed < *n) {
                let window = match (&budget.schedule, &budget.duration) {
                    (Some(s), Some(d)) => format!(" in its window {s:?} for {d}"),
                    _ => String::new(),
                };
                limit = Some((allowed, format!("nodes {:?}{window}", budget.nodes)));
            }
        }
        Ok(limit)
    }

    /// How many more nodes of `pool` may be disrupted for `reason` now; `Err` explains a zero.
    pub fn allowed(&self, pool: &str, reason: DisruptionReason) -> Result<u64, String> {
        let count = self.counts.get(pool).copied().unwrap_or_default();
        let taken = self.taken.get(pool).copied().unwrap_or(0);
        let Some((allowed, which)) = self.tightest(pool, reason)? else {
            return Ok(u64::MAX);
        };
        let used = count.disrupting + taken;
        match allowed.saturating_sub(used) {
            0 => Err(format!(
                "budget of nodepool {pool} ({which}) allows {allowed} of {} nodes to be disrupted for {reason:?} and {used} already are",
                count.total
            )),
            left => Ok(left),
        }
    }

    /// Takes one node of `pool` (for every reason: a node is disrupting, whatever the method).
    pub fn take(&mut self, pool: &str) {
        *self.taken.entry(pool.to_string()).or_default() += 1;
    }

    /// The node counts of `pool`.
    pub fn count(&self, pool: &str) -> PoolCount {
        self.counts.get(pool).copied().unwrap_or_default()
    }
}
