//! EC2 capacity reservations: on-demand capacity reservations (ODCRs, `open` or `targeted`,
//! optionally interruptible) and capacity blocks, as `DescribeCapacityReservations` reports them
//! and as `CreateFleet` launches into them.
//!
//! - A launch template whose `capacityReservationSpecification` targets a reservation
//!   (`capacity-reservations-only` + an id) launches only into it: an override of another type
//!   or zone is refused, a full reservation answers `ReservationCapacityExceeded`, and a capacity
//!   block also needs the `capacity-block` market type.
//! - An on-demand launch that does not opt out (`capacityReservationPreference: none`) is taken
//!   by a matching `open` reservation with room, as EC2 does: the instance then runs in it.
//! - A reservation's instances hold a slot each until terminated. When an ODCR ends its instances
//!   run on as plain on-demand; EC2 reclaims a capacity block's instances
//!   [`CAPACITY_BLOCK_RECLAIM_LEAD`] before its end.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use karpenter_core::seams::ec2::{
    CapacityReservation, Ec2Error, Filter, InstanceMatchCriteria, ReservationType,
};
use serde_json::Value;

use crate::filters;

/// EC2 begins terminating a capacity block's instances this long before the block ends (AWS's
/// documented 30 minutes; Karpenter drains them 10 minutes before that).
pub const CAPACITY_BLOCK_RECLAIM_LEAD: Duration = Duration::from_secs(30 * 60);

/// What a new capacity reservation is: a [`FakeCloud::create_capacity_reservation`]
/// argument.
///
/// [`FakeCloud::create_capacity_reservation`]: crate::FakeCloud::create_capacity_reservation
#[derive(Clone, Debug, PartialEq)]
pub struct ReservationSpec {
    pub instance_type: String,
    pub zone: String,
    pub instance_count: u32,
    pub match_criteria: InstanceMatchCriteria,
    pub kind: ReservationType,
    pub interruptible: bool,
    /// `None`: until cancelled (ODCRs only; a capacity block always ends).
    pub end_date: Option<Timestamp>,
    /// `None`: the fake's own account.
    pub owner_id: Option<String>,
    pub tags: BTreeMap<String, String>,
}

impl ReservationSpec {
    /// A targeted ODCR of `instance_count` instances of `instance_type` in `zone`.
    pub fn new(instance_type: &str, zone: &str, instance_count: u32) -> Self {
        Self {
            instance_type: instance_type.to_string(),
            zone: zone.to_string(),
            instance_count,
            match_criteria: InstanceMatchCriteria::Targeted,
            kind: ReservationType::Default,
            interruptible: false,
            end_date: None,
            owner_id: None,
            tags: BTreeMap::new(),
        }
    }

    /// Any matching on-demand launch that does not opt out uses it.
    pub fn open(mut self) -> Self {
        self.match_criteria = InstanceMatchCriteria::Open;
        self
    }

    /// A capacity block ending at `end`.
    pub fn capacity_block(mut self, end: Timestamp) -> Self {
        self.kind = ReservationType::CapacityBlock;
        self.end_date = Some(end);
        self
    }

    pub fn interruptible(mut self) -> Self {
        self.interruptible = true;
        self
    }

    pub fn ending(mut self, end: Timestamp) -> Self {
        self.end_date = Some(end);
        self
    }

    pub fn tag(mut self, key: &str, value: &str) -> Self {
        self.tags.insert(key.to_string(), value.to_string());
        self
    }
}

/// What a launch template says about capacity reservations
/// (`CapacityReservationSpecification`, `InstanceMarketOptions`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct LaunchReservation {
    /// `open` (EC2's default), `none` or `capacity-reservations-only`.
    pub preference: Option<String>,
    pub target: Option<String>,
    /// `capacity-block`, `interruptible-capacity-reservation`, `spot`.
    pub market_type: Option<String>,
}

impl LaunchReservation {
    /// From a launch template's `extra` fields (their JSON text).
    pub fn of_template(extra: &BTreeMap<String, String>) -> Self {
        let parse = |key: &str| -> Value {
            extra
                .get(key)
                .and_then(|text| serde_json::from_str(text).ok())
                .unwrap_or(Value::Null)
        };
        let spec = parse("capacityReservationSpecification");
        let market = parse("instanceMarketOptions");
        let text = |v: &Value| v.as_str().map(str::to_string);
        LaunchReservation {
            preference: text(&spec["capacityReservationPreference"]),
            target: text(&spec["capacityReservationTarget"]["capacityReservationId"]),
            market_type: text(&market["marketType"]),
        }
    }

