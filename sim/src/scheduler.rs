//! A kube-scheduler stand-in for the simulation.
//!
//! It binds pending pods to nodes where kube-scheduler's default filters would let them run, so
//! the simulation can check that the nodes the controller launches really host the pods they were
//! launched for. It is written from the Kubernetes documentation and API reference, independently
//! of the controller's `scheduling` module: it is the check on that code, not a copy of it.
//!
//! The simulation drives it with [`Scheduler::step`] (no background task): each step lists pods
//! and nodes through the `KubeApi` seam, walks pending pods in queue order (priority, then
//! creation time, then namespace/name) and either binds each to the best feasible node or records
//! why it fits nowhere in its `PodScheduled` condition. Nodes are visited in name order and every
//! tie is broken by name, so a step is a pure function of the cluster state and the clock.
//!
//! Filters, in upstream's order: node `Ready` and not cordoned, `NoSchedule`/`NoExecute` taints
//! tolerated, `nodeSelector` and required node affinity, host ports, resources (`pods` count
//! included), node affinity of bound persistent volumes (an unbound claim of a
//! `WaitForFirstConsumer` class: its class's allowed topologies, and a volume provisioned in the
//! chosen node's zone before the pod is bound; an unbound `Immediate` claim or a missing class
//! makes the pod unschedulable), topology spread (`DoNotSchedule`), then
//! required inter-pod affinity and anti-affinity (both the pod's and the placed pods'). Among the
//! feasible nodes it takes the most allocated one (kube-scheduler's `MostAllocated` scoring, which
//! is what clusters that pack nodes tightly, as Karpenter's do, configure).

mod filters;
mod interpod;
pub(crate) mod matching;
mod requests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume,
    PersistentVolumeClaim, Pod,
};
use k8s_openapi::api::storage::v1::StorageClass;
use karpenter_core::resources::{CPU, MEMORY, Resources};
use karpenter_core::seams::kube::{ListOptions, ObjectKey, Patch, ResourceKind};
use karpenter_core::seams::{Clock, KubeApi, KubeError};
use karpenter_core::state::Reflector;
use serde_json::{Value, json};

use filters::{Candidate, NodeView};
use interpod::{Cluster, InterPod, PlacedPod};
use matching::Labels;
use requests::pod_requests;

use crate::objects::{
    NewCondition, after_ms, condition, condition_matches, condition_true, conditions_with, decode,
    decode_ref, guarded, object_key, resources_of,
};

/// The `schedulerName` of pods nobody asked a particular scheduler for.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// The condition the scheduler owns on every pod it considers.
const POD_SCHEDULED: &str = "PodScheduled";

/// What the scheduler stand-in is configured with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// Pods naming another `spec.schedulerName` are left alone, as a second scheduler's would be.
    pub scheduler_name: String,
    /// kube-scheduler's per-pod backoff after a failed attempt: the pod is not tried again
    /// before it ends, however the cluster changes. `None`: every pass tries every pending pod.
    pub backoff: Option<Backoff>,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            scheduler_name: DEFAULT_SCHEDULER_NAME.to_string(),
            backoff: None,
        }
    }
}

/// How long a pod waits after its n-th failed attempt: `initial × 2^(n-1)`, at most `max`
/// (kube-scheduler's `podInitialBackoffSeconds` and `podMaxBackoffSeconds`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Backoff {
    /// kube-scheduler's defaults: 1 s, doubling to 10 s.
    pub const KUBE_SCHEDULER: Backoff = Backoff {
        initial: Duration::from_secs(1),
        max: Duration::from_secs(10),
    };

    fn after(&self, attempts: u32) -> Duration {
        let doublings = attempts.saturating_sub(1).min(31);
        self.initial.saturating_mul(1u32 << doublings).min(self.max)
    }
}

/// A pod that failed: how often, and when it may be tried again.
#[derive(Clone, Copy, Debug)]
struct Retry {
    attempts: u32,
    until: Timestamp,
}

/// A pod bound during a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    pub pod: ObjectKey,
    pub node: String,
}

