//! `cargo xtask <command>`: the project's entry points, so that CI, the README and developers run
//! exactly the same steps.
//!
//! - `cargo xtask test`: format check, clippy (`-D warnings`), CRD staleness check, a replayed
//!   simulation, a 100-seed swarm, the chart check, the AWS clients, every test.
//! - `cargo xtask crds`: regenerate `crds/` and `charts/karpenter/crds/` from the API types.
//! - `cargo xtask sim [ARGS]`: `karpenter-sim` built with `--cfg madsim` (`run`, `swarm`, ...).
//! - `cargo xtask chart`: the Helm chart, IAM policy and Dockerfile checks with real Helm.
//! - `cargo xtask aws-clients`: the AWS CLI v1, v2 and boto3 against `fakecloud serve`.
//! - `cargo xtask image`: the controller image, where a Docker daemon runs.
//! - `cargo xtask e2e` (alias `e2e-local`): the end-to-end suite (`e2e/`) against `karpenter-sim
//!   serve` and two real controller replicas, with the leader-election checks ([`e2e`]).
//! - `cargo xtask mutants [--seeds A..B] [--only NAME,...|--short] [--json FILE]`: the mutation
//!   catalogue (`sim/mutations/`) against the swarm ([`mutants`]; long, not part of `test`).
//! - `cargo xtask bench-memory [--json FILE]`: the real controller's RSS holding 2,000 nodes and
//!   20,000 pods served by `karpenter-sim serve` ([`bench_memory`]; not part of `test`: it runs
//!   for minutes).
//! - `cargo xtask sim serve [ARGS]`: `karpenter-sim serve` (a normal build with the `serve`
//!   feature: it runs on the system clock, never under madsim).