    /// Whether an on-demand launch may be taken by an open reservation.
    pub fn accepts_open(&self) -> bool {
        self.target.is_none() && self.preference.as_deref().is_none_or(|p| p == "open")
    }
}

/// Every capacity reservation of the account, by id.
#[derive(Clone, Debug, Default)]
pub(crate) struct Reservations {
    by_id: BTreeMap<String, CapacityReservation>,
}

const FILTERS: [&str; 6] = [
    "state",
    "owner-id",
    "instance-match-criteria",
    "instance-type",
    "availability-zone",
    "capacity-reservation-id",
];

fn criteria_label(c: InstanceMatchCriteria) -> &'static str {
    match c {
        InstanceMatchCriteria::Open => "open",
        InstanceMatchCriteria::Targeted => "targeted",
    }
}

impl Reservations {
    pub fn insert(&mut self, reservation: CapacityReservation) {
        self.by_id.insert(reservation.id.clone(), reservation);
    }

    pub fn get(&self, id: &str) -> Option<&CapacityReservation> {
        self.by_id.get(id)
    }

    /// `DescribeCapacityReservations`: by ids (each must exist) or by filters, sorted by id.
    pub fn describe(
        &self,
        ids: &[String],
        filters: &[Filter],
    ) -> Result<Vec<CapacityReservation>, Ec2Error> {
        filters::check(filters, &FILTERS)?;
        if let Some(missing) = ids.iter().find(|id| !self.by_id.contains_key(*id)) {
            return Err(Ec2Error::NotFound {
                code: "InvalidCapacityReservationId.NotFound".into(),
                message: format!("The capacity reservation ID '{missing}' does not exist"),
            });
        }
        Ok(self
            .by_id
            .values()
            .filter(|r| ids.is_empty() || ids.contains(&r.id))
            .filter(|r| {
                filters::matches(filters, &r.tags, |name| match name {
                    "state" => vec![r.state.clone()],
                    "owner-id" => vec![r.owner_id.clone()],
                    "instance-match-criteria" => {
                        vec![criteria_label(r.instance_match_criteria).to_string()]
                    }
                    "instance-type" => vec![r.instance_type.clone()],
                    "availability-zone" => vec![r.zone.clone()],
                    "capacity-reservation-id" => vec![r.id.clone()],
                    _ => Vec::new(),
                })
            })
            .cloned()
            .collect())
    }

    /// Takes one slot of an active reservation; false when it is full or not active.
    pub fn take(&mut self, id: &str) -> bool {
        match self.by_id.get_mut(id) {
            Some(r) if r.state == "active" && r.available_instance_count > 0 => {
                r.available_instance_count -= 1;
                true
            }
            _ => false,
        }
    }

    /// A terminated instance's slot is free again (while the reservation is active).
    pub fn give_back(&mut self, id: &str) {
        if let Some(r) = self.by_id.get_mut(id)
            && r.state == "active"
        {
            r.available_instance_count =
                (r.available_instance_count + 1).min(r.total_instance_count);
        }
    }

    /// The open, active reservation (lowest id) with room for `instance_type` in `zone`.
    pub fn open_for(&self, instance_type: &str, zone: &str) -> Option<String> {
        self.by_id
            .values()
            .find(|r| {
                r.instance_match_criteria == InstanceMatchCriteria::Open
                    && r.state == "active"
                    && r.available_instance_count > 0
                    && r.instance_type == instance_type
                    && r.zone == zone
                    && r.reservation_type == ReservationType::Default
            })
            .map(|r| r.id.clone())
    }

    /// Ends a reservation (`expired` or `cancelled`): no room left.
    pub fn end(&mut self, id: &str, state: &str) -> bool {
        match self.by_id.get_mut(id) {
            Some(r) if r.state == "active" => {
                r.state = state.to_string();
                r.available_instance_count = 0;
                true
            }
            _ => false,
        }
    }
}

