//! `karpenter-sim`: runs a seeded simulation of the controller against the in-memory cluster and
//! fakecloud, and reports what happened.
//!
//! `karpenter-sim run --seed N --scenario NAME [--duration 2h] [--json FILE]`
//! `karpenter-sim swarm --seeds 1..1000 [--jobs N] [--scenario NAME] [--safety 30m]
//!   [--liveness 30m] [--faults drawn|none|a,b] [--bug NAME] [--json FILE] [--logs DIR]
//!   [--stop-on-fail] [--workload drawn|scenario]`
//! `karpenter-sim scenarios`
//! `KARPENTER_SIM_LOG=karpenter_core=debug karpenter-sim swarm --seeds 211..211`: the same, with
//! the controller's logs on stderr
//! `karpenter-sim serve --listen ADDR [--cluster NAME] [--scenario NAME] [--seed N]
//!   [--no-controller] [--no-kubelet] [--kubeconfig FILE]` (with the `serve` feature; see
//!   `docs/serve.md`)
//! `karpenter-sim cloud --kubeconfig FILE [--aws-listen ADDR] [--cluster NAME] [--seed N]`: the
//!   node registrar (the fake cloud plus the kubelet of its instances' nodes, against a real API
//!   server; with the `serve` feature; see `e2e/README.md`)

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use karpenter_sim::bugs::Bug;
use karpenter_sim::report::Report;
use karpenter_sim::scenario::{BUILTIN, LatencyKnob, Scenario};
use karpenter_sim::swarm::{
    self, DETERMINISM_EVERY_DEFAULT, FAULTS, SeedOutcome, Selection, Summary, SwarmConfig,
};
use karpenter_sim::workload_mix::WorkloadSelection;

/// jemalloc, as the controller's binary uses. A simulation allocates and frees in short bursts
/// (every pass builds its views, every step its observations, every seed its world): glibc's
/// allocator spent over a quarter of a swarm seed's CPU in `malloc`, `free` and their
/// consolidation (perf, seeds 1..16). Allocation order never reaches a decision (the swarm's
/// determinism check and seed 42's replay hash run on this binary), so the allocator changes
/// only the speed.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
use karpenter_sim::world::World;