/// A pod that fits no node, with the message its `PodScheduled` condition carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unschedulable {
    pub pod: ObjectKey,
    pub message: String,
}

/// What one step did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepReport {
    /// Pods bound, in the order they were bound.
    pub bound: Vec<Binding>,
    /// Pods that fit nowhere this step (whether or not their condition had to be rewritten).
    pub unschedulable: Vec<Unschedulable>,
    /// Pods with `spec.schedulingGates`, not considered until the gates are removed.
    pub gated: Vec<ObjectKey>,
    /// `PodScheduled` writes (status patches) made; unchanged conditions are not rewritten.
    pub status_writes: usize,
    /// Writes that lost a race (the pod changed or went away since the list): retried next step.
    pub conflicts: usize,
}

impl StepReport {
    pub fn bound_count(&self) -> usize {
        self.bound.len()
    }

    pub fn unschedulable_count(&self) -> usize {
        self.unschedulable.len()
    }
}

/// The kube-scheduler stand-in. Everything it decides from, it reads from the API server (through
/// watch-fed caches); the only memory it keeps is when it last tried, because, like
/// kube-scheduler, it retries unschedulable pods when the cluster changes and otherwise only
/// every [`UNSCHEDULABLE_RETRY`].
pub struct Scheduler {
    kube: Arc<dyn KubeApi>,
    clock: Arc<dyn Clock>,
    config: SchedulerConfig,
    cache: futures::lock::Mutex<Cache>,
}

/// kube-scheduler moves pods that stayed unschedulable back to its active queue after this long
/// even without a cluster event (`podMaxInUnschedulablePodsDuration`, 5 minutes).
pub const UNSCHEDULABLE_RETRY: Duration = Duration::from_secs(5 * 60);

struct Cache {
    nodes: Reflector<Value>,
    pods: Reflector<Value>,
    last_pass: Option<Timestamp>,
    /// Pods in backoff (with [`SchedulerConfig::backoff`]), by key.
    retries: BTreeMap<ObjectKey, Retry>,
    /// Each cached pod decoded, with the shared object it was decoded from: a pass decodes
    /// only the pods that changed since the last (decoding all 3,000 of a burst every pass was
    /// a twentieth of a simulated burst). Same object (pointer) means same decoding.
    decoded: BTreeMap<ObjectKey, (Arc<Value>, Arc<Pod>)>,
}

/// A cached pod: its key, the shared object, and its decoding.
type CachedPod = (ObjectKey, Arc<Value>, Arc<Pod>);

impl Cache {
    /// The cached pods with their decodings, in the cache's order; decodes what changed and
    /// forgets what is gone. An undecodable pod fails the pass, as before.
    fn decoded_pods(&mut self) -> Result<Vec<CachedPod>, KubeError> {
        let mut previous = std::mem::take(&mut self.decoded);
        let mut out = Vec::with_capacity(self.pods.len());
        for object in self.pods.to_vec() {
            let key = object_key(&object);
            let pod = match previous.remove(&key) {
                Some((was, pod)) if Arc::ptr_eq(&was, &object) => pod,
                _ => {
                    let what = pod_what(&key);
                    Arc::new(decode_ref::<Pod>(&object, &what)?)
                }
            };
            self.decoded
                .insert(key.clone(), (object.clone(), pod.clone()));
            out.push((key, object, pod));
        }
        Ok(out)
    }
}

/// How errors name a pod: `pod namespace/name`.
fn pod_what(key: &ObjectKey) -> String {
    format!(
        "pod {}/{}",
        key.namespace.as_deref().unwrap_or(""),
        key.name
    )
}

/// A pod waiting for a node.
struct Pending {
    key: ObjectKey,
    object: Arc<Value>,
    pod: Arc<Pod>,
    priority: i32,
    created: Option<Timestamp>,
}

