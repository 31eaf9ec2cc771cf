//! `cargo xtask <command>`: the project's entry points, so that CI, the README and developers run
//! exactly the same steps.
//!
//! - `cargo xtask test`: format check, clippy (`-D warnings`), CRD staleness check, every test.
//! - `cargo xtask crds`: regenerate `crds/` and `charts/karpenter/crds/` from the API types.

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
    /// Everything CI runs: fmt check, clippy -D warnings, CRD staleness check, all tests.
    Test,
    /// Regenerate the committed CRD manifests.
    Crds,
}

/// Directories that hold generated CRDs.
const CRD_DIRS: [&str; 2] = ["crds", "charts/karpenter/crds"];

fn main() -> ExitCode {
    let root = workspace_root();
    let result = match Cli::parse().command {
        Task::Test => test(&root),
        Task::Crds => crds(&root),
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
    for dir in CRD_DIRS {
        run(
            root,
            "CRD staleness check",
            "cargo",
            &[
                "run",
                "--quiet",
                "--package",
                "karpenter-cli",
                "--",
                "crds",
                "--check",
                "--out",
                dir,
            ],
        )?;
    }
    // Last, so that its summary is the run's closing line.
    run_tests(root)
}

/// Runs `cargo test --workspace`, streaming its output, and closes with one summary line
/// (`tests: N passed, M failed`) so a reader (or CI) need not add up each binary's result.
fn run_tests(root: &Path) -> Result<(), String> {
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
    println!("tests: {passed} passed, {failed} failed");
    if status.success() && failed == 0 {
        Ok(())
    } else {
        Err("tests".to_string())
    }
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
