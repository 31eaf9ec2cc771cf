//! Leader election (`karpenter_core::leader`) over the adapter: two replicas, each with its own
//! client, against one in-test Lease store that enforces resourceVersion preconditions the way
//! the API server does.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use karpenter_core::leader::{LeaderElector, LeaseConfig};
use karpenter_core::seams::{Clock, KubeApi, ManualClock};
use karpenter_kube::rbac::LEADER_ELECTION_LEASE;
use karpenter_kube::{ClientLimits, KubeClient};
use serde_json::{Value, json};

use super::{Answer, Seen, ok, start, status};

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/karpenter/leases";

/// The one Lease and its resourceVersion counter.
#[derive(Default)]
struct LeaseStore {
    lease: Option<Value>,
    version: u64,
}

fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

impl LeaseStore {
    fn handle(&mut self, seen: &Seen) -> Answer {
        let path = format!("{LEASES}/{LEADER_ELECTION_LEASE}");
        match (seen.method.as_str(), seen.path.as_str()) {
            ("GET", p) if p == path => match &self.lease {
                Some(lease) => ok(lease.clone()),
                None => status(404, "NotFound", "leases not found"),
            },
            ("POST", LEASES) if self.lease.is_some() => {
                status(409, "AlreadyExists", "leases already exists")
            }
            ("POST", LEASES) => {
                self.version += 1;
                let mut lease = seen.body.clone();
                lease["metadata"]["resourceVersion"] = json!(self.version.to_string());
                lease["metadata"]["uid"] = json!("lease-uid");
                self.lease = Some(lease.clone());
                (201, lease.to_string())
            }
            ("PATCH", p) if p == path => {
                let Some(lease) = &mut self.lease else {
                    return status(404, "NotFound", "leases not found");
                };
                let expected = &seen.body["metadata"]["resourceVersion"];
                if expected.is_string() && *expected != lease["metadata"]["resourceVersion"] {
                    return status(409, "Conflict", "the object has been modified");
                }
                merge(lease, &seen.body);
                self.version += 1;
                lease["metadata"]["resourceVersion"] = json!(self.version.to_string());
                ok(lease.clone())
            }
            _ => status(404, "NotFound", "no such path"),
        }
    }
}

fn elector(store: &Arc<Mutex<LeaseStore>>, clock: &Arc<ManualClock>, id: &str) -> LeaderElector {
    let store = store.clone();
    let (client, _) = super::client_with(
        move |seen| store.lock().unwrap().handle(seen),
        ClientLimits::default(),
    );
    let kube = KubeClient::new(
        client.client().clone(),
        ClientLimits::default(),
        clock.clone(),
        id,
    );
    let kube: Arc<dyn KubeApi> = Arc::new(kube);
    let clock: Arc<dyn Clock> = clock.clone();
    LeaderElector::new(
        kube,
        clock,
        LeaseConfig::new("karpenter", LEADER_ELECTION_LEASE, id),
    )
    .unwrap()
}

#[tokio::test]
async fn of_two_replicas_exactly_one_leads_and_a_release_hands_over_at_the_next_attempt() {
    let store = Arc::new(Mutex::new(LeaseStore::default()));
    let clock = Arc::new(ManualClock::new(start()));
    let mut a = elector(&store, &clock, "replica-a");
    let mut b = elector(&store, &clock, "replica-b");
    assert!(a.step().await.unwrap());
    assert!(!b.step().await.unwrap());
    for _ in 0..20 {
        clock.advance(Duration::from_secs(1));
        let _ = a.step().await;
        let _ = b.step().await;
        assert!(a.is_leader() != b.is_leader(), "exactly one leads");
        assert!(a.is_leader());
    }
    assert!(a.release().await.unwrap());
    assert!(!a.is_leader());
    clock.advance(Duration::from_secs(2));
    assert!(
        b.step().await.unwrap(),
        "the standby takes over after a release"
    );
    let lease = store.lock().unwrap().lease.clone().unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "replica-b");
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
}

#[tokio::test]
async fn a_leader_that_stops_renewing_is_replaced_once_the_lease_duration_passes() {
    let store = Arc::new(Mutex::new(LeaseStore::default()));
    let clock = Arc::new(ManualClock::new(start()));
    let mut a = elector(&store, &clock, "replica-a");
    let mut b = elector(&store, &clock, "replica-b");
    assert!(a.step().await.unwrap());
    assert!(!b.step().await.unwrap());
    // a is killed: only b keeps trying.
    for second in 1..=14 {
        clock.advance(Duration::from_secs(1));
        assert!(!b.step().await.unwrap(), "b must not lead at {second} s");
    }
    clock.advance(Duration::from_secs(2));
    assert!(b.step().await.unwrap(), "b leads once 15 s have passed");
    assert!(!a.is_leader(), "a stopped leading at its renew deadline");
}
