//! The run's answer: planned claims with their instance types (cheapest first, truncated to the
//! run's maximum), requirements and requests; placements on existing nodes; unschedulable pods.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use super::dense::add;
use super::{Claim, Failure, Solver};
use crate::api::labels::{CAPACITY_RESERVATION_ID_LABEL, CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL};
use crate::scheduling::requirements::{Requirement, Requirements};
use crate::scheduling::{NodePlacement, PlannedClaim, Results, Unschedulable};

/// Shared instance-type name lists of planned claims.
type TypeNames = Arc<[Arc<str>]>;

/// What a claim's pricing depends on: pool, types, requirements, reservations held.
type OfferKey<'s> = (usize, &'s [u32], &'s Requirements, &'s BTreeSet<String>);

/// A claim's priced types (price, type index), cheapest first, its offerings' capacity types
/// and its types' names; shared between alike claims.
type Offers = (Priced, CapacityTypes, TypeNames);

/// (price, type index), cheapest first.
type Priced = Rc<[(f64, u32)]>;

/// Capacity-type labels of a claim's offerings, sorted.
type CapacityTypes = Rc<[&'static str]>;

impl Solver<'_> {
    pub(super) fn results(&self, failures: BTreeMap<usize, Failure>) -> Results {
        let mut results = Results::default();
        // Many claims end with the same type list: share one copy of each.
        let mut lists: HashMap<(usize, Vec<u32>), TypeNames> = HashMap::new();
        // Claims alike in pool, types, requirements and reservations (thousands of them when
        // every pod gets its own node) price the same: each such set is priced once.
        let mut offers: HashMap<OfferKey<'_>, Offers> = HashMap::new();
        for claim in &self.claims {
            let pool = &self.pools[claim.pool];
            let key = (
                claim.pool,
                claim.types.as_slice(),
                &claim.requirements,
                &claim.reserved,
            );
            let (priced, capacity_types, names) = offers
                .entry(key)
                .or_insert_with(|| {
                    let (priced, capacity_types) = self.offers(claim);
                    let ids: Vec<u32> = priced.iter().map(|(_, t)| *t).collect();
                    let names = lists
                        .entry((claim.pool, ids))
                        .or_insert_with_key(|(_, ids)| {
                            ids.iter()
                                .map(|t| pool.types[*t as usize].name.clone())
                                .collect()
                        })
                        .clone();
                    (priced, capacity_types, names)
                })
                .clone();
            let mut reqs = claim.requirements.clone();
            reqs.add(CAPACITY_TYPE_LABEL, Requirement::any_of(&capacity_types));
            if !claim.reserved.is_empty() {
                // Upstream's `FinalizeScheduling`: pinned to reserved and its reservations.
                let ids: Vec<&str> = claim.reserved.iter().map(String::as_str).collect();
                reqs.add(CAPACITY_RESERVATION_ID_LABEL, Requirement::any_of(&ids));
            }
            let daemon = priced
                .iter()
                .map(|(_, t)| &pool.types[*t as usize].daemon)
                .min_by_key(|d| (d[0], d[1]))
                .cloned()
                .unwrap_or_else(|| vec![0; self.space.names.len()]);
            let mut requests = claim.used.clone();
            add(&mut requests, &daemon);
            let mut requirements = reqs.to_api();
            requirements.retain(|r| r.key != INSTANCE_TYPE_LABEL || r.min_values.is_some());
            results.new_claims.push(PlannedClaim {
                node_pool: pool.name.clone(),
                instance_types: names,
                requirements,
                pods: claim
                    .pods
                    .iter()
                    .map(|p| self.input.pods[*p].key.clone())
                    .collect(),
                requests: self.space.sparse(&requests),
                price: priced.first().map_or(0.0, |(p, _)| *p),
            });
        }
        for node in &self.nodes {
            if !node.placed.is_empty() {
                results.existing_nodes.push(NodePlacement {
                    node: node.node.name.clone(),
                    pods: node
                        .placed
                        .iter()
                        .map(|p| self.input.pods[*p].key.clone())
                        .collect(),
                });
            }
        }
        for (p, failure) in failures {
            results.unschedulable.push(Unschedulable {
                pod: self.input.pods[p].key.clone(),
                reason: failure.reason,
                awaiting_reservation: failure.awaiting_reservation,
            });
        }
        results.unschedulable.sort_by(|a, b| a.pod.cmp(&b.pod));
        results
    }

    /// The claim's instance types priced by their cheapest offering it may launch into,
    /// cheapest first (at most the run's maximum), and the capacity types of those offerings.
    fn offers(&self, claim: &Claim) -> (Priced, CapacityTypes) {
        let pool = &self.pools[claim.pool];
        let mut capacity_types = BTreeSet::new();
        let mut priced: Vec<(f64, u32)> = Vec::with_capacity(claim.types.len());
        for &t in &claim.types {
            let mut cheapest: Option<f64> = None;
            // A claim holding reservations launches into one of them; one holding none never
            // launches reserved (the run gave the capacity to other claims).
            let offerings = pool.types[t as usize]
                .offerings(&claim.requirements)
                .filter(|o| match o.reservation_id() {
                    Some(id) => claim.reserved.contains(id),
                    None => claim.reserved.is_empty(),
                });
            for o in offerings {
                capacity_types.insert(o.capacity_type.label());
                cheapest = Some(cheapest.map_or(o.price, |c| c.min(o.price)));
            }
            if let Some(price) = cheapest {
                priced.push((price, t));
            }
        }
        // Ties keep the pool's order (its cheapest price, then name).
        priced.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        priced.truncate(self.input.options.instance_types_max);
        (
            priced.into(),
            capacity_types.into_iter().collect::<Vec<_>>().into(),
        )
    }
}