impl crate::state::State {
    /// Creates a reservation now and schedules its end (and a capacity block's reclaim).
    pub(crate) fn create_reservation(&mut self, spec: ReservationSpec) -> String {
        let mut id = crate::rng::resource_id(&mut self.rng.ids, "cr");
        while self.reservations.get(&id).is_some() {
            id = crate::rng::resource_id(&mut self.rng.ids, "cr");
        }
        if let Some(end) = spec.end_date {
            self.timeline
                .at(end, crate::timeline::Due::ReservationEnd(id.clone()));
            if spec.kind == ReservationType::CapacityBlock {
                let reclaim = end
                    .checked_sub(
                        jiff::SignedDuration::try_from(CAPACITY_BLOCK_RECLAIM_LEAD)
                            .unwrap_or_default(),
                    )
                    .unwrap_or(end)
                    .max(self.now);
                self.timeline.at(
                    reclaim,
                    crate::timeline::Due::CapacityBlockReclaim(id.clone()),
                );
            }
        }
        self.reservations.insert(CapacityReservation {
            id: id.clone(),
            instance_type: spec.instance_type,
            zone: spec.zone,
            owner_id: spec
                .owner_id
                .unwrap_or_else(|| self.config.account_id.clone()),
            instance_match_criteria: spec.match_criteria,
            reservation_type: spec.kind,
            interruptible: spec.interruptible,
            state: "active".into(),
            total_instance_count: spec.instance_count,
            available_instance_count: spec.instance_count,
            end_date: spec.end_date,
            tags: spec.tags,
        });
        id
    }

    /// Ends a reservation: an ODCR's instances run on as plain on-demand instances (EC2 drops
    /// their `CapacityReservationId`); false if it was not active.
    pub(crate) fn end_reservation(&mut self, id: &str, state: &str, _time: Timestamp) -> bool {
        if !self.reservations.end(id, state) {
            return false;
        }
        for record in self.instances.values_mut() {
            if record.reservation.as_deref() == Some(id) {
                record.reservation = None;
                record.instance.capacity_reservation_id = None;
                record.instance.capacity_type = karpenter_core::catalog::CapacityType::OnDemand;
            }
        }
        true
    }

    /// EC2 terminates a capacity block's live instances.
    pub(crate) fn reclaim_capacity_block(&mut self, id: &str, time: Timestamp) {
        let ids: Vec<String> = self
            .instances
            .values()
            .filter(|r| r.reservation.as_deref() == Some(id))
            .map(|r| r.instance.instance_id.clone())
            .collect();
        for instance in ids {
            self.begin_termination(&instance, time);
        }
    }

    /// The owner of an interruptible reservation takes `count` instances back: each gets an
    /// interruption warning and is terminated two minutes later. Returns the ids warned.
    pub(crate) fn interrupt_reservation(
        &mut self,
        id: &str,
        count: usize,
        time: Timestamp,
    ) -> Vec<String> {
        if !self.reservations.get(id).is_some_and(|r| r.interruptible) {
            return Vec::new();
        }
        let ids: Vec<String> = self
            .instances
            .values()
            .filter(|r| r.reservation.as_deref() == Some(id) && !r.warned)
            .filter(|r| {
                matches!(
                    r.instance.state,
                    karpenter_core::seams::ec2::InstanceState::Pending
                        | karpenter_core::seams::ec2::InstanceState::Running
                )
            })
            .map(|r| r.instance.instance_id.clone())
            .take(count)
            .collect();
        for instance in &ids {
            if let Some(record) = self.instances.get_mut(instance) {
                record.warned = true;
            }
            self.emit(time, |o| {
                crate::events::capacity_reservation_interruption_warning(o, instance)
            });
            self.timeline.at(
                crate::state::after(time, crate::instances::SPOT_INTERRUPTION_NOTICE),
                crate::timeline::Due::SpotReclaim(instance.clone()),
            );
        }
        ids
    }
}

/// Capacity reservation knobs.
impl crate::FakeCloud {
    /// Creates a capacity reservation now; returns its id.
    pub fn create_capacity_reservation(&self, spec: ReservationSpec) -> String {
        self.current().create_reservation(spec)
    }

    /// What `DescribeCapacityReservations` says of `id` now.
    pub fn capacity_reservation(&self, id: &str) -> Option<CapacityReservation> {
        self.current().reservations.get(id).cloned()
    }

    /// Cancels a reservation now (its instances run on as on-demand); false if not active.
    pub fn cancel_capacity_reservation(&self, id: &str) -> bool {
        let mut state = self.current();
        let now = state.now;
        state.end_reservation(id, "cancelled", now)
    }

    /// The owner of interruptible reservation `id` takes `count` of its instances back (see
    /// `State::interrupt_reservation`); returns the ids warned.
    pub fn interrupt_capacity_reservation(&self, id: &str, count: usize) -> Vec<String> {
        let mut state = self.current();
        let now = state.now;
        state.interrupt_reservation(id, count, now)
    }
}
