//! Instance types as a NodePool sees them ([`TypeView`]: allocatable after daemon overhead, the
//! offerings requirements allow), the per-run compatibility cache, and the `minValues` check.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;

use super::dense::Dense;
use super::{MinValuesPolicy, Solver};
use crate::api::Operator;
use crate::api::labels::{
    AWS_WELL_KNOWN_LABELS, CAPACITY_RESERVATION_ID_LABEL, CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL,
    CAPACITY_RESERVATION_TYPE_LABEL, CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, WINDOWS_BUILD_LABEL,
    ZONE_ID_LABEL, ZONE_LABEL,
};
use crate::catalog::{InstanceType, Offering};
use crate::scheduling::requirements::Requirements;

/// Instance-type attribute labels: a type without one of them has it as "does not exist"
/// (upstream's types say `node.kubernetes.io/windows-build DoesNotExist` unless a Windows class
/// launches them, so a pod requiring a Windows build gets no Linux type).
pub(super) fn is_type_attribute(key: &str) -> bool {
    AWS_WELL_KNOWN_LABELS.contains(&key) || key == INSTANCE_TYPE_LABEL || key == WINDOWS_BUILD_LABEL
}

/// One instance type as a NodePool sees it.
pub(super) struct TypeView<'a> {
    pub(super) it: &'a InstanceType,
    /// Zone name → zone id of the catalog the type comes from (`topology.k8s.aws/zone-id`).
    pub(super) zone_ids: &'a BTreeMap<String, String>,
    pub(super) name: Arc<str>,
    /// Allocatable minus the pool's daemon overhead on this type.
    pub(super) alloc: Dense,
    pub(super) capacity: Dense,
    pub(super) daemon: Dense,
}

impl<'a> TypeView<'a> {
    /// `it` with nothing worked out: enough for [`Self::compatible`] and the offering queries,
    /// which read only the type and its zones.
    pub(super) fn bare(it: &'a InstanceType, zone_ids: &'a BTreeMap<String, String>) -> Self {
        Self {
            it,
            zone_ids,
            name: Arc::from(""),
            alloc: Dense::new(),
            capacity: Dense::new(),
            daemon: Dense::new(),
        }
    }

    /// Whether the type can satisfy `reqs`: shared label keys intersect, and some available
    /// offering matches the zone and capacity-type requirements.
    pub(super) fn compatible(&self, reqs: &Requirements) -> bool {
        for (key, req) in reqs.iter() {
            if is_offering_key(key) {
                continue;
            }
            let ok = match self.it.labels.get(key) {
                Some(value) => req.has(value),
                // A type without an attribute label has it as "does not exist".
                None if is_type_attribute(key) => {
                    matches!(req.operator(), Operator::NotIn | Operator::DoesNotExist)
                }
                None => true,
            };
            if !ok {
                return false;
            }
        }
        self.cheapest(reqs).is_some()
    }

