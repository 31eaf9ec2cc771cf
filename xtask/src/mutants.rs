//! `cargo xtask mutants`: the mutation catalogue of issue 22 (`sim/mutations/*.patch`, each a
//! realistic controller-logic bug) run against the seeded swarm.
//!
//! Each mutation is applied in one scratch worktree (`target/mutants/tree`, a detached `git
//! worktree` of `HEAD`, reset between mutations), the madsim simulator is built there the way
//! `cargo xtask sim` builds it (release, `RUSTFLAGS=--cfg madsim`) into one shared target
//! directory (each mutation recompiles only the crates its patch touches and those above them),
//! and the swarm runs with `--stop-on-fail` (a caught mutation costs only the seeds up to its
//! first failure). A mutation is *caught* when some seed fails; one that survives every seed,
//! does not apply or does not build is not, and makes the command exit non-zero.
//!
//! The mutants are built from `HEAD`, not the working tree (uncommitted controller changes are
//! not in them); the patches themselves are read from the working tree.

// Build and swarm wall times are what this reports (measurements of the harness, not of a
// simulated world): the wall clock is the point here, as in `e2e.rs`.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

/// Where the patches live, relative to the workspace root.
pub const MUTATIONS_DIR: &str = "sim/mutations";
/// Seeds each mutation's swarm covers by default (issue 22: caught within seeds 1..100).
pub const DEFAULT_SEEDS: &str = "1..100";
/// The one path prefix a mutation may touch: controller logic, never the simulation.
pub const MUTABLE_PREFIX: &str = "controller/core/";

/// `cargo xtask mutants --short`: the five mutations the swarm caught fastest in the measured
/// runs (`sim/mutations/README.md`, Results), for a quick check that the swarm still catches
/// controller bugs. Not part of `cargo xtask test`: even these cost a release rebuild each.
pub const SHORT: [&str; 5] = [
    "04-instance-terminated-as-drain-starts",
    "09-disrupted-taint-never-applied",
    "01-gc-does-nothing",
    "03-do-not-disrupt-pods-evicted",
    "07-in-flight-nodeclaims-ignored",
];

/// The options of `cargo xtask mutants`.
pub struct Options {
    pub seeds: String,
    pub jobs: usize,
    /// Mutation names (`01-gc-does-nothing` or `gc-does-nothing`); empty: all.
    pub only: Vec<String>,
    pub json: Option<PathBuf>,
    /// Source files of `karpenter-core` (workspace-relative) whose mutants `cargo-mutants`
    /// generates, run instead of the catalogue ([`from_cargo_mutants`]); empty: the catalogue.
    pub cargo_mutants: Vec<String>,
    /// At most this many of cargo-mutants' mutants, every k-th of its list so the sample spans
    /// every function of the files (`None`: all).
    pub limit: Option<usize>,
}

/// One patch of the catalogue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mutation {
    /// The file stem, `NN-name`.
    pub name: String,
    pub path: PathBuf,
}

impl Mutation {
    /// The name without its `NN-` number.
    pub fn short_name(&self) -> &str {
        match self.name.split_once('-') {
            Some((number, rest)) if number.chars().all(|c| c.is_ascii_digit()) => rest,
            _ => &self.name,
        }
    }

    fn selected(&self, only: &[String]) -> bool {
        only.is_empty()
            || only
                .iter()
                .any(|o| o == &self.name || o == self.short_name())
    }
}

/// Every `*.patch` of `dir`, by name.
pub fn catalogue(dir: &Path) -> Result<Vec<Mutation>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut out = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        if path.extension().is_some_and(|e| e == "patch") {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_default();
            out.push(Mutation { name, path });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The files a unified diff changes (its `+++ b/...` lines).
pub fn touched_files(patch: &str) -> Vec<String> {
    patch
        .lines()
        .filter_map(|l| l.strip_prefix("+++ b/"))
        .map(str::to_string)
        .collect()
}

/// How one mutation ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Some seed failed.
    Caught {
        invariants: Vec<String>,
        seeds_failed: usize,
        seeds_run: usize,
        replay: String,
    },
    /// Every seed passed.
    Survived { seeds_run: usize },
    /// `git apply` refused the patch.
    DoesNotApply(String),
    /// The mutated simulator did not compile.
    DoesNotBuild(String),
    /// The swarm did not produce a summary (a crash, a usage error).
    SwarmError(String),
}

