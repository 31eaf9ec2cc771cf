//! The invariants that need history (what happened across steps) or attribution (what the
//! controller did, from the [`Audit`] its wrapped seam keeps), checked after every step:
//!
//! - `drained-before-terminate`: an instance that was live at the previous step and is shutting
//!   down or terminated now, and was not reclaimed by EC2 after a spot warning
//!   ([`SPOT_NOTICE`] elapsed) nor terminated by the harness itself
//!   ([`Catalogue::note_external_termination`]), had no pod on its node that is neither finished, a mirror pod,
//!   tolerating `karpenter.sh/disrupted`, nor deleted with its grace period over
//!   (`deletionTimestamp ≤ now`: the API server sets it to the delete's time plus the grace
//!   period) — unless its NodeClaim's terminationGracePeriod deadline had passed.
//! - `pdb-respected`: every pod the controller removes is either evicted through the Eviction API
//!   (the API server evaluates its PodDisruptionBudgets at that moment) or deleted inside its
//!   NodeClaim's terminationGracePeriod window (at or after `deadline − the pod's grace period`);
//!   a plain delete outside that window of a pod a budget covers is a violation when the budget
//!   allowed no disruption just before it (healthy − 1 < desiredHealthy for a healthy pod).
//! - `do-not-disrupt-respected`: a pod annotated `karpenter.sh/do-not-disrupt: "true"` is only
//!   evicted or deleted by the controller inside that window; without a terminationGracePeriod,
//!   never.
//! - `claim-storm`: retry storms do not mint NodeClaims endlessly. Over every sliding window of
//!   [`CLAIM_STORM_WINDOW`], the NodeClaims the controller deleted without an instance ever
//!   launched for them (insufficient-capacity failures) number at most
//!   [`CLAIM_STORM_FAILED_LAUNCHES_FLOOR`] plus the number of distinct pods pending at some step
//!   of the window. Why that bound: after a capacity error the failed offerings are cached
//!   unavailable for three minutes, so each group of pending pods (at least one pod) gets a new
//!   claim only when an offering it has not tried remains, a handful per window; a controller that
//!   turns retries into new claims makes one per reconcile, hundreds per window.
//! - `interruption-rehomed`: the pods a spot-interrupted node held at the warning (not finished,
//!   not DaemonSet or mirror pods, not tolerating `karpenter.sh/disrupted`, not already being
//!   deleted before it) have somewhere else to run by the time they leave it — at the first step
//!   at which none of them is left on the node undeleted, or at the reclaim ([`SPOT_NOTICE`] after
//!   the warning) if that comes first: each is matched one-to-one with a pod of the same owner
//!   (controller owner reference, else the `app` label) created since the warning and bound to
//!   another node, and those left over fit (first-fit decreasing on cpu, memory and pod count) in
//!   the free allocatable of other Ready, schedulable, non-deleting nodes. (Without a workload
//!   controller re-creating evicted pods, the second half carries the check: replacement capacity
//!   must be up before the drain.) Checked only when capacity existed from the warning to then:
//!   no insufficient-capacity answer, no instance launched in it that bootstrapped too slowly
//!   (or never) to join [`REHOME_JOIN_SLACK`] before the reclaim, and no instance launched in it
//!   (a replacement) warned itself before the reclaim (a second storm taking the replacement
//!   back). EC2 throttling and 5xx answers do not excuse it: the controller retries them.
//! - `termination-progress`: a deleting NodeClaim is gone within its terminationGracePeriod (or
//!   [`TERMINATION_WITHOUT_TGP_MAX`] without one) plus [`TERMINATION_SLACK`]; a claim without a
//!   terminationGracePeriod whose node holds a do-not-disrupt or PodDisruptionBudget-covered pod
//!   may wait for it forever (upstream's design).
//! - `pods-scheduled`: no pod stays pending longer than [`POD_PENDING_MAX`] while capacity
//!   exists: no capacity incident (an insufficient-capacity answer in the last
//!   [`CAPACITY_ERROR_SHADOW`], a slow bootstrap until it joined, a never-booting instance until
//!   its registration deadline) overlapped its wait, and no NodePool with limits is too full for
//!   it. EC2 throttling and 5xx answers are not missing capacity (the controller retries them).

use fakekit::Fake;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use fakecloud::{FakeCloud, Operation};
use jiff::{SignedDuration, Timestamp};
use karpenter_core::api::labels::{
    DISRUPTED_TAINT_KEY, DO_NOT_DISRUPT_ANNOTATION, MIRROR_POD_ANNOTATION,
};
use karpenter_core::resources::Resources;
use karpenter_core::seams::kube::ResourceKind;
use serde_json::Value;

use super::{CLAIM_DEADLINE, Invariants, Observation, res};
use crate::audit::{Audit, PodRemoval};
use fakekube::ApiServer;

