//! `interruption-rehomed`: the pods a spot-interrupted node held at the warning (not finished,
//! not DaemonSet or mirror pods, not tolerating `karpenter.sh/disrupted`, not
//! `karpenter.sh/do-not-disrupt` (never drained, they leave at the reclaim), not already being
//! deleted before it) have somewhere else to run by the time they leave it — at the first step
//! at which none of them is left on the node undeleted, or at the reclaim ([`SPOT_NOTICE`] after
//! the warning) if that comes first: each is matched one-to-one with a pod of the same owner
//! (controller owner reference, else the `app` label) created since the warning and bound to
//! another node, and those left over fit (first-fit decreasing on cpu, memory and pod count) in
//! the free allocatable of other Ready, schedulable, non-deleting nodes. (Without a workload
//! controller re-creating evicted pods, the second half carries the check: replacement capacity
//! must be up before the drain.)
//!
//! Pods removed from the node by someone other than the controller before the reclaim (their
//! Deployment scaled down) need no home and are not counted. Not checked for an instance no NodeClaim owns at the warning (its claim force-deleted by a
//! user: the controller has nothing to act on). Checked only when capacity existed from the warning to then: no insufficient-capacity answer,
//! no instance launched in it that bootstrapped too slowly (or never) to join
//! [`REHOME_JOIN_SLACK`] before the reclaim, no replacement launched promptly (within
//! [`REHOME_LAUNCH_PROMPT`] of the warning) whose node was still not Ready when the controller's
//! hold ended ([`SPOT_EVICTION_HOLD_MAX`] after the warning: a boot and CNI start in the normal
//! range can take longer than the notice leaves), no instance launched in it (a replacement)
//! warned itself before the reclaim (a spot warning, or an AWS Health scheduled change, which
//! the controller answers alike by deleting the claim), and no later warning or scheduled
//! change that took away the room the pods
//! would otherwise have had (a second storm taking back the capacity they counted on: with
//! those nodes' room counted, they fit), and no pods created after a replacement's NodeClaim
//! that took its room, or created after the warning that took room a node had at the warning
//! (kube-scheduler binds any pending pod that fits: with that room counted, they fit). EC2 throttling and 5xx answers do not excuse it: the controller retries them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use karpenter_core::api::labels::{DISRUPTED_TAINT_KEY, REPLACES_ANNOTATION};
use karpenter_core::resources::Resources;
use karpenter_core::seams::kube::SharedObject;
use serde_json::Value;

use super::pod_facts::{
    condition_true, is_daemon, is_deleting, is_do_not_disrupt, is_healthy, is_mirror, is_terminal,
    minus, name_of, node_of_instance, plus, requests, resource_list, time_of, tolerates_disrupted,
};
use super::{Check, Invariant, StepView, Violation};

/// EC2 reclaims a spot instance this long after its interruption warning.
pub const SPOT_NOTICE: Duration = fakecloud::SPOT_INTERRUPTION_NOTICE;
/// A replacement for an interrupted node must be ready to join this long before the reclaim to
/// count as capacity that existed (registration, initialization and pod start take about 15 s).
pub const REHOME_JOIN_SLACK: Duration = Duration::from_secs(15);
/// The controller's hold: eviction of an interrupted node starts at the latest this long after
/// the warning, replacement ready or not (the rest of the notice is the pods' graceful shutdown).
pub const SPOT_EVICTION_HOLD_MAX: Duration =
    karpenter_core::interruption::handler::SPOT_EVICTION_HOLD_MAX;
/// The controller is held to launching replacement capacity within this long of a spot warning:
/// receiving the message, marking and deleting the claim, one provisioning batch (at most 10 s)
/// and CreateFleet, each EC2 call taking up to 3 s under the `ec2-latency` fault. A replacement
/// launched later that misses the hold is the controller's fault, not the world's.
pub const REHOME_LAUNCH_PROMPT: Duration = Duration::from_secs(30);