impl Verdict {
    fn label(&self) -> &'static str {
        match self {
            Verdict::Caught { .. } => "caught",
            Verdict::Survived { .. } => "SURVIVED",
            Verdict::DoesNotApply(_) => "DOES NOT APPLY",
            Verdict::DoesNotBuild(_) => "DOES NOT BUILD",
            Verdict::SwarmError(_) => "SWARM ERROR",
        }
    }
}

/// Reads a swarm summary (`karpenter-sim swarm --json`): caught when any seed failed.
pub fn verdict_of(summary: &Value) -> Verdict {
    let seeds_run = summary["seeds"].as_u64().unwrap_or(0) as usize;
    let failed = summary["failed"].as_array().cloned().unwrap_or_default();
    let Some(first) = failed.first() else {
        return Verdict::Survived { seeds_run };
    };
    let invariants: BTreeSet<String> = failed
        .iter()
        .flat_map(|f| f["invariants"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v["invariant"].as_str().map(str::to_string))
        .collect();
    Verdict::Caught {
        invariants: invariants.into_iter().collect(),
        seeds_failed: failed.len(),
        seeds_run,
        replay: first["replay"].as_str().unwrap_or_default().to_string(),
    }
}

/// One row of the report.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub name: String,
    pub verdict: Verdict,
    pub build_seconds: f64,
    pub run_seconds: f64,
}

/// `cargo xtask mutants`: see the module docs. `Err` when a step of the harness itself failed or
/// any mutation was not caught.
pub fn run(root: &Path, options: &Options) -> Result<(), String> {
    let generated = !options.cargo_mutants.is_empty();
    let mutations: Vec<Mutation> = if generated {
        let dir = root.join("target/mutants/cargo-mutants");
        sample(
            from_cargo_mutants(root, &options.cargo_mutants, &dir)?,
            options.limit,
        )
    } else {
        catalogue(&root.join(MUTATIONS_DIR))?
            .into_iter()
            .filter(|m| m.selected(&options.only))
            .collect()
    };
    if mutations.is_empty() {
        return Err(format!("mutants (no mutation matches {:?})", options.only));
    }
    let commit = git_output(root, &["rev-parse", "HEAD"])?;
    let tree = root.join("target/mutants/tree");
    prepare_tree(root, &tree, &commit)?;
    let target = mutants_target_dir(root);
    eprintln!(
        "xtask: mutants: {} mutations of {} on seeds {} (jobs {}), tree {}, target {}",
        mutations.len(),
        &commit[..12.min(commit.len())],
        options.seeds,
        options.jobs,
        tree.display(),
        target.display()
    );
    let mut outcomes = Vec::new();
    for mutation in &mutations {
        let results = root.join("target/mutants/results").join(&mutation.name);
        let outcome = run_one(mutation, &tree, &target, &results, &commit, options)?;
        eprintln!(
            "xtask: mutants: {}: {} (build {:.0} s, swarm {:.0} s)",
            outcome.name,
            outcome.verdict.label(),
            outcome.build_seconds,
            outcome.run_seconds
        );
        outcomes.push(outcome);
        // Written after each mutation: a long run interrupted keeps what it measured.
        if let Some(path) = &options.json {
            let text = serde_json::to_string_pretty(&report_json(&outcomes, &commit, options))
                .unwrap_or_default();
            std::fs::write(root.join(path), text + "\n")
                .map_err(|e| format!("mutants (cannot write {}: {e})", path.display()))?;
        }
    }
    reset_tree(&tree, &commit)?;
    println!("{}", table(&outcomes));
    // A generated mutant that does not compile is unviable (cargo-mutants' own word), not a
    // survivor: the type checker caught it before any test could.
    let uncaught: Vec<&str> = outcomes
        .iter()
        .filter(|o| !matches!(o.verdict, Verdict::Caught { .. }))
        .filter(|o| !(generated && matches!(o.verdict, Verdict::DoesNotBuild(_))))
        .map(|o| o.name.as_str())
        .collect();
    if uncaught.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "mutants ({} not caught: {})",
            uncaught.len(),
            uncaught.join(", ")
        ))
    }
}