/// EC2 reclaims a spot instance this long after its interruption warning.
pub const SPOT_NOTICE: Duration = fakecloud::SPOT_INTERRUPTION_NOTICE;
/// Sliding window of `claim-storm`.
pub const CLAIM_STORM_WINDOW: Duration = Duration::from_secs(10 * 60);
/// Failed launches `claim-storm` allows in a window besides one per pending pod.
pub const CLAIM_STORM_FAILED_LAUNCHES_FLOOR: usize = 10;
/// Longest a pod may stay pending while capacity exists (batching, launch and bootstrap take
/// about two minutes; the rest is room for API and EC2 errors and retries).
pub const POD_PENDING_MAX: Duration = Duration::from_secs(10 * 60);
/// How long after an insufficient-capacity answer capacity counts as missing (upstream's
/// unavailable-offerings cache keeps the offering out that long).
pub const CAPACITY_ERROR_SHADOW: Duration = Duration::from_secs(3 * 60);
/// Bound on a termination without a terminationGracePeriod (drain, volume detach, EC2's
/// shutting-down) when no pod blocks it by design.
pub const TERMINATION_WITHOUT_TGP_MAX: Duration = Duration::from_secs(10 * 60);
/// Slack on top of a termination's bound: the instance's shutdown (30 s), the node's removal
/// after it (40 s), steps and retries.
pub const TERMINATION_SLACK: Duration = Duration::from_secs(5 * 60);
/// A replacement for an interrupted node must be ready to join this long before the reclaim to
/// count as capacity that existed (registration, initialization and pod start take about 15 s).
pub const REHOME_JOIN_SLACK: Duration = Duration::from_secs(15);
/// Kubernetes' default `terminationGracePeriodSeconds`.
const DEFAULT_POD_GRACE_SECONDS: i64 = 30;

/// How many times faults the catalogue can see happened (the swarm reports them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub spot_warnings: u64,
    /// CreateFleet answers that launched nothing for lack of capacity.
    pub capacity_errors: u64,
    /// EC2 calls that failed with throttling or a 5xx.
    pub ec2_errors: u64,
    pub slow_boots: u64,
    pub never_boots: u64,
    /// `interruption-rehomed` checks made, and those skipped because capacity did not exist.
    pub rehome_checked: u64,
    pub rehome_excused: u64,
}

/// Pods of an interrupted node to find running elsewhere at the reclaim.
#[derive(Clone, Debug)]
struct RehomeCheck {
    instance: String,
    node: String,
    warned: Timestamp,
    due: Timestamp,
    /// (name, owner key, requests).
    pods: Vec<(String, Option<String>, Resources)>,
}

/// The history the catalogue keeps between steps.
pub struct Catalogue {
    audit: Arc<Audit>,
    /// Instances live (not shutting down or terminated) at the previous step.
    live: BTreeSet<String>,
    /// Every instance seen, so each launch is looked at once.
    seen: BTreeSet<String>,
    /// Spot warnings by instance id.
    warned: BTreeMap<String, Timestamp>,
    /// Instances the harness terminated itself ("outside Karpenter"): not the controller's doing.
    external: BTreeSet<String>,
    messages_seen: usize,
    rehome: Vec<RehomeCheck>,
    /// Intervals during which capacity was missing.
    incidents: Vec<(Timestamp, Timestamp)>,
    pending_since: BTreeMap<String, Timestamp>,
    /// Pod name → last step it was pending (for `claim-storm`'s count of pending pods).
    pending_seen: BTreeMap<String, Timestamp>,
    failed_launches: VecDeque<Timestamp>,
    boot_max: Duration,
    pub counters: Counters,
}

/// Objects read from the API server on first use in a step (most steps need none).
#[derive(Default)]
struct Lazy {
    pods: Option<Vec<Value>>,
    nodes: Option<Vec<Value>>,
    claims: Option<Vec<Value>>,
    pdbs: Option<Vec<Value>>,
    pools: Option<Vec<Value>>,
}

impl Lazy {
    fn get<'a>(
        slot: &'a mut Option<Vec<Value>>,
        api: &ApiServer,
        kind: &ResourceKind,
    ) -> &'a [Value] {
        slot.get_or_insert_with(|| api.objects(kind))
    }
    fn pods(&mut self, api: &ApiServer) -> &[Value] {
        Self::get(&mut self.pods, api, &ResourceKind::POD)
    }
    fn nodes(&mut self, api: &ApiServer) -> &[Value] {
        Self::get(&mut self.nodes, api, &ResourceKind::NODE)
    }
    fn claims(&mut self, api: &ApiServer) -> &[Value] {
        Self::get(&mut self.claims, api, &ResourceKind::NODE_CLAIM)
    }
    fn pdbs(&mut self, api: &ApiServer) -> &[Value] {
        Self::get(&mut self.pdbs, api, &ResourceKind::POD_DISRUPTION_BUDGET)
    }
    fn pools(&mut self, api: &ApiServer) -> &[Value] {
        Self::get(&mut self.pools, api, &ResourceKind::NODE_POOL)
    }
}

fn plus(time: Timestamp, by: Duration) -> Timestamp {
    time.saturating_add(SignedDuration::try_from(by).unwrap_or(SignedDuration::MAX))
        .unwrap_or(time)
}

