//! `scheduled-change-acted`: an instance EC2 scheduled for a stop (AWS Health's scheduled-change
//! event; the `scheduled-maintenance` fault) while a NodeClaim named it (`status.providerID`)
//! has that NodeClaim deleted before the stop (seen deleting or gone at a step before it, or
//! carrying a `deletionTimestamp` earlier than it): the controller cordons and drains the node
//! before EC2 stops it, as upstream does for every scheduled change (its interruption
//! controller's `CordonAndDrain`). Ours also holds the eviction for a replacement, but never past
//! `SCHEDULED_CHANGE_MARGIN` before the stop, and deletes the claim at once, so a notice of
//! minutes is plenty.
//!
//! A claim deleted only once the stop began does not count: EC2's `stopping` state-change
//! notification makes the controller delete it then anyway, and a check of "deleting at the
//! stop" let a controller that ignored the notice pass (candidate mutation 30 survived it).
//!
//! Not checked for an instance no claim named at the event (a launch whose answer the claim had
//! not recorded yet, a force-deleted claim): the controller cannot tell whose it is, and upstream
//! drops such a message too.

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::pod_facts::{instance_of, is_deleting, name_of, time_of};
use super::{Check, Invariant, StepView, Violation};

/// One scheduled stop awaiting its start.
#[derive(Debug)]
struct Scheduled {
    /// The NodeClaim that named the instance at the event.
    claim: String,
    announced: Timestamp,
    start: Timestamp,
    /// Seen being deleted, or gone, at a step before the stop.
    acted: bool,
}

/// The `scheduled-change-acted` checker.
#[derive(Debug, Default)]
pub struct ScheduledChangeActed {
    /// Scheduled stops of owned instances not judged yet, by instance id.
    pending: BTreeMap<String, Scheduled>,
}

impl ScheduledChangeActed {
    /// Records that EC2 announced at `announced` a stop of `instance` at `start`, while `claim`
    /// named it (`None`: no claim did, nothing to check).
    pub fn note(
        &mut self,
        instance: &str,
        claim: Option<String>,
        announced: Timestamp,
        start: Timestamp,
    ) {
        if let Some(claim) = claim {
            self.pending.insert(
                instance.to_string(),
                Scheduled {
                    claim,
                    announced,
                    start,
                    acted: false,
                },
            );
        }
    }
}

/// The name of the NodeClaim whose `status.providerID` names `instance`, among `claims`.
pub fn claim_naming<'a>(
    claims: impl IntoIterator<Item = &'a serde_json::Value>,
    instance: &str,
) -> Option<String> {
    claims
        .into_iter()
        .find(|c| {
            c["status"]["providerID"]
                .as_str()
                .is_some_and(|p| instance_of(p) == instance)
        })
        .map(|c| name_of(c).to_string())
}

impl Check for ScheduledChangeActed {
    fn invariant(&self) -> Invariant {
        Invariant::ScheduledChangeActed
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let now = step.now;
        for scheduled in self
            .pending
            .values_mut()
            .filter(|s| s.start > now && !s.acted)
        {
            let claim = step.claims().iter().find(|c| name_of(c) == scheduled.claim);
            scheduled.acted = claim.is_none_or(|c| is_deleting(c));
        }
        let due: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, s)| s.start <= now)
            .map(|(id, _)| id.clone())
            .collect();
        let mut out = Vec::new();
        for id in due {
            let Some(scheduled) = self.pending.remove(&id) else {
                continue;
            };
            let claim = step.claims().iter().find(|c| name_of(c) == scheduled.claim);
            let deleted_before = claim
                .and_then(|c| time_of(&c["metadata"]["deletionTimestamp"]))
                .is_some_and(|at| at < scheduled.start);
            if !scheduled.acted && !deleted_before && claim.is_some() {
                out.push(Violation::at(
                    now,
                    format!(
                        "instance {id} was scheduled at {} for a stop at {}: its NodeClaim {} \
                         was not deleted before the stop",
                        scheduled.announced, scheduled.start, scheduled.claim
                    ),
                ));
            }
        }
        out
    }
}