/// What one pod's scheduling attempt reads and changes of its pass.
struct Pass<'a> {
    now: Timestamp,
    nodes: &'a mut [NodeView],
    placed: &'a mut Vec<PlacedPod>,
    namespaces: &'a BTreeMap<String, Labels>,
    verdicts: &'a mut Verdicts,
    retries: &'a mut BTreeMap<ObjectKey, Retry>,
}

/// "Fits no node" verdicts of this pass, by equivalence class, valid until the next bind.
///
/// kube-scheduler's filters read a pod's namespace, labels and spec and the cluster; between two
/// binds of one pass the cluster does not change (the pass works on its snapshot), so a pod
/// equivalent to one that fit nowhere fits nowhere either, for the same reasons: it gets the same
/// message without scanning every node again. That is what lets a pass over thousands of pending
/// replicas on thousands of full nodes (the `fleet-2000` scenario behind `serve`) finish in
/// seconds instead of scanning every node for every replica. Pods with volumes are never
/// classed: their claims (and so their verdicts) are their own.
#[derive(Default)]
struct Verdicts {
    unschedulable: BTreeMap<String, String>,
}

impl Verdicts {
    /// The equivalence class of `pod`: its namespace, labels and spec; `None` for a pod whose
    /// verdict is its own (volumes, or a spec that does not serialize).
    fn class_of(pod: &Pod) -> Option<String> {
        let spec = pod.spec.as_ref()?;
        if spec
            .volumes
            .iter()
            .flatten()
            .any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some())
        {
            return None;
        }
        serde_json::to_string(&(&pod.metadata.namespace, &pod.metadata.labels, spec)).ok()
    }

    fn unschedulable(&self, class: &str) -> Option<String> {
        self.unschedulable.get(class).cloned()
    }

    fn remember(&mut self, class: String, message: String) {
        self.unschedulable.insert(class, message);
    }

    fn forget(&mut self) {
        self.unschedulable.clear();
    }
}

/// Why a pod cannot be considered at all (before any node is looked at).
enum PreFilter {
    /// Schedulable on the nodes whose labels match these (bound volumes' node affinity, and the
    /// allowed topologies of classes still to provision a volume); the claims to provision once
    /// a node is chosen.
    Volumes(Vec<NodeSelector>, Vec<Provision>),
    /// Unschedulable everywhere, with upstream's message.
    Rejected(String),
}

/// An unbound claim of a `WaitForFirstConsumer` class: provisioned in the chosen node's zone.
struct Provision {
    claim: PersistentVolumeClaim,
    class: StorageClass,
}

/// The EBS CSI driver's topology key: its volumes' node affinity, and a label of every node
/// (the kubelet stand-in sets it, as the driver's node plugin does).
const EBS_CSI_ZONE_KEY: &str = "topology.ebs.csi.aws.com/zone";
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

impl Scheduler {
    pub fn new(kube: Arc<dyn KubeApi>, clock: Arc<dyn Clock>, config: SchedulerConfig) -> Self {
        Self {
            kube,
            clock,
            config,
            cache: futures::lock::Mutex::new(Cache {
                nodes: Reflector::new(ResourceKind::NODE),
                pods: Reflector::new(ResourceKind::POD),
                last_pass: None,
                retries: BTreeMap::new(),
                decoded: BTreeMap::new(),
            }),
        }
    }