#[derive(Parser)]
#[command(
    name = "karpenter-sim",
    about = "Seeded, deterministic simulation of karpenter-rs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one scenario with one seed.
    Run {
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// A built-in scenario name or a scenario file.
        #[arg(long, default_value = "default")]
        scenario: String,
        /// Simulated time to run (default: the scenario's).
        #[arg(long, value_parser = humantime::parse_duration)]
        duration: Option<Duration>,
        /// Also write the report as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
        /// The cloud's normal latency instead of the scenario's (`drawn`: the seed's own
        /// ranges; `realistic`: CreateFleet 1-3 s, Describe* 0.1-0.5 s, SQS 10-50 ms; `none`).
        #[arg(long, value_enum)]
        latency: Option<LatencyKnob>,
    },
    /// Swarm testing: every seed draws its faults, runs a safety phase (faults on, invariants
    /// checked every step) then a liveness phase (faults off, the cluster must settle by the
    /// deadline). Exits non-zero if any seed failed.
    Swarm {
        /// Seeds, `A..B` inclusive (`17..17` is one seed) or one `N`.
        #[arg(long, default_value = "1..100")]
        seeds: String,
        /// Seeds run in parallel (threads, each seed its own world and runtime).
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        /// A built-in scenario name or a scenario file.
        #[arg(long, default_value = "default")]
        scenario: String,
        /// Simulated time with faults on.
        #[arg(long, value_parser = humantime::parse_duration, default_value = "30m")]
        safety: Duration,
        /// Simulated time the cluster has to settle once faults are off.
        #[arg(long, value_parser = humantime::parse_duration, default_value = "30m")]
        liveness: Duration,
        /// `drawn` (each fault on or off per seed), `none`, or the faults to switch on.
        #[arg(long, default_value = "drawn")]
        faults: Selection,
        /// A deliberately broken behaviour (test-only; shows an invariant catches it).
        #[arg(long, default_value = "none")]
        bug: Bug,
        /// Seeds divisible by this run twice and must write the same event log (0: none).
        #[arg(long, default_value_t = DETERMINISM_EVERY_DEFAULT)]
        determinism_every: u64,
        /// Also write the summary as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Where failing seeds' event logs are written.
        #[arg(long, default_value = "target/swarm")]
        logs: PathBuf,
        /// Start no new seed once one has failed (seeds already running finish); the summary
        /// then covers the seeds that ran.
        #[arg(long)]
        stop_on_fail: bool,
        /// `drawn` (the scenario's workload plus each seed's draw: do-not-disrupt pods, a
        /// PodDisruptionBudget, a scale-down) or `scenario` (as written).
        #[arg(long, default_value = "drawn")]
        workload: WorkloadSelection,
    },
    /// List the built-in scenarios.
    Scenarios,
    /// The world on the system clock behind the Kubernetes REST API and the AWS endpoint, for
    /// kubectl and the real controller binary (`docs/serve.md`).
    #[cfg(feature = "serve")]
    Serve {
        /// The Kubernetes API's address (port 0: any free port).
        #[arg(long, default_value = "127.0.0.1:8001")]
        listen: std::net::SocketAddr,
        /// The AWS endpoint's address (port 0: any free port).
        #[arg(long, default_value = "127.0.0.1:0")]
        aws_listen: std::net::SocketAddr,
        /// The cluster's name (discovery tags, node role `KarpenterNodeRole-NAME`, queue).
        #[arg(long, default_value = "demo")]
        cluster: String,
        /// A built-in scenario or a scenario file (default: an empty cluster).
        #[arg(long)]
        scenario: Option<String>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Leave the in-process controller off (run `karpenter controller` against it).
        #[arg(long)]
        no_controller: bool,
        /// Leave the kubelet stand-in off (run `karpenter-sim cloud` against it: the nodes then
        /// join over HTTP from the registrar's own fake cloud, as on kind).
        #[arg(long)]
        no_kubelet: bool,
        /// Where to write a kubeconfig for the served API.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Wall time between two ticks of the kubelet, scheduler and Deployment stand-ins.
        #[arg(long, default_value_t = 500)]
        tick_ms: u64,
    },
    /// The node registrar, kwok-style: the fake cloud's AWS endpoint plus the kubelet of every
    /// node its instances become, against the real API server of `--kubeconfig` (kind, k3s,
    /// `serve --no-kubelet`). Point the controller's `AWS_ENDPOINT_URL` at the printed endpoint.
    #[cfg(feature = "serve")]
    Cloud {
        /// The cluster the nodes join.
        #[arg(long, env = "KUBECONFIG")]
        kubeconfig: PathBuf,
        /// The AWS endpoint's address (port 0: any free port).
        #[arg(long, default_value = "127.0.0.1:0")]
        aws_listen: std::net::SocketAddr,
        /// The cluster's name (discovery tags, node role `KarpenterNodeRole-NAME`, queue).
        #[arg(long, default_value = "demo")]
        cluster: String,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Wall time between two ticks of the kubelet stand-in.
        #[arg(long, default_value_t = 500)]
        tick_ms: u64,
    },
}

/// Environment variable naming what to log (a `tracing` target list such as
/// `karpenter_core=debug,info`): the controller's and the world's own logs on stderr, for
/// replaying one seed. Unset, nothing is logged (a swarm of 1,000 seeds would drown in it).
fn main() -> ExitCode {
    if let Err(err) = karpenter_sim::logging::install_from_env() {
        eprintln!("error: {err}");
        return ExitCode::from(2);
    }
    match Cli::parse().command {
        Command::Scenarios => {
            for (name, text) in BUILTIN {
                let description = Scenario::parse(name, text)
                    .map(|s| s.description)
                    .unwrap_or_default();
                println!("{name:<12} {description}");
            }
            ExitCode::SUCCESS
        }
        Command::Run {
            seed,
            scenario,
            duration,
            json,
            latency,
        } => run(seed, &scenario, duration, json, latency),
        #[cfg(feature = "serve")]
        Command::Serve {
            listen,
            aws_listen,
            cluster,
            scenario,
            seed,
            no_controller,
            no_kubelet,
            kubeconfig,
            tick_ms,
        } => serve(karpenter_sim::serve::ServeOptions {
            listen,
            aws_listen,
            cluster,
            scenario,
            seed,
            controller: !no_controller,
            kubelet: !no_kubelet,
            kubeconfig,
            tick_ms,
        }),
        #[cfg(feature = "serve")]
        Command::Cloud {
            kubeconfig,
            aws_listen,
            cluster,
            seed,
            tick_ms,
        } => cloud(karpenter_sim::serve::registrar::RegistrarOptions {
            tick_ms,
            ..karpenter_sim::serve::registrar::RegistrarOptions::new(
                kubeconfig, aws_listen, &cluster, seed,
            )
        }),
        Command::Swarm {
            seeds,
            jobs,
            scenario,
            safety,
            liveness,
            faults,
            bug,
            determinism_every,
            json,
            logs,
            stop_on_fail,
            workload,
        } => {
            let seeds = match swarm::parse_seeds(&seeds) {
                Ok(seeds) => seeds,
                Err(err) => {
                    eprintln!("error: {err}");
                    return ExitCode::from(2);
                }
            };
            let loaded = match Scenario::load(&scenario) {
                Ok(s) => s,
                Err(err) => {
                    eprintln!("error: {err}");
                    return ExitCode::from(2);
                }
            };
            let mut config = SwarmConfig::new(loaded, &scenario);
            config.safety = safety;
            config.liveness = liveness;
            config.faults = faults;
            config.bug = bug;
            config.determinism_every = determinism_every;
            config.stop_on_fail = stop_on_fail;
            config.workload = workload;
            run_swarm(&config, &seeds, jobs, json, &logs)
        }
    }
}

