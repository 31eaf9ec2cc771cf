//! Condition updates keep upstream's transition semantics.

use karpenter_core::api::ConditionStatus::{False, True, Unknown};
use karpenter_core::api::conditions::{self, READY, nodeclaim};

fn at(text: &str) -> jiff::Timestamp {
    text.parse().expect("timestamp")
}

#[test]
fn last_transition_time_moves_only_when_the_status_changes() {
    let mut list = Vec::new();
    assert!(conditions::set(
        &mut list,
        nodeclaim::LAUNCHED,
        False,
        "Pending",
        "",
        None,
        at("2026-01-01T00:00:00Z")
    ));
    assert!(conditions::set(
        &mut list,
        nodeclaim::LAUNCHED,
        False,
        "StillPending",
        "retrying",
        None,
        at("2026-01-01T00:01:00Z")
    ));
    assert_eq!(list[0].last_transition_time.0, at("2026-01-01T00:00:00Z"));
    assert_eq!(list[0].reason, "StillPending");
    assert!(!conditions::set(
        &mut list,
        nodeclaim::LAUNCHED,
        False,
        "StillPending",
        "retrying",
        None,
        at("2026-01-01T00:02:00Z")
    ));
    assert!(conditions::set(
        &mut list,
        nodeclaim::LAUNCHED,
        True,
        "Launched",
        "",
        None,
        at("2026-01-01T00:03:00Z")
    ));
    assert_eq!(list[0].last_transition_time.0, at("2026-01-01T00:03:00Z"));
}

#[test]
fn ready_is_true_only_when_every_dependent_is_true() {
    let now = at("2026-01-01T00:00:00Z");
    let mut list = Vec::new();
    conditions::set(
        &mut list,
        nodeclaim::LAUNCHED,
        True,
        "Launched",
        "",
        None,
        now,
    );
    conditions::set_ready(&mut list, &nodeclaim::READY_DEPENDENTS, None, now);
    assert_eq!(
        conditions::get(&list, READY).map(|c| c.status),
        Some(Unknown)
    );
    conditions::set(
        &mut list,
        nodeclaim::REGISTERED,
        False,
        "NotRegistered",
        "",
        None,
        now,
    );
    conditions::set_ready(&mut list, &nodeclaim::READY_DEPENDENTS, None, now);
    assert_eq!(
        conditions::get(&list, READY).map(|c| c.reason.as_str()),
        Some("RegisteredFalse")
    );
    conditions::set(
        &mut list,
        nodeclaim::REGISTERED,
        True,
        "Registered",
        "",
        None,
        now,
    );
    conditions::set(
        &mut list,
        nodeclaim::INITIALIZED,
        True,
        "Initialized",
        "",
        None,
        now,
    );
    conditions::set_ready(&mut list, &nodeclaim::READY_DEPENDENTS, None, now);
    assert!(conditions::is_true(&list, READY));
}