/// Pods of an interrupted node to find running elsewhere at the reclaim.
#[derive(Clone, Debug)]
struct RehomeCheck {
    instance: String,
    /// The NodeClaim that owned the instance at the warning.
    claim: Option<String>,
    node: String,
    warned: Timestamp,
    due: Timestamp,
    /// (name, owner key, requests).
    pods: Vec<(String, Option<String>, Resources)>,
    /// Pods the controller removed from the node since the warning (evicted or deleted).
    removed: BTreeSet<String>,
    /// Replacements seen bound to another node since the warning (name → owner key): a home
    /// found counts even if the pod is gone by the check (its Deployment scaled down, swarm seed
    /// 727: the replacements of 44 evicted pods deleted by the drawn scale-down 6 s before the
    /// reclaim would otherwise have been owed a home again).
    homes: BTreeMap<String, Option<String>>,
}

impl RehomeCheck {
    /// The pods the interruption moves: those the controller removed, and those still on the
    /// node undeleted (the reclaim takes them). A pod removed by someone else before the reclaim
    /// (its Deployment scaled down) needs no home.
    fn owed(mut self, pods: &[SharedObject]) -> Self {
        let staying: BTreeSet<&str> = pods
            .iter()
            .filter(|p| p["spec"]["nodeName"] == self.node.as_str() && !is_deleting(p))
            .map(|o| name_of(o))
            .collect();
        let removed = &self.removed;
        self.pods
            .retain(|(name, _, _)| removed.contains(name) || staying.contains(name.as_str()));
        self
    }
}

/// How fast the controller answered one spot warning (the issue-13 figure: a warning that
/// arrives during a launch burst is acted on within 5 s), from the objects' own timestamps, so
/// the world's step length does not round it.
#[derive(Clone, Debug)]
struct Response {
    claim: String,
    warned: Timestamp,
    /// The claim's `deletionTimestamp`: the interruption handler acted, the drain begins.
    deleted: Option<Timestamp>,
    /// The earliest `creationTimestamp` of a claim that names it in `karpenter.sh/replaces`.
    replaced: Option<Timestamp>,
}

/// What the spot warnings of a run got: seconds from each warning to its claim's deletion, and
/// to its replacement's creation (only warnings whose pods needed a new node have one), and
/// warnings whose claim was never seen deleted before the reclaim.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Responses {
    pub warnings: u64,
    pub deleted_after: Vec<f64>,
    pub replaced_after: Vec<f64>,
    pub unanswered: u64,
}

/// The `interruption-rehomed` checker: the checks not yet due, and how many were made.
#[derive(Debug, Default)]
pub struct Rehome {
    pending: Vec<RehomeCheck>,
    /// Warnings of claimed instances still being timed, then those timed.
    responding: Vec<Response>,
    responses: Responses,
    /// Checks made, and those excused because capacity did not exist.
    checked: u64,
    excused: u64,
    /// Instances whose NodeClaim a user force-deleted (the `claim-force-deleted` fault), and
    /// when: their nodes' room was taken by the world, not the controller.
    lost: BTreeMap<String, Timestamp>,
    /// Instances EC2 scheduled for a stop (AWS Health's scheduled change, the
    /// `scheduled-maintenance` fault), and when it announced it: the controller cordons and
    /// drains such a node at once, as upstream's interruption controller does, so its room, or
    /// a replacement's capacity, was taken back by the world (swarm seed 398).
    scheduled: BTreeMap<String, Timestamp>,
}

impl Rehome {
    /// Checks made so far, and of those, excused because capacity did not exist.
    pub fn counts(&self) -> (u64, u64) {
        (self.checked, self.excused)
    }

    /// A user force-deleted the NodeClaim of `instance` at `at`: garbage collection terminates
    /// the instance, so its node's room goes with it (swarm seeds 400 and 990: the replacement,
    /// or the node the provisioner counted the pods' room on, lost during the notice).
    pub fn note_claim_lost(&mut self, instance: &str, at: Timestamp) {
        self.lost.insert(instance.to_string(), at);
    }

    /// EC2 announced at `at` a scheduled stop of `instance` (AWS Health's scheduled change):
    /// like a spot warning, it takes back the capacity of a replacement launched during a notice
    /// (see [`replacement_interrupted`]) and the room of a node the pods counted on (see
    /// [`room_taken_back`]).
    pub fn note_scheduled_change(&mut self, instance: &str, at: Timestamp) {
        self.scheduled.entry(instance.to_string()).or_insert(at);
    }

