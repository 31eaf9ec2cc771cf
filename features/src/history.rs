//! What happened, not only what is: when each pod, node, NodeClaim and instance was first seen in
//! each state that termination and interruption scenarios ask about.
//!
//! A [`Snapshot`](crate::observe::Snapshot) answers "is the node gone now?"; ordering claims need
//! more: "were the DaemonSet pods evicted only after the others had left?", "was the instance
//! terminated only after the drain?", "was nothing evicted before the replacement initialized?".
//! The objects that would answer them are gone by the time a `Then` step runs, and the API
//! server's call log is cleared by the world every step (it counts injected faults from it), so
//! [`SimWorld::step`](crate::SimWorld::step) records every step's outcome here.
//!
//! Times are exact in simulated time: the clock only moves between steps, so whatever a step
//! changed happened at the time that step ran, which is the time [`History::observe`] is given.
//! A deletion request is taken from the object itself (`deletionTimestamp` minus
//! `deletionGracePeriodSeconds`, what the API server wrote), so it is exact even for an action a
//! scenario took between steps.
//!
//! It reads through the fakes' inspection side, like the snapshot, so recording never draws an
//! injected fault or a random number: a scenario's outcome does not depend on it.

use std::collections::{BTreeMap, BTreeSet};

use fakecloud::FakeCloud;
use fakekube::ApiServer;
use jiff::{SignedDuration, Timestamp};
use karpenter_core::api::labels::{
    DISRUPTED_TAINT_KEY, INTERRUPTION_EVICTION_DEADLINE_ANNOTATION, REPLACES_ANNOTATION,
};
use karpenter_core::seams::ec2::{InstanceState, LaunchTemplateRequest};
use karpenter_core::seams::kube::{ResourceKind, SharedObject};
use serde_json::Value;

/// One pod's life on its node.
#[derive(Clone, Debug, PartialEq)]
pub struct PodRecord {
    pub namespace: String,
    pub name: String,
    /// The node it was last seen bound to.
    pub node: Option<String>,
    /// Tolerates every taint (`operator: Exists` without a key) or `karpenter.sh/disrupted`:
    /// such a pod chose to stay, and termination does not wait for it.
    pub tolerates_disrupted: bool,
    /// When its deletion (an eviction or a delete) was requested.
    pub deletion_requested: Option<Timestamp>,
    /// When it left the API server.
    pub gone: Option<Timestamp>,
}