fn run_swarm(
    config: &SwarmConfig,
    seeds: &[u64],
    jobs: usize,
    json: Option<PathBuf>,
    logs: &std::path::Path,
) -> ExitCode {
    let commit = option_env!("KARPENTER_SIM_COMMIT").unwrap_or("unknown");
    println!(
        "swarm: scenario={} seeds={}..{} ({}) safety={} liveness={} faults={} bug={} jobs={jobs} commit={commit}",
        config.scenario_arg,
        seeds.first().copied().unwrap_or(0),
        seeds.last().copied().unwrap_or(0),
        seeds.len(),
        humantime::format_duration(config.safety),
        humantime::format_duration(config.liveness),
        config.faults,
        config.bug,
    );
    let terminal = std::io::stderr().is_terminal();
    let progress = |done: usize, total: usize| {
        if terminal {
            eprint!("\r[swarm] {done}/{total} seeds");
            let _ = std::io::stderr().flush();
            if done == total {
                eprintln!();
            }
        }
    };
    let started = wall_now();
    let outcomes = match swarm::run_swarm(config, seeds, jobs, &progress) {
        Ok(outcomes) => outcomes,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    let mut summary = Summary::of(config, &outcomes);
    summary.wall_seconds = wall_now()
        .duration_since(started)
        .unwrap_or_default()
        .as_secs_f64();
    for (failed, outcome) in summary
        .failed
        .iter_mut()
        .zip(outcomes.iter().filter(|o| !o.passed()))
    {
        match write_seed_log(config, outcome, logs) {
            Ok(path) => failed.log = Some(path),
            Err(err) => eprintln!(
                "error: cannot write the event log of seed {}: {err}",
                outcome.seed
            ),
        }
    }
    print_summary(&summary, &outcomes);
    if outcomes.len() < seeds.len() {
        println!(
            "stopped at the first failure (--stop-on-fail): {} of {} seeds ran",
            outcomes.len(),
            seeds.len()
        );
    }
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&summary).unwrap_or_default();
        if let Err(err) = std::fs::write(&path, text + "\n") {
            eprintln!("error: cannot write {}: {err}", path.display());
            return ExitCode::from(2);
        }
    }
    if summary.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Writes a failed seed's event log (one line per step) with a header saying how to replay it.
fn write_seed_log(
    config: &SwarmConfig,
    outcome: &SeedOutcome,
    dir: &std::path::Path,
) -> std::io::Result<String> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("seed-{}.log", outcome.seed));
    let mut text = format!(
        "# seed={} scenario={} bug={} faults on: [{}] workload: [{}]\n# replay: {}\n",
        outcome.seed,
        config.scenario_arg,
        config.bug,
        outcome.faults_on.join(","),
        outcome.workload_on.join(","),
        config.replay(outcome.seed)
    );
    for v in &outcome.violations {
        text += &format!("# {} ({} times): {}\n", v.invariant, v.count, v.first);
    }
    for line in &outcome.log {
        text += line;
        text += "\n";
    }
    std::fs::write(&path, text)?;
    Ok(path.display().to_string())
}

