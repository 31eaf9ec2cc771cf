//! The end-to-end suite's harness: what every test in `tests/` uses to reach the cluster under
//! test, to wait on it with a time bound, and to say what it saw when a check fails.
//!
//! The target is named by environment variables, so the same tests can run against any cluster
//! that has the Karpenter controller installed:
//!
//! | variable | meaning |
//! |---|---|
//! | `E2E_KUBECONFIG` | the cluster's kubeconfig; unset: every test skips, saying so |
//! | `E2E_AWS_ENDPOINT` | the fake cloud's endpoint (`http://host:port`): its control API (`/fakecloud/...`) and EC2; unset: tests that need it skip |
//! | `E2E_CLUSTER_NAME` | the cluster name the examples' discovery tags and node role are written for (default `demo`) |
//! | `E2E_CONTROLLER_LOGS` | controller log files, separated by `:`; their last lines are printed on failure |
//! | `E2E_TIMINGS` | a file each case appends `name, seconds, bound, outcome` to (tab-separated); `cargo xtask e2e` prints every case's margin from it |
//!
//! `cargo xtask e2e` sets them (against `karpenter-sim serve --no-controller`, or with
//! `--registrar` serve `--no-kubelet` plus the node registrar `karpenter-sim cloud`, and two
//! `karpenter controller` replicas); `cargo xtask e2e-k3s` against k3s in a container;
//! `e2e/kind/up.sh` against kind. Any other cluster works the same way as long as the nodes come
//! from the fake cloud: run `karpenter-sim cloud --kubeconfig K` against it, install the
//! controller with `AWS_ENDPOINT_URL` at the registrar, and set `E2E_AWS_ENDPOINT` to it.
//!
//! Every test owns its objects: its NodePools, Deployments and PDBs carry the label
//! [`CASE_LABEL`]`=<case>`, its NodePools taint their nodes with it and its pods select and
//! tolerate it, so the tests run side by side against one cluster without landing pods on one
//! another's nodes.

// Waiting on a real cluster: its deadlines are wall-clock ones (nothing here feeds a seeded
// decision of the controller).
#![allow(clippy::disallowed_methods)]

pub mod checks;
pub mod cloud;
pub mod kinds;
pub mod manifests;

use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::ApiResource;
use serde_json::{Value, json};

pub use cloud::Cloud;

/// The label (and taint key) that marks a test's objects and nodes.
pub const CASE_LABEL: &str = "karpenter-e2e.io/case";
/// The namespace the tests' workloads run in.
pub const NAMESPACE: &str = "default";
/// How often conditions are polled.
pub const POLL: Duration = Duration::from_millis(1_000);
/// The field manager of the suite's server-side applies.
const FIELD_MANAGER: &str = "karpenter-e2e";

/// Why a check failed.
#[derive(Debug, thiserror::Error)]
pub enum E2eError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("kubeconfig {0}: {1}")]
    Kubeconfig(PathBuf, String),
    #[error("fake cloud: {0}")]
    Cloud(String),
    #[error("manifest: {0}")]
    Manifest(String),
    #[error("check failed: {0}")]
    Check(String),
}

/// What the tests' results are.
pub type Outcome<T> = Result<T, E2eError>;

/// A failed check, as an error.
pub fn fail<T>(message: impl Into<String>) -> Outcome<T> {
    Err(E2eError::Check(message.into()))
}

/// The cluster under test, from the environment.
#[derive(Clone, Debug)]
pub struct Target {
    pub kubeconfig: PathBuf,
    pub aws_endpoint: Option<String>,
    pub cluster_name: String,
    pub controller_logs: Vec<PathBuf>,
    /// Where each case appends its name, duration, bound and outcome (`E2E_TIMINGS`), so the
    /// harness can report every case's margin, passed or not.
    pub timings: Option<PathBuf>,
}

impl Target {
    /// The target the environment names; `None` when `E2E_KUBECONFIG` is unset.
    pub fn from_env() -> Option<Self> {
        let kubeconfig = std::env::var_os("E2E_KUBECONFIG").filter(|v| !v.is_empty())?;
        Some(Self {
            kubeconfig: PathBuf::from(kubeconfig),
            aws_endpoint: std::env::var("E2E_AWS_ENDPOINT")
                .ok()
                .filter(|v| !v.is_empty()),
            cluster_name: std::env::var("E2E_CLUSTER_NAME")
                .ok()
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| "demo".into()),
            controller_logs: std::env::var("E2E_CONTROLLER_LOGS")
                .unwrap_or_default()
                .split(':')
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
                .collect(),
            timings: std::env::var_os("E2E_TIMINGS")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
        })
    }

    async fn client(&self) -> Outcome<kube::Client> {
        let bad = |e: String| E2eError::Kubeconfig(self.kubeconfig.clone(), e);
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig).map_err(|e| bad(e.to_string()))?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| bad(e.to_string()))?;
        kube::Client::try_from(config).map_err(E2eError::Kube)
    }
}