fn minus(time: Timestamp, by: Duration) -> Timestamp {
    time.saturating_sub(SignedDuration::try_from(by).unwrap_or(SignedDuration::MAX))
        .unwrap_or(time)
}

fn time_of(value: &Value) -> Option<Timestamp> {
    value.as_str().and_then(|t| t.parse().ok())
}

fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

fn instance_of(provider_id: &str) -> &str {
    provider_id.rsplit('/').next().unwrap_or_default()
}

fn is_terminal(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    )
}

fn is_mirror(pod: &Value) -> bool {
    pod["metadata"]["annotations"][MIRROR_POD_ANNOTATION].is_string()
}

fn is_daemon(pod: &Value) -> bool {
    pod["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|o| o["kind"] == "DaemonSet")
}

/// Whether the pod tolerates the `karpenter.sh/disrupted:NoSchedule` taint (it chose to stay).
fn tolerates_disrupted(pod: &Value) -> bool {
    pod["spec"]["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| {
            let key = t["key"].as_str().unwrap_or_default();
            let exists = t["operator"] == "Exists";
            let effect = t["effect"].as_str().unwrap_or_default();
            (key.is_empty() && exists || key == DISRUPTED_TAINT_KEY)
                && (effect.is_empty() || effect == "NoSchedule")
        })
}

fn is_do_not_disrupt(pod: &Value) -> bool {
    pod["metadata"]["annotations"][DO_NOT_DISRUPT_ANNOTATION] == "true"
}

fn is_deleting(object: &Value) -> bool {
    object["metadata"]["deletionTimestamp"].is_string()
}

fn grace_seconds(pod: &Value) -> i64 {
    pod["spec"]["terminationGracePeriodSeconds"]
        .as_i64()
        .unwrap_or(DEFAULT_POD_GRACE_SECONDS)
        .max(0)
}

fn condition_true(object: &Value, type_: &str) -> bool {
    object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == type_ && c["status"] == "True")
}

/// Running, not being deleted, and Ready if it reports readiness.
fn is_healthy(pod: &Value) -> bool {
    let ready = pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .is_none_or(|c| c["status"] == "True");
    pod["status"]["phase"] == "Running" && !is_deleting(pod) && ready
}

fn requests(pod: &Value) -> Resources {
    let mut total = Resources::new();
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        total = total.plus(&res(&c["resources"]["requests"]));
    }
    total.add_one("pods", 1);
    total
}

/// Who replaces the pod when it goes: its controller owner reference, else its `app` label.
fn owner_key(pod: &Value) -> Option<String> {
    let owner = pod["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["controller"] == true)
        .and_then(|o| o["uid"].as_str())
        .map(|uid| format!("uid={uid}"));
    owner.or_else(|| {
        pod["metadata"]["labels"]["app"]
            .as_str()
            .map(|app| format!("app={app}"))
    })
}

fn node_of_instance<'a>(nodes: &'a [Value], instance: &str) -> Option<&'a Value> {
    nodes.iter().find(|n| {
        n["spec"]["providerID"]
            .as_str()
            .is_some_and(|p| instance_of(p) == instance)
    })
}

/// The NodeClaim of a node, by provider id.
fn claim_of_node<'a>(claims: &'a [Value], node: &Value) -> Option<&'a Value> {
    let provider = node["spec"]["providerID"].as_str()?;
    claims
        .iter()
        .find(|c| c["status"]["providerID"].as_str() == Some(provider))
}

fn parse_tgp(claim: &Value) -> Option<Duration> {
    claim["spec"]["terminationGracePeriod"]
        .as_str()
        .and_then(|t| humantime::parse_duration(t).ok())
}

/// A deleting claim's terminationGracePeriod deadline (deletionTimestamp + the period).
fn claim_deadline(claim: &Value) -> Option<Timestamp> {
    let deleted = time_of(&claim["metadata"]["deletionTimestamp"])?;
    Some(plus(deleted, parse_tgp(claim)?))
}

/// Whether a label selector (`matchLabels`, `matchExpressions`) selects `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    if !selector.is_object() {
        return false;
    }
    let label = |key: &str| labels[key].as_str();
    let by_labels = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let by_expressions = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match e["operator"].as_str() {
                Some("In") => label(key).is_some_and(|v| values.contains(&v)),
                Some("NotIn") => label(key).is_none_or(|v| !values.contains(&v)),
                Some("Exists") => label(key).is_some(),
                Some("DoesNotExist") => label(key).is_none(),
                _ => false,
            }
        });
    by_labels && by_expressions
}

fn pdb_covers(pdb: &Value, pod: &Value) -> bool {
    pdb["metadata"]["namespace"] == pod["metadata"]["namespace"]
        && selects(&pdb["spec"]["selector"], &pod["metadata"]["labels"])
}

/// `value` of an int-or-percent field over `total`, rounded up.
fn scaled(value: &Value, total: u64) -> Option<u64> {
    if let Some(n) = value.as_u64() {
        return Some(n);
    }
    let percent: u64 = value.as_str()?.strip_suffix('%')?.parse().ok()?;
    Some((total * percent).div_ceil(100))
}

