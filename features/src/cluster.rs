//! [`SimWorld`]: the cucumber world over the simulated cluster.
//!
//! `Given` steps collect a [`Setup`] (manifests, cloud knobs, the seed); the first step that
//! needs the cluster builds the sim `World` from it, so the order of `Given`s never matters and
//! a knob can never be turned after the world it shapes exists. From then on, time only moves
//! when a step steps the world: `within 2 minutes ...` steps until the condition holds or the
//! simulated deadline passes, which takes milliseconds of wall time.
//!
//! Every step of the world also runs the scenario's Deployments (a ReplicaSet stand-in) and
//! checks the sim's invariants, failing at once on a violation: whatever a scenario asserts, it
//! also asserts that no instance leaked, no NodePool exceeded its limits, no node is
//! overcommitted and no NodeClaim is stuck.
//!
//! Every failure names the seed and the command that replays the scenario.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use fakecloud::Pool;
use fakekube::ApiServer;
use jiff::Timestamp;
use karpenter_core::seams::ec2::Instance;
use karpenter_core::seams::kube::{DeleteOptions, DeleteOutcome, ObjectKey, Patch, ResourceKind};
use karpenter_core::seams::{Clock, Ec2, KubeApi, KubeError};
use karpenter_sim::scenario::{CloudKnobs, Scenario};
use karpenter_sim::world::{EPOCH, World};
use serde_json::Value;

use crate::history::History;
use crate::manifests;
use crate::observe::Snapshot;
use karpenter_sim::workloads::{DaemonSet, Deployment};

/// The seed of a scenario that does not say `Given the seed N`.
pub const DEFAULT_SEED: u64 = 1;

/// How long a scenario's world may run at most (a guard, not a budget: steps say how long they
/// wait).
const WORLD_DURATION: Duration = Duration::from_secs(24 * 3600);

/// What `Given` steps collected before the world exists.
#[derive(Clone, Debug, Default)]
pub struct Setup {
    /// Cluster objects (NodePools, EC2NodeClasses, Namespaces), applied at start in this order.
    pub documents: Vec<Value>,
    /// Fakecloud and API-server knobs the world is built with.
    pub knobs: CloudKnobs,
    /// Pools whose free capacity is set right after the world is built.
    pub pool_capacity: Vec<(Pool, u32)>,
}

/// The node an action step singled out ("the node running "web""), as it was then. Later steps
/// say "that node", "its NodeClaim", "its instance", and ask the [`History`] about them after
/// they are gone.
#[derive(Clone, Debug, PartialEq)]
pub struct Subject {
    pub node: String,
    pub claim: String,
    pub instance_id: String,
    /// When the step singled it out (the time of the action that followed).
    pub at: Timestamp,
}

/// The cucumber world: one scenario's simulated cluster, built on first use.
#[derive(cucumber::World)]
#[world(init = Self::new)]
pub struct SimWorld {
    pub seed: u64,
    /// `feature: scenario`, set before the scenario runs (for failure messages).
    pub scenario: String,
    setup: Setup,
    world: Option<World>,
    /// Why the world could not be built (manifests it refused), once a step tried.
    refused: Option<String>,
    /// Deployments created, by name.
    deployments: BTreeMap<String, Deployment>,
    /// DaemonSets created, by name.
    daemonsets: BTreeMap<String, DaemonSet>,
    /// What every step changed, for the steps that ask about order and timing.
    history: History,
    /// The node the last singling-out step chose.
    subject: Option<Subject>,
    /// Every instance ever seen (any state), by id, and the order they were first seen in.
    launched: BTreeMap<String, Instance>,
    launch_order: Vec<String>,
    /// `launch_order.len()` when the last action step ran: what "new nodes" are counted from.
    baseline: usize,
    /// Results of the last `validate` step.
    pub validated: Vec<karpenter_core::manifest::Checked>,
}