    /// One scheduling pass over every pending pod.
    ///
    /// Errors of the seam other than a lost race (`Conflict`, `NotFound` on a write) end the step
    /// early and are returned; what was already bound stays bound, and the next step carries on.
    pub async fn step(&self) -> Result<StepReport, KubeError> {
        let now = self.clock.now();
        let report = StepReport::default();
        let (node_objects, pod_objects) = {
            let mut cache = self.cache.lock().await;
            let mut changed = cache.nodes.sync(self.kube.as_ref()).await?;
            changed |= cache.pods.sync(self.kube.as_ref()).await?;
            let retry_due = cache
                .last_pass
                .is_none_or(|last| now.duration_since(last).unsigned_abs() >= UNSCHEDULABLE_RETRY);
            // A pod whose backoff ended is tried again even if nothing changed.
            let backoff_over = cache.retries.values().any(|r| r.until <= now);
            if !changed && !retry_due && !backoff_over {
                // Nothing moved since the last pass, which left every pod it could bind bound.
                return Ok(report);
            }
            cache.last_pass = Some(now);
            // Shared, not copied: a pass reads every pod, and a copy of 20,000 was most of it.
            let pods = cache.decoded_pods();
            if pods.is_err() {
                cache.last_pass = None;
            }
            (cache.nodes.to_vec(), pods?)
        };
        let mut retries = std::mem::take(&mut self.cache.lock().await.retries);
        let result = self
            .pass(now, node_objects, pod_objects, &mut retries, report)
            .await;
        let mut cache = self.cache.lock().await;
        cache.retries = retries;
        if result.is_err() {
            // A pass cut short by an error is retried on the next step, change or no change.
            cache.last_pass = None;
        }
        result
    }

    /// One pass over the cluster as listed.
    async fn pass(
        &self,
        now: Timestamp,
        node_objects: Vec<Arc<Value>>,
        pod_objects: Vec<CachedPod>,
        retries: &mut BTreeMap<ObjectKey, Retry>,
        mut report: StepReport,
    ) -> Result<StepReport, KubeError> {
        let mut bound = Vec::new();
        let mut pending: Vec<Pending> = Vec::new();
        for (key, object, pod) in pod_objects {
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            if matches!(phase, Some("Succeeded" | "Failed")) {
                continue;
            }
            let spec = pod.spec.as_ref();
            if spec
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| !n.is_empty())
            {
                bound.push((key, pod));
                continue;
            }
            let scheduler = spec
                .and_then(|s| s.scheduler_name.as_deref())
                .unwrap_or(DEFAULT_SCHEDULER_NAME);
            if pod.metadata.deletion_timestamp.is_some() || scheduler != self.config.scheduler_name
            {
                continue;
            }
            pending.push(Pending {
                key,
                priority: spec.and_then(|s| s.priority).unwrap_or(0),
                created: pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
                object,
                pod,
            });
        }
        pending.sort_by(|a, b| {
            b.priority
                .cmp(&a.priority)
                .then(a.created.cmp(&b.created))
                .then_with(|| a.key.cmp(&b.key))
        });
        // Pods no longer pending leave backoff; those still in it sit this pass out.
        let still: BTreeSet<&ObjectKey> = pending.iter().map(|p| &p.key).collect();
        retries.retain(|key, _| still.contains(key));
        pending.retain(|p| retries.get(&p.key).is_none_or(|r| r.until <= now));
        if pending.is_empty() {
            // Nothing to place: the nodes' free room is not needed (at 20,000 bound pods,
            // computing it was most of a pass with nothing pending).
            return Ok(report);
        }

        let mut nodes: Vec<NodeView> = node_objects
            .iter()
            .map(|n| node_view(n))
            .collect::<Result<_, _>>()?;
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let index: BTreeMap<String, usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        let mut placed: Vec<PlacedPod> = Vec::new();
        for (key, pod) in bound {
            let node_name = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .unwrap_or_default();
            // Pods bound to a node that no longer exists take nothing from anyone.
            if let Some(&i) = index.get(node_name) {
                let what = pod_what(&key);
                let requests = pod_requests(&pod, &what)?;
                nodes[i].add(&requests, &filters::host_ports(&pod));
                placed.push(PlacedPod::new(&pod, i));
            }
        }

