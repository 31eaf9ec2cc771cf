//! `cargo xtask e2e` (alias `e2e-local`): the end-to-end suite against the simulated cluster, run
//! by `cargo xtask test` after the tests (it uses the `karpenter` binary their build made).
//! Starts `karpenter-sim serve --no-controller` (the simulated cluster behind the Kubernetes API
//! and the AWS endpoint with the fake cloud's control API) and two replicas of the real
//! `karpenter controller` against it, then:
//! 1. exactly one replica holds the leader Lease;
//! 2. runs the e2e suite (`e2e/tests`, one process, every test in parallel) against it, with
//!    `E2E_KUBECONFIG`, `E2E_AWS_ENDPOINT`, `E2E_CLUSTER_NAME` and `E2E_CONTROLLER_LOGS` set;
//! 3. while the suite runs: once the first NodeClaim exists, the leader's `/metrics` counts the
//!    claims it created; the leader is SIGKILLed and the standby takes the Lease within the
//!    lease duration plus one retry (so most of the suite is served by the new leader); the
//!    killed replica is restarted and stays standby;
//! 4. after the suite: SIGTERM the leader: it drains, releases the Lease and exits 0, and the
//!    standby takes over.
//!
//! With `--registrar` (the kind topology, [`Topology::Registrar`]) `serve` runs with
//! `--no-kubelet` and a separate `karpenter-sim cloud` process is the fake cloud and every node's
//! kubelet, reaching serve's API server over HTTP through the production Kubernetes adapter; the
//! controllers and the suite use that process's AWS endpoint. `cargo xtask test` runs the
//! provisioning and termination tests that way after the full suite.
//!
//! Before either, the registrar's own tests (`cargo test -p karpenter-sim --features serve
//! --test serve`) run: they need the `serve` feature, which the workspace's test run leaves off.
//!
//! Bounded in time; stops what it started; prints every log on failure.

// The harness waits on real processes, so its deadlines are wall-clock ones (nothing here feeds
// a seeded decision).
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Longest the whole run may take (the suite's own tests are bounded at 420 s each at most).
const RUN_SECONDS_MAX: u64 = 480;
/// Longest `serve` may take to answer `/readyz`.
const READY_SECONDS_MAX: u64 = 30;
/// How often conditions are polled.
const POLL_MS: u64 = 1_000;
/// The cluster the suite's EC2NodeClasses discover (`karpenter.sh/discovery: demo`).
const CLUSTER: &str = "demo";
/// The longest a standby may take to lead after the leader died without releasing the Lease:
/// client-go's 15 s lease duration runs from when the standby last saw the record change (up
/// to one 2 s retry period after the leader's last renewal), then one more retry period and
/// the controller's 0.5 s leader step (measured: 17.0 s).
const HANDOVER_SECONDS_MAX: u64 = 15 + 2 + 2 + 1;
/// Longest a SIGTERMed controller may take to drain, release the Lease and exit (the core's
/// 20 s drain bound plus the release).
const EXIT_SECONDS_MAX: u64 = 25;
/// The controller log line that says a replica took the Lease and started its loops.
const LEADING_LOG: &str = "leading: starting the controllers";
/// Tests the suite runs at once: all of them (they wait on the cluster, not the CPU).
const SUITE_THREADS: &str = "32";

/// Which processes play the cluster around the API server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// `serve` is the cloud and every node's kubelet too (in process, no HTTP between them).
    InProcess,
    /// `serve --no-kubelet` is the API server; `karpenter-sim cloud` (the node registrar) is the
    /// cloud and the kubelets, over HTTP: what `e2e/kind/up.sh` runs against kind.
    Registrar,
}

/// The tests `cargo xtask test` runs in the registrar topology (name filters): provisioning
/// (every node registered over HTTP), termination (nodes deleted, instances ended) and the drain
/// order (evictions and the registrar's pod removals over HTTP).
pub const REGISTRAR_FILTERS: [&str; 3] = ["seed_000", "deleting_a_node_claim", "a_drain_evicts"];

/// One `karpenter controller` process.
pub(crate) struct Replica {
    pub(crate) name: String,
    pub(crate) child: Child,
    /// `127.0.0.1:PORT` of its `/metrics`.
    pub(crate) metrics: String,
}

