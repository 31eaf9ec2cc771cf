//! Subcommands of the `karpenter` binary.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod controller;
mod disrupt;
mod plan;
mod validate;

/// karpenter-rs: a Kubernetes node autoscaler for EKS, drop-in compatible with Karpenter's v1 APIs.
#[derive(Debug, Parser)]
#[command(name = "karpenter", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the controller (the container's entrypoint). Settings come from upstream's
    /// environment variables (CLUSTER_NAME, ...) or the matching flags.
    Controller(Box<controller::Settings>),
    /// One size of the scheduling benchmark, as a JSON line (used by `cargo xtask bench`).
    #[command(hide = true)]
    BenchScheduling {
        #[arg(long)]
        pods: usize,
        /// Solves to run; the median is reported.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// The pod mix: upstream's `makeDiversePods` or `makePreferencePods`.
        #[arg(long, value_enum, default_value_t = bench::Workload::Diverse)]
        workload: bench::Workload,
        /// Solve with `PREFERENCE_POLICY=Ignore` (upstream's `BenchmarkIgnorePreferences`).
        #[arg(long)]
        ignore_preferences: bool,
        /// Write the last solve's decisions (every claim's pods, requirements, instance types,
        /// requests and price; placements; unschedulable pods) to this file as JSON, so two
        /// builds' decisions can be compared byte for byte.
        #[arg(long)]
        dump_claims: Option<PathBuf>,
    },
    /// One full disruption pass over a busy cluster, as a JSON line (used by `cargo xtask bench`).
    #[command(hide = true)]
    BenchDisruption {
        #[arg(long, default_value_t = 1_000)]
        nodes: usize,
        #[arg(long, default_value_t = 10_000)]
        pods: usize,
        /// Passes to run; the median is reported.
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
    /// Validate NodePool, NodeClaim and EC2NodeClass manifests as the API server and Karpenter
    /// would. Exit 0 when all are valid, 1 when any is invalid, 2 when input cannot be read.
    Validate {
        /// A YAML/JSON file (multi-document allowed), or `-` for stdin. Repeatable.
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<String>,
    },
    /// Dry-run provisioning: the NodeClaims Karpenter would create for the pending pods of the
    /// given manifests, the pods existing nodes would take, and the pods nothing can run. Exit 0
    /// with a plan, 2 when input cannot be read.
    Plan {
        /// A YAML/JSON file (multi-document allowed), or `-` for stdin. Repeatable.
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<String>,
        /// Instance-type catalog file (YAML/JSON); the built-in us-west-2 catalog by default.
        #[arg(long)]
        catalog: Option<String>,
        /// Output format.
        #[arg(short = 'o', long = "output", value_enum, default_value = "json")]
        output: plan::Format,
        /// Also decide what disruption would do now: the commands successive passes would start
        /// (JSON: a top-level "disruption" object) and why every other managed node is kept.
        #[arg(long)]
        disrupt: bool,
        /// The time disruption decides at (RFC 3339), instead of the wall clock.
        #[arg(long, requires = "disrupt")]
        now: Option<String>,
        /// Also show what launching each planned NodeClaim would send EC2 (JSON:
        /// `launchTemplates` per NodeClaim; table: the user data), for the cluster the
        /// `--cluster-*` flags describe.
        #[arg(long, requires_all = ["cluster_name", "cluster_endpoint", "cluster_ca_bundle"])]
        show_launch: bool,
        /// The cluster's name (with --show-launch).
        #[arg(long)]
        cluster_name: Option<String>,
        /// The API server endpoint nodes join (`https://...`).
        #[arg(long)]
        cluster_endpoint: Option<String>,
        /// The cluster CA bundle, base64 of PEM as EKS reports it.
        #[arg(long)]
        cluster_ca_bundle: Option<String>,
        /// The service CIDR (the DNS IP is its .10 unless --cluster-dns says otherwise).
        #[arg(long)]
        cluster_cidr: Option<String>,
        /// The cluster DNS IP.
        #[arg(long)]
        cluster_dns: Option<String>,
    },
    /// Write the CRD manifests (NodePool, NodeClaim, EC2NodeClass) generated from the API types.
    Crds {
        /// Directory to write into; prints to stdout when omitted.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Do not write: exit 1 if the files in --out differ from what would be generated.
        #[arg(long, requires = "out")]
        check: bool,
    },
}

pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Controller(settings) => controller::run(*settings),
        Command::Crds { out, check } => crds(out, check),
        Command::Validate { files } => validate::run(&files),
        Command::Plan {
            files,
            catalog,
            output,
            disrupt,
            now,
            show_launch,
            cluster_name,
            cluster_endpoint,
            cluster_ca_bundle,
            cluster_cidr,
            cluster_dns,
        } => {
            let launch = show_launch.then(|| plan::ShowLaunch {
                name: cluster_name.unwrap_or_default(),
                endpoint: cluster_endpoint.unwrap_or_default(),
                ca_bundle: cluster_ca_bundle.unwrap_or_default(),
                cidr: cluster_cidr,
                dns: cluster_dns,
            });
            plan::run(
                &files,
                catalog.as_deref(),
                output,
                plan::Disrupt {
                    enabled: disrupt,
                    now,
                },
                launch,
            )
        }
        Command::BenchScheduling {
            pods,
            runs,
            workload,
            ignore_preferences,
            dump_claims,
        } => bench::run(
            pods,
            runs,
            workload,
            ignore_preferences,
            dump_claims.as_deref(),
        ),
        Command::BenchDisruption { nodes, pods, runs } => bench::disruption::run(nodes, pods, runs),
    }
}

fn crds(out: Option<PathBuf>, check: bool) -> ExitCode {
    let generated = karpenter_core::api::crd::all();
    let Some(dir) = out else {
        for crd in &generated {
            print!("{}", crd.to_yaml());
        }
        return ExitCode::SUCCESS;
    };
    let mut stale = 0;
    for crd in &generated {
        let path = dir.join(crd.file_name);
        let want = crd.to_yaml();
        if check {
            let have = std::fs::read_to_string(&path).unwrap_or_default();
            if have != want {
                eprintln!("stale: {} (run `cargo xtask crds`)", path.display());
                stale += 1;
            }
        } else if let Err(err) = std::fs::write(&path, want) {
            eprintln!("error: cannot write {}: {err}", path.display());
            return ExitCode::from(2);
        } else {
            println!("wrote {}", path.display());
        }
    }
    if stale > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
