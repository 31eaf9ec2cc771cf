//! Capacity reservations within one run (upstream's `ReservationManager`): a reservation with `n`
//! instances left can be held by at most `n` planned claims. A claim holds every reservation of
//! the reserved offerings it could launch into (pessimistically: it may launch into any one of
//! them), releases those its narrowing requirements rule out, and is finally pinned to
//! `capacity-type: reserved` and the reservations it holds, so that launch never spends more of
//! a reservation than the run planned.

use std::collections::BTreeSet;

use super::{Failure, Solver};
use crate::catalog::CapacityType;
use crate::scheduling::ReservedOfferingMode;
use crate::scheduling::requirements::Requirements;

impl Solver<'_> {
    /// Each reservation's instances left, from the pools' reserved offerings (the smallest
    /// count where two catalogs disagree).
    pub(super) fn build_reservations(&mut self) {
        for pool in &self.pools {
            for view in &pool.types {
                for o in &view.it.offerings {
                    if o.capacity_type != CapacityType::Reserved || !o.available {
                        continue;
                    }
                    let Some(r) = &o.reservation else { continue };
                    self.reservations
                        .entry(r.id.clone())
                        .and_modify(|c| *c = (*c).min(r.capacity))
                        .or_insert(r.capacity);
                }
            }
        }
    }

    /// The reservations a claim of `pool` with `types` under `reqs` holds, given it holds `held`
    /// now: every compatible reserved offering's reservation it holds already or that has an
    /// instance left. In strict mode a claim that could use reserved capacity but gets none, or
    /// that would lose all it held, is refused (the pod waits for the next run).
    pub(super) fn reservations_for(
        &self,
        pool: usize,
        types: &[u32],
        reqs: &Requirements,
        held: &BTreeSet<String>,
    ) -> Result<BTreeSet<String>, Failure> {
        if self.reservations.is_empty() {
            return Ok(BTreeSet::new());
        }
        let mut compatible = false;
        let mut reserved = BTreeSet::new();
        for t in types {
            let view = &self.pools[pool].types[*t as usize];
            for o in view.offerings(reqs) {
                let Some(id) = o.reservation_id() else {
                    continue;
                };
                compatible = true;
                if held.contains(id) || self.reservations.get(id).is_some_and(|n| *n > 0) {
                    reserved.insert(id.to_string());
                }
            }
        }
        if self.input.options.reserved_offering_mode == ReservedOfferingMode::Strict {
            if compatible && reserved.is_empty() {
                return Err(Failure {
                    reason: "compatible reserved offerings exist, but other NodeClaims of this \
                             pass hold all their capacity"
                        .to_string(),
                    awaiting_reservation: true,
                });
            }
            if !held.is_empty() && reserved.is_empty() {
                return Err(Failure {
                    reason: "the pod's requirements would remove every reserved offering the \
                             NodeClaim holds"
                        .to_string(),
                    awaiting_reservation: true,
                });
            }
        }
        Ok(reserved)
    }

    /// A claim that held `old` now holds `new`: reservations taken and released.
    pub(super) fn hold(&mut self, old: &BTreeSet<String>, new: &BTreeSet<String>) {
        for id in new.difference(old) {
            let left = self.reservations.get_mut(id);
            debug_assert!(left.as_ref().is_some_and(|n| **n > 0), "over-reserved {id}");
            if let Some(n) = left {
                *n = n.saturating_sub(1);
            }
        }
        for id in old.difference(new) {
            if let Some(n) = self.reservations.get_mut(id) {
                *n += 1;
            }
        }
    }
}