/// What the run started and where it writes (also `cargo xtask bench-memory`'s processes).
pub(crate) struct Harness {
    root: PathBuf,
    pub(crate) dir: PathBuf,
    kubectl: String,
    serve: Option<Child>,
    /// `karpenter-sim cloud`, in the registrar topology.
    registrar: Option<Child>,
    /// A cluster of its own (k3s): no serve; the registrar plays the nodes against it.
    external: Option<PathBuf>,
    topology: Topology,
    pub(crate) replicas: Vec<Replica>,
    aws: String,
    /// The fake cloud's interruption queue name (`INTERRUPTION_QUEUE` for the controllers).
    queue: String,
    pub(crate) deadline: Instant,
    transcript: Vec<String>,
    /// Extra arguments for the suite's test binary (a name filter).
    suite_args: Vec<String>,
    /// The served cluster's name (`--cluster`, `CLUSTER_NAME`).
    cluster: String,
    /// Extra arguments for `karpenter-sim serve` (a scenario).
    serve_args: Vec<String>,
    /// The `karpenter` binary the replicas run.
    controller: PathBuf,
    /// The `karpenter-sim` binary that serves the cluster (the debug build unless a benchmark
    /// needs a release one to keep up).
    serve_binary: PathBuf,
    /// Extra environment for the replicas.
    controller_env: Vec<(String, String)>,
    /// The controller container as the chart renders it for this cluster (arguments and
    /// environment), once [`Harness::render_chart`] ran.
    chart: Option<crate::chart_env::ChartController>,
    /// What the notes are prefixed with (the run's directory name).
    label: String,
}

/// What the suite reported.
#[derive(Debug, Default)]
pub struct SuiteCounts {
    pub passed: u64,
    pub failed: u64,
}

/// `CARGO_TARGET_DIR`, else the workspace's `target/`.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(|d| root.join(d))
        .unwrap_or_else(|| root.join("target"))
}

/// How `karpenter-sim serve` is built (a debug build with the `serve` feature).
pub(crate) const SERVE_BUILD: [&str; 8] = [
    "build",
    "--quiet",
    "-p",
    "karpenter-sim",
    "--features",
    "serve",
    "--bin",
    "karpenter-sim",
];

/// How the registrar's tests are built (`sim/tests/serve.rs` needs the `serve` feature).
const SERVE_TEST_BUILD: [&str; 9] = [
    "test",
    "--quiet",
    "-p",
    "karpenter-sim",
    "--features",
    "serve",
    "--test",
    "serve",
    "--no-run",
];

/// Builds what the run needs: the `karpenter` binary (as the CLI's integration tests build it:
/// under `cargo xtask test` it is already there, and the workspace's feature set keeps the AWS
/// SDK from being built a second time), `karpenter-sim` with `serve`, and the suite.
fn build(root: &Path) -> Result<(), String> {
    let steps: [&[&str]; 4] = [
        &[
            "test",
            "--quiet",
            "--workspace",
            "--test",
            "cli",
            "--no-run",
        ],
        &SERVE_BUILD,
        &SERVE_TEST_BUILD,
        &[
            "test",
            "--quiet",
            "--workspace",
            "--test",
            "e2e",
            "--no-run",
        ],
    ];
    for args in steps {
        let status = Command::new("cargo")
            .args(args)
            .current_dir(root)
            .status()
            .map_err(|e| format!("e2e build (could not start cargo: {e})"))?;
        if !status.success() {
            return Err(format!("e2e build (cargo {})", args.join(" ")));
        }
    }
    Ok(())
}

/// Runs the harness and the suite; the suite's counts, or `Err(step)` naming what failed (the
/// harness's own checks, or the suite as a whole).
pub fn run(root: &Path, suite_args: &[String]) -> Result<SuiteCounts, String> {
    let (topology, suite_args) = match suite_args.split_first() {
        Some((first, rest)) if first == "--registrar" => (Topology::Registrar, rest),
        _ => (Topology::InProcess, suite_args),
    };
    let started = Instant::now();
    build(root)?;
    let registrar_tests = run_serve_tests(root)?;
    let mut counts = run_topology(root, topology, suite_args, started, None)?;
    counts.passed += registrar_tests.passed;
    counts.failed += registrar_tests.failed;
    Ok(counts)
}

