//! `karpenter-sim`: runs a seeded simulation of the controller against the in-memory cluster and
//! fakecloud, and reports what happened.
//!
//! `karpenter-sim run --seed N --scenario NAME [--duration 2h] [--json FILE]`
//! `karpenter-sim scenarios`

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use karpenter_sim::report::Report;
use karpenter_sim::scenario::{BUILTIN, Scenario};
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
    },
    /// List the built-in scenarios.
    Scenarios,
}

fn main() -> ExitCode {
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
        } => run(seed, &scenario, duration, json),
    }
}

fn run(seed: u64, name: &str, duration: Option<Duration>, json: Option<PathBuf>) -> ExitCode {
    let commit = option_env!("KARPENTER_SIM_COMMIT").unwrap_or("unknown");
    println!("seed={seed} scenario={name} commit={commit}");
    let scenario = match Scenario::load(name) {
        Ok(s) => s,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    let replay = format!(
        "cargo xtask sim run --seed {seed} --scenario {name}{}",
        duration
            .map(|d| format!(" --duration {}", humantime::format_duration(d)))
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
    block_on(seed, future)
}

#[cfg(madsim)]
fn block_on<T>(seed: u64, future: impl std::future::Future<Output = T>) -> T {
    madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default()).block_on(future)
}

#[cfg(not(madsim))]
fn block_on<T>(_seed: u64, future: impl std::future::Future<Output = T>) -> T {
    // Time is the world's clock; tokio is only there for the few injected-latency sleeps.
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime builds")
        .block_on(future)
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
            "  {:<22} {}{}",
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