/// The healthy pods a budget wants, given how many pods it expects; `None` if it protects nothing.
fn desired_healthy(pdb: &Value, expected: u64) -> Option<u64> {
    let spec = &pdb["spec"];
    if !spec["minAvailable"].is_null() {
        return scaled(&spec["minAvailable"], expected);
    }
    if !spec["maxUnavailable"].is_null() {
        return scaled(&spec["maxUnavailable"], expected).map(|n| expected.saturating_sub(n));
    }
    None
}

/// Places `pods` first-fit decreasing into `free` (node → free resources); the pods left over.
fn first_fit_decreasing(
    mut pods: Vec<(String, Resources)>,
    free: &mut [(String, Resources)],
) -> Vec<String> {
    pods.sort_by(|a, b| {
        b.1.get("cpu")
            .cmp(&a.1.get("cpu"))
            .then(b.1.get("memory").cmp(&a.1.get("memory")))
            .then(a.0.cmp(&b.0))
    });
    let mut left = Vec::new();
    for (name, need) in pods {
        match free.iter_mut().find(|(_, room)| need.fits_in(room)) {
            Some((_, room)) => *room = room.minus(&need),
            None => left.push(name),
        }
    }
    left
}

impl Catalogue {
    pub fn new(audit: Arc<Audit>, cloud: &FakeCloud) -> Self {
        let mut boot_max = Duration::from_secs(60);
        cloud.configure(|c| boot_max = Duration::from_millis(c.boot.boot_duration_ms_max));
        Self {
            audit,
            live: BTreeSet::new(),
            seen: BTreeSet::new(),
            warned: BTreeMap::new(),
            external: BTreeSet::new(),
            messages_seen: 0,
            rehome: Vec::new(),
            incidents: Vec::new(),
            pending_since: BTreeMap::new(),
            pending_seen: BTreeMap::new(),
            failed_launches: VecDeque::new(),
            boot_max,
            counters: Counters::default(),
        }
    }

    /// Records that the harness (not the controller) terminated `instance_id`, as a user or EC2
    /// would outside Karpenter: `drained-before-terminate` does not hold the controller to it.
    pub fn note_external_termination(&mut self, instance_id: &str) {
        self.external.insert(instance_id.to_string());
    }

    /// Whether capacity itself was missing in `from..=to` (insufficient capacity, slow or never
    /// booting instances). EC2 throttling and 5xx answers are not missing capacity: the
    /// invariants hold the controller to riding them out (it retries them).
    fn capacity_lost(&self, from: Timestamp, to: Timestamp) -> bool {
        self.incidents.iter().any(|(a, b)| *a <= to && *b >= from)
    }

    /// Checks everything after one step; violations go to `invariants`.
    pub fn check(
        &mut self,
        api: &ApiServer,
        cloud: &FakeCloud,
        observation: &Observation,
        now: Timestamp,
        invariants: &mut Invariants,
    ) {
        let audit = self.audit.take();
        let mut lazy = Lazy::default();
        self.watch_capacity(cloud, observation, now);
        self.watch_warnings(api, cloud, now, &mut lazy);
        self.check_terminations(api, observation, now, &mut lazy, invariants);
        self.check_removals(api, &audit.pod_removals, &mut lazy, invariants);
        self.check_claim_storm(&audit.claims_ended, observation, now, invariants);
        self.check_rehome(api, cloud, now, &mut lazy, invariants);
        self.check_termination_progress(api, observation, now, &mut lazy, invariants);
        self.check_pending(api, observation, now, &mut lazy, invariants);
        self.live = observation.instances.keys().cloned().collect();
    }

    /// Records capacity incidents: insufficient-capacity answers, slow and never bootstraps.
    fn watch_capacity(&mut self, cloud: &FakeCloud, observation: &Observation, now: Timestamp) {
        const ICE: [&str; 5] = [
            "InsufficientInstanceCapacity",
            "MaxSpotInstanceCountExceeded",
            "UnfulfillableCapacity",
            "VcpuLimitExceeded",
            "InsufficientFreeAddressesInSubnet",
        ];
        for call in cloud.calls() {
            // Throttling and 5xx (the substrings the world's fault tally uses): counted, not
            // incidents.
            let failed = !call.is_ok()
                && ["RequestLimitExceeded", "InternalError", "Unavailable"]
                    .iter()
                    .any(|code| call.outcome.contains(code));
            if failed {
                self.counters.ec2_errors += 1;
            }
            if call.operation != Operation::CreateFleet {
                continue;
            }
            let nothing = call.outcome.contains("instances=[]") || !call.is_ok();
            if nothing && ICE.iter().any(|code| call.outcome.contains(code)) {
                self.counters.capacity_errors += 1;
                self.incidents
                    .push((call.time, plus(call.time, CAPACITY_ERROR_SHADOW)));
            }
        }
        for id in observation.instances.keys() {
            if !self.seen.insert(id.clone()) {
                continue;
            }
            let Some(boot) = cloud.boot(id) else { continue };
            match boot.ready_at {
                None => {
                    self.counters.never_boots += 1;
                    self.incidents
                        .push((boot.launch_time, plus(boot.launch_time, CLAIM_DEADLINE)));
                }
                Some(ready)
                    if ready.duration_since(boot.launch_time).unsigned_abs() > self.boot_max =>
                {
                    self.counters.slow_boots += 1;
                    self.incidents.push((boot.launch_time, ready));
                }
                Some(_) => {}
            }
        }
        // Nothing looks back further than the oldest pending pod or a whole claim deadline.
        let horizon = self
            .pending_since
            .values()
            .min()
            .copied()
            .unwrap_or(now)
            .min(minus(now, CLAIM_DEADLINE));
        self.incidents.retain(|(_, end)| *end >= horizon);
    }