        let namespaces = self.namespace_labels(&pending, &placed).await?;
        let mut verdicts = Verdicts::default();
        for entry in pending {
            let pass = Pass {
                now,
                nodes: &mut nodes,
                placed: &mut placed,
                namespaces: &namespaces,
                verdicts: &mut verdicts,
                retries: &mut *retries,
            };
            self.schedule(entry, pass, &mut report).await?;
        }
        Ok(report)
    }

    /// Tries one pod against every node and binds it or records why not.
    async fn schedule(
        &self,
        entry: Pending,
        pass: Pass<'_>,
        report: &mut StepReport,
    ) -> Result<(), KubeError> {
        let Pass {
            now,
            nodes,
            placed,
            namespaces,
            verdicts,
            retries,
        } = pass;
        let gated = entry
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_ref())
            .is_some_and(|g| !g.is_empty());
        if gated {
            // Gated pods are not attempted, so not in backoff (kube-scheduler queues them when
            // the gates go).
            retries.remove(&entry.key);
            return self.gated(entry, now, report).await;
        }
        self.back_off(retries, &entry.key, now);
        let what = pod_what(&entry.key);
        let equivalence = Verdicts::class_of(&entry.pod);
        if let Some(message) = equivalence.as_ref().and_then(|c| verdicts.unschedulable(c)) {
            return self.unschedulable(entry, message, now, report).await;
        }
        let requests = pod_requests(&entry.pod, &what)?;
        let (volume_affinity, provisions) = match self.pre_filter_volumes(&entry.pod).await? {
            PreFilter::Volumes(selectors, provisions) => (selectors, provisions),
            PreFilter::Rejected(message) => {
                return self.unschedulable(entry, message, now, report).await;
            }
        };
        let candidate = Candidate::new(&entry.pod, requests, volume_affinity);
        let inter_pod = InterPod::new(
            &entry.pod,
            &candidate,
            &Cluster {
                nodes,
                placed,
                namespaces,
            },
        );

        let chosen = match best_node(nodes, &candidate, &inter_pod) {
            Ok(chosen) => chosen,
            Err(reasons) => {
                let message = fit_error(nodes.len(), &reasons);
                if let Some(class) = equivalence {
                    verdicts.remember(class, message.clone());
                }
                return self.unschedulable(entry, message, now, report).await;
            }
        };
        let node_name = nodes[chosen].name.clone();
        // Upstream's PreBind: volumes are provisioned and their claims bound before the pod.
        let zone = nodes[chosen].labels.get(ZONE_LABEL).cloned();
        tracing::debug!(pod = %entry.key.name, node = %node_name, zone = ?zone, "binding");
        for provision in &provisions {
            self.provision(provision, zone.as_deref()).await?;
        }
        if !self.bind(&entry, &node_name, report).await? {
            return Ok(());
        }
        nodes[chosen].add(&candidate.requests, &candidate.host_ports);
        placed.push(PlacedPod::new(&entry.pod, chosen));
        // The cluster changed: a verdict reached before this bind may no longer hold.
        verdicts.forget();
        retries.remove(&entry.key);
        report.bound.push(Binding {
            pod: entry.key,
            node: node_name,
        });
        Ok(())
    }

    /// Binds the pod to `node_name` with a `Binding`, as kube-scheduler does: the API server
    /// sets `spec.nodeName` and `PodScheduled=True` in one write. `false` when it lost a race
    /// (the pod was deleted, is being deleted or was bound since the list; the binding carries
    /// the pod's uid so a pod re-created under the same name is not bound by mistake).
    async fn bind(
        &self,
        entry: &Pending,
        node_name: &str,
        report: &mut StepReport,
    ) -> Result<bool, KubeError> {
        let binding = json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {
                "name": entry.key.name,
                "namespace": entry.key.namespace,
                "uid": entry.object["metadata"]["uid"],
            },
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        });
        match self.kube.create(&fakekube::BINDING, binding).await {
            Ok(_) => Ok(true),
            Err(KubeError::Conflict(_) | KubeError::NotFound(_)) => {
                report.conflicts += 1;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// kube-scheduler's backoff: every attempt but a bind (or a lost race) pushes the pod's
    /// next attempt back.
    fn back_off(&self, retries: &mut BTreeMap<ObjectKey, Retry>, key: &ObjectKey, now: Timestamp) {
        if let Some(backoff) = self.config.backoff {
            let attempts = retries.get(key).map_or(0, |r| r.attempts) + 1;
            let wait_ms = u64::try_from(backoff.after(attempts).as_millis()).unwrap_or(u64::MAX);
            let until = after_ms(now, wait_ms);
            retries.insert(key.clone(), Retry { attempts, until });
        }
    }

    /// Records `PodScheduled=False` / `SchedulingGated`.
    async fn gated(
        &self,
        entry: Pending,
        now: Timestamp,
        report: &mut StepReport,
    ) -> Result<(), KubeError> {
        let update = NewCondition {
            type_: POD_SCHEDULED,
            status: "False",
            reason: Some("SchedulingGated"),
            message: Some("Scheduling is blocked due to non-empty scheduling gates"),
        };
        self.write_condition(&entry.key, &entry.object, &update, now, report)
            .await?;
        report.gated.push(entry.key);
        Ok(())
    }

    /// Records `PodScheduled=False` / `Unschedulable` with `message`.
    async fn unschedulable(
        &self,
        entry: Pending,
        message: String,
        now: Timestamp,
        report: &mut StepReport,
    ) -> Result<(), KubeError> {
        tracing::debug!(pod = %entry.key.name, %message, "unschedulable");
        let update = NewCondition {
            type_: POD_SCHEDULED,
            status: "False",
            reason: Some("Unschedulable"),
            message: Some(&message),
        };
        self.write_condition(&entry.key, &entry.object, &update, now, report)
            .await?;
        report.unschedulable.push(Unschedulable {
            pod: entry.key,
            message,
        });
        Ok(())
    }

    /// Writes a `PodScheduled` condition unless the pod already says exactly that: a pod that
    /// stays unschedulable step after step costs no writes (and no watch events).
    async fn write_condition(
        &self,
        key: &ObjectKey,
        object: &Value,
        update: &NewCondition<'_>,
        now: Timestamp,
        report: &mut StepReport,
    ) -> Result<(), KubeError> {
        if condition_matches(condition(object, POD_SCHEDULED), update) {
            return Ok(());
        }
        let conditions = conditions_with(object, std::slice::from_ref(update), now);
        let patch = guarded(object, json!({ "status": { "conditions": conditions } }));
        match self
            .kube
            .patch_status(&ResourceKind::POD, key, &Patch::Merge(patch))
            .await
        {
            Ok(_) => {
                report.status_writes += 1;
                Ok(())
            }
            Err(KubeError::Conflict(_) | KubeError::NotFound(_)) => {
                report.conflicts += 1;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Upstream's `VolumeBinding` for claims that exist: a missing claim makes the pod
    /// unschedulable; a claim bound to a volume restricts the pod to the volume's node affinity;
    /// an unbound claim is judged by [`Scheduler::unbound_claim`].
    async fn pre_filter_volumes(&self, pod: &Pod) -> Result<PreFilter, KubeError> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let mut selectors = Vec::new();
        let mut provisions = Vec::new();
        let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
        for volume in volumes.into_iter().flatten() {
            let claim = match (&volume.persistent_volume_claim, &volume.ephemeral) {
                (Some(source), _) => source.claim_name.clone(),
                (None, Some(_)) => format!("{pod_name}-{}", volume.name),
                (None, None) => continue,
            };
            let key = ObjectKey::namespaced(&namespace, &claim);
            let Some(object) = self
                .kube
                .get(&ResourceKind::PERSISTENT_VOLUME_CLAIM, &key)
                .await?
            else {
                return Ok(PreFilter::Rejected(format!(
                    "persistentvolumeclaim \"{claim}\" not found"
                )));
            };
            let pvc: PersistentVolumeClaim = decode(
                object,
                &format!("persistentvolumeclaim {namespace}/{claim}"),
            )?;
            let Some(volume_name) = pvc
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.clone())
                .filter(|n| !n.is_empty())
            else {
                match self.unbound_claim(pvc).await? {
                    Ok((selector, provision)) => {
                        selectors.extend(selector);
                        provisions.push(provision);
                    }
                    Err(message) => return Ok(PreFilter::Rejected(message)),
                }
                continue;
            };
            let pv_key = ObjectKey::cluster(&volume_name);
            let Some(object) = self
                .kube
                .get(&ResourceKind::PERSISTENT_VOLUME, &pv_key)
                .await?
            else {
                return Ok(PreFilter::Rejected(format!(
                    "persistentvolume \"{volume_name}\" not found"
                )));
            };
            let pv: PersistentVolume = decode(object, &format!("persistentvolume {volume_name}"))?;
            if let Some(required) = pv
                .spec
                .and_then(|s| s.node_affinity)
                .and_then(|a| a.required)
            {
                selectors.push(required);
            }
        }
        Ok(PreFilter::Volumes(selectors, provisions))
    }

    /// An unbound claim: its class must exist and bind `WaitForFirstConsumer` (an `Immediate`
    /// claim is bound by its provisioner before any pod can use it; until then kube-scheduler
    /// reports it); the class's allowed topologies restrict the node.
    async fn unbound_claim(
        &self,
        claim: PersistentVolumeClaim,
    ) -> Result<Result<(Option<NodeSelector>, Provision), String>, KubeError> {
        let class_name = claim
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.clone())
            .unwrap_or_default();
        let key = ObjectKey::cluster(&class_name);
        let Some(object) = self.kube.get(&ResourceKind::STORAGE_CLASS, &key).await? else {
            return Ok(Err(format!(
                "storageclass.storage.k8s.io \"{class_name}\" not found"
            )));
        };
        let class: StorageClass = decode(object, &format!("storageclass {class_name}"))?;
        if class.volume_binding_mode.as_deref() != Some("WaitForFirstConsumer") {
            return Ok(Err(
                "pod has unbound immediate PersistentVolumeClaims".to_string()
            ));
        }
        let terms: Vec<NodeSelectorTerm> = class
            .allowed_topologies
            .iter()
            .flatten()
            .map(|term| NodeSelectorTerm {
                match_expressions: Some(
                    term.match_label_expressions
                        .iter()
                        .flatten()
                        .map(|e| NodeSelectorRequirement {
                            key: e.key.clone(),
                            operator: "In".to_string(),
                            values: Some(e.values.clone()),
                        })
                        .collect(),
                ),
                match_fields: None,
            })
            .collect();
        let selector = (!terms.is_empty()).then_some(NodeSelector {
            node_selector_terms: terms,
        });
        Ok(Ok((selector, Provision { claim, class })))
    }

    /// The CSI provisioner's part: a volume in `zone` for the claim, and the claim bound to it.
    async fn provision(&self, provision: &Provision, zone: Option<&str>) -> Result<(), KubeError> {
        let claim = &provision.claim;
        let namespace = claim.metadata.namespace.clone().unwrap_or_default();
        let name = claim.metadata.name.clone().unwrap_or_default();
        let volume = format!("pvc-{namespace}-{name}");
        let storage = claim
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .map(|q| q.0.clone())
            .unwrap_or_else(|| "1Gi".to_string());
        let mut pv = json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": volume},
            "spec": {
                "capacity": {"storage": storage},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": provision.class.metadata.name,
                "claimRef": {"namespace": namespace, "name": name},
                "csi": {"driver": provision.class.provisioner, "volumeHandle": format!("vol-{namespace}-{name}")}
            }
        });
        if let Some(zone) = zone {
            pv["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": EBS_CSI_ZONE_KEY, "operator": "In", "values": [zone]}]}
            ]}});
        }
        match self.kube.create(&ResourceKind::PERSISTENT_VOLUME, pv).await {
            Ok(_) | Err(KubeError::AlreadyExists(_)) => {}
            Err(e) => return Err(e),
        }
        self.kube
            .patch(
                &ResourceKind::PERSISTENT_VOLUME_CLAIM,
                &ObjectKey::namespaced(namespace, name),
                &Patch::Merge(json!({"spec": {"volumeName": volume}})),
            )
            .await?;
        Ok(())
    }

    /// Namespace labels, listed only when some affinity term selects namespaces by label.
    async fn namespace_labels(
        &self,
        pending: &[Pending],
        placed: &[PlacedPod],
    ) -> Result<BTreeMap<String, Labels>, KubeError> {
        let pending_terms: Vec<_> = pending
            .iter()
            .flat_map(|p| {
                interpod::required_affinity(&p.pod)
                    .into_iter()
                    .chain(interpod::required_anti_affinity(&p.pod))
            })
            .collect();
        let needed = interpod::needs_namespace_labels(&pending_terms)
            || interpod::needs_namespace_labels(placed.iter().flat_map(|p| &p.anti_affinity));
        if !needed {
            return Ok(BTreeMap::new());
        }
        let list = self
            .kube
            .list(&ResourceKind::NAMESPACE, &ListOptions::default())
            .await?;
        Ok(list
            .items
            .iter()
            .map(|ns| {
                let name = ns["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let labels: Labels =
                    serde_json::from_value(ns["metadata"]["labels"].clone()).unwrap_or_default();
                (name, labels)
            })
            .collect())
    }
}

