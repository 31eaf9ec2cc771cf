//! Status condition types of the v1 API and the one way conditions are updated.
//!
//! `lastTransitionTime` changes only when a condition's status changes (as in upstream's
//! operatorpkg), so watchers can tell "still false" from "became false".

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::common::{Condition, ConditionStatus};

/// The root condition every object reports: true when all its dependents are.
pub const READY: &str = "Ready";

/// NodeClaim conditions.
pub mod nodeclaim {
    pub const LAUNCHED: &str = "Launched";
    pub const REGISTERED: &str = "Registered";
    pub const INITIALIZED: &str = "Initialized";
    pub const CONSOLIDATABLE: &str = "Consolidatable";
    pub const DRIFTED: &str = "Drifted";
    pub const DRAINED: &str = "Drained";
    pub const VOLUMES_DETACHED: &str = "VolumesDetached";
    pub const INSTANCE_TERMINATING: &str = "InstanceTerminating";
    pub const CONSISTENT_STATE_FOUND: &str = "ConsistentStateFound";
    pub const DISRUPTION_REASON: &str = "DisruptionReason";
    /// Ours: why disruption leaves the node alone (the one blocker), kept current by the
    /// disruption controller; upstream reports it only as `DisruptionBlocked` events.
    pub const DISRUPTION_BLOCKED: &str = "DisruptionBlocked";
    /// `Ready` = all of these.
    pub const READY_DEPENDENTS: [&str; 3] = [LAUNCHED, REGISTERED, INITIALIZED];
}

/// NodePool conditions.
pub mod nodepool {
    pub const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
    pub const NODE_CLASS_READY: &str = "NodeClassReady";
    /// Informational: does not gate `Ready`.
    pub const NODE_REGISTRATION_HEALTHY: &str = "NodeRegistrationHealthy";
    pub const READY_DEPENDENTS: [&str; 2] = [VALIDATION_SUCCEEDED, NODE_CLASS_READY];
}

/// EC2NodeClass conditions.
pub mod ec2nodeclass {
    pub const AMIS_READY: &str = "AMIsReady";
    pub const SUBNETS_READY: &str = "SubnetsReady";
    pub const SECURITY_GROUPS_READY: &str = "SecurityGroupsReady";
    pub const INSTANCE_PROFILE_READY: &str = "InstanceProfileReady";
    pub const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
    pub const PLACEMENT_GROUP_READY: &str = "PlacementGroupReady";
    pub const CAPACITY_RESERVATIONS_READY: &str = "CapacityReservationsReady";
    pub const READY_DEPENDENTS: [&str; 6] = [
        AMIS_READY,
        SUBNETS_READY,
        SECURITY_GROUPS_READY,
        INSTANCE_PROFILE_READY,
        VALIDATION_SUCCEEDED,
        PLACEMENT_GROUP_READY,
    ];
}

/// Finds a condition by type.
pub fn get<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition is present and `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    get(conditions, type_).is_some_and(|c| c.status == ConditionStatus::True)
}

/// Sets a condition. Returns whether anything changed. `lastTransitionTime` moves only when the
/// status changes; reason, message and generation are updated in place.
pub fn set(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) -> bool {
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) {
        let before = existing.clone();
        if existing.status != status {
            existing.status = status;
            existing.last_transition_time = Time(now);
        }
        existing.reason = reason.to_string();
        existing.message = message.to_string();
        existing.observed_generation = generation;
        return *existing != before;
    }
    conditions.push(Condition {
        type_: type_.to_string(),
        status,
        observed_generation: generation,
        last_transition_time: Time(now),
        reason: reason.to_string(),
        message: message.to_string(),
    });
    conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
    true
}

/// Recomputes `Ready` from `dependents`: `True` when all are true, `False` naming the first
/// false one, `Unknown` while any is missing or unknown.
pub fn set_ready(
    conditions: &mut Vec<Condition>,
    dependents: &[&str],
    generation: Option<i64>,
    now: Timestamp,
) -> bool {
    let mut status = ConditionStatus::True;
    let mut reason = "Ready".to_string();
    let mut message = String::new();
    for dependent in dependents {
        match get(conditions, dependent).map(|c| c.status) {
            Some(ConditionStatus::True) => {}
            Some(ConditionStatus::False) => {
                status = ConditionStatus::False;
                reason = format!("{dependent}False");
                message = format!("{dependent}=False");
                break;
            }
            _ if status == ConditionStatus::True => {
                status = ConditionStatus::Unknown;
                reason = format!("{dependent}Unknown");
                message = format!("{dependent}=Unknown");
            }
            _ => {}
        }
    }
    set(
        conditions, READY, status, &reason, &message, generation, now,
    )
}