mod bench_memory;
mod chart_env;
mod e2e;
mod e2e_report;
mod k3s;
mod mutants;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Everything CI runs: fmt check, clippy -D warnings, CRD staleness check, simulations, the
    /// chart check, all tests.
    Test,
    /// Regenerate the committed CRD manifests.
    Crds,
    /// The seeded simulation: builds `karpenter-sim` with `--cfg madsim` (its own target dir) and
    /// runs it; with no arguments, the default scenario with seed 1.
    Sim {
        /// Arguments for `karpenter-sim` (default: `run --seed 1 --scenario default`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The chart check: `helm lint`/`helm template` with real Helm, offline validation, exact
    /// RBAC, security context, IAM template and Dockerfile lint, and negative cases of each.
    Chart,
    /// The AWS CLI v1 and v2 and boto3 against `fakecloud serve` (EC2 Query, SQS JSON and Query,
    /// SSM, IAM, EKS, Pricing on the wire).
    AwsClients,
    /// The end-to-end suite (`e2e/tests`) against `karpenter-sim serve --no-controller` and two
    /// real `karpenter controller` replicas, with leader election, SIGKILL handover and SIGTERM
    /// release checked while and after it runs. `--registrar` first: the kind topology (serve
    /// `--no-kubelet`, the nodes played over HTTP by `karpenter-sim cloud`).
    #[command(alias = "e2e-local")]
    E2e {
        /// `--registrar` (optional, first), then arguments for the suite's test binary (e.g. a
        /// test name filter).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The end-to-end suite against k3s in a throwaway container (the registrar and two
    /// controller replicas on this host); skipped, saying so, without a Docker engine.
    E2eK3s {
        /// Arguments for the suite's test binary (e.g. a test name filter).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Builds the controller image from the Dockerfile (skipped, saying so, without a daemon).
    Image {
        /// Image reference to tag the build with.
        #[arg(long, default_value = concat!("ghcr.io/karpenter-rs/karpenter:", env!("CARGO_PKG_VERSION")))]
        tag: String,
    },
    /// The scheduling benchmark (release build), one process per size, and one full disruption
    /// pass over 1,000 nodes / 10,000 pods.
    Bench {
        /// Write `{"results": [...], "preferences": [...], "disruption": {...}}` here as well as
        /// printing a table.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Pod counts to run (default: 1,100,1000,5000,20000,100000).
        #[arg(long, value_delimiter = ',')]
        sizes: Vec<usize>,
    },
    /// The mutation catalogue (`sim/mutations/*.patch`, realistic controller bugs): each
    /// applied in a scratch worktree, the madsim simulator built, the swarm run until its first
    /// failing seed; a table of what was caught. Fails if any mutation survives.
    Mutants {
        /// Seeds of each mutation's swarm, `A..B` inclusive.
        #[arg(long, default_value = mutants::DEFAULT_SEEDS)]
        seeds: String,
        /// Seeds run in parallel.
        #[arg(long, default_value_t = 2)]
        jobs: usize,
        /// Only these mutations (`01-gc-does-nothing` or `gc-does-nothing`).
        #[arg(long, value_delimiter = ',', conflicts_with = "short")]
        only: Vec<String>,
        /// The short form: only the five mutations the swarm catches fastest
        /// (`mutants::SHORT`), about 10 minutes with their rebuilds.
        #[arg(long)]
        short: bool,
        /// Also write the results as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Instead of the catalogue, the mutants `cargo-mutants` generates over these
        /// `karpenter-core` files (e.g. `controller/core/src/disruption/budgets.rs`), judged by
        /// the same swarm; needs `cargo install cargo-mutants`.
        #[arg(long, value_delimiter = ',', conflicts_with_all = ["only", "short"])]
        cargo_mutants: Vec<String>,
        /// With `--cargo-mutants`: at most this many, spread over its list.
        #[arg(long, requires = "cargo_mutants")]
        limit: Option<usize>,
    },
    /// The memory benchmark: the release `karpenter controller` holding 2,000 nodes and 20,000
    /// pods served by `karpenter-sim serve --scenario fleet-2000`; fails above 1 GiB RSS.
    BenchMemory {
        /// Write the figures (and an RSS timeline) here as JSON as well as printing them.
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

/// Directories that hold generated CRDs.
const CRD_DIRS: [&str; 2] = ["crds", "charts/karpenter/crds"];

fn main() -> ExitCode {
    let root = workspace_root();
    let result = match Cli::parse().command {
        Task::Test => test(&root),
        Task::Crds => crds(&root),
        Task::Bench { json, sizes } => bench(&root, json.as_deref(), &sizes),
        Task::BenchMemory { json } => bench_memory::run(&root, json.as_deref()),
        Task::Sim { args } => sim(&root, &args),
        Task::Chart => chart(&root),
        Task::AwsClients => aws_clients(&root),
        Task::Image { tag } => image(&root, &tag),
        Task::E2e { args } => e2e::run(&root, &args).map(|_| ()),
        Task::E2eK3s { args } => k3s::run(&root, &args),
        Task::Mutants {
            seeds,
            jobs,
            only,
            short,
            json,
            cargo_mutants,
            limit,
        } => mutants::run(
            &root,
            &mutants::Options {
                seeds,
                jobs,
                only: if short {
                    mutants::SHORT.iter().map(|s| s.to_string()).collect()
                } else {
                    only
                },
                json,
                cargo_mutants,
                limit,
            },
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(step) => {
            eprintln!("xtask: {step} failed");
            ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// Runs one step, echoing it first; `Err(step)` when it fails.
fn run(root: &Path, step: &str, program: &str, args: &[&str]) -> Result<(), String> {
    eprintln!("xtask: {step}: {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .current_dir(root)
        .status()
        .map_err(|e| format!("{step} (could not start {program}: {e})"))?;
    if status.success() {
        Ok(())
    } else {
        Err(step.to_string())
    }
}

fn test(root: &Path) -> Result<(), String> {
    run(root, "format check", "cargo", &["fmt", "--all", "--check"])?;
    run(
        root,
        "clippy",
        "cargo",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    // The `serve` feature is off in the workspace build (it must stay out of madsim's graph).
    run(
        root,
        "clippy (karpenter-sim serve)",
        "cargo",
        &[
            "clippy",
            "--package",
            "karpenter-sim",
            "--features",
            "serve",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    // The suite's tests are `test = false` (they need a cluster), so `--all-targets` skips them.
    run(
        root,
        "clippy (e2e suite)",
        "cargo",
        &[
            "clippy",
            "--package",
            "karpenter-e2e",
            "--test",
            "e2e",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    // The CRD staleness check is a test (`crds_check_passes_on_the_committed_files_...` in
    // controller/cli), run by `run_tests` below with the binary that build already makes.
    sim_determinism(root)?;
    sim_swarm(root)?;
    chart(root)?;
    aws_clients(root)?;
    let (mut passed, mut failed) = run_tests(root)?;
    // After the tests: it runs the `karpenter` binary their build made, so the run does not
    // build the binary's AWS SDK graph a second time under another feature set. The suite's
    // tests count one each; the harness's leader-election checks count as one more.
    match e2e::run_for_ci(root) {
        Ok(counts) => {
            passed += counts.passed + 1;
            failed += counts.failed;
        }
        Err(step) => {
            eprintln!("xtask: {step}");
            failed += 1;
        }
    }
    // Last, so that it is the run's closing line.
    println!("tests: {passed} passed, {failed} failed (e2e harness checks counted as one)");
    if failed == 0 {
        Ok(())
    } else {
        Err("tests".to_string())
    }
}

/// Runs `cargo test --workspace`, streaming its output; the passed and failed counts summed over
/// every test binary (the caller prints them as the run's one summary line, so a reader or CI
/// need not add up each binary's result). A run that failed without a failed test (a build
/// error) is an `Err`.
fn run_tests(root: &Path) -> Result<(u64, u64), String> {
    eprintln!("xtask: tests: cargo test --workspace");
    let mut child = Command::new("cargo")
        .args(["test", "--workspace"])
        .current_dir(root)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("tests (could not start cargo: {e})"))?;
    let (mut passed, mut failed) = (0u64, 0u64);
    let stdout = child.stdout.take().expect("stdout is piped");
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| format!("tests (reading output: {e})"))?;
        println!("{line}");
        if let Some(rest) = line.strip_prefix("test result: ") {
            passed += count_before(rest, " passed");
            failed += count_before(rest, " failed");
        }
    }
    let status = child.wait().map_err(|e| format!("tests ({e})"))?;
    if !status.success() && failed == 0 {
        println!("tests: {passed} passed, {failed} failed");
        return Err("tests (cargo test failed before any test did)".to_string());
    }
    Ok((passed, failed))
}

/// The number just before `label` in a `test result:` line (`ok. 12 passed; 0 failed; ...`).
fn count_before(text: &str, label: &str) -> u64 {
    text.split(';')
        .find_map(|part| {
            part.trim()
                .trim_start_matches("ok. ")
                .trim_start_matches("FAILED. ")
                .strip_suffix(label.trim_start())
        })
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

fn crds(root: &Path) -> Result<(), String> {
    for dir in CRD_DIRS {
        std::fs::create_dir_all(root.join(dir)).map_err(|e| format!("create {dir}: {e}"))?;
        run(
            root,
            "generate CRDs",
            "cargo",
            &[
                "run",
                "--quiet",
                "--package",
                "karpenter-cli",
                "--",
                "crds",
                "--out",
                dir,
            ],
        )?;
    }
    Ok(())
}

/// Default benchmark sizes (upstream's go up to 20,000; we add 100,000).
const BENCH_SIZES: [usize; 6] = [1, 100, 1_000, 5_000, 20_000, 100_000];

/// Solves per size; the median is reported. Fewer for the largest sizes to bound wall time.
fn bench_runs(pods: usize) -> usize {
    match pods {
        0..=1_000 => 7,
        1_001..=20_000 => 5,
        _ => 3,
    }
}

fn bench(root: &Path, json: Option<&Path>, sizes: &[usize]) -> Result<(), String> {
    run(
        root,
        "release build",
        "cargo",
        &[
            "build",
            "--release",
            "--quiet",
            "--package",
            "karpenter-cli",
        ],
    )?;
    let binary = e2e::target_dir(root).join("release/karpenter");
    let sizes = if sizes.is_empty() {
        BENCH_SIZES.to_vec()
    } else {
        sizes.to_vec()
    };
    let mut results = Vec::new();
    let mut failed = false;
    println!(
        "{:>8} {:>12} {:>12} {:>8} {:>10}",
        "pods", "s/solve", "pods/s", "nodes", "peak RSS"
    );
    for pods in sizes {
        let output = Command::new(&binary)
            .args([
                "bench-scheduling",
                "--pods",
                &pods.to_string(),
                "--runs",
                &bench_runs(pods).to_string(),
            ])
            .output()
            .map_err(|e| format!("benchmark (could not start karpenter: {e})"))?;
        let line = String::from_utf8_lossy(&output.stdout);
        let report: serde_json::Value = serde_json::from_str(line.trim()).map_err(|e| {
            format!(
                "benchmark ({pods} pods printed no report: {e}; stderr: {})",
                String::from_utf8_lossy(&output.stderr)
            )
        })?;
        println!(
            "{:>8} {:>12.4} {:>12.0} {:>8} {:>8} MB",
            pods,
            report["secondsPerSolve"].as_f64().unwrap_or_default(),
            report["podsPerSecond"].as_f64().unwrap_or_default(),
            report["nodes"],
            report["peakRssBytes"].as_u64().unwrap_or_default() / (1 << 20),
        );
        if !output.status.success() {
            eprintln!("{}", String::from_utf8_lossy(&output.stderr));
            failed = true;
        }
        results.push(report);
    }
    let preferences = bench_preferences(&binary);
    let disruption = bench_disruption(&binary);
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&serde_json::json!({
            "results": results,
            "preferences": preferences.clone().unwrap_or_default(),
            "disruption": disruption.clone().unwrap_or_default(),
        }))
        .map_err(|e| format!("benchmark report ({e})"))?;
        std::fs::write(path, text + "\n").map_err(|e| format!("write {} ({e})", path.display()))?;
    }
    if failed {
        Err("benchmark (some pods were left unscheduled)".to_string())
    } else {
        preferences.and(disruption).map(|_| ())
    }
}

/// Pods of upstream's preference benchmark (`BenchmarkRespectPreferences`/`IgnorePreferences`).
const PREFERENCE_PODS: usize = 4_000;

/// Upstream's two preference cases: 4,000 pods with preferred node affinity and preferred
/// zonal/hostname anti-affinity, solved respecting then ignoring preferences (issue 13's target:
/// <= 0.3 s each; upstream reports 11.7 s on an Apple M3 Pro). Reported, not enforced: a timing
/// threshold would fail on a loaded machine.
fn bench_preferences(binary: &Path) -> Result<serde_json::Value, String> {
    let mut reports = Vec::new();
    for extra in [None, Some("--ignore-preferences")] {
        let pods = PREFERENCE_PODS.to_string();
        let mut args = vec![
            "bench-scheduling",
            "--pods",
            &pods,
            "--runs",
            "5",
            "--workload",
            "preferences",
        ];
        args.extend(extra);
        let output = Command::new(binary)
            .args(&args)
            .output()
            .map_err(|e| format!("preference benchmark (could not start karpenter: {e})"))?;
        let report: serde_json::Value =
            serde_json::from_str(String::from_utf8_lossy(&output.stdout).trim()).map_err(|e| {
                format!(
                    "preference benchmark printed no report: {e}; stderr: {}",
                    String::from_utf8_lossy(&output.stderr)
                )
            })?;
        println!(
            "preferences ({}): {} pods: {:.4} s/solve, {} nodes, peak RSS {} MB",
            report["preferencePolicy"].as_str().unwrap_or_default(),
            report["pods"],
            report["secondsPerSolve"].as_f64().unwrap_or_default(),
            report["nodes"],
            report["peakRssBytes"].as_u64().unwrap_or_default() / (1 << 20),
        );
        if !output.status.success() {
            return Err(format!(
                "preference benchmark left pods unscheduled: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        reports.push(report);
    }
    Ok(serde_json::Value::Array(reports))
}

/// One full disruption pass over 1,000 busy nodes and 10,000 pods (the target: <= 1 s).
fn bench_disruption(binary: &Path) -> Result<serde_json::Value, String> {
    let output = Command::new(binary)
        .args([
            "bench-disruption",
            "--nodes",
            "1000",
            "--pods",
            "10000",
            "--runs",
            "3",
        ])
        .output()
        .map_err(|e| format!("disruption benchmark (could not start karpenter: {e})"))?;
    let line = String::from_utf8_lossy(&output.stdout);
    let report: serde_json::Value = serde_json::from_str(line.trim()).map_err(|e| {
        format!(
            "disruption benchmark printed no report: {e}; stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    println!(
        "disruption: {} nodes, {} pods: {:.4} s/pass, peak RSS {} MB",
        report["nodes"],
        report["pods"],
        report["secondsPerPass"].as_f64().unwrap_or_default(),
        report["peakRssBytes"].as_u64().unwrap_or_default() / (1 << 20),
    );
    if output.status.success() {
        Ok(report)
    } else {
        Err(format!(
            "disruption benchmark: {}",
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// Where the `--cfg madsim` build lives: RUSTFLAGS change every fingerprint, so it gets its own
/// (`KARPENTER_SIM_TARGET_DIR` overrides it, e.g. to share one build between worktrees).
const MADSIM_TARGET_DIR: &str = "target/madsim";

fn madsim_target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("KARPENTER_SIM_TARGET_DIR") {
        Some(dir) => root.join(dir),
        None => root.join(MADSIM_TARGET_DIR),
    }
}

/// Builds `karpenter-sim` under madsim (release: a 2-hour scenario runs in seconds) and runs it.
fn sim(root: &Path, args: &[String]) -> Result<(), String> {
    let default = ["run", "--seed", "1", "--scenario", "default"]
        .map(String::from)
        .to_vec();
    let args = if args.is_empty() {
        default
    } else {
        args.to_vec()
    };
    if args.first().is_some_and(|a| a == "serve") {
        return sim_serve(root, &args);
    }
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    let target_dir = madsim_target_dir(root);
    eprintln!(
        "xtask: simulation build: cargo build --release -p karpenter-sim (--cfg madsim, {})",
        target_dir.display()
    );
    let status = Command::new("cargo")
        .args([
            "build",
            "--release",
            "--quiet",
            "--package",
            "karpenter-sim",
            "--bin",
            "karpenter-sim",
            "--target-dir",
        ])
        .arg(&target_dir)
        .env("RUSTFLAGS", "--cfg madsim")
        .env("KARPENTER_SIM_COMMIT", &commit)
        .current_dir(root)
        .status()
        .map_err(|e| format!("simulation build (could not start cargo: {e})"))?;
    if !status.success() {
        return Err("simulation build".to_string());
    }
    let binary = target_dir.join("release/karpenter-sim");
    let status = Command::new(binary)
        .args(&args)
        .current_dir(root)
        .status()
        .map_err(|e| format!("simulation (could not start karpenter-sim: {e})"))?;
    if status.success() {
        Ok(())
    } else {
        Err("simulation".to_string())
    }
}

/// `karpenter-sim serve ARGS`: a normal (tokio, system clock) build with the `serve` feature.
fn sim_serve(root: &Path, args: &[String]) -> Result<(), String> {
    run(
        root,
        "serve build",
        "cargo",
        &[
            "build",
            "-p",
            "karpenter-sim",
            "--features",
            "serve",
            "--bin",
            "karpenter-sim",
        ],
    )?;
    let status = Command::new(root.join("target/debug/karpenter-sim"))
        .args(args)
        .current_dir(root)
        .status()
        .map_err(|e| format!("serve (could not start karpenter-sim: {e})"))?;
    if status.success() {
        Ok(())
    } else {
        Err("serve".to_string())
    }
}

/// Runs the default scenario twice under madsim with one seed (30 simulated minutes) and fails
/// unless both runs hold every invariant and write the same event log.
fn sim_determinism(root: &Path) -> Result<(), String> {
    let mut hashes = Vec::new();
    for attempt in 0..2 {
        let report = madsim_target_dir(root).join(format!("determinism-{attempt}.json"));
        let report_arg = report.to_string_lossy().to_string();
        sim(
            root,
            &[
                "run",
                "--seed",
                "42",
                "--scenario",
                "default",
                "--duration",
                "30m",
                "--json",
                &report_arg,
            ]
            .map(String::from),
        )?;
        let text =
            std::fs::read_to_string(&report).map_err(|e| format!("simulation report ({e})"))?;
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("simulation report ({e})"))?;
        hashes.push(
            value["eventLogSha256"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }
    if hashes[0] != hashes[1] || hashes[0].is_empty() {
        return Err(format!(
            "simulation determinism (seed 42 gave {} then {})",
            hashes[0], hashes[1]
        ));
    }
    eprintln!(
        "xtask: simulation determinism: seed 42 replayed bit for bit ({})",
        hashes[0]
    );
    Ok(())
}

/// Seeds the test run's swarm covers (default phases: 30 simulated minutes of faults, then up to
/// 20 to settle; about 50 s of wall time on two cores with two jobs).
const TEST_SWARM_SEEDS: &str = "1..100";

/// Runs the swarm over [`TEST_SWARM_SEEDS`] under madsim and fails on any failing seed (each
/// printed with its replay command; event logs in `target/swarm/`).
fn sim_swarm(root: &Path) -> Result<(), String> {
    let summary = madsim_target_dir(root).join("swarm.json");
    sim(
        root,
        &[
            "swarm",
            "--seeds",
            TEST_SWARM_SEEDS,
            "--jobs",
            "2",
            "--json",
            &summary.to_string_lossy(),
        ]
        .map(String::from),
    )
    .map_err(|_| {
        format!("simulation swarm (seeds {TEST_SWARM_SEEDS}; see the replay commands above)")
    })
}

/// Runs `scripts/chart-check.sh` (pinned Helm and validators installed once under `target/tools`,
/// renderings in `target/chart`). The RBAC test it runs is built first, so that the check's own
/// time budget (300 s, set in the script) is not spent compiling.
fn chart(root: &Path) -> Result<(), String> {
    run(
        root,
        "chart RBAC test build",
        "cargo",
        &[
            "test",
            "--quiet",
            // The workspace's feature set, so `run_tests` reuses these dependency builds.
            "--workspace",
            "--test",
            "chart_rbac",
            "--no-run",
        ],
    )?;
    run(
        root,
        "chart check",
        "bash",
        &["scripts/chart-check.sh", "target/tools", "target/chart"],
    )
}

/// Builds the `fakecloud` binary, installs the pinned AWS clients once under
/// `target/tools/aws-clients` (`scripts/install-aws-clients.sh`), and runs
/// `scripts/aws_clients_check.py` against a `fakecloud serve` it starts on a free port.
fn aws_clients(root: &Path) -> Result<(), String> {
    run(
        root,
        "fakecloud build",
        "cargo",
        &[
            "build",
            "--quiet",
            "--package",
            "fakecloud-serve",
            "--bin",
            "fakecloud",
        ],
    )?;
    run(
        root,
        "AWS clients install",
        "bash",
        &["scripts/install-aws-clients.sh", "target/tools/aws-clients"],
    )?;
    run(
        root,
        "AWS clients check",
        "python3",
        &[
            "scripts/aws_clients_check.py",
            "target/debug/fakecloud",
            "target/tools/aws-clients",
        ],
    )
}

/// `docker build` of the controller image where a Docker daemon answers; elsewhere says it skipped
/// (the Dockerfile is still linted by the chart check).
fn image(root: &Path, tag: &str) -> Result<(), String> {
    let daemon = Command::new("docker")
        .arg("info")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !daemon {
        eprintln!(
            "xtask: image: skipped: no Docker daemon answers `docker info` here \
             (the Dockerfile is linted by `cargo xtask chart`)"
        );
        return Ok(());
    }
    let commit = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let commit_arg = format!("KARPENTER_COMMIT={commit}");
    run(
        root,
        "image build",
        "docker",
        &["build", "--build-arg", &commit_arg, "--tag", tag, "."],
    )
}