    /// Spot warnings: remembered, and the node's pods snapshotted for `interruption-rehomed`.
    fn watch_warnings(
        &mut self,
        api: &ApiServer,
        cloud: &FakeCloud,
        now: Timestamp,
        lazy: &mut Lazy,
    ) {
        let messages = cloud.sent_messages();
        let fresh = messages.get(self.messages_seen..).unwrap_or_default();
        let mut warnings = Vec::new();
        for message in fresh {
            let Ok(body) = serde_json::from_str::<Value>(&message.body) else {
                continue;
            };
            if body["detail-type"] != "EC2 Spot Instance Interruption Warning" {
                continue;
            }
            if let Some(id) = body["detail"]["instance-id"].as_str() {
                warnings.push((id.to_string(), message.time));
            }
        }
        self.messages_seen = messages.len();
        for (id, warned) in warnings {
            self.counters.spot_warnings += 1;
            self.warned.insert(id.clone(), warned);
            let Some(node) = node_of_instance(lazy.nodes(api), &id).map(|n| name_of(n).to_string())
            else {
                continue;
            };
            let pods = lazy
                .pods(api)
                .iter()
                .filter(|p| p["spec"]["nodeName"] == node.as_str())
                .filter(|p| !is_terminal(p) && !is_mirror(p) && !is_daemon(p))
                .filter(|p| !tolerates_disrupted(p))
                .filter(|p| {
                    // Already going before the warning: not the interruption's to move.
                    let asked = time_of(&p["metadata"]["deletionTimestamp"]).map(|t| {
                        let grace = p["metadata"]["deletionGracePeriodSeconds"]
                            .as_i64()
                            .unwrap_or(0);
                        t.checked_sub(SignedDuration::from_secs(grace)).unwrap_or(t)
                    });
                    asked.is_none_or(|t| t >= warned)
                })
                .map(|p| (name_of(p).to_string(), owner_key(p), requests(p)))
                .collect();
            self.rehome.push(RehomeCheck {
                instance: id,
                node,
                warned,
                due: plus(warned, SPOT_NOTICE).max(now),
                pods,
            });
        }
    }

    /// `drained-before-terminate`.
    fn check_terminations(
        &mut self,
        api: &ApiServer,
        observation: &Observation,
        now: Timestamp,
        lazy: &mut Lazy,
        invariants: &mut Invariants,
    ) {
        let gone: Vec<String> = self
            .live
            .iter()
            .filter(|id| !observation.instances.contains_key(*id))
            .filter(|id| !self.external.contains(*id))
            .filter(|id| {
                // EC2 reclaiming a warned spot instance is not a termination anyone asked for.
                self.warned
                    .get(*id)
                    .is_none_or(|t| now < plus(*t, SPOT_NOTICE))
            })
            .cloned()
            .collect();
        for id in gone {
            let Some(node) = node_of_instance(lazy.nodes(api), &id).cloned() else {
                continue;
            };
            let deadline = claim_of_node(lazy.claims(api), &node).and_then(claim_deadline);
            if deadline.is_some_and(|d| d <= now) {
                continue;
            }
            let node_name = name_of(&node).to_string();
            let left: Vec<String> = lazy
                .pods(api)
                .iter()
                .filter(|p| p["spec"]["nodeName"] == node_name.as_str())
                .filter(|p| !is_terminal(p) && !is_mirror(p) && !tolerates_disrupted(p))
                .filter(|p| time_of(&p["metadata"]["deletionTimestamp"]).is_none_or(|t| t > now))
                .map(|p| name_of(p).to_string())
                .collect();
            if !left.is_empty() {
                invariants.record(
                    "drained-before-terminate",
                    format!(
                        "instance {id} terminated while node {node_name} still had {} pods neither evicted nor past their grace period: {:?}",
                        left.len(),
                        &left[..left.len().min(5)]
                    ),
                    now,
                );
            }
        }
    }