impl fmt::Debug for SimWorld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimWorld")
            .field("seed", &self.seed)
            .field("scenario", &self.scenario)
            .field("simulated", &self.elapsed())
            .field("built", &self.world.is_some())
            .finish()
    }
}

impl SimWorld {
    pub fn new() -> Self {
        Self {
            seed: DEFAULT_SEED,
            scenario: String::new(),
            setup: Setup::default(),
            world: None,
            refused: None,
            deployments: BTreeMap::new(),
            daemonsets: BTreeMap::new(),
            history: History::default(),
            subject: None,
            launched: BTreeMap::new(),
            launch_order: Vec::new(),
            baseline: 0,
            validated: Vec::new(),
        }
    }

    /// Fails the step: `message`, then the seed, simulated time, the state of the world and the
    /// command that replays this scenario.
    pub fn fail(&self, message: impl fmt::Display) -> ! {
        let state = self
            .world
            .as_ref()
            .map(|w| format!("\n{}", Snapshot::read(&w.api, &w.cloud)))
            .unwrap_or_default();
        let name = self
            .scenario
            .split_once(": ")
            .map_or(self.scenario.as_str(), |(_, s)| s);
        panic!(
            "{message}\n--- seed {} at {}s simulated ({}){state}\n--- replay: cargo test -p karpenter-features --test features -- --name '^{}$'",
            self.seed,
            self.elapsed().as_secs(),
            self.scenario,
            regex_escape(name),
        )
    }

    /// Seed, simulated time, what was launched and the state of the world, in a few lines.
    pub fn summary(&self) -> String {
        let launched: Vec<String> = self
            .launch_order
            .iter()
            .filter_map(|id| self.launched.get(id))
            .map(|i| format!("{}/{}/{}", i.instance_type, i.zone, i.capacity_type.label()))
            .collect();
        let state = self
            .world
            .as_ref()
            .map(|w| Snapshot::read(&w.api, &w.cloud).to_string())
            .unwrap_or_else(|| "(no world was built)".to_string());
        format!(
            "--- {} (seed {}, {}s simulated)\nlaunched: {}\n{state}",
            self.scenario,
            self.seed,
            self.elapsed().as_secs(),
            launched.join(", ")
        )
    }

    /// The simulated clock (the epoch before the world is built).
    pub fn now(&self) -> Timestamp {
        self.world
            .as_ref()
            .map_or_else(|| EPOCH.parse().unwrap_or_default(), |w| w.clock.now())
    }

    /// What the steps so far changed, and when.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// Simulated time since the world was built (zero before).
    pub fn elapsed(&self) -> Duration {
        let start: Timestamp = EPOCH.parse().unwrap_or_default();
        self.world.as_ref().map_or(Duration::ZERO, |w| {
            w.clock.now().duration_since(start).unsigned_abs()
        })
    }

    // ---- setup (Given) ----

    /// The setup, for a `Given` step to add to. Fails once the world exists: a knob turned after
    /// the fact would silently not apply.
    pub fn setup(&mut self) -> &mut Setup {
        if self.world.is_some() {
            self.fail(
                "setup step after the cluster started: put Given steps before the first When/Then",
            );
        }
        &mut self.setup
    }

    /// Adds cluster objects to the setup. The same object named twice (two NodePools from one
    /// file sharing their EC2NodeClass) is taken once; two different objects with one name fail.
    pub fn add_documents(&mut self, documents: impl IntoIterator<Item = Value>) {
        for document in documents {
            let same = |v: &Value| {
                v["kind"] == document["kind"]
                    && v["metadata"]["name"] == document["metadata"]["name"]
            };
            match self.setup().documents.iter().find(|v| same(v)) {
                Some(existing) if *existing == document => {}
                Some(_) => self.fail(format!(
                    "two different {} objects named {} in the setup",
                    document["kind"], document["metadata"]["name"]
                )),
                None => self.setup.documents.push(document),
            }
        }
    }