    /// The available offerings `reqs` allows (zone, zone id, capacity type, reservation).
    pub(super) fn offerings<'r>(
        &'r self,
        reqs: &'r Requirements,
    ) -> impl Iterator<Item = &'a Offering> + 'r {
        let zone = reqs.get(ZONE_LABEL);
        let zone_id = reqs.get(ZONE_ID_LABEL);
        let capacity_type = reqs.get(CAPACITY_TYPE_LABEL);
        let zone_ids = self.zone_ids;
        let reservation_keys: Vec<_> = RESERVATION_KEYS
            .iter()
            .filter_map(|k| reqs.get(k).map(|r| (*k, r)))
            .collect();
        self.it
            .offerings
            .iter()
            .filter(|o| o.available)
            .filter(move |o| zone.is_none_or(|r| r.has(&o.zone)))
            .filter(move |o| {
                zone_id.is_none_or(|r| match zone_ids.get(&o.zone) {
                    Some(id) => r.has(id),
                    // A zone without a known id has the label as "does not exist".
                    None => matches!(r.operator(), Operator::NotIn | Operator::DoesNotExist),
                })
            })
            .filter(move |o| capacity_type.is_none_or(|r| r.has(o.capacity_type.label())))
            .filter(move |o| {
                reservation_keys
                    .iter()
                    .all(|(key, r)| match reservation_value(o, key) {
                        Some(value) => r.has(&value),
                        // Spot and on-demand offerings have no reservation labels.
                        None => matches!(r.operator(), Operator::NotIn | Operator::DoesNotExist),
                    })
            })
    }

    /// Price of the cheapest available offering `reqs` allows.
    pub(super) fn cheapest(&self, reqs: &Requirements) -> Option<f64> {
        self.offerings(reqs).map(|o| o.price).min_by(f64::total_cmp)
    }

    /// Calls `visit` with each value [`Self::values`] lists, in the same order, without
    /// allocating; stops when `visit` returns false.
    pub(super) fn each_value(
        &self,
        key: &str,
        reqs: &Requirements,
        visit: &mut dyn FnMut(&str) -> bool,
    ) {
        match key {
            ZONE_LABEL => {
                for o in self.offerings(reqs) {
                    if !visit(&o.zone) {
                        return;
                    }
                }
            }
            ZONE_ID_LABEL => {
                for id in self
                    .offerings(reqs)
                    .filter_map(|o| self.zone_ids.get(&o.zone))
                {
                    if !visit(id) {
                        return;
                    }
                }
            }
            CAPACITY_TYPE_LABEL => {
                for o in self.offerings(reqs) {
                    if !visit(o.capacity_type.label()) {
                        return;
                    }
                }
            }
            _ if RESERVATION_KEYS.contains(&key) => {
                for v in self
                    .offerings(reqs)
                    .filter_map(|o| reservation_value(o, key))
                {
                    if !visit(&v) {
                        return;
                    }
                }
            }
            _ => {
                if let Some(v) = self.it.labels.get(key) {
                    visit(v);
                }
            }
        }
    }

    /// Values this type can give `key` under `reqs` (offerings for zone/capacity type).
    pub(super) fn values(&self, key: &str, reqs: &Requirements) -> Vec<String> {
        let offerings = self.offerings(reqs);
        match key {
            ZONE_LABEL => offerings.map(|o| o.zone.clone()).collect(),
            ZONE_ID_LABEL => offerings
                .filter_map(|o| self.zone_ids.get(&o.zone).cloned())
                .collect(),
            CAPACITY_TYPE_LABEL => offerings
                .map(|o| o.capacity_type.label().to_string())
                .collect(),
            _ if RESERVATION_KEYS.contains(&key) => offerings
                .filter_map(|o| reservation_value(o, key))
                .collect(),
            _ => self.it.labels.get(key).cloned().into_iter().collect(),
        }
    }
}

/// The labels a reserved offering adds (its reservation's id, type and interruptibility).
const RESERVATION_KEYS: [&str; 3] = [
    CAPACITY_RESERVATION_ID_LABEL,
    CAPACITY_RESERVATION_TYPE_LABEL,
    CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL,
];

/// The value an offering gives a reservation label (`None`: not a reserved offering).
fn reservation_value(o: &Offering, key: &str) -> Option<String> {
    o.reservation.as_ref().and_then(|r| {
        r.labels()
            .into_iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    })
}

/// Keys whose values come from a type's offerings rather than its labels.
pub(super) fn is_offering_key(key: &str) -> bool {
    key == ZONE_LABEL
        || key == ZONE_ID_LABEL
        || key == CAPACITY_TYPE_LABEL
        || RESERVATION_KEYS.contains(&key)
}

/// One cached compatibility result: pool, requirement set, per-type verdicts.
pub(super) type CompatEntry = (usize, Requirements, Rc<[bool]>);

impl Solver<'_> {
    /// Which of `pool`'s types satisfy `reqs` (cached per distinct requirement set).
    pub(super) fn compatible_types(&self, pool: usize, reqs: &Requirements) -> Rc<[bool]> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (pool, reqs).hash(&mut hasher);
        let hash = hasher.finish();
        if let Some(bucket) = self.compat_cache.borrow().get(&hash)
            && let Some((_, _, hit)) = bucket.iter().find(|(p, r, _)| *p == pool && r == reqs)
        {
            return hit.clone();
        }
        let computed: Rc<[bool]> = self.pools[pool]
            .types
            .iter()
            .map(|t| t.compatible(reqs))
            .collect();
        self.compat_cache
            .borrow_mut()
            .entry(hash)
            .or_default()
            .push((pool, reqs.clone(), computed.clone()));
        computed
    }

    pub(super) fn check_min_values(
        &self,
        pool: usize,
        reqs: &Requirements,
        types: &[u32],
    ) -> Result<(), String> {
        if self.input.options.min_values_policy == MinValuesPolicy::BestEffort {
            return Ok(());
        }
        for (key, req) in reqs.iter() {
            let Some(min) = req.min_values else { continue };
            let mut seen = BTreeSet::new();
            for t in types {
                let view = &self.pools[pool].types[*t as usize];
                if key == INSTANCE_TYPE_LABEL {
                    seen.insert(view.it.name.clone());
                } else {
                    seen.extend(view.values(key, reqs).into_iter().filter(|v| req.has(v)));
                }
            }
            if (seen.len() as i64) < min {
                return Err(format!(
                    "minValues: {key} needs {min} distinct values, the instance types that fit offer {}",
                    seen.len()
                ));
            }
        }
        Ok(())
    }
}
