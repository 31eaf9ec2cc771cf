//! Capacity reservations as offerings (upstream's `ReservedCapacityResolver` and
//! `capacityreservation` provider): each reservation an EC2NodeClass selects (its
//! `status.capacityReservations`) becomes one `reserved` offering of its instance type in its
//! zone, priced at the type's on-demand price divided by [`RESERVED_PRICE_DIVISOR`] (so that it
//! is always the cheapest offering: the reservation is paid for whether it is used or not, and
//! still ranks types by their size), available while the reservation has instances left.
//!
//! How many instances a reservation can still take is tracked by [`ReservationAvailability`]:
//! synced from `DescribeCapacityReservations` by the EC2NodeClass status controller, decremented
//! by each launch into it and zeroed by a `ReservationCapacityExceeded` launch error or an
//! interruption warning, until the next sync says otherwise.

use std::collections::BTreeMap;
use std::sync::Mutex;

use jiff::Timestamp;

use super::{CapacityType, Catalog, Offering};
use crate::api::EC2NodeClass;
use crate::api::ec2nodeclass::{ReservationState, ReservationType};
use crate::api::labels::{
    CAPACITY_RESERVATION_ID_LABEL, CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL,
    CAPACITY_RESERVATION_TYPE_LABEL,
};

/// A reserved offering's price is the type's on-demand price divided by this (upstream's
/// `odPrice / 10_000_000`): cheaper than any spot price, yet ordered like the on-demand prices.
pub const RESERVED_PRICE_DIVISOR: f64 = 10_000_000.0;

/// The capacity reservation behind a `reserved` offering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// `cr-...`.
    pub id: String,
    pub kind: ReservationType,
    pub interruptible: bool,
    /// Instances the reservation can still launch, as the availability cache knows it when the
    /// catalog was built.
    pub capacity: u32,
}

impl Reservation {
    /// The labels a node launched into this reservation carries.
    pub fn labels(&self) -> [(&'static str, String); 3] {
        [
            (CAPACITY_RESERVATION_ID_LABEL, self.id.clone()),
            (
                CAPACITY_RESERVATION_TYPE_LABEL,
                self.kind.label().to_string(),
            ),
            (
                CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL,
                self.interruptible.to_string(),
            ),
        ]
    }
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    count: u32,
    synced_at: Timestamp,
}

/// Instances each capacity reservation can still launch (upstream's `availabilityCache`).
#[derive(Debug, Default)]
pub struct ReservationAvailability {
    entries: Mutex<BTreeMap<String, Entry>>,
}

impl ReservationAvailability {
    pub fn new() -> Self {
        Self::default()
    }

    /// What `DescribeCapacityReservations` said at `now`: replaces each reservation's count.
    pub fn sync(&self, counts: impl IntoIterator<Item = (String, u32)>, now: Timestamp) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        for (id, count) in counts {
            entries.insert(
                id,
                Entry {
                    count,
                    synced_at: now,
                },
            );
        }
    }

    /// One instance launched into `id` at `now`. A sync taken after the launch already counts
    /// it, so it is not counted twice.
    pub fn mark_launched(&self, id: &str, now: Timestamp) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = entries.get_mut(id)
            && entry.synced_at <= now
        {
            entry.count = entry.count.saturating_sub(1);
        }
    }

    /// One instance of `id` terminated: its slot is free again.
    pub fn mark_terminated(&self, id: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = entries.get_mut(id) {
            entry.count = entry.count.saturating_add(1);
        }
    }

    /// EC2 refused a launch into `id` (`ReservationCapacityExceeded`) or is reclaiming it: no
    /// more launches until the next sync.
    pub fn mark_unavailable(&self, id: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = entries.get_mut(id) {
            entry.count = 0;
        }
    }

    /// Instances `id` can still launch (0 when never synced).
    pub fn available(&self, id: &str) -> u32 {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(id).map_or(0, |e| e.count)
    }
}

/// The reserved offerings `class` selects, by instance type: one per reservation of a type the
/// catalog knows, priced from the type's cheapest on-demand offering. A reservation is
/// available while it has instances left, is not expiring and its zone is one the type is
/// offered in.
pub fn reserved_offerings(
    catalog: &Catalog,
    class: &EC2NodeClass,
    availability: &ReservationAvailability,
) -> BTreeMap<String, Vec<Offering>> {
    let mut out: BTreeMap<String, Vec<Offering>> = BTreeMap::new();
    let reservations = class
        .status
        .as_ref()
        .map(|s| s.capacity_reservations.as_slice())
        .unwrap_or_default();
    for r in reservations {
        let Some(it) = catalog.get(&r.instance_type) else {
            continue;
        };
        let on_demand = it
            .offerings
            .iter()
            .filter(|o| o.capacity_type == CapacityType::OnDemand)
            .map(|o| o.price)
            .min_by(f64::total_cmp)
            .unwrap_or(0.0);
        let offered_in_zone = it.offerings.iter().any(|o| o.zone == r.availability_zone);
        let capacity = availability.available(&r.id);
        out.entry(r.instance_type.clone())
            .or_default()
            .push(Offering {
                zone: r.availability_zone.clone(),
                capacity_type: CapacityType::Reserved,
                price: on_demand / RESERVED_PRICE_DIVISOR,
                available: capacity > 0 && offered_in_zone && r.state != ReservationState::Expiring,
                reservation: Some(Reservation {
                    id: r.id.clone(),
                    kind: r.reservation_type,
                    interruptible: r.interruptible.unwrap_or(false),
                    capacity,
                }),
            });
    }
    out
}

/// `catalog` with `class`'s reserved offerings added, or `None` when it selects none.
pub fn with_reservations(
    catalog: &Catalog,
    class: &EC2NodeClass,
    availability: &ReservationAvailability,
) -> Option<Catalog> {
    let mut reserved = reserved_offerings(catalog, class, availability);
    if reserved.is_empty() {
        return None;
    }
    let mut out = catalog.clone();
    for it in &mut out.instance_types {
        if let Some(offerings) = reserved.remove(&it.name) {
            it.offerings.extend(offerings);
        }
    }
    Some(
        Catalog::new(out.instance_types)
            .with_zone_ids(out.zone_ids)
            .with_ipv4_per_interface(out.ipv4_per_interface),
    )
}
