//! Consolidation's rules for a replacement: one new node, strictly cheaper in every way it could
//! launch, never trading spot for on-demand.
//!
//! - Every instance type kept must cost less than the candidates together at its *most
//!   expensive* allowed offering (zone and capacity type), so whatever EC2 picks saves money.
//! - When the replacement may be spot or on-demand it is pinned to spot (its prices were checked
//!   against on-demand too; a spot shortage then fails the launch instead of buying on-demand).
//! - Spot candidates are replaced only by spot, and only with the `SpotToSpotConsolidation` gate;
//!   a single spot node then needs at least [`SPOT_TO_SPOT_TYPES_MIN`] cheaper types and launches
//!   with the cheapest of them (upstream's guard against trading down into a scarce pool).
//! - Multi-node: options priced at or above the dearest candidate whose own type is among them are
//!   dropped (replacing two m5.large with one m5.large at the same price is churn, not savings).
//! - `minValues` on instance types still has to hold after the filtering.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::candidates::Candidate;
use crate::api::labels::{
    CAPACITY_TYPE_LABEL, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, INSTANCE_TYPE_LABEL,
    ZONE_LABEL,
};
use crate::api::{Operator, Requirement as ApiRequirement};
use crate::catalog::Catalog;
use crate::scheduling::{PlannedClaim, Requirements};

/// Fewest cheaper instance types a single spot node's spot replacement needs (upstream
/// `MinInstanceTypesForSpotToSpotConsolidation`).
pub const SPOT_TO_SPOT_TYPES_MIN: usize = 15;

/// A replacement node a command launches.
#[derive(Clone, Debug, PartialEq)]
pub struct Replacement {
    /// What to create (pool, instance types cheapest first, requirements, requests, pods).
    pub planned: PlannedClaim,
    /// `spot`, `on-demand` or `reserved` (one value once pinned; joined by `,` otherwise).
    pub capacity_type: String,
    /// Zones its offerings allow, sorted.
    pub zones: Vec<String>,
}

/// One instance type's price range under the replacement's zone and capacity-type requirements.
struct Priced {
    name: Arc<str>,
    cheapest: f64,
    dearest: f64,
    zones: BTreeSet<String>,
}