fn print_summary(summary: &Summary, outcomes: &[SeedOutcome]) {
    println!("{:<20} {:>8} {:>10}", "fault", "seeds on", "fired");
    for fault in FAULTS {
        println!(
            "{fault:<20} {:>8} {:>10}",
            summary.faults_on.get(fault).copied().unwrap_or(0),
            summary.faults_fired.get(fault).copied().unwrap_or(0)
        );
    }
    for (part, seeds) in &summary.workload_on {
        println!("{:<20} {seeds:>8}", format!("workload {part}"));
    }
    for failed in &summary.failed {
        println!(
            "FAILED seed {}: {}: {}",
            failed.seed, failed.invariant, failed.first
        );
        for other in failed.invariants.iter().skip(1) {
            println!(
                "  also {} ({} times): {}",
                other.invariant, other.count, other.first
            );
        }
        println!(
            "  faults on: [{}] workload: [{}]",
            failed.faults_on.join(","),
            failed.workload_on.join(",")
        );
        if let Some(log) = &failed.log {
            println!("  log: {log}");
        }
        println!("  replay: {}", failed.replay);
    }
    println!(
        "interruption-rehomed: {} checks, {} excused (no capacity during the notice)",
        summary.rehome_checked, summary.rehome_excused
    );
    println!(
        "drained-before-terminate: {} terminations past a terminationGracePeriod deadline, {} pods on them deleted but not gone",
        summary.drain_past_deadline, summary.drain_past_deadline_deleted
    );
    let simulated: f64 = outcomes.iter().map(|o| o.simulated.as_secs_f64()).sum();
    println!(
        "passed: {}/{} seeds; determinism checked on {}; liveness settled within {} s at most",
        summary.passed, summary.seeds, summary.determinism_checked, summary.settle_seconds_max
    );
    println!(
        "time: {:.0} simulated minutes in {:.1} wall seconds",
        simulated / 60.0,
        summary.wall_seconds
    );
}

fn run(
    seed: u64,
    name: &str,
    duration: Option<Duration>,
    json: Option<PathBuf>,
    latency: Option<LatencyKnob>,
) -> ExitCode {
    let commit = option_env!("KARPENTER_SIM_COMMIT").unwrap_or("unknown");
    println!("seed={seed} scenario={name} commit={commit}");
    let mut scenario = match Scenario::load(name) {
        Ok(s) => s,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    if let Some(latency) = latency {
        scenario.cloud.latency = latency;
    }
    let replay = format!(
        "cargo xtask sim run --seed {seed} --scenario {name}{}{}",
        duration
            .map(|d| format!(" --duration {}", humantime::format_duration(d)))
            .unwrap_or_default(),
        latency
            .map(|l| format!(" --latency {}", l.name()))
            .unwrap_or_default()
    );
    let started = wall_now();
    let report = match execute(seed, scenario, duration) {
        Ok(report) => report,
        Err(err) => {
            eprintln!("error: {err}\nreplay: {replay}");
            return ExitCode::FAILURE;
        }
    };
    let mut report = report;
    report.wall_seconds = wall_now()
        .duration_since(started)
        .unwrap_or_default()
        .as_secs_f64();
    print_report(&report);
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&report).unwrap_or_default();
        if let Err(err) = std::fs::write(&path, text + "\n") {
            eprintln!("error: cannot write {}: {err}", path.display());
            return ExitCode::from(2);
        }
    }
    if report.passed() {
        ExitCode::SUCCESS
    } else {
        println!("FAILED: replay with: {replay}");
        ExitCode::FAILURE
    }
}

/// Wall time only measures how fast the simulation ran; nothing in the run reads it.
#[allow(clippy::disallowed_methods)]
fn wall_now() -> std::time::SystemTime {
    std::time::SystemTime::now()
}

fn execute(seed: u64, scenario: Scenario, duration: Option<Duration>) -> Result<Report, String> {
    let future = async move {
        let mut world = World::new(seed, scenario)
            .await
            .map_err(|e| e.to_string())?;
        let terminal = std::io::stderr().is_terminal();
        let mut last = 0;
        let mut progress = |done: u64, total: u64| {
            let percent = done * 100 / total.max(1);
            if terminal && percent != last {
                last = percent;
                let bar = "#".repeat((percent / 4) as usize);
                eprint!("\r[{bar:<25}] {percent:>3}%");
                let _ = std::io::stderr().flush();
                if done == total {
                    eprintln!();
                }
            }
        };
        world
            .run(duration, &mut progress)
            .await
            .map_err(|e| e.to_string())
    };
    swarm::block_on(seed, future)?
}

