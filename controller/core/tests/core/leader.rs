//! Leader election over a Lease: acquire, renew, expiry measured from observation, the renew
//! deadline, guarded writes, release, and that two candidates never lead at once.

use std::sync::Arc;
use std::time::Duration;

use karpenter_core::leader::{
    LEASE_DURATION, LeaderElector, LeaderError, LeaseConfig, RENEW_DEADLINE, RETRY_PERIOD,
};
use karpenter_core::seams::kube::{ObjectKey, ResourceKind};
use karpenter_core::seams::{Clock, KubeApi, KubeError, ManualClock};
use serde_json::{Value, json};

use fakekube::{ApiFault, ApiOperation, ApiServer, Fake};

use super::api_server::{Fixtures, api_server};

const NAMESPACE: &str = "kube-system";
const LEASE: &str = "karpenter-leader-election";

fn setup() -> (Arc<ApiServer>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(
        "2026-01-01T00:00:00Z".parse().expect("timestamp"),
    ));
    let kube = api_server(clock.clone());
    (kube, clock)
}

fn candidate(kube: &Arc<ApiServer>, clock: &Arc<ManualClock>, identity: &str) -> LeaderElector {
    LeaderElector::new(
        kube.clone(),
        clock.clone(),
        LeaseConfig::new(NAMESPACE, LEASE, identity),
    )
    .expect("default config is valid")
}

fn lease(kube: &ApiServer) -> Value {
    kube.object_named(&ResourceKind::LEASE, &format!("{NAMESPACE}/{LEASE}"))
        .expect("the lease exists")
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    futures::executor::block_on(future)
}

#[test]
fn the_first_candidate_creates_the_lease_and_leads() {
    let (kube, clock) = setup();
    let mut a = candidate(&kube, &clock, "a");
    assert!(!a.is_leader(), "nobody leads before trying");
    assert!(block_on(a.step()).expect("step"));
    assert!(a.is_leader());
    let spec = &lease(&kube)["spec"];
    assert_eq!(spec["holderIdentity"], "a");
    assert_eq!(spec["leaseDurationSeconds"], 15);
    assert_eq!(spec["leaseTransitions"], 0);
    assert_eq!(spec["renewTime"], "2026-01-01T00:00:00.000000Z");
    assert_eq!(spec["acquireTime"], "2026-01-01T00:00:00.000000Z");
}

#[test]
fn a_follower_waits_while_the_leader_renews_and_takes_over_a_lease_duration_after_it_stops() {
    let (kube, clock) = setup();
    let mut a = candidate(&kube, &clock, "a");
    let mut b = candidate(&kube, &clock, "b");
    assert!(block_on(a.step()).expect("a acquires"));
    // Both step every second for a minute: a renews every 2 s, b never gets in.
    for _ in 0..60 {
        clock.advance(Duration::from_secs(1));
        assert!(block_on(a.step()).expect("a renews"));
        assert!(!block_on(b.step()).expect("b follows"));
        assert_eq!(b.observed_holder(), Some("a"));
    }
    let renew_time = lease(&kube)["spec"]["renewTime"].clone();
    assert_eq!(
        renew_time, "2026-01-01T00:01:00.000000Z",
        "renewed every 2 s"
    );
    // a dies (no release). b may take over only a whole lease duration after it observed a's
    // last renewal (so never within 15 s of a's death), and does at one of its next attempts.
    let mut took_over = None;
    for second in 1..=30 {
        clock.advance(Duration::from_secs(1));
        if block_on(b.step()).expect("b steps") {
            took_over = Some(second);
            break;
        }
    }
    let took_over = took_over.expect("b takes over");
    assert!(
        took_over >= LEASE_DURATION.as_secs(),
        "b took over {took_over} s after a's last renewal"
    );
    assert!(
        took_over <= (LEASE_DURATION + 2 * RETRY_PERIOD).as_secs(),
        "b took over only {took_over} s after a's last renewal"
    );
    let spec = &lease(&kube)["spec"];
    assert_eq!(spec["holderIdentity"], "b");
    assert_eq!(spec["leaseTransitions"], 1);
    assert_eq!(spec["acquireTime"], spec["renewTime"]);
    assert!(!a.is_leader(), "a's renew deadline passed long ago");
}