    /// How fast the warnings so far were answered (those still being timed not included).
    pub fn responses(&self) -> &Responses {
        &self.responses
    }

    /// Starts timing each fresh warning of an instance a claim owns; notes the claims' deletion
    /// and replacement times; ends a timing once both are seen, or at the reclaim.
    fn time_responses(&mut self, step: &StepView<'_>) {
        for (id, warned) in step.history.fresh_warnings() {
            let claim = step.claims().iter().find(|c| {
                c["status"]["providerID"]
                    .as_str()
                    .is_some_and(|p| p.ends_with(&format!("/{id}")))
            });
            if let Some(claim) = claim {
                self.responses.warnings += 1;
                self.responding.push(Response {
                    claim: name_of(claim).to_string(),
                    warned: *warned,
                    deleted: None,
                    replaced: None,
                });
            }
        }
        if self.responding.is_empty() {
            return;
        }
        let claims = step.claims();
        for response in &mut self.responding {
            if response.deleted.is_none() {
                response.deleted = claims
                    .iter()
                    .find(|c| name_of(c) == response.claim)
                    .and_then(|c| time_of(&c["metadata"]["deletionTimestamp"]));
            }
            if response.replaced.is_none() {
                response.replaced = claims
                    .iter()
                    .filter(|c| {
                        c["metadata"]["annotations"][REPLACES_ANNOTATION]
                            .as_str()
                            .is_some_and(|list| list.split(',').any(|n| n == response.claim))
                    })
                    .filter_map(|c| time_of(&c["metadata"]["creationTimestamp"]))
                    .min();
            }
        }
        let seconds =
            |from: Timestamp, to: Timestamp| to.duration_since(from).as_secs_f64().max(0.0);
        let (done, timing): (Vec<_>, Vec<_>) = std::mem::take(&mut self.responding)
            .into_iter()
            .partition(|r| {
                (r.deleted.is_some() && r.replaced.is_some())
                    || step.now >= plus(r.warned, SPOT_NOTICE)
            });
        self.responding = timing;
        for response in done {
            match response.deleted {
                Some(at) => self
                    .responses
                    .deleted_after
                    .push(seconds(response.warned, at)),
                None => self.responses.unanswered += 1,
            }
            if let Some(at) = response.replaced {
                self.responses
                    .replaced_after
                    .push(seconds(response.warned, at));
            }
        }
    }

    /// Snapshots the pods of each node whose instance got its warning this step. An instance
    /// no NodeClaim owns (its claim force-deleted by a user) is not the controller's to rehome:
    /// upstream's interruption handling acts on claims only.
    fn watch_warnings(&mut self, step: &StepView<'_>) {
        for (id, warned) in step.history.fresh_warnings() {
            if !step.observation.known_instances.contains(id) {
                continue;
            }
            let warned = *warned;
            let Some(node) = node_of_instance(step.nodes(), id).map(name_of) else {
                continue;
            };
            let pods = step
                .pods()
                .iter()
                .filter(|p| p["spec"]["nodeName"] == node)
                .filter(|p| !is_terminal(p) && !is_mirror(p) && !is_daemon(p))
                .filter(|p| !tolerates_disrupted(p))
                // A do-not-disrupt pod is not drained: it leaves at the reclaim, and the room
                // launched for it is the scheduler's to give away before then (to pending pods
                // of a scale-up); the controller cannot hold it.
                .filter(|p| !is_do_not_disrupt(p))
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
            let claim = step
                .claims()
                .iter()
                .find(|c| {
                    c["status"]["providerID"]
                        .as_str()
                        .is_some_and(|p| p.ends_with(&format!("/{id}")))
                })
                .map(|c| name_of(c).to_string());
            self.pending.push(RehomeCheck {
                instance: id.clone(),
                claim,
                node: node.to_string(),
                warned,
                due: plus(warned, SPOT_NOTICE).max(step.now),
                pods,
                removed: BTreeSet::new(),
                homes: BTreeMap::new(),
            });
        }
    }

