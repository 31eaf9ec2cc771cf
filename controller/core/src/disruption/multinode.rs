//! Multi-node consolidation: the largest prefix of the candidates (in consolidation order,
//! within budgets) that can go at once — deleted, or replaced by one cheaper node — found by
//! binary search over the prefix length, at least two nodes. Unlike upstream there is no
//! 100-candidate cap and no one-minute timeout: every candidate is in the search.

use super::candidates::{self, Candidate};
use super::consolidation::{self, Replacement};
use super::engine::Pass;
use super::simulate::Simulation;
use super::{Command, Method};
use crate::api::nodepool::{ConsolidationPolicy, DisruptionReason};

/// Candidates consolidation may consider: not empty (emptiness's), pool policy not `WhenEmpty`,
/// `consolidateAfter` passed. The others are blocked with the reason.
pub(crate) fn consolidation_candidates<'v>(pass: &mut Pass<'v>) -> Vec<Candidate<'v>> {
    let mut out = Vec::new();
    for candidate in pass.eligible.clone() {
        if candidate.facts.is_empty() {
            continue;
        }
        let node = candidate.facts.node.clone();
        if candidate.pool.spec.disruption.consolidation_policy == ConsolidationPolicy::WhenEmpty {
            let pods = candidate
                .facts
                .pods
                .iter()
                .filter(|p| p.reschedulable)
                .count();
            pass.block(
                &node,
                format!(
                    "consolidationPolicy WhenEmpty on nodepool {} and {pods} pods run on it",
                    candidate.facts.pool
                ),
            );
            continue;
        }
        if let Err(reason) = candidates::consolidatable(&candidate, pass.view.now) {
            pass.block(&node, reason);
            continue;
        }
        out.push(candidate);
    }
    out
}

/// What a simulation means for consolidation: no new node (delete), one cheaper node (replace),
/// or why neither.
pub(crate) fn outcome(
    sim: Simulation,
    candidates: &[&Candidate<'_>],
    pass: &Pass<'_>,
) -> Result<Vec<Replacement>, String> {
    match sim.new_claims.as_slice() {
        [] => Ok(Vec::new()),
        [one] => {
            consolidation::replacement(candidates, one, pass.catalog, pass.options.spot_to_spot)
                .map(|r| vec![r])
        }
        many => Err(format!(
            "no cheaper replacement: its pods would need {} new nodes",
            many.len()
        )),
    }
}

/// The multi-node consolidation command of this pass, if two or more nodes can go together.
pub(crate) fn find(pass: &mut Pass<'_>) -> Option<Command> {
    let mut budgets = pass.budgets.clone();
    let mut within = Vec::new();
    for candidate in consolidation_candidates(pass) {
        if budgets
            .allowed(&candidate.facts.pool, DisruptionReason::Underutilized)
            .is_ok()
        {
            budgets.take(&candidate.facts.pool);
            within.push(candidate);
        }
    }
    if within.len() < 2 {
        return None;
    }
    let (mut lo, mut hi) = (2, within.len());
    let mut best: Option<Command> = None;
    while lo <= hi {
        let mid = lo + (hi - lo) / 2;
        let prefix: Vec<&Candidate<'_>> = within[..mid].iter().collect();
        let facts: Vec<_> = prefix.iter().map(|c| c.facts).collect();
        let price: f64 = prefix.iter().map(|c| c.price).sum();
        let homeless = pass.room.homeless(pass.view, &facts);
        let tried = match super::prune::hopeless(&homeless, price, pass.catalog, prefix[0].pool) {
            Some(reason) => Err(reason),
            None => pass
                .sim
                .run(&facts)
                .and_then(|sim| outcome(sim, &prefix, pass)),
        };
        match tried {
            Ok(replacements) => {
                best = Some(Command::new(Method::Underutilized, &prefix, replacements));
                lo = mid + 1;
            }
            Err(_) => hi = mid - 1,
        }
    }
    let command = best?;
    for node in &command.nodes {
        pass.budgets.take(&node.pool);
    }
    Some(command)
}

/// Re-checks a consolidation command: within budget, and the simulation still needs the same
/// number of replacements (0 or 1), the replacement still cheaper.
pub(crate) fn revalidate(
    pass: &mut Pass<'_>,
    chosen: &[Candidate<'_>],
    replacements: usize,
) -> Result<Command, String> {
    for c in chosen {
        candidates::consolidatable(c, pass.view.now)
            .map_err(|reason| format!("{}: {reason}", c.facts.node))?;
        pass.budgets
            .allowed(&c.facts.pool, DisruptionReason::Underutilized)
            .map_err(|reason| format!("{}: {reason}", c.facts.node))?;
        pass.budgets.take(&c.facts.pool);
    }
    let refs: Vec<&Candidate<'_>> = chosen.iter().collect();
    let facts: Vec<_> = chosen.iter().map(|c| c.facts).collect();
    let sim = pass.sim.run(&facts)?;
    let found = outcome(sim, &refs, pass)?;
    if found.len() != replacements {
        return Err(format!(
            "the cluster changed: it now needs {} replacements instead of {replacements}",
            found.len()
        ));
    }
    Ok(Command::new(Method::Underutilized, &refs, found))
}
