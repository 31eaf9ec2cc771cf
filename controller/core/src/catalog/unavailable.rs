//! The unavailable-offerings cache (upstream's `pkg/cache/unavailableofferings`): an
//! insufficient-capacity error marks (instance type, zone, capacity type) unavailable for a while,
//! so the next scheduling pass falls back to other types, zones or on-demand instead of asking EC2
//! for the same empty pool again. Filled by the launch path (CreateFleet capacity errors) and the
//! interruption controller (spot interruption warnings); read by provisioning and launch.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;

use crate::catalog::{CapacityType, Catalog};

/// How long an offering stays unavailable after a capacity error (upstream: 3 minutes).
pub const UNAVAILABLE_TTL: Duration = Duration::from_secs(180);

/// (instance type, zone, capacity type).
type OfferingKey = (String, String, CapacityType);

/// (instance type, zone, capacity type) → when it becomes available again.
#[derive(Debug, Default)]
pub struct UnavailableOfferings {
    entries: Mutex<BTreeMap<OfferingKey, Timestamp>>,
    /// The last [`UnavailableOfferings::apply`]: its catalog, the offerings it marked and the
    /// result, handed out again while both are the same (a pass per step with pending pods
    /// copied the catalog each time: 4 % of a swarm seed).
    applied: Mutex<Option<Applied>>,
}

#[derive(Debug)]
struct Applied {
    base: Arc<Catalog>,
    marked: BTreeSet<OfferingKey>,
    view: Arc<Catalog>,
}

impl UnavailableOfferings {
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks an offering unavailable until `now + ttl`.
    pub fn mark(
        &self,
        instance_type: &str,
        zone: &str,
        capacity_type: CapacityType,
        now: Timestamp,
        ttl: Duration,
    ) {
        // Saturates at the end of time; only a calendar span could fail, and a `Duration` is none.
        let until = now.saturating_add(ttl).unwrap_or(now);
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.insert(
            (instance_type.to_string(), zone.to_string(), capacity_type),
            until,
        );
    }

    /// Whether the offering is unavailable at `now`.
    pub fn is_unavailable(
        &self,
        instance_type: &str,
        zone: &str,
        capacity_type: CapacityType,
        now: Timestamp,
    ) -> bool {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(&(instance_type.to_string(), zone.to_string(), capacity_type))
            .is_some_and(|until| *until > now)
    }

    /// `catalog` with every cached offering marked unavailable at `now` (expired entries dropped).
    /// `catalog` itself when nothing is cached, and the last answer while neither the catalog nor
    /// the cached offerings changed: copying the catalog on every provisioning pass with pending
    /// pods was 5 % of a swarm seed's time.
    pub fn apply(&self, catalog: &Arc<Catalog>, now: Timestamp) -> Arc<Catalog> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.retain(|_, until| *until > now);
        if entries.is_empty() {
            return catalog.clone();
        }
        let mut applied = self.applied.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(last) = applied.as_ref()
            && Arc::ptr_eq(&last.base, catalog)
            && last.marked.iter().eq(entries.keys())
        {
            return last.view.clone();
        }
        let view = Arc::new(Self::marked(catalog, &entries));
        *applied = Some(Applied {
            base: catalog.clone(),
            marked: entries.keys().cloned().collect(),
            view: view.clone(),
        });
        view
    }

    /// A copy of `catalog` with the offerings of `entries` unavailable.
    fn marked(catalog: &Catalog, entries: &BTreeMap<OfferingKey, Timestamp>) -> Catalog {
        let mut out = catalog.clone();
        for instance_type in &mut out.instance_types {
            for offering in &mut instance_type.offerings {
                let key = (
                    instance_type.name.clone(),
                    offering.zone.clone(),
                    offering.capacity_type,
                );
                if entries.contains_key(&key) {
                    offering.available = false;
                }
            }
        }
        out
    }

    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + seconds).expect("timestamp")
    }

    fn spot_available(view: &Catalog, zone: &str) -> bool {
        let m5 = view.get("m5.large").expect("m5.large");
        m5.offerings
            .iter()
            .filter(|o| o.zone == zone && o.capacity_type == CapacityType::Spot)
            .all(|o| o.available)
    }

    #[test]
    fn the_view_is_remembered_until_the_catalog_or_the_marked_offerings_change() {
        let cache = UnavailableOfferings::new();
        let catalog = Arc::new(Catalog::builtin());
        assert!(Arc::ptr_eq(&cache.apply(&catalog, at(0)), &catalog));
        cache.mark(
            "m5.large",
            "us-west-2a",
            CapacityType::Spot,
            at(0),
            UNAVAILABLE_TTL,
        );
        let first = cache.apply(&catalog, at(1));
        assert!(!spot_available(&first, "us-west-2a"));
        assert!(
            Arc::ptr_eq(&first, &cache.apply(&catalog, at(2))),
            "nothing changed"
        );
        cache.mark(
            "m5.large",
            "us-west-2b",
            CapacityType::Spot,
            at(3),
            UNAVAILABLE_TTL,
        );
        let second = cache.apply(&catalog, at(4));
        assert!(!Arc::ptr_eq(&first, &second));
        assert!(!spot_available(&second, "us-west-2b"));
        let refreshed = Arc::new(Catalog::builtin());
        let third = cache.apply(&refreshed, at(5));
        assert!(
            !Arc::ptr_eq(&second, &third),
            "a new catalog is marked again"
        );
        assert!(!spot_available(&third, "us-west-2a") && !spot_available(&third, "us-west-2b"));
        // The first mark expires: the view changes with it.
        let later = cache.apply(&refreshed, at(181));
        assert!(spot_available(&later, "us-west-2a") && !spot_available(&later, "us-west-2b"));
    }
}