    /// `pdb-respected` and `do-not-disrupt-respected`, for the pods the controller removed.
    fn check_removals(
        &mut self,
        api: &ApiServer,
        removals: &[PodRemoval],
        lazy: &mut Lazy,
        invariants: &mut Invariants,
    ) {
        if removals.is_empty() {
            return;
        }
        let nodes = lazy.nodes(api).to_vec();
        let claims = lazy.claims(api).to_vec();
        // The terminationGracePeriod window of each removal.
        let in_window: Vec<bool> = removals
            .iter()
            .map(|r| {
                let node = r.pod["spec"]["nodeName"].as_str().unwrap_or_default();
                nodes
                    .iter()
                    .find(|n| name_of(n) == node)
                    .and_then(|n| claim_of_node(&claims, n))
                    .and_then(claim_deadline)
                    .is_some_and(|d| {
                        r.at >= d
                            .checked_sub(SignedDuration::from_secs(grace_seconds(&r.pod)))
                            .unwrap_or(d)
                    })
            })
            .collect();
        for (r, open) in removals.iter().zip(&in_window) {
            if is_do_not_disrupt(&r.pod) && !open {
                invariants.record(
                    "do-not-disrupt-respected",
                    format!(
                        "pod {}/{} (karpenter.sh/do-not-disrupt) {} by the controller outside its NodeClaim's terminationGracePeriod window",
                        r.pod["metadata"]["namespace"].as_str().unwrap_or_default(),
                        name_of(&r.pod),
                        if r.evicted { "evicted" } else { "deleted" }
                    ),
                    r.at,
                );
            }
        }
        if removals
            .iter()
            .zip(&in_window)
            .all(|(r, open)| r.evicted || *open)
        {
            return;
        }
        let pdbs = lazy.pdbs(api).to_vec();
        let pods = lazy.pods(api).to_vec();
        for pdb in &pdbs {
            let mine: Vec<(usize, &PodRemoval)> = removals
                .iter()
                .enumerate()
                .filter(|(_, r)| pdb_covers(pdb, &r.pod))
                .collect();
            if mine.is_empty() {
                continue;
            }
            let covered: Vec<&Value> = pods.iter().filter(|p| pdb_covers(pdb, p)).collect();
            let present: BTreeSet<&str> = covered.iter().map(|p| name_of(p)).collect();
            let gone = mine
                .iter()
                .filter(|(_, r)| !present.contains(name_of(&r.pod)))
                .count() as u64;
            let expected = covered.iter().filter(|p| !is_terminal(p)).count() as u64 + gone;
            let Some(desired) = desired_healthy(pdb, expected) else {
                continue;
            };
            let mut healthy = covered.iter().filter(|p| is_healthy(p)).count() as u64
                + mine.iter().filter(|(_, r)| is_healthy(&r.pod)).count() as u64;
            for (index, r) in mine {
                let was_healthy = is_healthy(&r.pod);
                let allowed = if was_healthy {
                    healthy > desired
                } else {
                    healthy >= desired
                };
                if !r.evicted && !in_window[index] && !allowed {
                    invariants.record(
                        "pdb-respected",
                        format!(
                            "pod {}/{} deleted by the controller without eviction while PodDisruptionBudget {} allowed no disruption ({healthy} healthy, {desired} desired)",
                            r.pod["metadata"]["namespace"].as_str().unwrap_or_default(),
                            name_of(&r.pod),
                            name_of(pdb)
                        ),
                        r.at,
                    );
                }
                if was_healthy {
                    healthy = healthy.saturating_sub(1);
                }
            }
        }
    }

    /// `claim-storm`.
    fn check_claim_storm(
        &mut self,
        ended: &[crate::audit::ClaimEnded],
        observation: &Observation,
        now: Timestamp,
        invariants: &mut Invariants,
    ) {
        let start = minus(now, CLAIM_STORM_WINDOW);
        for name in &observation.pending_names {
            self.pending_seen.insert(name.clone(), now);
        }
        self.pending_seen.retain(|_, t| *t > start);
        self.failed_launches
            .extend(ended.iter().filter(|e| !e.launched).map(|e| e.at));
        while self.failed_launches.front().is_some_and(|t| *t <= start) {
            self.failed_launches.pop_front();
        }
        let allowed = CLAIM_STORM_FAILED_LAUNCHES_FLOOR + self.pending_seen.len();
        if self.failed_launches.len() > allowed {
            invariants.record(
                "claim-storm",
                format!(
                    "{} NodeClaims deleted without launching in the last {}s, with {} pods pending (at most {allowed})",
                    self.failed_launches.len(),
                    CLAIM_STORM_WINDOW.as_secs(),
                    self.pending_seen.len()
                ),
                now,
            );
        }
    }

