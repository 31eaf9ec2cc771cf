//! A kubelet stand-in for the simulation, plus the bits of the node lifecycle around it that a
//! real cluster gets from elsewhere (a CNI daemon removing its startup taint, the cloud node
//! lifecycle controller deleting nodes whose instance is gone, its taint eviction deleting pods
//! from `NoExecute`-tainted nodes, PodGC removing pods of deleted nodes).
//!
//! It closes the loop between `fakecloud` and the in-memory API server: instances the fake cloud
//! says have booted register as Nodes with what their user data says (so the controller's
//! bootstrap output is what gets checked), pods bound to live nodes start and stop, and nodes of
//! terminated instances go NotReady and away. The simulation drives it with [`Kubelet::tick`]
//! (no background task); every pass walks instances by id and nodes and pods by name, so a tick is
//! a pure function of the cluster, the cloud and the clock.
//!
//! Timings are measured from timestamps written into the objects (`Ready`'s
//! `lastTransitionTime`, a pod's `status.startTime` and `deletionTimestamp`), so a restarted
//! stand-in carries on where the previous one stopped. The one thing kept in memory is which
//! instances were registered: a real kubelet registers its Node once at start-up and does not
//! re-create it if it is deleted while the instance keeps running.

mod nodes;
mod pods;
mod register;
pub mod taint_eviction;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use fakecloud::FakeCloud;
use karpenter_core::seams::kube::{ObjectKey, ResourceKind};
use karpenter_core::seams::{Clock, KubeApi, KubeError};
use karpenter_core::state::Reflector;
use serde_json::Value;

/// Annotation the kubelet stand-in puts on a Node it registers, listing the registered taints
/// that are *startup* taints (in kubelet flag syntax, `key=value:Effect` or `key:Effect`, comma
/// separated). They are removed, with the annotation, `startup_taint_removal_ms` after the node
/// became Ready, as the daemon owning each would. See [`KubeletConfig::startup_taint_keys`] for
/// which taints are startup taints.
pub const STARTUP_TAINTS_ANNOTATION: &str = "sim.karpenter-rs.dev/startup-taints";

/// Annotation the startup taints' owners (the kubelet stand-in's daemons) put on a Node once they
/// removed startup taints from it: every `key:Effect` removed so far, comma separated and sorted.
/// `startup-taints-honoured` reads it as "the owner of this taint is done".
pub const STARTUP_TAINTS_REMOVED_ANNOTATION: &str = "sim.karpenter-rs.dev/startup-taints-removed";

/// The taint the node lifecycle controller puts on a NotReady node (with both effects).
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// The `Ready=False` message a kubelet posts from registration until its node is ready (the
/// CNI not up yet); the stand-in turns exactly these nodes Ready after `ready_delay_ms`.
pub const STARTING_MESSAGE: &str =
    "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady";

/// Annotation on a registered Node whose instance type has extended resources (GPUs, Neuron,
/// EFA, and on a Windows node the VPC resource controller's `vpc.amazonaws.com/PrivateIPv4Address`):
/// they are reported allocatable `device_plugin_delay_ms` after the node became Ready, as a
/// device plugin (or the controller, once it has set up the node's addresses) would, and the
/// annotation removed.
pub const DEVICE_PLUGINS_PENDING_ANNOTATION: &str = "sim.karpenter-rs.dev/device-plugins-pending";

