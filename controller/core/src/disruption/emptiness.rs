//! Emptiness: nodes no pod would need a new home from (only DaemonSet, mirror or finished pods),
//! past `consolidateAfter`, are deleted together in one command, as many as their budgets allow
//! (whatever the consolidation policy: `WhenEmpty` allows exactly this).

use super::candidates::{self, Candidate};
use super::engine::Pass;
use super::{Command, Method};
use crate::api::nodepool::DisruptionReason;

/// The emptiness command of this pass, if any node qualifies.
pub(crate) fn find(pass: &mut Pass<'_>) -> Option<Command> {
    let mut chosen: Vec<Candidate<'_>> = Vec::new();
    let eligible: Vec<Candidate<'_>> = pass
        .eligible
        .iter()
        .filter(|c| c.facts.is_empty())
        .cloned()
        .collect();
    for candidate in eligible {
        let node = candidate.facts.node.clone();
        if let Err(reason) = candidates::consolidatable(&candidate, pass.view.now) {
            pass.block(&node, reason);
            continue;
        }
        match pass
            .budgets
            .allowed(&candidate.facts.pool, DisruptionReason::Empty)
        {
            Ok(_) => {
                pass.budgets.take(&candidate.facts.pool);
                chosen.push(candidate);
            }
            Err(reason) => pass.block(&node, reason),
        }
    }
    if chosen.is_empty() {
        return None;
    }
    let refs: Vec<&Candidate<'_>> = chosen.iter().collect();
    Some(Command::new(Method::Empty, &refs, Vec::new()))
}

/// Re-checks an emptiness command: every node still empty and within budget.
pub(crate) fn revalidate(pass: &mut Pass<'_>, chosen: &[Candidate<'_>]) -> Result<Command, String> {
    for c in chosen {
        if !c.facts.is_empty() {
            return Err(format!("{} is no longer empty", c.facts.node));
        }
        candidates::consolidatable(c, pass.view.now)
            .map_err(|reason| format!("{}: {reason}", c.facts.node))?;
        pass.budgets
            .allowed(&c.facts.pool, DisruptionReason::Empty)
            .map_err(|reason| format!("{}: {reason}", c.facts.node))?;
        pass.budgets.take(&c.facts.pool);
    }
    let refs: Vec<&Candidate<'_>> = chosen.iter().collect();
    Ok(Command::new(Method::Empty, &refs, Vec::new()))
}