    /// `interruption-rehomed`, for the checks that are due.
    fn check_rehome(
        &mut self,
        api: &ApiServer,
        cloud: &FakeCloud,
        now: Timestamp,
        lazy: &mut Lazy,
        invariants: &mut Invariants,
    ) {
        if self.rehome.is_empty() {
            return;
        }
        // Due at the reclaim, or as soon as none of the pods is left on the node undeleted.
        let (due, later): (Vec<RehomeCheck>, Vec<RehomeCheck>) = {
            let pods = lazy.pods(api);
            std::mem::take(&mut self.rehome).into_iter().partition(|c| {
                c.due <= now
                    || !pods.iter().any(|p| {
                        p["spec"]["nodeName"] == c.node.as_str()
                            && !is_deleting(p)
                            && c.pods.iter().any(|(name, _, _)| name == name_of(p))
                    })
            })
        };
        self.rehome = later;
        for check in due {
            if check.pods.is_empty() {
                continue;
            }
            self.counters.rehome_checked += 1;
            if self.capacity_lost(check.warned, now.min(check.due))
                || self.slow_replacement(&check)
                || self.replacement_interrupted(&check, cloud)
            {
                self.counters.rehome_excused += 1;
                continue;
            }
            let pods = lazy.pods(api).to_vec();
            let nodes = lazy.nodes(api).to_vec();
            // Replacements: same owner, created since the warning, bound elsewhere.
            let mut replacements: Vec<(Option<String>, &str)> = pods
                .iter()
                .filter(|p| !is_deleting(p) && !is_terminal(p))
                .filter(|p| {
                    p["spec"]["nodeName"]
                        .as_str()
                        .is_some_and(|n| !n.is_empty() && n != check.node)
                })
                .filter(|p| {
                    time_of(&p["metadata"]["creationTimestamp"]).is_some_and(|t| t >= check.warned)
                })
                .map(|p| (owner_key(p), name_of(p)))
                .collect();
            let mut unmatched = Vec::new();
            for (name, owner, need) in &check.pods {
                let same = pods.iter().any(|p| {
                    name_of(p) == name
                        && is_healthy(p)
                        && p["spec"]["nodeName"] != check.node.as_str()
                });
                if same {
                    continue;
                }
                match replacements
                    .iter()
                    .position(|(o, _)| owner.is_some() && o == owner)
                {
                    Some(i) => {
                        replacements.remove(i);
                    }
                    None => unmatched.push((name.clone(), need.clone())),
                }
            }
            if unmatched.is_empty() {
                continue;
            }
            let mut used: BTreeMap<&str, Resources> = BTreeMap::new();
            for pod in pods.iter().filter(|p| !is_terminal(p)) {
                if let Some(node) = pod["spec"]["nodeName"].as_str() {
                    let slot = used.entry(node).or_default();
                    *slot = slot.plus(&requests(pod));
                }
            }
            let mut free: Vec<(String, Resources)> = nodes
                .iter()
                .filter(|n| name_of(n) != check.node && condition_true(n, "Ready"))
                .filter(|n| !is_deleting(n) && n["spec"]["unschedulable"] != true)
                .filter(|n| {
                    !n["spec"]["taints"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|t| t["key"] == DISRUPTED_TAINT_KEY)
                })
                .map(|n| {
                    let room = res(&n["status"]["allocatable"])
                        .minus(used.get(name_of(n)).unwrap_or(&Resources::new()));
                    (name_of(n).to_string(), room)
                })
                .collect();
            let left = first_fit_decreasing(unmatched, &mut free);
            if !left.is_empty() {
                invariants.record(
                    "interruption-rehomed",
                    format!(
                        "spot instance {} (node {}) warned at {}: {} of its pods left it with no replacement bound elsewhere and no room on other nodes: {:?}",
                        check.instance,
                        check.node,
                        check.warned,
                        left.len(),
                        &left[..left.len().min(5)]
                    ),
                    now,
                );
            }
        }
    }

    /// Whether an instance launched during the notice (a replacement) got a spot warning of its
    /// own before the reclaim: the capacity made for these pods was taken back, and a second
    /// replacement cannot boot within what is left of the notice.
    fn replacement_interrupted(&self, check: &RehomeCheck, cloud: &FakeCloud) -> bool {
        self.warned.iter().any(|(id, warned)| {
            *warned > check.warned
                && *warned <= check.due
                && cloud
                    .boot(id)
                    .is_some_and(|boot| boot.launch_time >= check.warned)
        })
    }

    /// Whether an instance launched during the notice joins too late to count as capacity.
    fn slow_replacement(&self, check: &RehomeCheck) -> bool {
        let latest = minus(check.due, REHOME_JOIN_SLACK);
        self.incidents
            .iter()
            .any(|(start, ready)| *start >= check.warned && *start <= check.due && *ready > latest)
    }

    /// `termination-progress`.
    fn check_termination_progress(
        &mut self,
        api: &ApiServer,
        observation: &Observation,
        now: Timestamp,
        lazy: &mut Lazy,
        invariants: &mut Invariants,
    ) {
        if observation.deleting_claims == 0 {
            return;
        }
        let claims: Vec<Value> = lazy
            .claims(api)
            .iter()
            .filter(|c| is_deleting(c))
            .cloned()
            .collect();
        for claim in claims {
            let Some(deleted) = time_of(&claim["metadata"]["deletionTimestamp"]) else {
                continue;
            };
            let tgp = parse_tgp(&claim);
            let bound = tgp.unwrap_or(TERMINATION_WITHOUT_TGP_MAX) + TERMINATION_SLACK;
            if now <= plus(deleted, bound) {
                continue;
            }
            if tgp.is_none() && self.blocked_by_design(api, &claim, lazy) {
                continue;
            }
            invariants.record(
                "termination-progress",
                format!(
                    "NodeClaim {} still terminating {}s after its deletion (bound {}s)",
                    name_of(&claim),
                    now.duration_since(deleted).as_secs(),
                    bound.as_secs()
                ),
                now,
            );
        }
    }

