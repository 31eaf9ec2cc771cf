//! Drift: a node whose claim says `Drifted=True`, or whose labels its NodePool's requirements no
//! longer allow, is replaced by whatever its pods need (any number of new nodes, no price rule),
//! one node per pass, empty ones first, then the oldest. `consolidateAfter` does not apply; pod
//! blockers do unless the claim has a `terminationGracePeriod` (it bounds the drain anyway).

use super::candidates::{self, Candidate};
use super::consolidation::Replacement;
use super::engine::Pass;
use super::{Command, Method};
use crate::api::labels::{CAPACITY_TYPE_LABEL, ZONE_LABEL};
use crate::api::nodepool::DisruptionReason;
use crate::scheduling::{PlannedClaim, Requirements};

/// A replacement exactly as the solver planned it (drift replaces like for like, at any price).
pub(crate) fn as_planned(planned: PlannedClaim) -> Replacement {
    let reqs = Requirements::from_api(&planned.requirements);
    let values = |key: &str| -> Vec<String> {
        reqs.get(key)
            .map(|r| r.values().map(str::to_string).collect())
            .unwrap_or_default()
    };
    Replacement {
        capacity_type: values(CAPACITY_TYPE_LABEL).join(","),
        zones: values(ZONE_LABEL),
        planned,
    }
}

/// The drift command of this pass, if a drifted node can be replaced now.
pub(crate) fn find(pass: &mut Pass<'_>) -> Option<Command> {
    let mut drifted: Vec<(Candidate<'_>, String)> = Vec::new();
    for facts in pass.view.facts.values() {
        let Some(why) = &facts.drift else { continue };
        let pod_blockers = !facts.has_termination_grace_period;
        match candidates::check(
            pass.view,
            pass.catalog,
            facts,
            &pass.exclusions,
            pod_blockers,
        ) {
            Ok(c) => drifted.push((c, why.clone())),
            Err(reason) => pass.block(&facts.node, format!("drifted ({why}) but {reason}")),
        }
    }
    drifted.sort_by(|(a, _), (b, _)| {
        (!a.facts.is_empty(), a.facts.created, &a.facts.node).cmp(&(
            !b.facts.is_empty(),
            b.facts.created,
            &b.facts.node,
        ))
    });
    for (candidate, why) in drifted {
        let node = candidate.facts.node.clone();
        if let Err(reason) = pass
            .budgets
            .allowed(&candidate.facts.pool, DisruptionReason::Drifted)
        {
            pass.block(&node, format!("drifted ({why}) but {reason}"));
            continue;
        }
        match pass.sim.run(&[candidate.facts]) {
            Ok(sim) => {
                pass.budgets.take(&candidate.facts.pool);
                let replacements = sim.new_claims.into_iter().map(as_planned).collect();
                return Some(Command::new(Method::Drifted, &[&candidate], replacements));
            }
            Err(reason) => pass.block(&node, format!("drifted ({why}) but {reason}")),
        }
    }
    None
}