fn print_report(report: &Report) {
    println!("converged: {}", report.converged);
    println!(
        "pods: {} total, {} running; pending p50 {:.1}s, p99 {:.1}s (simulated)",
        report.pods.total,
        report.pods.running,
        report.pods.pending_seconds_p50,
        report.pods.pending_seconds_p99
    );
    println!(
        "nodes: {} launched, {} terminated",
        report.nodes.launched, report.nodes.terminated
    );
    for (kind, count) in &report.nodes.launched_by_type {
        let gone = report
            .nodes
            .terminated_by_type
            .get(kind)
            .copied()
            .unwrap_or(0);
        println!("  {kind}: {count} launched, {gone} terminated");
    }
    if !report.faults_injected.is_empty() {
        let faults: Vec<String> = report
            .faults_injected
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        println!("faults injected: {}", faults.join(", "));
    }
    if let Some(r) = &report.interruption_response {
        println!(
            "spot warnings: {} acted on (claim deleted) p50 {:.1}s, max {:.1}s; {} replacements created p50 {:.1}s, max {:.1}s; {} unanswered",
            r.warnings,
            r.claim_deleted_seconds_p50,
            r.claim_deleted_seconds_max,
            r.replacements,
            r.replacement_created_seconds_p50,
            r.replacement_created_seconds_max,
            r.unanswered
        );
    }
    println!("cost: ${:.2}", report.cost_dollars);
    println!(
        "time: {:.0} simulated seconds in {:.2} wall seconds ({:.0}x)",
        report.simulated_seconds,
        report.wall_seconds,
        report.simulated_seconds / report.wall_seconds.max(1e-9)
    );
    println!("invariants:");
    for i in &report.invariants {
        println!(
            "  {:<26} {}{}",
            i.name,
            if i.held { "held" } else { "VIOLATED" },
            i.first
                .as_ref()
                .map(|f| format!(" ({} times; first: {f})", i.violations))
                .unwrap_or_default()
        );
    }
    println!(
        "event log sha256: {} ({} lines)",
        report.event_log_sha256, report.event_log_lines
    );
}

/// `karpenter-sim cloud`: the registrar until SIGINT or SIGTERM.
#[cfg(feature = "serve")]
fn cloud(options: karpenter_sim::serve::registrar::RegistrarOptions) -> ExitCode {
    let runtime = match real_tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(async {
        let cluster = options.cloud.cluster_name.clone();
        let kubeconfig = options.kubeconfig.clone();
        let registrar = match karpenter_sim::serve::registrar::start(options).await {
            Ok(registrar) => registrar,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        };
        println!(
            "karpenter-sim cloud: cluster {cluster}, nodes join {}",
            kubeconfig.display()
        );
        println!("AWS_ENDPOINT_URL={}", registrar.aws_url());
        println!("ready");
        registrar.run_until(stop_signal()).await;
        println!("karpenter-sim cloud: stopped");
        ExitCode::SUCCESS
    })
}

/// `karpenter-sim serve`: serves until Ctrl-C or SIGTERM.
#[cfg(feature = "serve")]
fn serve(options: karpenter_sim::serve::ServeOptions) -> ExitCode {
    let runtime = match real_tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(async {
        let running = match karpenter_sim::serve::start(&options).await {
            Ok(running) => running,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        };
        println!(
            "karpenter-sim serve: cluster {} (seed {})",
            options.cluster, options.seed
        );
        println!("KUBERNETES_API={}", running.kube_url());
        println!("AWS_ENDPOINT_URL={}", running.aws_url());
        if let Some(path) = &options.kubeconfig {
            println!("KUBECONFIG={}", path.display());
        }
        println!(
            "controller: {}",
            if options.controller {
                "in process"
            } else {
                "off (--no-controller)"
            }
        );
        if !options.kubelet {
            println!("kubelet: off (--no-kubelet): nodes join through `karpenter-sim cloud`");
        }
        println!("ready");
        running.run_until(stop_signal()).await;
        println!("karpenter-sim serve: stopped");
        ExitCode::SUCCESS
    })
}

#[cfg(feature = "serve")]
async fn stop_signal() {
    use real_tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = real_tokio::signal::ctrl_c().await;
        return;
    };
    real_tokio::select! {
        _ = real_tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