/// The mutants `cargo mutants --list --json` generates over `files` of `karpenter-core`, each
/// written to `dir` as a patch `git apply` takes (`cmNNN-<what it does>.patch`), in
/// cargo-mutants' order. cargo-mutants makes the mutants (operators swapped, bodies replaced by
/// default values, match arms deleted); the swarm, not `cargo test`, judges them, as the
/// catalogue's: cargo-mutants runs only a crate's own tests, and the point is whether the
/// seeded worlds and their invariants notice.
pub fn from_cargo_mutants(
    root: &Path,
    files: &[String],
    dir: &Path,
) -> Result<Vec<Mutation>, String> {
    let mut command = Command::new("cargo");
    command.args(["mutants", "--list", "--json", "--package", "karpenter-core"]);
    for file in files {
        command.args(["--file", file]);
    }
    let output = command
        .current_dir(root)
        .output()
        .map_err(|e| format!("mutants (could not start cargo mutants: {e})"))?;
    if !output.status.success() {
        return Err(format!(
            "mutants (cargo mutants --list failed; `cargo install cargo-mutants` first?): {}",
            last_lines(&output.stderr, 5)
        ));
    }
    let listed: Vec<Value> = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("mutants (cargo mutants --list --json: {e})"))?;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("mutants (cannot create {}: {e})", dir.display()))?;
    let mut out = Vec::new();
    for (i, mutant) in listed.iter().enumerate() {
        let (Some(file), Some(diff)) = (mutant["file"].as_str(), mutant["diff"].as_str()) else {
            return Err(format!(
                "mutants (a listed mutant has no file or diff: {mutant})"
            ));
        };
        let what = mutant["name"].as_str().unwrap_or_default();
        let name = format!("cm{:03}-{}", i + 1, slug(what));
        let path = dir.join(format!("{name}.patch"));
        std::fs::write(&path, git_patch(file, diff))
            .map_err(|e| format!("mutants (cannot write {}: {e})", path.display()))?;
        out.push(Mutation { name, path });
    }
    Ok(out)
}

/// cargo-mutants' diff with the headers `git apply` reads (`--- a/FILE`, `+++ b/FILE`; its own
/// `+++` line names the mutation instead of a file).
pub fn git_patch(file: &str, diff: &str) -> String {
    let mut out = String::new();
    for (i, line) in diff.lines().enumerate() {
        match i {
            0 if line.starts_with("--- ") => out += &format!("--- a/{file}"),
            1 if line.starts_with("+++ ") => out += &format!("+++ b/{file}"),
            _ => out += line,
        }
        out.push('\n');
    }
    out
}

/// A file-name-safe form of a mutant's description: `budgets.rs:52:31: replace && with ||
/// in is_active` → `budgets-rs-52-31-replace-and-and-with-or-or-in-is-active`, at most 80
/// characters.
fn slug(text: &str) -> String {
    let text = text.rsplit('/').next().unwrap_or(text);
    let spelled = text.replace("&&", " and and ").replace("||", " or or ");
    let mut out = String::new();
    for c in spelled.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').chars().take(80).collect()
}

/// Every k-th of `mutations` so that at most `limit` are left, spread over the whole list.
pub fn sample(mutations: Vec<Mutation>, limit: Option<usize>) -> Vec<Mutation> {
    match limit {
        Some(limit) if limit > 0 && mutations.len() > limit => {
            let step = mutations.len().div_ceil(limit);
            mutations.into_iter().step_by(step).collect()
        }
        _ => mutations,
    }
}

/// The shared target directory of the mutants' builds (`KARPENTER_MUTANTS_TARGET_DIR` overrides
/// it, e.g. to reuse the dependencies of an existing madsim build).
fn mutants_target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("KARPENTER_MUTANTS_TARGET_DIR") {
        Some(dir) => root.join(dir),
        None => root.join("target/mutants/target"),
    }
}

/// Creates the scratch worktree once (`git worktree add --detach`), else resets it to `commit`.
fn prepare_tree(root: &Path, tree: &Path, commit: &str) -> Result<(), String> {
    if !tree.join(".git").exists() {
        // A directory left by a removed worktree would make `worktree add` fail.
        let _ = git_output(root, &["worktree", "prune"]);
        let tree_arg = tree.to_string_lossy().to_string();
        git_output(root, &["worktree", "add", "--detach", &tree_arg, commit])?;
    }
    reset_tree(tree, commit)
}

fn reset_tree(tree: &Path, commit: &str) -> Result<(), String> {
    git_output(tree, &["reset", "--quiet", "--hard", commit])?;
    git_output(tree, &["clean", "--quiet", "-fd"])?;
    Ok(())
}