    /// The checks due now: at the reclaim, or as soon as none of the pods is left on the node
    /// undeleted. The rest stay pending.
    fn take_due(&mut self, step: &StepView<'_>) -> Vec<RehomeCheck> {
        let pods = step.pods();
        let (due, later) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|c| {
                c.due <= step.now
                    || !pods.iter().any(|p| {
                        p["spec"]["nodeName"] == c.node.as_str()
                            && !is_deleting(p)
                            && c.pods.iter().any(|(name, _, _)| name == name_of(p))
                    })
            });
        self.pending = later;
        due
    }
}

impl Check for Rehome {
    fn invariant(&self) -> Invariant {
        Invariant::InterruptionRehomed
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        self.time_responses(step);
        self.watch_warnings(step);
        if self.pending.is_empty() {
            return Vec::new();
        }
        for removal in &step.audit.pod_removals {
            let node = removal.pod["spec"]["nodeName"].as_str().unwrap_or_default();
            for check in self.pending.iter_mut().filter(|c| c.node == node) {
                check.removed.insert(name_of(&removal.pod).to_string());
            }
        }
        // Pods created since the earliest pending warning: the few that can be replacements.
        let earliest = self.pending.iter().map(|c| c.warned).min();
        let fresh: Vec<&Value> = step
            .pods()
            .iter()
            .map(|p| &**p)
            .filter(|p| {
                time_of(&p["metadata"]["creationTimestamp"])
                    .is_some_and(|t| earliest.is_some_and(|e| t >= e))
            })
            .collect();
        for check in &mut self.pending {
            let found: Vec<(String, Option<String>)> = fresh
                .iter()
                .filter(|p| is_replacement(check, p))
                .map(|p| (name_of(p).to_string(), owner_key(p)))
                .collect();
            for (name, owner) in found {
                check.homes.entry(name).or_insert(owner);
            }
        }
        let mut out = Vec::new();
        for check in self.take_due(step) {
            let check = check.owed(step.pods());
            if check.pods.is_empty() {
                continue;
            }
            self.checked += 1;
            if capacity_missing(&check, step, &self.scheduled) {
                self.excused += 1;
                continue;
            }
            let left = homeless(&check, step.pods(), step.nodes(), &BTreeMap::new());
            if !left.is_empty()
                && (room_taken_back(&check, step, &self.lost, &self.scheduled)
                    || room_given_away(&check, step))
            {
                self.excused += 1;
                continue;
            }
            if !left.is_empty() {
                out.push(Violation::at(
                    step.now,
                    format!(
                        "spot instance {} (node {}) warned at {}: {} of its pods left it with no replacement bound elsewhere and no room on other nodes: {:?}; other nodes: {}; the {} need {}",
                        check.instance,
                        check.node,
                        check.warned,
                        left.len(),
                        &left[..left.len().min(5)],
                        room_report(&check.node, step.pods(), step.nodes()),
                        left.len(),
                        needs(&check, &left),
                    ),
                ));
            }
        }
        out
    }
}

/// Whether the check is excused: capacity was missing from the warning to now (or the reclaim),
/// a replacement joined too late, or a replacement was itself interrupted (a spot warning or a
/// scheduled change of its own, `scheduled`).
fn capacity_missing(
    check: &RehomeCheck,
    step: &StepView<'_>,
    scheduled: &BTreeMap<String, Timestamp>,
) -> bool {
    step.history
        .capacity_lost(check.warned, step.now.min(check.due))
        || slow_replacement(check, step)
        || replacement_missed_hold(check, step)
        || replacement_interrupted(check, step, scheduled)
}

/// Whether a replacement launched promptly (within [`REHOME_LAUNCH_PROMPT`] of the warning) was
/// still not a Ready node when the controller's hold ended: the world's boot and CNI start took
/// longer than the notice leaves, so eviction had to start without it. Judged only once the hold
/// has ended (a drain before it, with the replacement not Ready, is the controller's doing).
fn replacement_missed_hold(check: &RehomeCheck, step: &StepView<'_>) -> bool {
    // The message's `time` is whole seconds (EventBridge's format), and the hold runs from it.
    let sent = Timestamp::from_second(check.warned.as_second()).unwrap_or(check.warned);
    let hold_end = plus(sent, SPOT_EVICTION_HOLD_MAX);
    if step.now < hold_end {
        return false;
    }
    let prompt = plus(check.warned, REHOME_LAUNCH_PROMPT);
    step.cloud.instances().iter().any(|instance| {
        let launched = step
            .cloud
            .boot(&instance.instance_id)
            .map(|boot| boot.launch_time);
        launched.is_some_and(|t| t >= check.warned && t <= prompt)
            && !ready_by(
                node_of_instance(step.nodes(), &instance.instance_id),
                hold_end,
            )
    })
}