    /// Whether a claim's node holds a pod eviction may never move (do-not-disrupt, or covered by a
    /// PodDisruptionBudget).
    fn blocked_by_design(&self, api: &ApiServer, claim: &Value, lazy: &mut Lazy) -> bool {
        let Some(provider) = claim["status"]["providerID"].as_str() else {
            return false;
        };
        let Some(node) = node_of_instance(lazy.nodes(api), instance_of(provider))
            .map(|n| name_of(n).to_string())
        else {
            return false;
        };
        let pdbs = lazy.pdbs(api).to_vec();
        lazy.pods(api)
            .iter()
            .filter(|p| p["spec"]["nodeName"] == node.as_str() && !is_terminal(p))
            .any(|p| is_do_not_disrupt(p) || pdbs.iter().any(|b| pdb_covers(b, p)))
    }

    /// `pods-scheduled`.
    fn check_pending(
        &mut self,
        api: &ApiServer,
        observation: &Observation,
        now: Timestamp,
        lazy: &mut Lazy,
        invariants: &mut Invariants,
    ) {
        let pending: BTreeSet<&String> = observation.pending_names.iter().collect();
        self.pending_since.retain(|name, _| pending.contains(name));
        for name in pending {
            self.pending_since.entry(name.clone()).or_insert(now);
        }
        let overdue: Vec<(String, Timestamp)> = self
            .pending_since
            .iter()
            .filter(|(_, since)| now.duration_since(**since).unsigned_abs() > POD_PENDING_MAX)
            .filter(|(_, since)| !self.capacity_lost(**since, now))
            .map(|(name, since)| (name.clone(), *since))
            .collect();
        for (name, since) in overdue {
            let Some(pod) = lazy.pods(api).iter().find(|p| name_of(p) == name).cloned() else {
                continue;
            };
            if self.pool_too_full(api, &pod, lazy) {
                continue;
            }
            invariants.record(
                "pods-scheduled",
                format!(
                    "pod {name} pending for {}s while capacity existed",
                    now.duration_since(since).as_secs()
                ),
                now,
            );
        }
    }

    /// Whether every NodePool with limits is too full to add a node for `pod` (then its wait is
    /// the user's limit, not a stuck controller). Pools without limits are never full.
    fn pool_too_full(&self, api: &ApiServer, pod: &Value, lazy: &mut Lazy) -> bool {
        let need = requests(pod);
        let claims = lazy.claims(api).to_vec();
        let pools = lazy.pools(api);
        if pools.is_empty() {
            return false;
        }
        pools.iter().all(|pool| {
            let limits = res(&pool["spec"]["limits"]);
            if limits.is_empty() {
                return false;
            }
            let name = name_of(pool);
            let mut used = Resources::new();
            for claim in claims
                .iter()
                .filter(|c| c["metadata"]["labels"]["karpenter.sh/nodepool"] == name)
            {
                used = used.plus(&res(&claim["status"]["capacity"]));
            }
            ["cpu", "memory"]
                .iter()
                .any(|r| limits.get(r) > 0 && used.get(r) + need.get(r) > limits.get(r))
        })
    }
}

/// What keeps the cluster from being settled (empty when settled): pods not running, NodeClaims
/// not initialized or being deleted, nodes not Ready or being deleted, live instances no NodeClaim
/// owns. The swarm's liveness phase waits for this to be empty.
pub fn unsettled(api: &ApiServer, cloud: &FakeCloud) -> Vec<String> {
    let mut out = Vec::new();
    for pod in api.objects(&ResourceKind::POD) {
        if is_deleting(&pod) {
            out.push(format!("pod {} terminating", name_of(&pod)));
        } else if !is_terminal(&pod) && pod["status"]["phase"] != "Running" {
            out.push(format!("pod {} pending", name_of(&pod)));
        }
    }
    let claims = api.objects(&ResourceKind::NODE_CLAIM);
    for claim in &claims {
        if is_deleting(claim) {
            out.push(format!("NodeClaim {} terminating", name_of(claim)));
        } else if !condition_true(claim, "Initialized") {
            out.push(format!("NodeClaim {} not initialized", name_of(claim)));
        }
    }
    for node in api.objects(&ResourceKind::NODE) {
        if is_deleting(&node) {
            out.push(format!("node {} terminating", name_of(&node)));
        } else if !condition_true(&node, "Ready") {
            out.push(format!("node {} not Ready", name_of(&node)));
        }
    }
    let owned: BTreeSet<&str> = claims
        .iter()
        .filter_map(|c| c["status"]["providerID"].as_str().map(instance_of))
        .collect();
    for instance in cloud.instances() {
        use karpenter_core::seams::ec2::InstanceState;
        let live = !matches!(
            instance.state,
            InstanceState::ShuttingDown | InstanceState::Terminated
        );
        if live && !owned.contains(instance.instance_id.as_str()) {
            out.push(format!(
                "instance {} has no NodeClaim",
                instance.instance_id
            ));
        }
    }
    out
}
