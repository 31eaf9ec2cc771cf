//! `unavailable-offerings-honoured`: once a controller process learnt that an offering (instance
//! type, zone, capacity type) had no capacity, that process does not offer EC2 the same offering
//! again for [`UNAVAILABLE_TTL`] (upstream's unavailable-offerings cache: 3 minutes). It learns
//! it two ways, as upstream's cache is fed: `CreateFleet` answered it with an
//! [`INSUFFICIENT_CAPACITY_CODES`] error naming the offering, or it handled a spot interruption
//! warning (deleted the message from the queue) for an instance a NodeClaim owns: upstream's
//! interruption controller marks that instance's type and zone unavailable as spot (whether or
//! not the claim is already being deleted), so the replacement goes to another pool.
//!
//! Read from the audit of every `CreateFleet` that reached EC2 ([`crate::audit::FleetCall`],
//! recorded per process under the bug layer, so it is what EC2 answered) and of every spot
//! warning each process deleted ([`crate::audit::SpotWarningHandled`]): the world's own record,
//! not the controller's cache. Judged per process: a restarted process or a new leader starts
//! with an empty cache (upstream's too), so only the process that got the answer or handled the
//! warning is held to it. Only spot and on-demand requests: a capacity reservation's shortage is
//! cached per reservation, not per offering. A request sent in the same step as the answer or
//! the warning's handling (the world's clock does not move within a step) is excused: launches
//! run concurrently, and one composed before the news came cannot know it (upstream has the same
//! race).

use std::collections::{BTreeMap, BTreeSet};
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

/// How a process learnt an offering was dry.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Cause {
    /// `CreateFleet` answered it had no capacity.
    Fleet,
    /// The process handled a spot interruption warning for this instance.
    SpotWarning(String),
}

/// The `unavailable-offerings-honoured` checker: when each process last heard an offering was
/// dry, and how.
#[derive(Debug, Default)]
pub struct UnavailableHonoured {
    dry: BTreeMap<Key, (Timestamp, Cause)>,
    /// The instances NodeClaims named (`status.providerID`) at the end of the last step: what a
    /// handler acting at the start of this step could map a warning to.
    owned_before: BTreeSet<String>,
}

impl UnavailableHonoured {
    /// Records the offerings of the spot warnings handled in this step whose instance a NodeClaim
    /// owned when the step began (the handler, which runs first in a step, acts only on those,
    /// as upstream's: a claim whose launch answer was lost, or whose process died after
    /// CreateFleet, names its instance only once the lifecycle adopts it, which may be later in
    /// the same step; swarm seeds 270, 618 and 836) and that EC2 runs as spot.
    fn note_spot_warnings(&mut self, step: &StepView<'_>) {
        let owned_before = std::mem::replace(&mut self.owned_before, owned_instances(step));
        if step.audit.spot_warnings_handled.is_empty() {
            return;
        }
        let instances = step.cloud.instances();
        for handled in &step.audit.spot_warnings_handled {
            let owned = owned_before.contains(&handled.instance_id);
            let instance = instances
                .iter()
                .find(|i| i.instance_id == handled.instance_id);
            let Some(instance) =
                instance.filter(|i| owned && i.capacity_type == CapacityType::Spot)
            else {
                continue;
            };
            let key = (
                handled.process.clone(),
                CapacityType::Spot,
                instance.instance_type.clone(),
                instance.zone.clone(),
            );
            let cause = Cause::SpotWarning(handled.instance_id.clone());
            self.dry.insert(key, (handled.at, cause));
        }
    }
}

/// The instance ids the step's NodeClaims name in `status.providerID` (`aws:///zone/id`).
fn owned_instances(step: &StepView<'_>) -> BTreeSet<String> {
    step.claims()
        .iter()
        .filter_map(|c| c["status"]["providerID"].as_str())
        .filter_map(|p| p.rsplit('/').next())
        .filter(|id| !id.is_empty())
        .map(String::from)
        .collect()
}

impl Check for UnavailableHonoured {
    fn invariant(&self) -> Invariant {
        Invariant::UnavailableOfferingsHonoured
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        self.note_spot_warnings(step);
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
                let Some((dry_at, cause)) = self.dry.get(&key) else {
                    continue;
                };
                let dry_at = *dry_at;
                if dry_at < call.at && call.at < plus(dry_at, UNAVAILABLE_TTL) {
                    let news = match cause {
                        Cause::Fleet => "EC2 answered it had no capacity there".to_string(),
                        Cause::SpotWarning(id) => {
                            format!("it handled a spot interruption warning for {id} there")
                        }
                    };
                    out.push(Violation::at(
                        call.at,
                        format!(
                            "process {} asked CreateFleet for {instance_type} {} in {zone} {}s after {news} (cached for {}s)",
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
                    (call.at, Cause::Fleet),
                );
            }
        }
        let horizon = step.now;
        self.dry
            .retain(|_, (at, _)| plus(*at, UNAVAILABLE_TTL) > horizon);
        out
    }
}
