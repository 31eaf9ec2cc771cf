//! Runs every `features/*.feature` on the simulated world (cucumber, `harness = false`).
//!
//! Scenarios run one at a time, each on its own world with its own seed (1 unless it says
//! `Given the seed N`), so a failure replays exactly; the failure message names the seed and the
//! replay command. A step no definition matches fails the run (`fail_on_skipped`): a scenario
//! that silently skips its assertion would pass for the wrong reason.
//!
//! The closing `test result:` line is libtest's, counting scenarios, so `cargo xtask test` adds
//! them to its tally like any other test binary's; any failure exits non-zero.
//!
//! `FEATURES_SHOW=1` prints each scenario's final state (pods, nodes, NodeClaims, cost).
//!
//! Filter with cucumber's own flags, e.g.
//! `cargo test -p karpenter-features --test features -- --name 'spot capacity'`.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;

use cucumber::World as _;
use cucumber::writer::Stats as _;
use futures::FutureExt as _;
use karpenter_features::SimWorld;

#[path = "steps/disruption.rs"]
mod disruption;
#[path = "steps/drift.rs"]
mod drift;
#[path = "steps/expectations.rs"]
mod expectations;
#[path = "steps/interruption.rs"]
mod interruption;
#[path = "steps/launch.rs"]
mod launch;
#[path = "steps/params.rs"]
mod params;
#[path = "steps/setup.rs"]
mod setup;
#[path = "steps/termination.rs"]
mod termination;
#[path = "steps/validation.rs"]
mod validation;
#[path = "steps/workloads.rs"]
mod workloads;

/// The repository's copy of the user's examples must stay what the user gave: the features
/// crate keeps its own copy (so it is self-contained) and this checks the two never drift.
fn check_examples_unchanged(root: &Path) -> Result<(), String> {
    let examples = root.join("../examples");
    let ours = karpenter_features::manifests::directory();
    let mut names: Vec<PathBuf> = std::fs::read_dir(&examples)
        .map_err(|e| format!("{}: {e}", examples.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    names.sort();
    for path in names {
        let name = path.file_name().unwrap_or_default();
        let original = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let copy = std::fs::read(ours.join(name)).map_err(|e| {
            format!(
                "features/manifests/{} ({e}): copy it from examples/",
                name.display()
            )
        })?;
        if copy != original {
            return Err(format!(
                "features/manifests/{} differs from examples/{0}",
                name.display()
            ));
        }
    }
    Ok(())
}

#[allow(clippy::disallowed_methods)] // wall time of the test run, not of the simulation
fn main() -> ExitCode {
    let started = std::time::Instant::now();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if let Err(err) = check_examples_unchanged(&root) {
        eprintln!("features: {err}");
        println!("test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out");
        return ExitCode::FAILURE;
    }
    // Scenarios tagged `@wip` describe behaviour not built yet: they are counted as ignored, not
    // run, so the spec can say what is missing without failing the build. A `--name` or
    // `--tags` filter on the command line replaces this one (cucumber's rule), so
    // `-- --tags @wip` runs exactly those.
    let ignored = Rc::new(Cell::new(0usize));
    let counter = ignored.clone();
    // A current-thread runtime with paused time: a world whose cloud answers with latency
    // (`cloud.latency`) sleeps it there, virtually, and charges it to its own clock.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("features: cannot build a runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let writer = runtime.block_on(
        SimWorld::cucumber()
            .max_concurrent_scenarios(1)
            .before(|feature, _rule, scenario, world| {
                world.scenario = format!("{}: {}", feature.name, scenario.name);
                async {}.boxed_local()
            })
            .after(|_feature, _rule, _scenario, _finished, world| {
                async move {
                    // `FEATURES_SHOW=1` prints where each scenario's world ended: how to see what
                    // a new scenario should assert.
                    if std::env::var_os("FEATURES_SHOW").is_some()
                        && let Some(world) = world
                    {
                        println!("{}", world.summary());
                    }
                }
                .boxed_local()
            })
            .fail_on_skipped()
            .filter_run(&root, move |_feature, _rule, scenario| {
                let wip = scenario.tags.iter().any(|t| t == "wip");
                if wip {
                    counter.set(counter.get() + 1);
                }
                !wip
            }),
    );
    let scenarios = writer.scenarios_stats();
    let failed = scenarios.failed + writer.parsing_errors() + writer.hook_errors();
    let verdict = if writer.execution_has_failed() {
        "FAILED"
    } else {
        "ok"
    };
    println!(
        "test result: {verdict}. {} passed; {failed} failed; {} ignored; 0 measured; 0 filtered out; finished in {:.2}s",
        scenarios.passed,
        ignored.get(),
        started.elapsed().as_secs_f64()
    );
    if writer.execution_has_failed() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
