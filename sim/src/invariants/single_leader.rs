//! `single-leader`: with leader election on, never two controller replicas leading (acting) in
//! the same step. Leader election's safety: two replicas acting at once can launch twice for one
//! pod or race a drain.

use super::{Check, Invariant, StepView, Violation};

/// The `single-leader` checker (no memory between steps).
#[derive(Debug, Default)]
pub struct SingleLeader;

impl Check for SingleLeader {
    fn invariant(&self) -> Invariant {
        Invariant::SingleLeader
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        if step.leaders <= 1 {
            return Vec::new();
        }
        vec![Violation::at(
            step.now,
            format!("{} replicas led in the same step", step.leaders),
        )]
    }
}
