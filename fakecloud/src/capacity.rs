//! Finite capacity per (instance type, zone, capacity type) pool: what makes `CreateFleet` return
//! `InsufficientInstanceCapacity`. A launch takes one unit, a stop or termination gives it back,
//! and knobs (or a scheduled capacity wave) set a pool's free units outright. A pool in a
//! drought has no capacity whatever its free units, which a wave does not touch.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use karpenter_core::catalog::{CapacityType, Catalog};

/// One capacity pool.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pool {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
}

impl Pool {
    pub fn new(instance_type: &str, zone: &str, capacity_type: CapacityType) -> Self {
        Self {
            instance_type: instance_type.to_string(),
            zone: zone.to_string(),
            capacity_type,
        }
    }
}

impl fmt::Display for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}",
            self.instance_type,
            self.zone,
            self.capacity_type.label()
        )
    }
}

/// Free units by pool. Pools the catalog does not offer are absent (`Unsupported`, not ICE).
#[derive(Clone, Debug, Default)]
pub(crate) struct Capacity {
    free: BTreeMap<Pool, u32>,
    /// Pools in a drought: no capacity until it ends, their units kept for then.
    dry: BTreeSet<Pool>,
}

impl Capacity {
    pub fn new(catalog: &Catalog, pool_capacity_default: u32) -> Self {
        let mut free = BTreeMap::new();
        for it in &catalog.instance_types {
            for offering in &it.offerings {
                let units = if offering.available {
                    pool_capacity_default
                } else {
                    0
                };
                free.insert(
                    Pool::new(&it.name, &offering.zone, offering.capacity_type),
                    units,
                );
            }
        }
        Self {
            free,
            dry: BTreeSet::new(),
        }
    }

    pub fn offered(&self, pool: &Pool) -> bool {
        self.free.contains_key(pool)
    }

    pub fn free(&self, pool: &Pool) -> u32 {
        if self.dry.contains(pool) {
            return 0;
        }
        self.free.get(pool).copied().unwrap_or(0)
    }

    /// Starts (`true`) or ends a drought of the pool.
    pub fn set_dry(&mut self, pool: &Pool, dry: bool) {
        if dry {
            self.dry.insert(pool.clone());
        } else {
            self.dry.remove(pool);
        }
    }

    /// Takes one unit; false when the pool is dry or not offered.
    pub fn take(&mut self, pool: &Pool) -> bool {
        if self.dry.contains(pool) {
            return false;
        }
        match self.free.get_mut(pool) {
            Some(units) if *units > 0 => {
                *units -= 1;
                true
            }
            _ => false,
        }
    }

    pub fn give_back(&mut self, pool: &Pool) {
        if let Some(units) = self.free.get_mut(pool) {
            *units = units.saturating_add(1);
        }
    }

    /// Sets a pool's free units; false (and nothing changes) if the catalog does not offer it.
    pub fn set(&mut self, pool: &Pool, units: u32) -> bool {
        match self.free.get_mut(pool) {
            Some(free) => {
                *free = units;
                true
            }
            None => false,
        }
    }

    /// Every pool with its free units (a pool in a drought with the units it gets back).
    pub fn pools(&self) -> Vec<(Pool, u32)> {
        self.free.iter().map(|(p, u)| (p.clone(), *u)).collect()
    }
}