    /// The setup's `kind` object named `name`, to change before the world is built (a NodePool's
    /// terminationGracePeriod, say).
    pub fn setup_document(&mut self, kind: &str, name: &str) -> &mut Value {
        let found = self
            .setup()
            .documents
            .iter()
            .position(|d| d["kind"] == kind && d["metadata"]["name"] == name);
        match found {
            Some(index) => &mut self.setup.documents[index],
            None => self.fail(format!("the setup has no {kind} {name}")),
        }
    }

    /// The knobs the world will be built with.
    pub fn knobs(&mut self) -> &mut CloudKnobs {
        &mut self.setup().knobs
    }

    // ---- the world ----

    /// Builds the world from the setup if that has not happened yet. Returns why the cluster
    /// refused the setup's manifests, if it did.
    pub async fn start(&mut self) -> Result<(), String> {
        if self.world.is_some() {
            return Ok(());
        }
        if let Some(refused) = &self.refused {
            return Err(refused.clone());
        }
        let mut knobs = self.setup.knobs.clone();
        if knobs.discovery_tag.is_none() {
            knobs.discovery_tag = manifests::discovery_tag(&self.setup.documents);
        }
        let scenario = Scenario {
            name: self.scenario.clone(),
            description: String::new(),
            duration: WORLD_DURATION,
            step: Duration::from_secs(1),
            manifests: manifests::join(&self.setup.documents),
            cloud: knobs,
            workloads: Vec::new(),
            faults: Default::default(),
        };
        match World::new(self.seed, scenario).await {
            Ok(world) => {
                for (pool, units) in &self.setup.pool_capacity {
                    world.cloud.set_pool_capacity(pool, *units);
                }
                let parameters = world.cloud.parameters();
                for (family, release) in manifests::pinned_ami_releases(&self.setup.documents) {
                    let published = parameters.keys().any(|k| {
                        k.contains(&format!("-{release}/"))
                            || k.contains(&format!("/{}/", release.trim_start_matches('v')))
                    });
                    if !published {
                        world.cloud.publish_ami(family, &release);
                    }
                }
                self.world = Some(world);
                Ok(())
            }
            Err(err) => {
                self.refused = Some(err.to_string());
                Err(err.to_string())
            }
        }
    }

    /// The world, built on first use; fails the step if the cluster refused the setup.
    pub async fn world(&mut self) -> &mut World {
        if let Err(refused) = self.start().await {
            self.fail(format!("the cluster refused the setup: {refused}"));
        }
        match self.world.as_mut() {
            Some(world) => world,
            None => unreachable!("start() built the world"),
        }
    }

    /// Why the cluster refused the setup (building it first if no step has yet).
    pub async fn refusal(&mut self) -> Option<String> {
        self.start().await.err()
    }

    /// What the world looks like now.
    pub async fn snapshot(&mut self) -> Snapshot {
        let world = self.world().await;
        Snapshot::read(&world.api, &world.cloud)
    }

    /// One pass of every Deployment's ReplicaSet stand-in and every DaemonSet's stand-in, with
    /// the API server's injected faults switched off: faults are for the controller, not for the
    /// scenario's own hands (the world does the same for its built-in workloads).
    async fn run_deployments(&mut self) {
        let Some(world) = self.world.as_ref() else {
            return;
        };
        let saved = world.api.suspend_faults();
        let pods = world.api.objects(&ResourceKind::POD);
        let mut result = Ok(());
        for deployment in self.deployments.values_mut() {
            result = deployment
                .reconcile(world.api.as_ref(), &pods)
                .await
                .map(drop);
            if result.is_err() {
                break;
            }
        }
        if result.is_ok() && !self.daemonsets.is_empty() {
            let nodes = world.api.objects(&ResourceKind::NODE);
            for daemonset in self.daemonsets.values_mut() {
                result = daemonset
                    .reconcile(world.api.as_ref(), &pods, &nodes)
                    .await
                    .map(drop);
                if result.is_err() {
                    break;
                }
            }
        }
        world.api.resume_faults(saved);
        if let Err(err) = result {
            self.fail(format!(
                "the ReplicaSet stand-in could not write pods: {err}"
            ));
        }
    }