/// Whether `node` exists and turned Ready at or before `by` (and is Ready now).
fn ready_by(node: Option<&Value>, by: Timestamp) -> bool {
    node.is_some_and(|node| {
        node["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| {
                c["type"] == "Ready"
                    && c["status"] == "True"
                    && time_of(&c["lastTransitionTime"]).is_some_and(|t| t <= by)
            })
    })
}

/// Whether the pods would have had a home but for later spot warnings: counting the room of
/// the nodes whose instances were warned after this one (up to the check), every pod fits. The
/// cloud took back the capacity they counted on; nothing boots within what is left of the notice.
/// Warnings up to the step that makes the check count, even those just after the reclaim: the
/// check sees the world as that step left it, the controller's answer to such a warning (the
/// replacement node tainted and deleting) included, though at the reclaim the room was there
/// (swarm seed 591: the replacement itself warned 2 s after the reclaim, checked at that step).
/// A scheduled stop EC2 announced in that time (`scheduled`) counts as such a warning: the
/// controller drains the node at once, as it does a warned one.
fn room_taken_back(
    check: &RehomeCheck,
    step: &StepView<'_>,
    lost: &BTreeMap<String, Timestamp>,
    scheduled: &BTreeMap<String, Timestamp>,
) -> bool {
    let until = step.now;
    let warned = step
        .history
        .warnings()
        .chain(scheduled.iter().map(|(id, at)| (id.as_str(), *at)))
        .filter(|(id, warned)| *warned > check.warned && *warned <= until && *id != check.instance)
        .map(|(id, _)| (id, true));
    let lost = lost
        .iter()
        .filter(|(_, at)| **at >= check.warned && **at <= until)
        .map(|(id, _)| (id.as_str(), false));
    let taken: BTreeMap<String, bool> = warned
        .chain(lost)
        .filter_map(|(id, ready)| {
            node_of_instance(step.nodes(), id).map(|n| (name_of(n).to_string(), ready))
        })
        .collect();
    !taken.is_empty() && homeless(check, step.pods(), step.nodes(), &taken).is_empty()
}

/// Whether an instance launched during the notice (a replacement) got a spot warning of its
/// own before the reclaim, or a scheduled change (`scheduled`: AWS Health's scheduled stop,
/// which upstream's interruption controller answers as it does a spot warning, by deleting the
/// claim — `CordonAndDrain` — swarm seed 398): the capacity made for these pods was taken back,
/// and a second replacement cannot boot within what is left of the notice.
fn replacement_interrupted(
    check: &RehomeCheck,
    step: &StepView<'_>,
    scheduled: &BTreeMap<String, Timestamp>,
) -> bool {
    let scheduled = scheduled.iter().map(|(id, at)| (id.as_str(), *at));
    step.history
        .warnings()
        .chain(scheduled)
        .any(|(id, warned)| {
            warned > check.warned
                && warned <= check.due
                && step
                    .cloud
                    .boot(id)
                    .is_some_and(|boot| boot.launch_time >= check.warned)
        })
}

/// Whether an instance launched during the notice joins too late to count as capacity.
fn slow_replacement(check: &RehomeCheck, step: &StepView<'_>) -> bool {
    let latest = minus(check.due, REHOME_JOIN_SLACK);
    step.history
        .incidents()
        .iter()
        .any(|(start, ready)| *start >= check.warned && *start <= check.due && *ready > latest)
}