/// Applies, builds and swarms one mutation; the swarm's summary (`summary.json`), output
/// (`swarm.txt`) and failing seeds' logs (`logs/`) go to `results`.
fn run_one(
    mutation: &Mutation,
    tree: &Path,
    target: &Path,
    results: &Path,
    commit: &str,
    options: &Options,
) -> Result<Outcome, String> {
    let mut outcome = Outcome {
        name: mutation.name.clone(),
        verdict: Verdict::Survived { seeds_run: 0 },
        build_seconds: 0.0,
        run_seconds: 0.0,
    };
    reset_tree(tree, commit)?;
    let text = std::fs::read_to_string(&mutation.path)
        .map_err(|e| format!("mutants (cannot read {}: {e})", mutation.path.display()))?;
    if let Some(file) = touched_files(&text)
        .into_iter()
        .find(|f| !f.starts_with(MUTABLE_PREFIX))
    {
        outcome.verdict = Verdict::DoesNotApply(format!(
            "touches {file}: a mutation changes {MUTABLE_PREFIX} only"
        ));
        return Ok(outcome);
    }
    let patch = mutation.path.to_string_lossy().to_string();
    if let Err(message) = git_output(tree, &["apply", &patch]) {
        outcome.verdict = Verdict::DoesNotApply(message);
        return Ok(outcome);
    }
    let started = Instant::now();
    let build = Command::new("cargo")
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
        .arg(target)
        .env("RUSTFLAGS", "--cfg madsim")
        // Incremental release builds: a mutation changes one function of `karpenter-core`, so
        // most of the workspace crates' codegen is reused from the previous mutation's build.
        .env("CARGO_INCREMENTAL", "1")
        .env(
            "KARPENTER_SIM_COMMIT",
            format!("{}+{}", &commit[..12.min(commit.len())], mutation.name),
        )
        .current_dir(tree)
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("mutants (could not start cargo: {e})"))?;
    outcome.build_seconds = started.elapsed().as_secs_f64();
    if !build.status.success() {
        outcome.verdict = Verdict::DoesNotBuild(last_lines(&build.stderr, 20));
        return Ok(outcome);
    }
    let _ = std::fs::remove_dir_all(results);
    std::fs::create_dir_all(results)
        .map_err(|e| format!("mutants (cannot create {}: {e})", results.display()))?;
    let summary = results.join("summary.json");
    let logs = results.join("logs");
    let output = std::fs::File::create(results.join("swarm.txt"))
        .map_err(|e| format!("mutants (cannot create {}: {e})", results.display()))?;
    let started = Instant::now();
    let swarm = Command::new(target.join("release/karpenter-sim"))
        .args(["swarm", "--seeds", &options.seeds, "--jobs"])
        .arg(options.jobs.to_string())
        .arg("--stop-on-fail")
        .arg("--json")
        .arg(&summary)
        .arg("--logs")
        .arg(&logs)
        .current_dir(tree)
        .stdout(output)
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("mutants (could not start karpenter-sim: {e})"))?;
    outcome.run_seconds = started.elapsed().as_secs_f64();
    outcome.verdict = match std::fs::read_to_string(&summary)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
    {
        Some(value) => verdict_of(&value),
        None => Verdict::SwarmError(format!(
            "exit {:?}: {}",
            swarm.status.code(),
            last_lines(&swarm.stderr, 10)
        )),
    };
    Ok(outcome)
}

/// The report as a Markdown table (pasted into `sim/mutations/README.md`).
pub fn table(outcomes: &[Outcome]) -> String {
    let mut out = String::from(
        "| mutation | verdict | invariants fired | seeds failed / run | first replay | build s | swarm s |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for o in outcomes {
        let (invariants, seeds, replay) = match &o.verdict {
            Verdict::Caught {
                invariants,
                seeds_failed,
                seeds_run,
                replay,
            } => (
                invariants.join(", "),
                format!("{seeds_failed} / {seeds_run}"),
                format!("`{replay}`"),
            ),
            Verdict::Survived { seeds_run } => {
                ("–".to_string(), format!("0 / {seeds_run}"), "–".to_string())
            }
            Verdict::DoesNotApply(m) | Verdict::DoesNotBuild(m) | Verdict::SwarmError(m) => (
                first_line(m).replace('|', "\\|"),
                "–".to_string(),
                "–".to_string(),
            ),
        };
        out += &format!(
            "| {} | {} | {invariants} | {seeds} | {replay} | {:.0} | {:.0} |\n",
            o.name,
            o.verdict.label(),
            o.build_seconds,
            o.run_seconds
        );
    }
    out
}