    /// Remembers every instance the cloud knows, so "launched" counts include instances that
    /// were already replaced.
    fn track_instances(&mut self) {
        let Some(world) = self.world.as_ref() else {
            return;
        };
        for instance in world.cloud.instances() {
            if !self.launched.contains_key(&instance.instance_id) {
                self.launch_order.push(instance.instance_id.clone());
                self.launched.insert(instance.instance_id.clone(), instance);
            }
        }
    }

    /// One step of the world: Deployments, then the world's own step (workloads, cloud, kubelet,
    /// scheduler, controller), then the invariants.
    pub async fn step(&mut self) {
        self.world().await;
        self.run_deployments().await;
        let ran_at = self.now();
        let result = match self.world.as_mut() {
            Some(world) => world.step().await,
            None => unreachable!("built above"),
        };
        if let Err(err) = result {
            self.fail(format!("the world could not step: {err}"));
        }
        if let Some(world) = self.world.as_ref() {
            self.history.observe(&world.api, &world.cloud, ran_at);
        }
        self.track_instances();
        let broken: Vec<String> = self
            .world
            .as_ref()
            .map(|w| w.invariants.results())
            .unwrap_or_default()
            .into_iter()
            .filter(|i| !i.held)
            .map(|i| format!("{}: {}", i.name, i.first.unwrap_or_default()))
            .collect();
        if !broken.is_empty() {
            self.fail(format!("invariant broken: {}", broken.join("; ")));
        }
    }

    /// Lets `duration` of simulated time pass.
    pub async fn run_for(&mut self, duration: Duration) {
        self.world().await;
        let until = self.elapsed() + duration;
        while self.elapsed() < until {
            self.step().await;
        }
    }

    /// Steps the world until `check` passes, failing with its last complaint if it has not
    /// within `limit` of simulated time (checked before the first step too).
    pub async fn wait_until(
        &mut self,
        limit: Duration,
        check: impl Fn(&Snapshot) -> Result<(), String>,
    ) -> Snapshot {
        self.world().await;
        let deadline = self.elapsed() + limit;
        loop {
            let snapshot = self.snapshot().await;
            match check(&snapshot) {
                Ok(()) => return snapshot,
                Err(why) if self.elapsed() >= deadline => {
                    self.fail(format!("not within {}s: {why}", limit.as_secs()))
                }
                Err(_) => self.step().await,
            }
        }
    }

    /// Steps the world for `duration`, failing as soon as `check` does not hold.
    pub async fn holds_for(
        &mut self,
        duration: Duration,
        check: impl Fn(&Snapshot) -> Result<(), String>,
    ) {
        self.world().await;
        let start = self.elapsed();
        let until = start + duration;
        loop {
            let snapshot = self.snapshot().await;
            if let Err(why) = check(&snapshot) {
                self.fail(format!(
                    "stopped holding after {}s: {why}",
                    (self.elapsed() - start).as_secs()
                ));
            }
            if self.elapsed() >= until {
                return;
            }
            self.step().await;
        }
    }

    // ---- actions (When) ----

    /// Marks "now" for [`SimWorld::launched_since_mark`]: every action step calls it.
    pub fn mark(&mut self) {
        self.track_instances();
        self.baseline = self.launch_order.len();
    }

    /// Every instance ever launched, in launch order.
    pub fn launched(&mut self) -> Vec<Instance> {
        self.track_instances();
        self.launch_order
            .iter()
            .filter_map(|id| self.launched.get(id).cloned())
            .collect()
    }

    /// Instances launched since the last action step.
    pub fn launched_since_mark(&mut self) -> Vec<Instance> {
        self.track_instances();
        self.launch_order[self.baseline.min(self.launch_order.len())..]
            .iter()
            .filter_map(|id| self.launched.get(id).cloned())
            .collect()
    }