#[test]
fn expiry_is_measured_from_observation_not_from_the_renew_time_written_in_the_lease() {
    let (kube, clock) = setup();
    let mut a = candidate(&kube, &clock, "a");
    assert!(block_on(a.step()).expect("a acquires"));
    // Long after a's only renewal a new candidate appears: the lease looks stale by its
    // renewTime, but the newcomer has only just observed it, so it waits a whole duration.
    clock.advance(Duration::from_secs(3600));
    let mut c = candidate(&kube, &clock, "c");
    assert!(!block_on(c.try_acquire_or_renew()).expect("c reads"));
    clock.advance(LEASE_DURATION - Duration::from_secs(1));
    assert!(!block_on(c.try_acquire_or_renew()).expect("c still waits"));
    clock.advance(Duration::from_secs(1));
    assert!(block_on(c.try_acquire_or_renew()).expect("c takes over"));
}

#[test]
fn a_leader_that_cannot_renew_steps_down_at_the_renew_deadline_before_anyone_can_take_over() {
    let (kube, clock) = setup();
    let mut a = candidate(&kube, &clock, "a");
    let mut b = candidate(&kube, &clock, "b");
    assert!(block_on(a.step()).expect("a acquires"));
    assert!(!block_on(b.step()).expect("b follows"));
    let renewed = clock.now();
    let mut a_led_until = None;
    let mut b_led_from = None;
    for second in 1..=30u64 {
        clock.advance(Duration::from_secs(1));
        // Every write a makes fails from now on (an API server partition for a).
        kube.script_faults(ApiOperation::Patch, [ApiFault::Unavailable]);
        let _ = block_on(a.step());
        // Use up the failure if a did not attempt this second, so b's writes go through.
        let _ = block_on(kube.patch(
            &ResourceKind::POD,
            &ObjectKey::namespaced("default", "absent"),
            &karpenter_core::seams::kube::Patch::Merge(json!({})),
        ));
        let b_leads = block_on(b.step()).unwrap_or(false);
        let a_leads = a.is_leader();
        assert!(!(a_leads && b_leads), "two leaders at {second} s");
        if a_leads {
            a_led_until = Some(second);
        }
        if b_leads && b_led_from.is_none() {
            b_led_from = Some(second);
        }
    }
    assert_eq!(
        a_led_until,
        Some(RENEW_DEADLINE.as_secs() - 1),
        "a leads until its renew deadline after {renewed}"
    );
    let b_led_from = b_led_from.expect("b takes over");
    assert!(
        (LEASE_DURATION.as_secs()..=(LEASE_DURATION + RETRY_PERIOD).as_secs())
            .contains(&b_led_from),
        "b led from {b_led_from} s"
    );
}

#[test]
fn of_two_candidates_racing_for_an_expired_lease_exactly_one_wins() {
    let (kube, clock) = setup();
    let mut a = candidate(&kube, &clock, "a");
    let mut b = candidate(&kube, &clock, "b");
    let mut c = candidate(&kube, &clock, "c");
    assert!(block_on(a.step()).expect("a acquires"));
    assert!(!block_on(b.try_acquire_or_renew()).expect("b observes"));
    assert!(!block_on(c.try_acquire_or_renew()).expect("c observes"));
    clock.advance(LEASE_DURATION);
    // b writes first. A write based on the read before it (what c would send if it had read
    // just before b wrote) carries the old resourceVersion and is refused.
    assert!(block_on(b.try_acquire_or_renew()).expect("b takes over"));
    let stale = block_on(kube.patch(
        &ResourceKind::LEASE,
        &ObjectKey::namespaced(NAMESPACE, LEASE),
        &karpenter_core::seams::kube::Patch::Merge(json!({
            "metadata": {"resourceVersion": "1"},
            "spec": {"holderIdentity": "c"},
        })),
    ));
    assert!(
        matches!(stale, Err(KubeError::Conflict(_))),
        "a write based on an old read is refused: {stale:?}"
    );
    // c, reading afresh, sees b's new record and waits for it to expire.
    assert!(!block_on(c.try_acquire_or_renew()).expect("c follows b"));
    assert_eq!(lease(&kube)["spec"]["holderIdentity"], "b");
    assert!(b.is_leader() && !c.is_leader() && !a.is_leader());
}