/// A node as the filters see it, before pods are added.
fn node_view(object: &Value) -> Result<NodeView, KubeError> {
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let ready = condition_true(object, "Ready");
    let node: Node = decode_ref(object, &format!("node {name}"))?;
    let spec = node.spec.unwrap_or_default();
    let allocatable = resources_of(
        node.status.as_ref().and_then(|s| s.allocatable.as_ref()),
        &format!("node {name} allocatable"),
    )?;
    Ok(NodeView {
        name,
        labels: node.metadata.labels.unwrap_or_default(),
        taints: spec.taints.unwrap_or_default(),
        ready,
        unschedulable: spec.unschedulable.unwrap_or(false),
        allocatable,
        requested: Resources::new(),
        pods: 0,
        host_ports: Vec::new(),
    })
}

/// `MostAllocated`: the mean of the cpu and memory fractions the node would have requested with
/// the pod on it, in thousandths (integers, so the choice cannot depend on float rounding).
fn most_allocated(node: &NodeView, requests: &Resources) -> i64 {
    let mut score = 0i64;
    for name in [CPU, MEMORY] {
        let allocatable = i128::from(node.allocatable.get(name));
        if allocatable <= 0 {
            continue;
        }
        let used = i128::from(node.requested.get(name)) + i128::from(requests.get(name));
        let fraction = (used * 1000 / allocatable).clamp(0, 1000);
        score += fraction as i64;
    }
    score / 2
}