    /// Creates a Deployment: its pods exist when this returns.
    pub async fn create_deployment(&mut self, deployment: Deployment) {
        self.world().await;
        self.mark();
        if self.deployments.contains_key(&deployment.name) {
            self.fail(format!("Deployment {} exists already", deployment.name));
        }
        self.deployments.insert(deployment.name.clone(), deployment);
        self.run_deployments().await;
    }

    /// The Deployment `name`, which a step created earlier.
    pub fn deployment(&mut self, name: &str) -> &mut Deployment {
        if !self.deployments.contains_key(name) {
            self.fail(format!("no Deployment {name} was created"));
        }
        match self.deployments.get_mut(name) {
            Some(deployment) => deployment,
            None => unreachable!("checked above"),
        }
    }

    /// Sets a Deployment's replica count; pods are added or removed at once.
    pub async fn scale(&mut self, name: &str, replicas: usize) {
        self.world().await;
        self.mark();
        self.deployment(name).replicas = replicas;
        self.run_deployments().await;
    }

    /// Deletes a Deployment and its pods.
    pub async fn delete_deployment(&mut self, name: &str) {
        self.scale(name, 0).await;
        self.deployments.remove(name);
    }

    /// Applies one manifest to the running cluster, as `kubectl apply` of a new object would:
    /// a Karpenter object is validated first (an invalid one fails the step, as the API server
    /// would refuse it), a Deployment starts its pods, anything else the API server stores is
    /// created (a PodDisruptionBudget, a Namespace, a DaemonSet, ...).
    pub async fn apply(&mut self, document: Value) {
        let checked = karpenter_core::manifest::check_document(&document);
        if let karpenter_core::manifest::Outcome::Invalid(violations) = &checked.outcome {
            self.fail(format!(
                "{}/{} is invalid: {violations}",
                checked.kind, checked.name
            ));
        }
        if checked.kind == "Deployment" {
            let deployment = Deployment::from_manifest(&document).unwrap_or_else(|e| self.fail(e));
            return self.create_deployment(deployment).await;
        }
        // A DaemonSet is stored (the provisioner reserves room for its pods) and run.
        let daemonset = (checked.kind == "DaemonSet")
            .then(|| DaemonSet::from_manifest(&document).unwrap_or_else(|e| self.fail(e)));
        let kind = match checked.kind.as_str() {
            "NodePool" => ResourceKind::NODE_POOL,
            "EC2NodeClass" => ResourceKind::EC2_NODE_CLASS,
            "Namespace" => ResourceKind::NAMESPACE,
            "PodDisruptionBudget" => ResourceKind::POD_DISRUPTION_BUDGET,
            "DaemonSet" => ResourceKind::DAEMON_SET,
            "PersistentVolumeClaim" => ResourceKind::PERSISTENT_VOLUME_CLAIM,
            "PersistentVolume" => ResourceKind::PERSISTENT_VOLUME,
            "StorageClass" => ResourceKind::STORAGE_CLASS,
            other => self.fail(format!("applying a {other} is not supported")),
        };
        self.world().await;
        self.mark();
        let mut document = document;
        if kind.namespaced && document["metadata"]["namespace"].is_null() {
            document["metadata"]["namespace"] = Value::from("default");
        }
        let result = match self.world.as_ref() {
            Some(world) => {
                let create = async |api: &ApiServer| api.create(&kind, document).await;
                world.api.without_faults(create).await
            }
            None => unreachable!("built above"),
        };
        if let Err(err) = result {
            self.fail(format!(
                "the API server refused {}/{}: {err}",
                checked.kind, checked.name
            ));
        }
        if let Some(daemonset) = daemonset {
            self.daemonsets.insert(daemonset.name.clone(), daemonset);
            self.run_deployments().await;
        }
    }

    /// Deletes an object as a user would (`kubectl delete`), with the API server's injected
    /// faults switched off (they are for the controller).
    pub async fn delete_object(
        &mut self,
        kind: &ResourceKind,
        key: &ObjectKey,
    ) -> Result<DeleteOutcome, KubeError> {
        self.world().await;
        self.mark();
        let world = self.built();
        let delete = async |api: &ApiServer| api.delete(kind, key, &DeleteOptions::default()).await;
        let result = world.api.without_faults(delete).await;
        self.observe_now();
        result
    }