/// One test against the target: its name (the [`CASE_LABEL`] value), a client, the fake cloud
/// when there is one, and what it has noted so far (printed on failure).
pub struct Case {
    pub name: String,
    pub target: Target,
    pub client: kube::Client,
    cloud: Option<Cloud>,
    started: Instant,
    notes: std::sync::Mutex<Vec<String>>,
}

impl Case {
    /// The case `name` against the environment's target; `None` (after printing why) when no
    /// target is configured, or when `needs_cloud` and there is no fake cloud endpoint.
    pub async fn start(name: &str, needs_cloud: bool) -> Option<Self> {
        let Some(target) = Target::from_env() else {
            eprintln!(
                "e2e {name}: skipped: no target (set E2E_KUBECONFIG, or run `cargo xtask e2e`)"
            );
            return None;
        };
        if needs_cloud && target.aws_endpoint.is_none() {
            eprintln!(
                "e2e {name}: skipped: needs the fake cloud's control API (set E2E_AWS_ENDPOINT)"
            );
            return None;
        }
        let client = match target.client().await {
            Ok(client) => client,
            Err(e) => panic!("e2e {name}: cannot reach the target: {e}"),
        };
        Some(Self {
            name: name.to_string(),
            cloud: target.aws_endpoint.clone().map(Cloud::new),
            target,
            client,
            started: Instant::now(),
            notes: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// Runs `body` within `bound`; on failure or timeout prints what the case involved and
    /// panics; always deletes the case's objects afterwards.
    pub async fn run<F: Future<Output = Outcome<()>>>(&self, bound: Duration, body: F) {
        let result = tokio::time::timeout(bound, body).await;
        let failure = match result {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!("did not finish within {} s", bound.as_secs())),
        };
        if let Some(failure) = &failure {
            self.diagnose(failure).await;
        }
        self.cleanup().await;
        self.record_timing(bound, failure.is_none());
        match failure {
            None => eprintln!(
                "e2e {}: passed in {:.0} s",
                self.name,
                self.started.elapsed().as_secs_f64()
            ),
            Some(failure) => panic!("e2e {}: {failure}", self.name),
        }
    }

    /// Appends `name<TAB>seconds<TAB>bound seconds<TAB>passed|failed` to the timings file, when
    /// there is one (one short `O_APPEND` write a case, so parallel cases do not interleave).
    fn record_timing(&self, bound: Duration, passed: bool) {
        let Some(path) = &self.target.timings else {
            return;
        };
        let line = format!(
            "{}\t{:.1}\t{}\t{}\n",
            self.name,
            self.started.elapsed().as_secs_f64(),
            bound.as_secs(),
            if passed { "passed" } else { "failed" }
        );
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut file| std::io::Write::write_all(&mut file, line.as_bytes()));
        if let Err(e) = written {
            eprintln!(
                "e2e {}: could not record its timing in {}: {e}",
                self.name,
                path.display()
            );
        }
    }

    /// The fake cloud (the case was started with `needs_cloud`).
    pub fn cloud(&self) -> Outcome<&Cloud> {
        self.cloud
            .as_ref()
            .ok_or_else(|| E2eError::Cloud("no E2E_AWS_ENDPOINT".into()))
    }

    /// Notes a step (printed as it happens and again in the failure report).
    pub fn note(&self, line: impl Into<String>) {
        let line = format!(
            "[{:>5.1} s] {}",
            self.started.elapsed().as_secs_f64(),
            line.into()
        );
        eprintln!("e2e {}: {line}", self.name);
        self.notes.lock().expect("notes lock").push(line);
    }

    /// The label selector of the case's objects.
    pub fn selector(&self) -> String {
        format!("{CASE_LABEL}={}", self.name)
    }

    fn api(&self, kind: &ApiResource, namespaced: bool) -> Api<DynamicObject> {
        if namespaced {
            Api::namespaced_with(self.client.clone(), NAMESPACE, kind)
        } else {
            Api::all_with(self.client.clone(), kind)
        }
    }

    /// Server-side applies `object` (its kind from `apiVersion`/`kind`).
    pub async fn apply(&self, object: &Value) -> Outcome<()> {
        let (kind, namespaced) = kinds::of(object)?;
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.api(&kind, namespaced)
            .patch(name, &params, &Patch::Apply(object))
            .await?;
        self.note(format!("applied {} {name}", kind.kind));
        Ok(())
    }

    /// Merge-patches one object.
    pub async fn patch(&self, kind: &kinds::Kind, name: &str, patch: Value) -> Outcome<()> {
        self.api(&kind.resource(), kind.namespaced)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        self.note(format!("patched {} {name}: {patch}", kind.kind));
        Ok(())
    }

    /// Deletes one object (absent is fine).
    pub async fn delete(&self, kind: &kinds::Kind, name: &str) -> Outcome<()> {
        match self
            .api(&kind.resource(), kind.namespaced)
            .delete(name, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
        self.note(format!("deleted {} {name}", kind.kind));
        Ok(())
    }

    /// One object, `None` when absent.
    pub async fn get(&self, kind: &kinds::Kind, name: &str) -> Outcome<Option<Value>> {
        let object = self
            .api(&kind.resource(), kind.namespaced)
            .get_opt(name)
            .await?;
        Ok(object.map(to_value))
    }

    /// The objects of `kind` matching `selector` (empty: all).
    pub async fn list(&self, kind: &kinds::Kind, selector: &str) -> Outcome<Vec<Value>> {
        let params = if selector.is_empty() {
            ListParams::default()
        } else {
            ListParams::default().labels(selector)
        };
        let list = self
            .api(&kind.resource(), kind.namespaced)
            .list(&params)
            .await?;
        Ok(list.items.into_iter().map(to_value).collect())
    }

    /// Polls `check` every [`POLL`] until it returns `Some`; the run's bound limits the wait.
    pub async fn until<T, F, Fut>(&self, what: &str, mut check: F) -> Outcome<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Outcome<Option<T>>>,
    {
        let start = Instant::now();
        self.note(format!("waiting until {what}"));
        loop {
            if let Some(value) = check().await? {
                self.note(format!(
                    "{what}: after {:.0} s",
                    start.elapsed().as_secs_f64()
                ));
                return Ok(value);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Checks `check` keeps holding for `hold` (polled every [`POLL`]); the first violation is
    /// the error.
    pub async fn holds<F, Fut>(&self, what: &str, hold: Duration, mut check: F) -> Outcome<()>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Outcome<Result<(), String>>>,
    {
        self.note(format!("checking for {} s that {what}", hold.as_secs()));
        let start = Instant::now();
        while start.elapsed() < hold {
            if let Err(why) = check().await? {
                return fail(format!("{what}: {why}"));
            }
            tokio::time::sleep(POLL).await;
        }
        self.note(format!("{what}: held for {} s", hold.as_secs()));
        Ok(())
    }

    /// The case's NodeClaims of NodePool `pool`.
    pub async fn node_claims(&self, pool: &str) -> Outcome<Vec<Value>> {
        self.list(&kinds::NODE_CLAIM, &format!("karpenter.sh/nodepool={pool}"))
            .await
    }

    /// The case's NodeClaims of NodePool `pool` once there is at least one and each has
    /// registered (`status.nodeName` set). A pod can run on a node before the controller has
    /// recorded the node on its claim, so a test that maps pods to claims waits for this.
    pub async fn registered_claims(&self, pool: &str) -> Outcome<Vec<Value>> {
        self.until(
            &format!("NodePool {pool}'s NodeClaims registered"),
            || async move {
                let claims = self.node_claims(pool).await?;
                let registered = !claims.is_empty()
                    && claims.iter().all(|c| c["status"]["nodeName"].is_string());
                Ok(registered.then_some(claims))
            },
        )
        .await
    }

    /// The nodes of NodePool `pool`.
    pub async fn nodes(&self, pool: &str) -> Outcome<Vec<Value>> {
        self.list(&kinds::NODE, &format!("karpenter.sh/nodepool={pool}"))
            .await
    }

    /// The pods matching `selector` in [`NAMESPACE`].
    pub async fn pods(&self, selector: &str) -> Outcome<Vec<Value>> {
        self.list(&kinds::POD, selector).await
    }

    /// Waits until `count` pods match `selector`, all Running and bound to nodes of `pool`; the
    /// pods.
    pub async fn until_running_on(
        &self,
        selector: &str,
        count: usize,
        pool: &str,
    ) -> Outcome<Vec<Value>> {
        self.until(
            &format!("{count} pod(s) {selector} Running on NodePool {pool}'s nodes"),
            || async move {
                let pods = self.pods(selector).await?;
                let nodes: Vec<String> = self.nodes(pool).await?.iter().map(name).collect();
                let running = pods
                    .iter()
                    .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
                    .filter(|p| p["status"]["phase"] == "Running")
                    .filter(|p| {
                        p["spec"]["nodeName"]
                            .as_str()
                            .is_some_and(|n| nodes.iter().any(|m| m == n))
                    })
                    .count();
                Ok((running == count && pods.len() == count).then_some(pods))
            },
        )
        .await
    }

    /// Deletes the case's Deployments, PDBs, NodePools and EC2NodeClasses (their NodeClaims
    /// and nodes go with the NodePools); does not wait.
    async fn cleanup(&self) {
        let selector = self.selector();
        for kind in [
            &kinds::DEPLOYMENT,
            &kinds::PDB,
            &kinds::NODE_POOL,
            &kinds::EC2_NODE_CLASS,
        ] {
            let Ok(objects) = self.list(kind, &selector).await else {
                continue;
            };
            for object in objects {
                let _ = self.delete(kind, &name(&object)).await;
            }
        }
    }

    /// Prints the case's notes, its objects (NodePools, NodeClaims, nodes, pods), the events
    /// about them and the controllers' last log lines.
    async fn diagnose(&self, failure: &str) {
        let mut report = vec![format!("==== e2e {} FAILED: {failure}", self.name)];
        report.push("---- steps".into());
        report.extend(self.notes.lock().expect("notes lock").iter().cloned());
        let mut involved = std::collections::BTreeSet::new();
        let selector = self.selector();
        let pools = self
            .list(&kinds::NODE_POOL, &selector)
            .await
            .unwrap_or_default();
        let mut objects: Vec<(&str, Value)> = Vec::new();
        for pool in &pools {
            let pool_name = name(pool);
            for claim in self.node_claims(&pool_name).await.unwrap_or_default() {
                objects.push(("NodeClaim", claim));
            }
            for node in self.nodes(&pool_name).await.unwrap_or_default() {
                objects.push(("Node", node));
            }
        }
        objects.extend(pools.into_iter().map(|p| ("NodePool", p)));
        for pod in self.pods(&selector).await.unwrap_or_default() {
            objects.push(("Pod", pod));
        }
        report.push("---- objects".into());
        for (kind, object) in &objects {
            involved.insert(name(object));
            report.push(format!("{kind} {}: {}", name(object), summary(object)));
        }
        report.push("---- events about them".into());
        // Both views: a real API server shows every Event in both (the in-memory one keeps
        // them apart), so an Event seen in both is printed once.
        let mut seen = std::collections::BTreeSet::new();
        for (kind, about, message) in [
            (&kinds::EVENT, "involvedObject", "message"),
            (&kinds::EVENT_V1, "regarding", "note"),
        ] {
            let events = Api::<DynamicObject>::all_with(self.client.clone(), &kind.resource())
                .list(&ListParams::default())
                .await
                .map(|l| l.items.into_iter().map(to_value).collect::<Vec<_>>())
                .unwrap_or_default();
            for event in events {
                let object = event[about]["name"].as_str().unwrap_or_default();
                if !involved.contains(object) || !seen.insert(name(&event)) {
                    continue;
                }
                report.push(format!(
                    "{} {}/{object}: {} {}",
                    event["type"].as_str().unwrap_or_default(),
                    event[about]["kind"].as_str().unwrap_or_default(),
                    event["reason"].as_str().unwrap_or_default(),
                    event[message].as_str().unwrap_or_default()
                ));
            }
        }
        for path in &self.target.controller_logs {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            report.push(format!(
                "---- {} (last {} lines)",
                path.display(),
                tail.len()
            ));
            report.extend(tail.into_iter().rev().map(String::from));
        }
        eprintln!("{}", report.join("\n"));
    }
}

fn to_value(object: DynamicObject) -> Value {
    serde_json::to_value(object).unwrap_or(Value::Null)
}

/// `metadata.name`.
pub fn name(object: &Value) -> String {
    object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A one-line summary of an object for the failure report: labels that matter, phase,
/// conditions, node, deletion.
fn summary(object: &Value) -> String {
    let labels = &object["metadata"]["labels"];
    let conditions: Vec<String> = object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let mut text = format!(
                "{}={}",
                c["type"].as_str().unwrap_or_default(),
                c["status"].as_str().unwrap_or_default()
            );
            if let Some(message) = c["message"].as_str().filter(|m| !m.is_empty()) {
                text.push_str(&format!(" ({message})"));
            }
            text
        })
        .collect();
    json!({
        "instanceType": labels["node.kubernetes.io/instance-type"],
        "capacityType": labels["karpenter.sh/capacity-type"],
        "zone": labels["topology.kubernetes.io/zone"],
        "providerID": object["spec"]["providerID"].as_str().or(object["status"]["providerID"].as_str()),
        "nodeName": object["spec"]["nodeName"].as_str().or(object["status"]["nodeName"].as_str()),
        "phase": object["status"]["phase"],
        "conditions": conditions,
        "deleting": object["metadata"]["deletionTimestamp"],
        "taints": object["spec"]["taints"],
    })
    .to_string()
}