fn price_types(
    planned: &PlannedClaim,
    catalog: &Catalog,
    zones: Option<&crate::scheduling::Requirement>,
    capacity_types: &BTreeSet<&str>,
) -> Vec<Priced> {
    let mut out: Vec<Priced> = planned
        .instance_types
        .iter()
        .filter_map(|name| {
            let it = catalog.get(name)?;
            let offerings: Vec<_> = it
                .offerings
                .iter()
                .filter(|o| o.available)
                .filter(|o| zones.is_none_or(|z| z.has(&o.zone)))
                .filter(|o| capacity_types.contains(o.capacity_type.label()))
                .collect();
            let cheapest = offerings.iter().map(|o| o.price).min_by(f64::total_cmp)?;
            let dearest = offerings.iter().map(|o| o.price).max_by(f64::total_cmp)?;
            Some(Priced {
                name: name.clone(),
                cheapest,
                dearest,
                zones: offerings.iter().map(|o| o.zone.clone()).collect(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.cheapest.total_cmp(&b.cheapest).then(a.name.cmp(&b.name)));
    out
}

/// The cheaper replacement for `candidates` from the solver's `planned` claim, or why there is
/// none (the text always says "cheaper", the word explanations are searched for).
pub fn replacement(
    candidates: &[&Candidate<'_>],
    planned: &PlannedClaim,
    catalog: &Catalog,
    spot_to_spot: bool,
) -> Result<Replacement, String> {
    let total: f64 = candidates.iter().map(|c| c.price).sum();
    let requirements = Requirements::from_api(&planned.requirements);
    let allowed = requirements.get(CAPACITY_TYPE_LABEL);
    let allows = |ct: &str| allowed.is_none_or(|r| r.has(ct));
    let all_spot = candidates
        .iter()
        .all(|c| c.facts.capacity_type.as_deref() == Some(CAPACITY_TYPE_SPOT));
    let single = candidates.len() == 1;
    let capacity_types: BTreeSet<&str> = if all_spot {
        if !spot_to_spot {
            return Err("no cheaper replacement is allowed: spot nodes are only replaced by spot, and spot-to-spot consolidation (feature gate SpotToSpotConsolidation) is off".into());
        }
        if !allows(CAPACITY_TYPE_SPOT) {
            return Err("no cheaper replacement: a spot node is never replaced by on-demand, and its pods cannot run on spot".into());
        }
        BTreeSet::from([CAPACITY_TYPE_SPOT])
    } else {
        crate::api::labels::CAPACITY_TYPES
            .into_iter()
            .filter(|ct| allows(ct))
            .collect()
    };
    let mut priced = price_types(
        planned,
        catalog,
        requirements.get(ZONE_LABEL),
        &capacity_types,
    );
    let cheapest_fit = priced.first().map(|p| (p.name.clone(), p.cheapest));
    let mut ceiling = total;
    if !single {
        // The same-type guard: never replace a set by one of their own types at no saving.
        for c in candidates {
            if let Some(own) = priced
                .iter()
                .find(|p| Some(&*p.name) == c.facts.instance_type.as_deref())
            {
                ceiling = ceiling.min(own.dearest.max(c.price));
            }
        }
    }
    priced.retain(|p| p.dearest < ceiling);
    if priced.is_empty() {
        return Err(match cheapest_fit {
            Some((name, price)) => format!(
                "no cheaper replacement: the cheapest type its pods fit, {name} at ${price:.4}/h, does not cost less than the ${total:.4}/h it would replace"
            ),
            None => {
                "no cheaper replacement: no offering of a type its pods fit is available".into()
            }
        });
    }
    if all_spot && single {
        if priced.len() < SPOT_TO_SPOT_TYPES_MIN {
            return Err(format!(
                "no cheaper replacement: spot-to-spot consolidation needs at least {SPOT_TO_SPOT_TYPES_MIN} cheaper spot types, {} fit",
                priced.len()
            ));
        }
        priced.truncate(SPOT_TO_SPOT_TYPES_MIN);
    }
    let min_values = planned
        .requirements
        .iter()
        .find(|r| r.key == INSTANCE_TYPE_LABEL)
        .and_then(|r| r.min_values);
    if let Some(min) = min_values
        && (priced.len() as i64) < min
    {
        return Err(format!(
            "no cheaper replacement keeps minValues {min} of instance types ({} cheaper types fit)",
            priced.len()
        ));
    }
    let pinned: Vec<&str> = if capacity_types.contains(CAPACITY_TYPE_SPOT)
        && capacity_types.contains(CAPACITY_TYPE_ON_DEMAND)
    {
        vec![CAPACITY_TYPE_SPOT]
    } else {
        capacity_types.iter().copied().collect()
    };
    Ok(build(planned, priced, &pinned))
}

fn build(planned: &PlannedClaim, priced: Vec<Priced>, capacity_types: &[&str]) -> Replacement {
    let zones: BTreeSet<String> = priced
        .iter()
        .flat_map(|p| p.zones.iter().cloned())
        .collect();
    let mut requirements: Vec<ApiRequirement> = planned
        .requirements
        .iter()
        .filter(|r| r.key != CAPACITY_TYPE_LABEL)
        .cloned()
        .collect();
    requirements.push(ApiRequirement {
        key: CAPACITY_TYPE_LABEL.to_string(),
        operator: Operator::In,
        values: capacity_types.iter().map(|s| s.to_string()).collect(),
        min_values: None,
    });
    requirements.sort_by(|a, b| a.key.cmp(&b.key));
    let price = priced.first().map_or(0.0, |p| p.cheapest);
    let planned = PlannedClaim {
        node_pool: planned.node_pool.clone(),
        instance_types: priced.iter().map(|p| p.name.clone()).collect(),
        requirements,
        pods: planned.pods.clone(),
        requests: planned.requests.clone(),
        price,
    };
    Replacement {
        planned,
        capacity_type: capacity_types.join(","),
        zones: zones.into_iter().collect(),
    }
}