impl PodRecord {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether the pod is one of the Deployment or DaemonSet `name`'s (named `<name>-<n>`).
    pub fn of(&self, name: &str) -> bool {
        self.name
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeRecord {
    /// When it left the API server (its finalizers removed).
    pub gone: Option<Timestamp>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClaimRecord {
    pub instance_id: Option<String>,
    /// The claims its `karpenter.sh/replaces` annotation names.
    pub replaces: BTreeSet<String>,
    /// Its `karpenter.sh/interruption-eviction-deadline` annotation, once seen.
    pub eviction_deadline: Option<Timestamp>,
    /// When `Initialized=True` was first seen.
    pub initialized_since: Option<Timestamp>,
    /// Its deletionTimestamp.
    pub deleting_since: Option<Timestamp>,
    pub gone: Option<Timestamp>,
    /// Every `(type, status, reason)` its conditions were seen with.
    pub conditions_seen: BTreeSet<(String, String, String)>,
}

impl ClaimRecord {
    /// Whether a condition of `type_` was ever seen with `status` (and `reason`, if given).
    pub fn had_condition(&self, type_: &str, status: &str, reason: Option<&str>) -> bool {
        self.conditions_seen
            .iter()
            .any(|(t, s, r)| t == type_ && s == status && reason.is_none_or(|want| r == want))
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct InstanceRecord {
    /// When each state was first seen.
    pub states: BTreeMap<String, Timestamp>,
}

impl InstanceRecord {
    pub fn since(&self, state: InstanceState) -> Option<Timestamp> {
        self.states.get(&state_label(state)).copied()
    }

    /// When EC2 started taking it away (shutting down, or terminated if that was seen first).
    pub fn termination_began(&self) -> Option<Timestamp> {
        [InstanceState::ShuttingDown, InstanceState::Terminated]
            .into_iter()
            .filter_map(|s| self.since(s))
            .min()
    }
}

fn state_label(state: InstanceState) -> String {
    format!("{state:?}")
}

/// Every step's outcome, by object.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// Pods by uid (a pod recreated under the same name is a new pod).
    pub pods: BTreeMap<String, PodRecord>,
    pub nodes: BTreeMap<String, NodeRecord>,
    pub claims: BTreeMap<String, ClaimRecord>,
    pub instances: BTreeMap<String, InstanceRecord>,
    /// Every launch template seen, by name, as first seen (a name is a hash of the content): the
    /// controller deletes a template unused for a minute, so what the launches used may be gone
    /// from the cloud by the time a step looks.
    pub launch_templates: BTreeMap<String, LaunchTemplateRequest>,
}

/// `at` cut to the whole second, as the API server writes a timestamp (`metav1.Time`: RFC 3339,
/// whole seconds) and EventBridge an event's `time`. A world charged the cloud's latency keeps
/// time in milliseconds, so an object's timestamp written in the same second as a moment the
/// world saw reads as earlier than it: compare such a pair in whole seconds.
pub fn whole_second(at: Timestamp) -> Timestamp {
    Timestamp::from_second(at.as_second()).unwrap_or(at)
}

fn time(value: &Value) -> Option<Timestamp> {
    value.as_str().and_then(|t| t.parse().ok())
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object["metadata"]["annotations"][key].as_str()
}

fn name_of(object: &Value) -> String {
    object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn instance_of(provider_id: &Value) -> Option<String> {
    provider_id
        .as_str()
        .and_then(|p| p.rsplit('/').next())
        .filter(|id| !id.is_empty())
        .map(str::to_string)
}

/// When the deletion of a marked object was asked for: `deletionTimestamp` is the request time
/// plus the grace period the API server granted.
fn deletion_requested(object: &Value) -> Option<Timestamp> {
    let marked = time(&object["metadata"]["deletionTimestamp"])?;
    let grace = object["metadata"]["deletionGracePeriodSeconds"]
        .as_i64()
        .unwrap_or(0);
    marked.checked_sub(SignedDuration::from_secs(grace)).ok()
}

fn tolerates_disrupted(spec: &Value) -> bool {
    spec["tolerations"]
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

impl History {
    /// Records what the world looks like after a step that ran at `ran_at`.
    pub fn observe(&mut self, api: &ApiServer, cloud: &FakeCloud, ran_at: Timestamp) {
        self.observe_pods(&api.objects(&ResourceKind::POD), ran_at);
        self.observe_nodes(&api.objects(&ResourceKind::NODE), ran_at);
        self.observe_claims(&api.objects(&ResourceKind::NODE_CLAIM), ran_at);
        for template in cloud.launch_templates() {
            self.launch_templates
                .entry(template.name.clone())
                .or_insert(template);
        }
        let mut live = BTreeSet::new();
        for instance in cloud.instances() {
            live.insert(instance.instance_id.clone());
            self.instances
                .entry(instance.instance_id)
                .or_default()
                .states
                .entry(state_label(instance.state))
                .or_insert(ran_at);
        }
        // EC2 forgets terminated instances after a while; one never seen terminated went that way.
        for (id, record) in &mut self.instances {
            if !live.contains(id) {
                record
                    .states
                    .entry(state_label(InstanceState::Terminated))
                    .or_insert(ran_at);
            }
        }
    }

    fn observe_pods(&mut self, pods: &[SharedObject], ran_at: Timestamp) {
        let mut present = BTreeSet::new();
        for pod in pods {
            let uid = pod["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            present.insert(uid.clone());
            let spec = &pod["spec"];
            let record = self.pods.entry(uid).or_insert_with(|| PodRecord {
                namespace: pod["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                name: name_of(pod),
                node: None,
                tolerates_disrupted: tolerates_disrupted(spec),
                deletion_requested: None,
                gone: None,
            });
            if let Some(node) = spec["nodeName"].as_str().filter(|n| !n.is_empty()) {
                record.node = Some(node.to_string());
            }
            if record.deletion_requested.is_none() {
                record.deletion_requested = deletion_requested(pod);
            }
        }
        for (uid, record) in &mut self.pods {
            if record.gone.is_none() && !present.contains(uid) {
                record.gone = Some(ran_at);
                record.deletion_requested.get_or_insert(ran_at);
            }
        }
    }

    fn observe_nodes(&mut self, nodes: &[SharedObject], ran_at: Timestamp) {
        let mut present = BTreeSet::new();
        for node in nodes {
            let name = name_of(node);
            present.insert(name.clone());
            self.nodes.entry(name).or_default().gone = None;
        }
        for (name, record) in &mut self.nodes {
            if record.gone.is_none() && !present.contains(name) {
                record.gone = Some(ran_at);
            }
        }
    }

    fn observe_claims(&mut self, claims: &[SharedObject], ran_at: Timestamp) {
        let mut present = BTreeSet::new();
        for claim in claims {
            let name = name_of(claim);
            present.insert(name.clone());
            let record = self.claims.entry(name).or_default();
            if record.instance_id.is_none() {
                record.instance_id = instance_of(&claim["status"]["providerID"]);
            }
            if let Some(list) = annotation(claim, REPLACES_ANNOTATION) {
                record.replaces.extend(
                    list.split(',')
                        .filter(|n| !n.is_empty())
                        .map(str::to_string),
                );
            }
            if let Some(deadline) = annotation(claim, INTERRUPTION_EVICTION_DEADLINE_ANNOTATION) {
                record.eviction_deadline = deadline.parse().ok();
            }
            if record.deleting_since.is_none() {
                record.deleting_since = time(&claim["metadata"]["deletionTimestamp"]);
            }
            for condition in claim["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let text = |key: &str| condition[key].as_str().unwrap_or_default().to_string();
                if condition["type"] == "Initialized" && condition["status"] == "True" {
                    record.initialized_since.get_or_insert(ran_at);
                }
                record
                    .conditions_seen
                    .insert((text("type"), text("status"), text("reason")));
            }
        }
        for (name, record) in &mut self.claims {
            if record.gone.is_none() && !present.contains(name) {
                record.gone = Some(ran_at);
            }
        }
    }

    /// The pods ever seen bound to `node`, in the order their deletion was requested (pods never
    /// deleted last), then by name.
    pub fn pods_on(&self, node: &str) -> Vec<&PodRecord> {
        let mut pods: Vec<&PodRecord> = self
            .pods
            .values()
            .filter(|p| p.node.as_deref() == Some(node))
            .collect();
        pods.sort_by_key(|p| {
            (
                p.deletion_requested.is_none(),
                p.deletion_requested,
                p.key(),
            )
        });
        pods
    }

    /// The claims whose `karpenter.sh/replaces` names `claim`, by name.
    pub fn replacements_of(&self, claim: &str) -> Vec<(&String, &ClaimRecord)> {
        self.claims
            .iter()
            .filter(|(_, c)| c.replaces.contains(claim))
            .collect()
    }
}
