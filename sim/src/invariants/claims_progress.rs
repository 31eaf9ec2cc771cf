//! `claims-progress`: no NodeClaim stays unregistered past [`CLAIM_DEADLINE`] from its creation
//! (registration timeout plus slack): a claim must register (its `Registered` condition `True`)
//! or be deleted by then. A claim being deleted is not held to it. Checked after every step.

use std::time::Duration;

use super::{Check, Invariant, StepView, Violation};

/// Registration timeout (15 min) + slack: a claim older than this must be registered or gone.
pub const CLAIM_DEADLINE: Duration = Duration::from_secs(15 * 60 + 60);

/// The `claims-progress` checker (no memory between steps).
#[derive(Debug, Default)]
pub struct ClaimsProgress;

impl Check for ClaimsProgress {
    fn invariant(&self) -> Invariant {
        Invariant::ClaimsProgress
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let now = step.now;
        let mut out = Vec::new();
        for (name, created) in step.observation.unregistered.iter() {
            let age = now.duration_since(created.unwrap_or(now)).unsigned_abs();
            if age > CLAIM_DEADLINE {
                out.push(Violation::at(
                    now,
                    format!("NodeClaim {name} unregistered after {}s", age.as_secs()),
                ));
            }
        }
        out
    }
}
