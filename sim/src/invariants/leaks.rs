//! `no-leaked-instances`: every live cluster instance (not shutting down or terminated) belongs
//! to a NodeClaim once it is older than [`LEAK_WINDOW`]. An instance belongs to a claim when its
//! id is in some claim's `status.providerID`, or its `karpenter.sh/nodeclaim` tag names an
//! existing claim that records no instance yet (a launch whose status write has not landed). A
//! second instance tagged with a claim that records another is a leaked duplicate. Checked after
//! every step.

use std::time::Duration;

use super::{Check, Invariant, StepView, Violation};

/// Garbage collection's window: grace (30 s) + interval (2 min) + slack for a step.
pub const LEAK_WINDOW: Duration = Duration::from_secs(30 + 120 + 30);

/// The `no-leaked-instances` checker (no memory between steps).
#[derive(Debug, Default)]
pub struct Leaks;

impl Check for Leaks {
    fn invariant(&self) -> Invariant {
        Invariant::NoLeakedInstances
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let observation = step.observation;
        let mut out = Vec::new();
        for instance in &observation.live {
            let owned = observation.known_instances.contains(&instance.instance_id)
                || instance
                    .tags
                    .get("karpenter.sh/nodeclaim")
                    .is_some_and(|n| observation.unlaunched_claims.contains(n));
            let age = step.now.duration_since(instance.launch_time).unsigned_abs();
            if !owned && age > LEAK_WINDOW {
                out.push(Violation::at(
                    step.now,
                    format!(
                        "instance {} ({}s old) has no NodeClaim",
                        instance.instance_id,
                        age.as_secs()
                    ),
                ));
            }
        }
        out
    }
}