/// Timings and rules of the kubelet stand-in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeletConfig {
    /// How long after a node becomes Ready its startup taints are removed (a CNI or other daemon
    /// starting and untainting the node).
    pub startup_taint_removal_ms: u64,
    /// How long after the kubelet accepts a pod (writes `status.startTime`) it is Running and
    /// Ready (image pull, container start, readiness probe). 0 starts pods on the tick that sees
    /// them.
    pub pod_start_ms: u64,
    /// How long after a node went NotReady because its instance is shutting down, terminated or
    /// unknown to EC2 the Node is deleted (the cloud node lifecycle controller's delay).
    pub node_gone_ms: u64,
    /// How long a registered node stays `NotReady` (with `node.kubernetes.io/not-ready:
    /// NoSchedule`) before it is Ready: the CNI starting. The world draws it per seed.
    pub ready_delay_ms: u64,
    /// How long after Ready a node's extended resources become allocatable (device plugins).
    pub device_plugin_delay_ms: u64,
    /// Taint keys always treated as startup taints when a node registers with them (the CNI's
    /// `node.cilium.io/agent-not-ready`, say). Besides these, a registered taint is a startup
    /// taint when the NodeClaim whose `status.providerID` is the node's lists it (same key and
    /// effect) in `spec.startupTaints`: Karpenter assumes a daemon exists for each of those.
    /// `karpenter.sh/unregistered` never is one: the controller removes it.
    pub startup_taint_keys: BTreeSet<String>,
    /// Play only the kubelets of nodes with an `aws:///` provider id (the fake cloud's
    /// instances): pods bound to any other node are left to that node's own kubelet. On in
    /// `karpenter-sim cloud` against a real cluster (kind's nodes run a real kubelet); off in the
    /// simulation, where a scenario's static nodes have no kubelet but this one.
    pub cloud_nodes_only: bool,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        Self {
            startup_taint_removal_ms: 10_000,
            pod_start_ms: 5_000,
            node_gone_ms: 40_000,
            ready_delay_ms: 5_000,
            device_plugin_delay_ms: 20_000,
            startup_taint_keys: BTreeSet::new(),
            cloud_nodes_only: false,
        }
    }
}

/// What one tick did. Node names and pod keys are in the order the tick acted on them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TickReport {
    /// Nodes created for instances that finished booting.
    pub registered: Vec<String>,
    /// Instances ready to join whose instance type the catalog does not know (not registered:
    /// a node without capacity would hide the problem).
    pub unknown_instance_types: Vec<String>,
    /// Nodes that finished starting and are now Ready.
    pub nodes_ready: Vec<String>,
    /// Nodes whose device plugins reported their extended resources.
    pub devices_reported: Vec<String>,
    /// Nodes whose startup taints were removed.
    pub startup_taints_removed: Vec<String>,
    /// Nodes set `Ready=False` because their instance stopped or went away.
    pub nodes_not_ready: Vec<String>,
    /// Nodes deleted after `node_gone_ms`.
    pub nodes_deleted: Vec<String>,
    /// Nodes whose delete only marked them (finalizers: the controller finishes the job).
    pub nodes_marked: Vec<String>,
    /// Pods accepted by a kubelet (`status.startTime` written, containers starting).
    pub pods_accepted: Vec<ObjectKey>,
    /// Pods now Running and Ready.
    pub pods_started: Vec<ObjectKey>,
    /// Terminating pods removed once their grace period ended.
    pub pods_terminated: Vec<ObjectKey>,
    /// Pods removed because their node no longer exists (PodGC's orphan rule).
    pub pods_orphaned: Vec<ObjectKey>,
    /// Pods deleted by the taint eviction controller (a `NoExecute` taint they did not tolerate,
    /// or no longer: [`taint_eviction`]).
    pub pods_taint_evicted: Vec<ObjectKey>,
    /// Writes that lost a race with another writer (retried on a later tick).
    pub conflicts: usize,
}

