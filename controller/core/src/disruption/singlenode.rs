//! Single-node consolidation: each candidate in order, alone — deleted when its pods fit on the
//! other nodes, replaced when one cheaper node holds them. The first that works is the command;
//! every other candidate keeps why it did not.

use super::candidates::Candidate;
use super::engine::Pass;
use super::multinode::{consolidation_candidates, outcome};
use super::{Command, Method};
use crate::api::nodepool::DisruptionReason;

/// The single-node consolidation command of this pass, if one candidate can go.
pub(crate) fn find(pass: &mut Pass<'_>) -> Option<Command> {
    for candidate in consolidation_candidates(pass) {
        let node = candidate.facts.node.clone();
        if let Err(reason) = pass
            .budgets
            .allowed(&candidate.facts.pool, DisruptionReason::Underutilized)
        {
            pass.block(&node, reason);
            continue;
        }
        match try_one(pass, &candidate) {
            Ok(command) => {
                pass.budgets.take(&candidate.facts.pool);
                return Some(command);
            }
            Err(reason) => pass.block(&node, reason),
        }
    }
    None
}

fn try_one(pass: &mut Pass<'_>, candidate: &Candidate<'_>) -> Result<Command, String> {
    let homeless = pass.room.homeless(pass.view, &[candidate.facts]);
    if let Some(reason) =
        super::prune::hopeless(&homeless, candidate.price, pass.catalog, candidate.pool)
    {
        return Err(reason);
    }
    let sim = pass.sim.run(&[candidate.facts])?;
    let replacements = outcome(sim, &[candidate], pass)?;
    Ok(Command::new(
        Method::Underutilized,
        &[candidate],
        replacements,
    ))
}