/// What `cargo xtask test` runs: the registrar's tests, the whole suite in process, then the
/// provisioning and termination tests in the registrar topology; the summed counts.
pub fn run_for_ci(root: &Path) -> Result<SuiteCounts, String> {
    let started = Instant::now();
    build(root)?;
    let mut counts = run_serve_tests(root)?;
    let full = run_topology(root, Topology::InProcess, &[], started, None)?;
    let filters: Vec<String> = REGISTRAR_FILTERS.iter().map(|f| f.to_string()).collect();
    let over_http = run_topology(root, Topology::Registrar, &filters, Instant::now(), None)?;
    counts.passed += full.passed + over_http.passed;
    counts.failed += full.failed + over_http.failed;
    eprintln!(
        "xtask: e2e (both topologies) in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(counts)
}

/// `cargo test -p karpenter-sim --features serve --test serve`: the node registrar against
/// `serve --no-kubelet` over HTTP.
fn run_serve_tests(root: &Path) -> Result<SuiteCounts, String> {
    let started = Instant::now();
    let output = Command::new("cargo")
        .args(&SERVE_TEST_BUILD[..SERVE_TEST_BUILD.len() - 1])
        .current_dir(root)
        .output()
        .map_err(|e| format!("registrar tests (could not start cargo: {e})"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    print!("{text}");
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    let mut counts = SuiteCounts::default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("test result: ") {
            counts.passed += crate::count_before(rest, " passed");
            counts.failed += crate::count_before(rest, " failed");
        }
    }
    eprintln!(
        "xtask: registrar tests: {} passed, {} failed, in {:.0} s",
        counts.passed,
        counts.failed,
        started.elapsed().as_secs_f64()
    );
    if !output.status.success() && counts.failed == 0 {
        return Err("registrar tests (cargo test -p karpenter-sim --test serve)".into());
    }
    Ok(counts)
}

/// The suite against a cluster of its own (`cargo xtask e2e-k3s`): the registrar and two
/// controller replicas on this host, against `kubeconfig`.
pub fn run_external(
    root: &Path,
    kubeconfig: &Path,
    suite_args: &[String],
) -> Result<SuiteCounts, String> {
    let started = Instant::now();
    build(root)?;
    run_topology(
        root,
        Topology::Registrar,
        suite_args,
        started,
        Some(kubeconfig),
    )
}

/// The harness and the suite in one topology (everything already built).
fn run_topology(
    root: &Path,
    topology: Topology,
    suite_args: &[String],
    started: Instant,
    external: Option<&Path>,
) -> Result<SuiteCounts, String> {
    let Some(kubectl) = find_kubectl() else {
        eprintln!(
            "xtask: e2e skipped: no kubectl found (set KUBECTL, or run scripts/install-helm.sh)"
        );
        return Ok(SuiteCounts::default());
    };
    let dir = match topology {
        Topology::InProcess => "e2e",
        Topology::Registrar => "e2e-registrar",
    };
    let mut harness = Harness::new(root, dir, RUN_SECONDS_MAX)?;
    harness.topology = topology;
    harness.external = external.map(Path::to_path_buf);
    harness.kubectl = kubectl;
    harness.suite_args = suite_args.to_vec();
    let result = harness.check();
    harness.stop();
    match &result {
        Ok(counts) => eprintln!(
            "xtask: e2e ({topology:?}): {} passed, {} failed, harness checks passed, in {:.0} s",
            counts.passed,
            counts.failed,
            started.elapsed().as_secs_f64()
        ),
        Err(step) => harness.print_logs(step),
    }
    result
}

/// The name of the fake cloud's interruption queue at `aws` (`host:port`), from its control API.
fn interruption_queue(aws: &str) -> Result<String, String> {
    let info = http(aws, "GET", "/fakecloud/", "")
        .ok_or("e2e: the fake cloud's control API did not answer")?;
    let info: serde_json::Value =
        serde_json::from_str(&info).map_err(|e| format!("e2e: /fakecloud/: {e}"))?;
    info["queueUrl"]
        .as_str()
        .and_then(|url| url.rsplit('/').next())
        .map(String::from)
        .ok_or_else(|| "e2e: the fake cloud names no interruption queue".to_string())
}

/// `KUBECTL`, else the newest `kubectl.1.NN` next to the gcloud `kubectl`, else the install
/// script's, else `kubectl` on the PATH.
pub(crate) fn find_kubectl() -> Option<String> {
    if let Ok(path) = std::env::var("KUBECTL") {
        return Some(path);
    }
    let candidates = [
        "/usr/lib/google-cloud-sdk/bin/kubectl.1.33",
        "/usr/lib/google-cloud-sdk/bin/kubectl.1.32",
        "target/tools/bin/kubectl",
    ];
    if let Some(found) = candidates.iter().find(|p| Path::new(p).exists()) {
        return Some(found.to_string());
    }
    Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| "kubectl".to_string())
}

impl Harness {
    /// A harness writing under `<target>/<dir>` (emptied first), with `deadline_seconds` from
    /// now for everything it waits on; the e2e cluster (`demo`, no scenario) and the debug
    /// `karpenter` binary unless changed.
    pub(crate) fn new(root: &Path, dir: &str, deadline_seconds: u64) -> Result<Self, String> {
        let target = target_dir(root);
        let label = dir.to_string();
        let dir = target.join(dir);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Harness {
            root: root.to_path_buf(),
            controller: target.join("debug/karpenter"),
            serve_binary: target.join("debug/karpenter-sim"),
            dir,
            kubectl: String::new(),
            serve: None,
            registrar: None,
            external: None,
            topology: Topology::InProcess,
            replicas: Vec::new(),
            aws: String::new(),
            queue: String::new(),
            deadline: Instant::now() + Duration::from_secs(deadline_seconds),
            transcript: Vec::new(),
            suite_args: Vec::new(),
            cluster: CLUSTER.to_string(),
            serve_args: Vec::new(),
            controller_env: Vec::new(),
            chart: None,
            label,
        })
    }

    /// Serves the cluster with `binary` instead of the debug `karpenter-sim`.
    pub(crate) fn use_serve_binary(&mut self, binary: PathBuf) {
        self.serve_binary = binary;
    }

    /// Serves `scenario` as cluster `cluster` to replicas running `controller` with `env` added.
    pub(crate) fn configure(
        &mut self,
        cluster: &str,
        scenario: &str,
        controller: PathBuf,
        env: &[(&str, &str)],
    ) {
        self.cluster = cluster.to_string();
        self.serve_args = vec!["--scenario".into(), scenario.into()];
        self.controller = controller;
        self.controller_env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }

    fn check(&mut self) -> Result<SuiteCounts, String> {
        match self.external.clone() {
            Some(kubeconfig) => self.start_external(&kubeconfig)?,
            None => self.start_serve()?,
        }
        self.render_chart()?;
        self.start_replica("a")?;
        self.start_replica("b")?;
        let first = self.until_one_leads()?;
        let mut suite = self.start_suite()?;
        let during = self.while_suite_runs(first);
        let status = suite.wait().map_err(|e| format!("e2e suite ({e})"))?;
        let counts = self.suite_counts();
        during?;
        self.note(format!(
            "suite exited ({status}): {} passed, {} failed",
            counts.passed, counts.failed
        ));
        let timings = std::fs::read_to_string(self.dir.join("timings.tsv")).unwrap_or_default();
        for line in crate::e2e_report::margin_lines(&crate::e2e_report::timings(&timings)) {
            self.note(format!("case time: {line}"));
        }
        if !status.success() {
            let suite_out = std::fs::read_to_string(self.dir.join("suite.out")).unwrap_or_default();
            let digest = crate::e2e_report::failure_digest(&suite_out);
            // Multi-line: this message ends the run's output, after every process's log.
            return Err(format!(
                "e2e suite ({} failed; full reports above; digest:)\n{}",
                counts.failed,
                digest.join("\n")
            ));
        }
        let second = self.until_one_leads()?;
        self.terminate_leader(second)?;
        Ok(counts)
    }

    /// The leader-election checks run while the suite drives the cluster: metrics after the
    /// first NodeClaim, SIGKILL and handover, the killed replica restarted as a standby.
    fn while_suite_runs(&mut self, first: usize) -> Result<(), String> {
        self.until("the suite's first NodeClaim exists", |h| {
            let claims = h.json_quiet(&["get", "nodeclaims"])?;
            Ok(claims["items"].as_array().is_some_and(|i| !i.is_empty()))
        })?;
        self.metrics_count_claims(first)?;
        self.kill_leader(first)?;
        self.start_replica("a-restarted")?;
        sleep(Duration::from_secs(5));
        self.until_one_leads().map(|_| ())
    }

    /// Starts `cargo test --test e2e` against the served cluster; its output goes to the
    /// terminal (cargo prints each failing test's report) and to `suite.out` for the counts.
    fn start_suite(&mut self) -> Result<Child, String> {
        let logs: Vec<String> = ["a", "b", "a-restarted"]
            .iter()
            .map(|n| {
                self.dir
                    .join(format!("controller-{n}.out"))
                    .display()
                    .to_string()
            })
            .collect();
        let out = std::fs::File::create(self.dir.join("suite.out")).map_err(|e| e.to_string())?;
        let timings = self.dir.join("timings.tsv");
        // Each case appends to it: a file left by an earlier run would mix with this one's.
        let _ = std::fs::remove_file(&timings);
        let child = Command::new("cargo")
            .args(["test", "--quiet", "--workspace", "--test", "e2e", "--"])
            .args(["--test-threads", SUITE_THREADS])
            .args(&self.suite_args)
            .env("E2E_KUBECONFIG", self.dir.join("kubeconfig"))
            .env("E2E_AWS_ENDPOINT", format!("http://{}", self.aws))
            .env("E2E_CLUSTER_NAME", CLUSTER)
            .env("E2E_CONTROLLER_LOGS", logs.join(":"))
            .env("E2E_TIMINGS", &timings)
            .current_dir(&self.root)
            .stdout(Stdio::from(out))
            .spawn()
            .map_err(|e| format!("e2e suite (could not start cargo: {e})"))?;
        self.note("suite started (cargo test --test e2e)".into());
        Ok(child)
    }

    /// The passed and failed counts of the suite's `test result:` line (its stdout is printed).
    fn suite_counts(&self) -> SuiteCounts {
        let text = std::fs::read_to_string(self.dir.join("suite.out")).unwrap_or_default();
        print!("{text}");
        let mut counts = SuiteCounts::default();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("test result: ") {
                counts.passed += crate::count_before(rest, " passed");
                counts.failed += crate::count_before(rest, " failed");
            }
        }
        counts
    }

    /// Starts one `karpenter controller` replica against the served cluster and AWS endpoint.
    pub(crate) fn start_replica(&mut self, name: &str) -> Result<(), String> {
        let metrics = free_port()?;
        let health = free_port()?;
        let out = std::fs::File::create(self.dir.join(format!("controller-{name}.out")))
            .map_err(|e| e.to_string())?;
        let err = std::fs::File::create(self.dir.join(format!("controller-{name}.err")))
            .map_err(|e| e.to_string())?;
        // Without a rendering (not used by a caller today) the cluster's settings are set here.
        let (args, chart_env) = match &self.chart {
            Some(chart) => (chart.args.clone(), chart.env.clone()),
            None => (
                vec!["controller".to_string()],
                vec![
                    ("CLUSTER_NAME".to_string(), self.cluster.clone()),
                    ("INTERRUPTION_QUEUE".to_string(), self.queue.clone()),
                ],
            ),
        };
        // The chart's environment first; what the lines below set replaces it (the endpoints
        // and ports a pod would get from its cluster; see `chart_env`).
        let child = Command::new(&self.controller)
            .args(&args)
            .envs(chart_env)
            .env("KUBECONFIG", self.dir.join("kubeconfig"))
            .env("AWS_ENDPOINT_URL", format!("http://{}", self.aws))
            .env("AWS_REGION", "us-west-2")
            .env("AWS_ACCESS_KEY_ID", "fake")
            .env("AWS_SECRET_ACCESS_KEY", "fake")
            .env("METRICS_PORT", metrics.to_string())
            .env("HEALTH_PROBE_PORT", health.to_string())
            .envs(self.controller_env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.root)
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("e2e (could not start karpenter controller: {e})"))?;
        self.replicas.push(Replica {
            name: name.to_string(),
            child,
            metrics: format!("127.0.0.1:{metrics}"),
        });
        self.note(format!(
            "controller {name} started (metrics :{metrics}, probes :{health})"
        ));
        Ok(())
    }

    /// Waits until exactly one running replica has logged that it leads and the Lease names a
    /// holder; that replica's index.
    fn until_one_leads(&mut self) -> Result<usize, String> {
        let mut leader = None;
        self.until("exactly one controller leads", |h| {
            let leading: Vec<usize> = (0..h.replicas.len())
                .filter(|&i| h.replica_running(i) && h.replica_log(i).contains(LEADING_LOG))
                .collect();
            let holder = h.lease_holder()?;
            if leading.len() > 1 {
                return Err(format!("e2e: {} replicas lead at once", leading.len()));
            }
            leader = leading.first().copied().filter(|_| !holder.is_empty());
            Ok(leader.is_some())
        })?;
        let leader = leader.ok_or("e2e: no leader")?;
        self.note(format!("controller {} leads", self.replicas[leader].name));
        Ok(leader)
    }

    fn replica_running(&mut self, index: usize) -> bool {
        matches!(self.replicas[index].child.try_wait(), Ok(None))
    }

    fn replica_log(&self, index: usize) -> String {
        let name = &self.replicas[index].name;
        std::fs::read_to_string(self.dir.join(format!("controller-{name}.out"))).unwrap_or_default()
    }

    /// `spec.holderIdentity` of the leader Lease; empty when released or absent.
    fn lease_holder(&mut self) -> Result<String, String> {
        let lease = self.kubectl_quiet(&[
            "get",
            "lease",
            "-n",
            "kube-system",
            "karpenter-leader-election",
            "-o",
            "json",
            "--ignore-not-found",
        ])?;
        if lease.trim().is_empty() {
            return Ok(String::new());
        }
        let lease: serde_json::Value =
            serde_json::from_str(&lease).map_err(|e| format!("e2e: lease: {e}"))?;
        Ok(lease["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    }

    /// The leader's `/metrics` counts the NodeClaims it created.
    fn metrics_count_claims(&mut self, leader: usize) -> Result<(), String> {
        let text = http(&self.replicas[leader].metrics, "GET", "/metrics", "")
            .ok_or("e2e: the leader's /metrics did not answer")?;
        let created = text
            .lines()
            .find(|l| l.starts_with("karpenter_nodeclaims_created_total{"))
            .ok_or("e2e: /metrics has no karpenter_nodeclaims_created_total")?
            .to_string();
        self.note(format!("leader /metrics: {created}"));
        Ok(())
    }

    /// SIGKILLs the leader (no Lease release) and waits for the standby to take over.
    fn kill_leader(&mut self, leader: usize) -> Result<(), String> {
        let replica = &mut self.replicas[leader];
        let _ = replica.child.kill();
        let _ = replica.child.wait();
        let name = replica.name.clone();
        let killed = Instant::now();
        self.note(format!("controller {name} killed (SIGKILL)"));
        let deadline = killed + Duration::from_secs(HANDOVER_SECONDS_MAX);
        loop {
            let leading = (0..self.replicas.len()).any(|i| {
                i != leader && self.replica_running(i) && self.replica_log(i).contains(LEADING_LOG)
            });
            if leading {
                self.note(format!(
                    "the standby took over {:.1} s after the kill",
                    killed.elapsed().as_secs_f64()
                ));
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "e2e: no standby led within {HANDOVER_SECONDS_MAX} s of the leader's death"
                ));
            }
            sleep(Duration::from_millis(250));
        }
    }

    /// SIGTERMs the leader: it must drain, release the Lease and exit 0 in time.
    fn terminate_leader(&mut self, leader: usize) -> Result<(), String> {
        let pid = self.replicas[leader].child.id().to_string();
        let name = self.replicas[leader].name.clone();
        let holder_before = self.lease_holder()?;
        let sent = Instant::now();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let status = loop {
            if let Ok(Some(status)) = self.replicas[leader].child.try_wait() {
                break status;
            }
            if sent.elapsed() > Duration::from_secs(EXIT_SECONDS_MAX) {
                return Err(format!(
                    "e2e: controller {name} did not exit within {EXIT_SECONDS_MAX} s of SIGTERM"
                ));
            }
            sleep(Duration::from_millis(100));
        };
        self.note(format!(
            "controller {name} exited ({status}) {:.1} s after SIGTERM",
            sent.elapsed().as_secs_f64()
        ));
        if !status.success() {
            return Err(format!("e2e: controller {name} exited with {status}"));
        }
        // Released: empty, or already taken by the standby (it retries every 2 s).
        let holder = self.lease_holder()?;
        if holder == holder_before {
            return Err(format!("e2e: the Lease still names {holder} after SIGTERM"));
        }
        self.note(format!("the Lease was released (now held by {holder:?})"));
        let standby = self.until_one_leads()?;
        if standby == leader {
            return Err("e2e: the terminated replica still leads".into());
        }
        Ok(())
    }

    /// Renders the chart for the served cluster and its queue: the replicas started after this
    /// run with the chart's arguments and environment (see [`crate::chart_env`]).
    pub(crate) fn render_chart(&mut self) -> Result<(), String> {
        let chart = crate::chart_env::render(&self.root, &self.cluster, &self.queue)?;
        let names: Vec<&str> = chart.env.iter().map(|(k, _)| k.as_str()).collect();
        self.note(format!(
            "the replicas run `karpenter {}` with the chart's environment ({}); replaced for a \
             local run: KUBECONFIG, AWS_ENDPOINT_URL, AWS_REGION, AWS credentials, METRICS_PORT, \
             HEALTH_PROBE_PORT",
            chart.args.join(" "),
            names.join(", ")
        ));
        self.chart = Some(chart);
        Ok(())
    }

    pub(crate) fn start_serve(&mut self) -> Result<(), String> {
        let port = free_port()?;
        let out = std::fs::File::create(self.dir.join("serve.out")).map_err(|e| e.to_string())?;
        let err = std::fs::File::create(self.dir.join("serve.err")).map_err(|e| e.to_string())?;
        let no_kubelet: &[&str] = match self.topology {
            Topology::InProcess => &[],
            Topology::Registrar => &["--no-kubelet"],
        };
        let child = Command::new(&self.serve_binary)
            .args(["serve", "--no-controller", "--cluster", &self.cluster])
            .args(no_kubelet)
            .args(&self.serve_args)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .arg("--kubeconfig")
            .arg(self.dir.join("kubeconfig"))
            .current_dir(&self.root)
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("e2e (could not start karpenter-sim serve: {e})"))?;
        self.serve = Some(child);
        let ready_by = Instant::now() + Duration::from_secs(READY_SECONDS_MAX);
        while http(&format!("127.0.0.1:{port}"), "GET", "/readyz", "").is_none_or(|b| b != "ok") {
            if Instant::now() > ready_by {
                return Err("e2e: serve did not get ready".into());
            }
            sleep(Duration::from_millis(200));
        }
        let stdout = std::fs::read_to_string(self.dir.join("serve.out")).unwrap_or_default();
        self.aws = stdout
            .lines()
            .find_map(|l| l.strip_prefix("AWS_ENDPOINT_URL=http://"))
            .ok_or("e2e: serve printed no AWS_ENDPOINT_URL")?
            .to_string();
        if self.topology == Topology::Registrar {
            self.aws = self.start_registrar()?;
        }
        self.queue = interruption_queue(&self.aws)?;
        self.note(format!(
            "serve ready on 127.0.0.1:{port}, AWS endpoint {}, interruption queue {}",
            self.aws, self.queue
        ));
        Ok(())
    }

    /// A cluster of its own instead of serve: its kubeconfig, the CRDs applied, the registrar
    /// started against it and the fake cloud's queue read.
    fn start_external(&mut self, kubeconfig: &Path) -> Result<(), String> {
        std::fs::copy(kubeconfig, self.dir.join("kubeconfig"))
            .map_err(|e| format!("e2e: {}: {e}", kubeconfig.display()))?;
        let crds = self
            .root
            .join("charts/karpenter/crds")
            .display()
            .to_string();
        self.kubectl_quiet(&["apply", "--server-side", "-f", &crds])?;
        self.aws = self.start_registrar()?;
        self.queue = interruption_queue(&self.aws)?;
        self.note(format!("cluster {}: CRDs applied", kubeconfig.display()));
        Ok(())
    }

    /// Starts `karpenter-sim cloud` against serve's kubeconfig; its AWS endpoint (`host:port`)
    /// once it printed it (it prints it only after reaching the API server).
    fn start_registrar(&mut self) -> Result<String, String> {
        let out =
            std::fs::File::create(self.dir.join("registrar.out")).map_err(|e| e.to_string())?;
        let err =
            std::fs::File::create(self.dir.join("registrar.err")).map_err(|e| e.to_string())?;
        let child = Command::new(&self.serve_binary)
            .args(["cloud", "--cluster", &self.cluster])
            .arg("--kubeconfig")
            .arg(self.dir.join("kubeconfig"))
            .current_dir(&self.root)
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("e2e (could not start karpenter-sim cloud: {e})"))?;
        self.registrar = Some(child);
        let ready_by = Instant::now() + Duration::from_secs(READY_SECONDS_MAX);
        loop {
            let stdout =
                std::fs::read_to_string(self.dir.join("registrar.out")).unwrap_or_default();
            if let Some(aws) = stdout
                .lines()
                .find_map(|l| l.strip_prefix("AWS_ENDPOINT_URL=http://"))
            {
                self.note(format!(
                    "registrar (karpenter-sim cloud) ready: AWS endpoint {aws}"
                ));
                return Ok(aws.to_string());
            }
            if let Some(Ok(Some(status))) = self.registrar.as_mut().map(|c| c.try_wait()) {
                return Err(format!("e2e: karpenter-sim cloud exited ({status})"));
            }
            if Instant::now() > ready_by {
                return Err("e2e: karpenter-sim cloud did not get ready".into());
            }
            sleep(Duration::from_millis(200));
        }
    }

    /// Runs kubectl without noting its output (for polls).
    pub(crate) fn kubectl_quiet(&mut self, args: &[&str]) -> Result<String, String> {
        let output = Command::new(&self.kubectl)
            .arg("--kubeconfig")
            .arg(self.dir.join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.join("kube-cache"))
            .args(args)
            .current_dir(&self.root)
            .output()
            .map_err(|e| format!("e2e (could not start {}: {e})", self.kubectl))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(format!(
                "e2e: kubectl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim_end()
            ))
        }
    }

    /// `kubectl get ... -o json` without noting its output (for polls).
    fn json_quiet(&mut self, args: &[&str]) -> Result<serde_json::Value, String> {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let text = self.kubectl_quiet(&all)?;
        serde_json::from_str(&text).map_err(|e| format!("e2e: kubectl output: {e}"))
    }

    /// Polls `done` until it holds, within the run's deadline.
    pub(crate) fn until(
        &mut self,
        what: &str,
        mut done: impl FnMut(&mut Self) -> Result<bool, String>,
    ) -> Result<(), String> {
        let start = Instant::now();
        loop {
            if done(self)? {
                self.note(format!(
                    "{what} after {:.0} s",
                    start.elapsed().as_secs_f64()
                ));
                return Ok(());
            }
            if Instant::now() > self.deadline {
                return Err(format!("e2e: timed out waiting until {what}"));
            }
            sleep(Duration::from_millis(POLL_MS));
        }
    }

    pub(crate) fn note(&mut self, line: String) {
        eprintln!("{}: {line}", self.label);
        self.transcript.push(line);
    }

    pub(crate) fn stop(&mut self) {
        for replica in &mut self.replicas {
            let _ = replica.child.kill();
            let _ = replica.child.wait();
        }
        for mut child in [self.registrar.take(), self.serve.take()]
            .into_iter()
            .flatten()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub(crate) fn print_logs(&self, step: &str) {
        eprintln!("xtask: {step}; logs of what e2e started:");
        let mut names = vec!["serve.out".to_string(), "serve.err".to_string()];
        if self.topology == Topology::Registrar {
            names.extend(["registrar.out".to_string(), "registrar.err".to_string()]);
        }
        for replica in &self.replicas {
            names.push(format!("controller-{}.out", replica.name));
            names.push(format!("controller-{}.err", replica.name));
        }
        for name in &names {
            let text = std::fs::read_to_string(self.dir.join(name)).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(200).collect();
            eprintln!("---- {name} (last {} lines)", tail.len());
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

/// A port free on 127.0.0.1 now.
fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("e2e (no free port: {e})"))
}

/// A one-shot HTTP/1.0 request; the body of a 2xx answer.
pub(crate) fn http(addr: &str, method: &str, path: &str, body: &str) -> Option<String> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    let ok = head.split_whitespace().nth(1)?.starts_with('2');
    ok.then(|| body.to_string())
}
