//! Capacity reservations an EC2NodeClass selects (upstream's `capacityreservation` provider and
//! nodeclass reconciler): its `capacityReservationSelectorTerms` become
//! `DescribeCapacityReservations` queries (an `id` term by id, a tags/owner/match-criteria term
//! by filters, always only `active` reservations), whose union (by id, reservations already
//! ended dropped) is `status.capacityReservations`. The counts EC2 reports sync
//! [`ReservationAvailability`], which provisioning and launch read.
//!
//! A capacity block is `expiring` from [`CAPACITY_BLOCK_EXPIRATION_LEAD`] before its end: no
//! more launches into it, and its nodes are drained (`crate::capacityreservation`) before EC2
//! reclaims them 30 minutes before the end.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;

use super::ResolveError;
use crate::api::EC2NodeClass;
use crate::api::ec2nodeclass::{
    CapacityReservationSelectorTerm, CapacityReservationStatus, InstanceMatchCriteria,
    ReservationState, ReservationType,
};
use crate::catalog::ReservationAvailability;
use crate::seams::ec2::{CapacityReservation, Ec2, Filter};

/// A capacity block is `expiring` this long before its end (upstream's
/// `capacityReservationExpirationPeriod`): 10 minutes more than EC2's 30-minute reclaim lead,
/// time to drain its nodes gracefully.
pub const CAPACITY_BLOCK_EXPIRATION_LEAD: Duration = Duration::from_secs(40 * 60);

/// One `DescribeCapacityReservations` query of a term: (ids, filters).
fn queries(term: &CapacityReservationSelectorTerm) -> Vec<(Vec<String>, Vec<Filter>)> {
    let active = Filter::new("state", &["active"]);
    let mut out = Vec::new();
    if let Some(id) = &term.id {
        out.push((vec![id.clone()], vec![active.clone()]));
    }
    let tags = term.tags.as_ref().filter(|t| !t.is_empty());
    if tags.is_some() || term.instance_match_criteria.is_some() {
        let mut filters = vec![active];
        if let Some(owner) = &term.owner_id {
            filters.push(Filter::new("owner-id", &[owner.as_str()]));
        }
        for (key, value) in tags.into_iter().flatten() {
            filters.push(if value == "*" {
                Filter::new("tag-key", &[key.as_str()])
            } else {
                Filter::new(format!("tag:{key}"), &[value.as_str()])
            });
        }
        if let Some(criteria) = term.instance_match_criteria {
            filters.push(Filter::new(
                "instance-match-criteria",
                &[match criteria {
                    InstanceMatchCriteria::Open => "open",
                    InstanceMatchCriteria::Targeted => "targeted",
                }],
            ));
        }
        out.push((Vec::new(), filters));
    }
    out
}

/// Every active reservation `class` selects that has not ended at `now`, by id. An id EC2 does
/// not know selects nothing (as upstream: the term is not an error).
pub async fn select(
    ec2: &dyn Ec2,
    class: &EC2NodeClass,
    now: Timestamp,
) -> Result<Vec<CapacityReservation>, ResolveError> {
    let mut found: BTreeMap<String, CapacityReservation> = BTreeMap::new();
    for term in class
        .spec
        .capacity_reservation_selector_terms
        .iter()
        .flatten()
    {
        for (ids, filters) in queries(term) {
            let reservations = match ec2.describe_capacity_reservations(&ids, &filters).await {
                Ok(reservations) => reservations,
                Err(crate::seams::ec2::Ec2Error::NotFound { .. }) => Vec::new(),
                Err(err) => return Err(ResolveError::Ec2(err)),
            };
            for r in reservations {
                found.insert(r.id.clone(), r);
            }
        }
    }
    Ok(found
        .into_values()
        .filter(|r| r.end_date.is_none_or(|end| end > now))
        .collect())
}

/// How the status lists `r` at `now`.
pub fn status_of(r: &CapacityReservation, now: Timestamp) -> CapacityReservationStatus {
    let lead = jiff::SignedDuration::try_from(CAPACITY_BLOCK_EXPIRATION_LEAD).unwrap_or_default();
    let expiring = r.reservation_type == ReservationType::CapacityBlock
        && r.end_date
            .and_then(|end| end.checked_sub(lead).ok())
            .is_some_and(|from| now >= from);
    CapacityReservationStatus {
        availability_zone: r.zone.clone(),
        end_time: r
            .end_date
            .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time),
        id: r.id.clone(),
        instance_match_criteria: r.instance_match_criteria,
        instance_type: r.instance_type.clone(),
        interruptible: Some(r.interruptible),
        owner_id: r.owner_id.clone(),
        reservation_type: r.reservation_type,
        state: if expiring {
            ReservationState::Expiring
        } else {
            ReservationState::Active
        },
    }
}

/// Resolves `class`'s reservations: their status entries, and the availability cache synced
/// with EC2's counts.
pub async fn resolve(
    ec2: &dyn Ec2,
    class: &EC2NodeClass,
    availability: &ReservationAvailability,
    now: Timestamp,
) -> Result<Vec<CapacityReservationStatus>, ResolveError> {
    if class
        .spec
        .capacity_reservation_selector_terms
        .as_ref()
        .is_none_or(|t| t.is_empty())
    {
        return Ok(Vec::new());
    }
    let reservations = select(ec2, class, now).await?;
    availability.sync(
        reservations
            .iter()
            .map(|r| (r.id.clone(), r.available_instance_count)),
        now,
    );
    Ok(reservations.iter().map(|r| status_of(r, now)).collect())
}
