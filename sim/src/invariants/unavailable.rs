//! `unavailable-offerings-honoured`: once `CreateFleet` answered a controller process that an
//! offering (instance type, zone, capacity type) had no capacity (an
//! [`INSUFFICIENT_CAPACITY_CODES`] error naming it), that process does not offer EC2 the same
//! offering again for [`UNAVAILABLE_TTL`] (upstream's unavailable-offerings cache: 3 minutes).
//!
//! Read from the audit of every `CreateFleet` that reached EC2 ([`crate::audit::FleetCall`],
//! recorded per process under the bug layer, so it is what EC2 answered): the world's own record,
//! not the controller's cache. Judged per process: a restarted process or a new leader starts
//! with an empty cache (upstream's too), so only the process that got the answer is held to it.
//! Only spot and on-demand requests: a capacity reservation's shortage is cached per reservation,
//! not per offering. A request sent in the same step as the answer (the world's clock does not
//! move within a step) is excused: launches run concurrently, and one composed before another's
//! answer came back cannot know it (upstream has the same race).

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use karpenter_core::catalog::CapacityType;

use super::pod_facts::plus;
use super::{Check, Invariant, StepView, Violation};
pub use crate::audit::INSUFFICIENT_CAPACITY_CODES;

/// How long an offering must stay out of a process's requests after an insufficient-capacity
/// answer (upstream `UnavailableOfferingsTTL`; the controller's `UNAVAILABLE_TTL`, restated here).
pub const UNAVAILABLE_TTL: Duration = Duration::from_secs(3 * 60);

/// (process, capacity type, instance type, zone).
type Key = (String, CapacityType, String, String);

/// The `unavailable-offerings-honoured` checker: when each process last heard an offering was
/// dry.
#[derive(Debug, Default)]
pub struct UnavailableHonoured {
    dry: BTreeMap<Key, Timestamp>,
}

impl Check for UnavailableHonoured {
    fn invariant(&self) -> Invariant {
        Invariant::UnavailableOfferingsHonoured
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let mut out = Vec::new();
        for call in &step.audit.fleets {
            if call.capacity_type == CapacityType::Reserved {
                continue;
            }
            for (instance_type, zone) in &call.offerings {
                let key = (
                    call.process.clone(),
                    call.capacity_type,
                    instance_type.clone(),
                    zone.clone(),
                );
                let Some(&dry_at) = self.dry.get(&key) else {
                    continue;
                };
                if dry_at < call.at && call.at < plus(dry_at, UNAVAILABLE_TTL) {
                    out.push(Violation::at(
                        call.at,
                        format!(
                            "process {} asked CreateFleet for {instance_type} {} in {zone} {}s after EC2 answered it had no capacity there (cached for {}s)",
                            call.process,
                            call.capacity_type.label(),
                            call.at.duration_since(dry_at).as_secs(),
                            UNAVAILABLE_TTL.as_secs()
                        ),
                    ));
                }
            }
            for (instance_type, zone) in &call.insufficient {
                self.dry.insert(
                    (
                        call.process.clone(),
                        call.capacity_type,
                        instance_type.clone(),
                        zone.clone(),
                    ),
                    call.at,
                );
            }
        }
        let horizon = step.now;
        self.dry
            .retain(|_, at| plus(*at, UNAVAILABLE_TTL) > horizon);
        out
    }
}