/// The check's pods that have neither a replacement bound elsewhere nor room on another node
/// (`also`: nodes whose room counts even though they are going, see [`room_taken_back`]; `true`:
/// only if Ready).
fn homeless(
    check: &RehomeCheck,
    pods: &[SharedObject],
    nodes: &[SharedObject],
    also: &BTreeMap<String, bool>,
) -> Vec<String> {
    let (unmatched, _) = unmatched(check, pods);
    if unmatched.is_empty() {
        return Vec::new();
    }
    first_fit_decreasing(unmatched, &mut free_room(&check.node, pods, nodes, also))
}

/// The check's pods matched with no replacement (name and requests), and the pods created since
/// the warning and bound elsewhere that no checked pod was matched with (by name).
fn unmatched(
    check: &RehomeCheck,
    pods: &[SharedObject],
) -> (Vec<(String, Resources)>, BTreeSet<String>) {
    // Replacements: same owner, created since the warning, bound elsewhere (now, or at a step
    // since the warning).
    let mut homes = check.homes.clone();
    for pod in pods.iter().filter(|p| is_replacement(check, p)) {
        homes
            .entry(name_of(pod).to_string())
            .or_insert_with(|| owner_key(pod));
    }
    let mut replacements: Vec<(String, Option<String>)> = homes.into_iter().collect();
    let mut unmatched = Vec::new();
    for (name, owner, need) in &check.pods {
        let same = pods.iter().any(|p| {
            name_of(p) == name && is_healthy(p) && p["spec"]["nodeName"] != check.node.as_str()
        });
        if same {
            continue;
        }
        match replacements
            .iter()
            .position(|(_, o)| owner.is_some() && o == owner)
        {
            Some(i) => {
                replacements.remove(i);
            }
            None => unmatched.push((name.clone(), need.clone())),
        }
    }
    let unused = replacements.into_iter().map(|(name, _)| name).collect();
    (unmatched, unused)
}

/// Whether the pods would have had a home but for the kube-scheduler giving the room meant for
/// them to pods that came later. Two shapes: room made for them (swarm seed 43: the replacement
/// the controller launched 4 s after the warning was up before the reclaim, but a scale-up's pods
/// created a minute later bound to it first, and the second replacement launched for the
/// displaced pods as they lost that room could not boot before the reclaim), and room that was
/// there for them (swarm seed 469: at the warning the pods fit on a node of their pool, so the
/// controller, as upstream's provisioner does, planned them onto it and launched nothing; the
/// scenario's scale-up 42 s later had its pods bound into that room, and the node launched for
/// the displaced pods 9 s after that could not boot before the reclaim). Counting the room that
/// pods use on nodes launched to replace the warned claim (`karpenter.sh/replaces`), if created
/// after that node's claim, or on nodes that existed at the warning, if created after the
/// warning, and in both cases not matched as replacements of the checked pods, every pod fits.
/// Neither upstream nor this controller can reserve room against kube-scheduler, which binds any
/// pending pod that fits; a controller that launched nothing while no room existed, or too
/// little, or planned the room while those pods were already pending, is not excused.
fn room_given_away(check: &RehomeCheck, step: &StepView<'_>) -> bool {
    let Some(claim) = check.claim.as_deref() else {
        return false;
    };
    // Nodes launched to replace the warned claim, with their claim's creation.
    let launched: BTreeMap<String, Timestamp> = step
        .claims()
        .iter()
        .filter(|c| {
            c["metadata"]["annotations"][REPLACES_ANNOTATION]
                .as_str()
                .is_some_and(|list| list.split(',').any(|n| n == claim))
        })
        .filter_map(|c| {
            let node = c["status"]["nodeName"].as_str()?;
            let created = time_of(&c["metadata"]["creationTimestamp"])?;
            Some((node.to_string(), created))
        })
        .collect();
    let mut since = launched;
    for node in step.nodes() {
        let created = time_of(&node["metadata"]["creationTimestamp"]);
        if created.is_some_and(|t| t <= check.warned) {
            since
                .entry(name_of(node).to_string())
                .or_insert(check.warned);
        }
    }
    let pods = step.pods();
    let (left, unused) = unmatched(check, pods);
    if left.is_empty() {
        return false;
    }
    let mut free = free_room(&check.node, pods, step.nodes(), &BTreeMap::new());
    let later = pods.iter().filter(|p| {
        let bound = p["spec"]["nodeName"].as_str().and_then(|n| since.get(n));
        let created = time_of(&p["metadata"]["creationTimestamp"]);
        unused.contains(name_of(p)) && bound.is_some_and(|at| created.is_some_and(|t| t > *at))
    });
    for pod in later {
        let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
        if let Some((_, room)) = free.iter_mut().find(|(n, _)| n == node) {
            *room = room.plus(&requests(pod));
        }
    }
    first_fit_decreasing(left, &mut free).is_empty()
}