#[test]
fn a_released_lease_is_taken_at_the_next_attempt() {
    let (kube, clock) = setup();
    let mut a = candidate(&kube, &clock, "a");
    let mut b = candidate(&kube, &clock, "b");
    assert!(block_on(a.step()).expect("a acquires"));
    assert!(!block_on(b.step()).expect("b follows"));
    assert!(block_on(a.release()).expect("a releases"));
    assert!(!a.is_leader());
    let spec = &lease(&kube)["spec"];
    assert_eq!(spec["holderIdentity"], "");
    assert_eq!(spec["leaseDurationSeconds"], 1);
    clock.advance(RETRY_PERIOD);
    assert!(block_on(b.step()).expect("b acquires"));
    assert_eq!(lease(&kube)["spec"]["leaseTransitions"], 1);
    assert!(
        !block_on(a.release()).expect("a holds nothing"),
        "releasing a lease one does not hold is a no-op"
    );
    assert_eq!(lease(&kube)["spec"]["holderIdentity"], "b");
}

#[test]
fn step_attempts_once_per_retry_period() {
    let (kube, clock) = setup();
    let mut a = candidate(&kube, &clock, "a");
    assert!(block_on(a.step()).expect("acquire"));
    let version = |kube: &ApiServer| lease(kube)["metadata"]["resourceVersion"].clone();
    let first = version(&kube);
    clock.advance(Duration::from_secs(1));
    assert!(block_on(a.step()).expect("still leading"));
    assert_eq!(version(&kube), first, "no write one second later");
    clock.advance(Duration::from_secs(1));
    assert!(block_on(a.step()).expect("renewed"));
    assert_ne!(version(&kube), first, "renewed after the retry period");
    assert_eq!(
        lease(&kube)["spec"]["renewTime"],
        "2026-01-01T00:00:02.000000Z"
    );
}

#[test]
fn a_lease_that_does_not_decode_is_an_error_not_a_panic_and_nobody_leads() {
    let (kube, clock) = setup();
    kube.apply(
        &ResourceKind::LEASE,
        json!({"metadata": {"name": LEASE, "namespace": NAMESPACE},
               "spec": {"holderIdentity": 42, "leaseDurationSeconds": "soon"}}),
    );
    let mut a = candidate(&kube, &clock, "a");
    let result = block_on(a.step());
    assert!(
        matches!(result, Err(LeaderError::Decode { .. })),
        "{result:?}"
    );
    assert!(!a.is_leader());
}

#[test]
fn timings_that_could_give_two_leaders_are_refused() {
    let (kube, clock) = setup();
    let mut config = LeaseConfig::new(NAMESPACE, LEASE, "a");
    config.renew_deadline = config.lease_duration;
    assert!(matches!(
        LeaderElector::new(kube.clone(), clock.clone(), config),
        Err(LeaderError::Config(_))
    ));
    let mut config = LeaseConfig::new(NAMESPACE, LEASE, "a");
    config.retry_period = config.renew_deadline;
    assert!(matches!(
        LeaderElector::new(kube.clone(), clock.clone(), config),
        Err(LeaderError::Config(_))
    ));
    let config = LeaseConfig::new(NAMESPACE, LEASE, "");
    assert!(matches!(
        LeaderElector::new(kube, clock, config),
        Err(LeaderError::Config(_))
    ));
}