fn report_json(outcomes: &[Outcome], commit: &str, options: &Options) -> Value {
    let rows: Vec<Value> = outcomes
        .iter()
        .map(|o| {
            let mut row = json!({
                "name": o.name,
                "verdict": o.verdict.label(),
                "buildSeconds": o.build_seconds,
                "runSeconds": o.run_seconds,
            });
            match &o.verdict {
                Verdict::Caught {
                    invariants,
                    seeds_failed,
                    seeds_run,
                    replay,
                } => {
                    row["invariants"] = json!(invariants);
                    row["seedsFailed"] = json!(seeds_failed);
                    row["seedsRun"] = json!(seeds_run);
                    row["replay"] = json!(replay);
                }
                Verdict::Survived { seeds_run } => row["seedsRun"] = json!(seeds_run),
                Verdict::DoesNotApply(m) | Verdict::DoesNotBuild(m) | Verdict::SwarmError(m) => {
                    row["error"] = json!(m)
                }
            }
            row
        })
        .collect();
    json!({"commit": commit, "seeds": options.seeds, "jobs": options.jobs, "mutations": rows})
}

/// Runs git in `dir`; its trimmed stdout, or `Err` with its stderr.
fn git_output(dir: &Path, args: &[&str]) -> Result<String, String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("could not start git: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    } else {
        Err(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

fn last_lines(bytes: &[u8], n: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn first_line(text: &str) -> &str {
    text.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("xtask lives in the workspace")
            .to_path_buf()
    }

    #[test]
    fn every_mutation_still_applies_to_the_tree_and_touches_only_controller_core() {
        let root = root();
        let mutations = catalogue(&root.join(MUTATIONS_DIR)).expect("the catalogue reads");
        assert!(mutations.len() >= 25, "{} mutations", mutations.len());
        for mutation in &mutations {
            let text = std::fs::read_to_string(&mutation.path).expect("the patch reads");
            let files = touched_files(&text);
            assert!(!files.is_empty(), "{} changes no file", mutation.name);
            for file in &files {
                assert!(
                    file.starts_with(MUTABLE_PREFIX),
                    "{} touches {file}: a mutation changes controller logic only",
                    mutation.name
                );
            }
            let patch = mutation.path.to_string_lossy().to_string();
            if let Err(message) = git_output(&root, &["apply", "--check", &patch]) {
                panic!(
                    "mutation {} no longer applies (re-cut it against the moved code): {message}",
                    mutation.name
                );
            }
        }
    }

    #[test]
    fn every_mutation_is_numbered_uniquely_and_described_in_the_readme() {
        let root = root();
        let readme = std::fs::read_to_string(root.join(MUTATIONS_DIR).join("README.md"))
            .expect("sim/mutations/README.md");
        let mutations = catalogue(&root.join(MUTATIONS_DIR)).expect("the catalogue reads");
        let mut numbers = BTreeSet::new();
        for mutation in &mutations {
            let (number, _) = mutation.name.split_once('-').expect("NN-name");
            assert!(
                number.len() == 2 && numbers.insert(number.to_string()),
                "{}: a two-digit number no other mutation has",
                mutation.name
            );
            assert!(
                readme.contains(&format!("| {} |", mutation.name)),
                "{} has no row in sim/mutations/README.md",
                mutation.name
            );
        }
    }

    #[test]
    fn a_summary_with_failed_seeds_is_caught_and_names_every_invariant_that_fired() {
        let summary = json!({
            "seeds": 7,
            "failed": [
                {"seed": 3, "replay": "cargo xtask sim swarm --seeds 3..3 --scenario default",
                 "invariants": [{"invariant": "liveness"}, {"invariant": "leaks"}]},
                {"seed": 5, "replay": "r5", "invariants": [{"invariant": "liveness"}]},
            ],
        });
        assert_eq!(
            verdict_of(&summary),
            Verdict::Caught {
                invariants: vec!["leaks".into(), "liveness".into()],
                seeds_failed: 2,
                seeds_run: 7,
                replay: "cargo xtask sim swarm --seeds 3..3 --scenario default".into(),
            }
        );
        let clean = json!({"seeds": 100, "failed": []});
        assert_eq!(verdict_of(&clean), Verdict::Survived { seeds_run: 100 });
    }

    #[test]
    fn the_short_form_is_five_distinct_mutations_of_the_catalogue() {
        let root = root();
        let names: BTreeSet<String> = catalogue(&root.join(MUTATIONS_DIR))
            .expect("the catalogue reads")
            .into_iter()
            .map(|m| m.name)
            .collect();
        let short: BTreeSet<&str> = SHORT.iter().copied().collect();
        assert_eq!(short.len(), 5, "{SHORT:?}");
        for name in SHORT {
            assert!(names.contains(name), "{name} is not in sim/mutations/");
        }
    }

    #[test]
    fn a_mutation_is_selected_by_its_full_or_short_name() {
        let m = Mutation {
            name: "01-gc-does-nothing".into(),
            path: PathBuf::from("x.patch"),
        };
        assert_eq!(m.short_name(), "gc-does-nothing");
        assert!(m.selected(&[]));
        assert!(m.selected(&["gc-does-nothing".into()]));
        assert!(m.selected(&["01-gc-does-nothing".into()]));
        assert!(!m.selected(&["gc".into()]));
    }

    #[test]
    fn a_mutation_that_did_not_apply_or_build_is_reported_as_such_not_as_caught() {
        let rows = [
            Outcome {
                name: "01-a".into(),
                verdict: Verdict::DoesNotApply("error: patch failed: x.rs:3".into()),
                build_seconds: 0.0,
                run_seconds: 0.0,
            },
            Outcome {
                name: "02-b".into(),
                verdict: Verdict::DoesNotBuild("error[E0425]: cannot find value".into()),
                build_seconds: 12.0,
                run_seconds: 0.0,
            },
        ];
        let text = table(&rows);
        assert!(text.contains("| 01-a | DOES NOT APPLY | error: patch failed: x.rs:3 |"));
        assert!(text.contains("| 02-b | DOES NOT BUILD |"));
        assert!(!text.contains("caught"), "{text}");
    }

    #[test]
    fn a_cargo_mutants_diff_becomes_a_patch_git_applies_to_the_tree() {
        // A cargo-mutants diff of the catalogue's own README, as `--list --json` writes one: its
        // `+++` line names the mutation, not a file.
        let file = "sim/mutations/README.md";
        let text = std::fs::read_to_string(root().join(file)).expect("readme");
        let lines: Vec<&str> = text.lines().take(3).collect();
        let diff = format!(
            "--- {file}\n+++ replace the title with xyzzy\n@@ -1,3 +1,3 @@\n-{}\n+xyzzy\n {}\n {}\n",
            lines[0], lines[1], lines[2]
        );
        let patch = git_patch(file, &diff);
        assert!(patch.starts_with(&format!("--- a/{file}\n+++ b/{file}\n@@")));
        assert_eq!(touched_files(&patch), [file]);
        let path = root().join("target/mutants-test-cargo-mutants.patch");
        std::fs::create_dir_all(path.parent().expect("target")).expect("target dir");
        std::fs::write(&path, &patch).expect("write");
        let applies = git_output(&root(), &["apply", "--check", &path.to_string_lossy()]);
        let _ = std::fs::remove_file(&path);
        assert_eq!(applies, Ok(String::new()));
    }

    #[test]
    fn a_sample_of_generated_mutants_spans_the_whole_list() {
        let mutations: Vec<Mutation> = (1..=10)
            .map(|i| Mutation {
                name: format!("cm{i:03}"),
                path: PathBuf::new(),
            })
            .collect();
        let names = |v: Vec<Mutation>| v.into_iter().map(|m| m.name).collect::<Vec<_>>();
        assert_eq!(
            names(sample(mutations.clone(), Some(4))),
            ["cm001", "cm004", "cm007", "cm010"]
        );
        assert_eq!(sample(mutations.clone(), None).len(), 10);
        assert_eq!(sample(mutations, Some(20)).len(), 10);
        assert_eq!(
            slug(
                "controller/core/src/disruption/budgets.rs:52:31: replace && with || in is_active"
            ),
            "budgets-rs-52-31-replace-and-and-with-or-or-in-is-active"
        );
    }
}