/// Whether `pod` could be a replacement for the check's pods: created since the warning, bound
/// to another node, neither deleting nor finished.
fn is_replacement(check: &RehomeCheck, pod: &Value) -> bool {
    !is_deleting(pod)
        && !is_terminal(pod)
        && pod["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty() && n != check.node)
        && time_of(&pod["metadata"]["creationTimestamp"]).is_some_and(|t| t >= check.warned)
}

/// Free allocatable of the Ready, schedulable, non-deleting, untainted nodes other than `node`.
/// Any `NoSchedule`/`NoExecute` taint rules a node out (the managed node group's
/// `CriticalAddonsOnly`, `karpenter.sh/disrupted`, a booting node's `not-ready`): the checked pods'
/// tolerations are not kept, so a taint some pod tolerates still counts as no room — strict, never
/// lenient. Nodes in `also` count whatever their state: if Ready, when their flag says so (a node
/// warned later), or even not Ready (a node whose claim a user force-deleted: its instance is
/// being terminated by garbage collection, which is what took the room).
fn free_room(
    node: &str,
    pods: &[SharedObject],
    nodes: &[SharedObject],
    also: &BTreeMap<String, bool>,
) -> Vec<(String, Resources)> {
    let mut used: BTreeMap<&str, Resources> = BTreeMap::new();
    for pod in pods.iter().filter(|p| !is_terminal(p)) {
        if let Some(node) = pod["spec"]["nodeName"].as_str() {
            let slot = used.entry(node).or_default();
            *slot = slot.plus(&requests(pod));
        }
    }
    nodes
        .iter()
        .filter(|n| name_of(n) != node)
        .filter(|n| match also.get(name_of(n)) {
            Some(true) => condition_true(n, "Ready"),
            Some(false) => true,
            None => {
                condition_true(n, "Ready")
                    && !is_deleting(n)
                    && n["spec"]["unschedulable"] != true
                    && !tainted(n)
            }
        })
        .map(|n| {
            let room = resource_list(&n["status"]["allocatable"])
                .minus(used.get(name_of(n)).unwrap_or(&Resources::new()));
            (name_of(n).to_string(), room)
        })
        .collect()
}

/// What the homeless pods request in all, for the violation's message.
fn needs(check: &RehomeCheck, left: &[String]) -> Resources {
    check
        .pods
        .iter()
        .filter(|(name, _, _)| left.contains(name))
        .fold(Resources::new(), |total, (_, _, need)| total.plus(need))
}

/// Each other node's free room, or why it does not count, for the violation's message.
fn room_report(node: &str, pods: &[SharedObject], nodes: &[SharedObject]) -> String {
    let free = free_room(node, pods, nodes, &BTreeMap::new());
    let lines: Vec<String> = nodes
        .iter()
        .filter(|n| name_of(n) != node)
        .map(|n| {
            let name = name_of(n);
            let state = match free.iter().find(|(f, _)| f == name) {
                Some((_, room)) => format!("free {room}"),
                None if !condition_true(n, "Ready") => "not Ready".to_string(),
                None if is_deleting(n) => "deleting".to_string(),
                None => "tainted or unschedulable".to_string(),
            };
            format!("{name} ({state})")
        })
        .collect();
    lines.join(", ")
}

/// Whether any `NoSchedule`/`NoExecute` taint (or `karpenter.sh/disrupted`) is on the node.
fn tainted(node: &Value) -> bool {
    node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| {
            t["key"] == DISRUPTED_TAINT_KEY
                || t["effect"] == "NoSchedule"
                || t["effect"] == "NoExecute"
        })
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