/// The kubelet stand-in (one for the whole cluster: it plays every node's kubelet).
pub struct Kubelet {
    kube: Arc<dyn KubeApi>,
    clock: Arc<dyn Clock>,
    cloud: Arc<FakeCloud>,
    config: KubeletConfig,
    /// Instance ids whose Node was registered (or found already registered).
    registered: Mutex<BTreeSet<String>>,
    /// Watch-fed views of what the kubelet reads each tick (a kubelet watches its pods too).
    cache: futures::lock::Mutex<Cache>,
    /// Pods last seen settled (a final or Running phase, not deleting, bound), by the address of
    /// the shared object the cache holds, with their node: while the cache hands out that same
    /// object the pod has not changed, and all a tick asks of it is whether its node still
    /// exists. Holding the object keeps its address from being reused. (perf: reading every
    /// pod's fields every tick was a quarter of a 3,000-pod simulation.)
    settled: Mutex<BTreeMap<usize, (Arc<Value>, String)>>,
    /// The pod and node cache revisions ([`Reflector::changes`]) at which a pods pass found
    /// every pod unbound or settled: until either cache changes, a pass would do nothing (no
    /// pod's step depends on the time), so none runs. (perf: the pass over 3,000 settled pods
    /// each simulated second was a tenth of a burst's steady state.)
    quiet_at: Mutex<Option<(u64, u64)>>,
    /// Nodes last seen settled ([`nodes::settled_node`]: Ready, untainted by the kubelet's and
    /// the agents' startup, devices reported), by the address of the shared object, with their
    /// instance id: while the cache hands out that object and its instance is alive, nothing a
    /// tick does applies to it. (perf: the checks over 2,000 settled nodes were a sixth of a
    /// fleet's idle step.)
    settled_nodes: Mutex<BTreeMap<usize, (Arc<Value>, String)>>,
}

struct Cache {
    nodes: Reflector<Value>,
    pods: Reflector<Value>,
    claims: Reflector<Value>,
}

impl Default for Cache {
    fn default() -> Self {
        Self {
            nodes: Reflector::new(ResourceKind::NODE),
            pods: Reflector::new(ResourceKind::POD),
            claims: Reflector::new(ResourceKind::NODE_CLAIM),
        }
    }
}

impl Kubelet {
    pub fn new(
        kube: Arc<dyn KubeApi>,
        clock: Arc<dyn Clock>,
        cloud: Arc<FakeCloud>,
        config: KubeletConfig,
    ) -> Self {
        Self {
            kube,
            clock,
            cloud,
            config,
            registered: Mutex::new(BTreeSet::new()),
            cache: futures::lock::Mutex::new(Cache::default()),
            settled: Mutex::new(BTreeMap::new()),
            quiet_at: Mutex::new(None),
            settled_nodes: Mutex::new(BTreeMap::new()),
        }
    }

    /// Every Node, as of now.
    async fn list_nodes(&self) -> Result<Vec<Arc<Value>>, KubeError> {
        let mut cache = self.cache.lock().await;
        cache.nodes.sync(self.kube.as_ref()).await?;
        Ok(cache.nodes.to_vec())
    }

    /// Every NodeClaim, as of now.
    async fn list_claims(&self) -> Result<Vec<Arc<Value>>, KubeError> {
        let mut cache = self.cache.lock().await;
        cache.claims.sync(self.kube.as_ref()).await?;
        Ok(cache.claims.to_vec())
    }

    pub fn config(&self) -> &KubeletConfig {
        &self.config
    }

    /// One pass: register booted instances, follow instance state on nodes (NotReady, deletion),
    /// remove due startup taints, then run pods (start, terminate, collect orphans).
    ///
    /// Errors of the seam other than a lost race end the tick early and are returned; whatever
    /// was done stays done, and the next tick carries on from the objects.
    pub async fn tick(&self) -> Result<TickReport, KubeError> {
        let now = self.clock.now();
        let mut report = TickReport::default();
        self.register(now, &mut report).await?;
        self.nodes(now, &mut report).await?;
        self.pods(now, &mut report).await?;
        Ok(report)
    }

    fn registered(&self) -> MutexGuard<'_, BTreeSet<String>> {
        self.registered
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Whether a write error means another writer got there first (or the object went away): the
/// object is looked at again on the next tick.
fn lost_race(error: &KubeError) -> bool {
    matches!(error, KubeError::Conflict(_) | KubeError::NotFound(_))
}