    /// Patches an object as a user would (`kubectl annotate`, `kubectl label`), with the API
    /// server's injected faults switched off.
    pub async fn patch_object(
        &mut self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<Value, KubeError> {
        self.world().await;
        self.mark();
        let world = self.built();
        let result = world
            .api
            .without_faults(async |api: &ApiServer| api.patch(kind, key, patch).await)
            .await;
        self.observe_now();
        result
    }

    /// Terminates an instance through the EC2 API as a user would (the console, a script), with
    /// fakecloud's standing fault rates switched off (they are for the controller). EC2 sends the
    /// state changes to the interruption queue as it would for any termination.
    pub async fn terminate_instance(&mut self, instance_id: &str) -> Result<Vec<String>, String> {
        self.world().await;
        self.mark();
        if let Some(world) = self.world.as_mut() {
            world.note_external_termination(instance_id);
        }
        let world = self.built();
        let mut saved = BTreeMap::new();
        world
            .cloud
            .configure(|c| saved = std::mem::take(&mut c.faults));
        let result = world
            .cloud
            .terminate_instances(&[instance_id.to_string()])
            .await;
        world.cloud.configure(|c| c.faults = saved);
        self.observe_now();
        result.map_err(|e| e.to_string())
    }

    /// The world, which the caller made sure exists.
    fn built(&self) -> &World {
        match self.world.as_ref() {
            Some(world) => world,
            None => unreachable!("the caller built the world"),
        }
    }

    /// Records a scenario's own action at the time it was taken: the next step would attribute
    /// it to the same time, but a `Then` step may ask before any step ran.
    fn observe_now(&mut self) {
        if let Some(world) = self.world.as_ref() {
            let now = world.clock.now();
            self.history.observe(&world.api, &world.cloud, now);
        }
    }

    /// Singles out the one node the pods of `deployment` run on, with its NodeClaim and
    /// instance, for "that node" steps. Fails if its pods are spread over several nodes or none:
    /// a step about "the node running X" must not pick one silently.
    pub async fn single_out(&mut self, deployment: &str) -> Subject {
        let snapshot = self.snapshot().await;
        let nodes = snapshot.nodes_of(deployment);
        let [node] = nodes.as_slice() else {
            let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
            self.fail(format!(
                "the pods of {deployment} run on {} nodes ({names:?}), want exactly one",
                names.len()
            ));
        };
        let Some(claim) = snapshot
            .claims
            .iter()
            .find(|c| c.node_name.as_deref() == Some(node.name.as_str()))
        else {
            self.fail(format!("node {} has no NodeClaim", node.name));
        };
        let Some(instance_id) = node.instance_id.clone() else {
            self.fail(format!("node {} has no provider id", node.name));
        };
        let subject = Subject {
            node: node.name.clone(),
            claim: claim.name.clone(),
            instance_id,
            at: self.now(),
        };
        self.subject = Some(subject.clone());
        subject
    }

    /// The node a step singled out earlier.
    pub fn subject(&self) -> Subject {
        match &self.subject {
            Some(subject) => subject.clone(),
            None => self.fail(
                "no node was singled out: say which one first (e.g. \"the NodeClaim of the node running ...\")",
            ),
        }
    }

    /// Sets the free capacity of one pool now (a capacity wave mid-scenario).
    pub async fn set_pool_capacity(&mut self, pool: Pool, units: u32) {
        self.mark();
        let world = self.world().await;
        if !world.cloud.set_pool_capacity(&pool, units) {
            self.fail(format!("the cloud offers no pool {pool}"));
        }
    }
}

impl Default for SimWorld {
    fn default() -> Self {
        Self::new()
    }
}

/// `text` with regex metacharacters escaped (for the replay command's `--name` filter).
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out
}