/// The feasible node the pod fits best (most allocated; nodes come in name order, so a tie keeps
/// the earlier name), or why each node failed, counted by reason.
fn best_node(
    nodes: &[NodeView],
    candidate: &Candidate,
    inter_pod: &InterPod,
) -> Result<usize, BTreeMap<String, usize>> {
    let mut best: Option<(i64, usize)> = None;
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for (i, node) in nodes.iter().enumerate() {
        match candidate.check(node).and_then(|()| inter_pod.check(node)) {
            Ok(()) => {
                let score = most_allocated(node, &candidate.requests);
                if best.is_none_or(|(top, _)| score > top) {
                    best = Some((score, i));
                }
            }
            Err(node_reasons) => {
                let unique: BTreeSet<String> = node_reasons.into_iter().collect();
                for reason in unique {
                    *reasons.entry(reason).or_insert(0) += 1;
                }
            }
        }
    }
    best.map(|(_, i)| i).ok_or(reasons)
}

/// kube-scheduler's `FitError` message: `0/N nodes are available: <count> <reason>, ....` with
/// the "count reason" strings sorted.
fn fit_error(node_count: usize, reasons: &BTreeMap<String, usize>) -> String {
    if node_count == 0 {
        return "no nodes available to schedule pods".to_string();
    }
    let mut parts: Vec<String> = reasons
        .iter()
        .map(|(reason, count)| format!("{count} {reason}"))
        .collect();
    parts.sort();
    format!("0/{node_count} nodes are available: {}.", parts.join(", "))
}
