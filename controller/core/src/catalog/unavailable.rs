//! The unavailable-offerings cache (upstream's `pkg/cache/unavailableofferings`): an
//! insufficient-capacity error marks (instance type, zone, capacity type) unavailable for a while,
//! so the next scheduling pass falls back to other types, zones or on-demand instead of asking EC2
//! for the same empty pool again. Filled by the launch path (CreateFleet capacity errors) and the
//! interruption controller (spot interruption warnings); read by provisioning and launch.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;

use crate::catalog::{CapacityType, Catalog};

/// How long an offering stays unavailable after a capacity error (upstream: 3 minutes).
pub const UNAVAILABLE_TTL: Duration = Duration::from_secs(180);

/// (instance type, zone, capacity type) → when it becomes available again.
#[derive(Debug, Default)]
pub struct UnavailableOfferings {
    entries: Mutex<BTreeMap<(String, String, CapacityType), Timestamp>>,
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
    /// Borrowed when nothing is cached: copying the catalog on every provisioning pass with
    /// pending pods was 5 % of a swarm seed's time.
    pub fn apply<'c>(&self, catalog: &'c Catalog, now: Timestamp) -> Cow<'c, Catalog> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.retain(|_, until| *until > now);
        if entries.is_empty() {
            return Cow::Borrowed(catalog);
        }
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
        Cow::Owned(out)
    }

    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
