//! `karpenter bench-scheduling --pods N`: one size of the scheduling benchmark (upstream's
//! diverse-pod mix, or its preference-pod mix, on 400 fake instance types), printed as one JSON
//! object. `cargo xtask bench` runs it once per size in a fresh process, so each size's peak RSS
//! is its own.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use karpenter_core::scheduling::{Input, Options, PodInfo, PreferencePolicy, Results, solve};

pub mod disruption;
mod workload;

use workload::{diverse_pods, instance_types, node_pool, preference_pods};

/// Which of upstream's pod mixes a benchmark run solves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// `makeDiversePods`: generic, spread, affinity and anti-affinity pods in equal parts.
    Diverse,
    /// `makePreferencePods`: preferred node affinity and preferred zonal/hostname
    /// anti-affinity, the zonal term unsatisfiable past three pods.
    Preferences,
}

impl Workload {
    fn pods(self, count: usize) -> Box<dyn Iterator<Item = Pod>> {
        match self {
            Workload::Diverse => Box::new(diverse_pods(count)),
            Workload::Preferences => Box::new(preference_pods(count)),
        }
    }
}

/// Runs `runs` solves of `pods` pods of `workload`; reports the median time per solve. With
/// `dump`, the last solve's decisions are written there (see [`decisions`]).
pub fn run(
    pods: usize,
    runs: usize,
    workload: Workload,
    ignore_preferences: bool,
    dump: Option<&Path>,
) -> ExitCode {
    let options = Options {
        preference_policy: if ignore_preferences {
            PreferencePolicy::Ignore
        } else {
            PreferencePolicy::Respect
        },
        ..Options::default()
    };
    let catalog = instance_types(400);
    let pools = vec![node_pool()];
    let namespaces = BTreeMap::new();
    let mut times = Vec::new();
    let mut outcome = None;
    for _ in 0..runs.max(1) {
        // Reading each Pod into the scheduler's view is part of a solve, as in upstream's
        // scheduler; it is timed pod by pod while the Pod objects are generated and dropped, so
        // the process never holds 100,000 full Pod objects next to their scheduling views.
        let mut convert = Duration::ZERO;
        let infos: Vec<PodInfo> = workload
            .pods(pods)
            .map(|pod| {
                let (elapsed, info) = timed(|| PodInfo::from_pod(&pod, Vec::new()));
                convert += elapsed;
                info.expect("benchmark pods are valid")
            })
            .collect();
        let (elapsed, results) = timed(|| {
            solve(Input {
                node_pools: &pools,
                catalog: &catalog,
                pool_catalogs: &karpenter_core::scheduling::NO_POOL_CATALOGS,
                nodes: &[],
                daemonsets: &[],
                pods: &infos,
                namespaces: &namespaces,
                options,
            })
        });
        times.push(elapsed + convert);
        outcome = Some(results);
    }
    times.sort();
    let median = times[times.len() / 2].as_secs_f64();
    let results = outcome.expect("at least one run");
    if let Some(path) = dump {
        let text = serde_json::to_string_pretty(&decisions(&results)).expect("JSON values print");
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    let scheduled: usize = results.new_claims.iter().map(|c| c.pods.len()).sum();
    let report = serde_json::json!({
        "pods": pods,
        "workload": format!("{workload:?}").to_lowercase(),
        "preferencePolicy": format!("{:?}", options.preference_policy),
        "secondsPerSolve": median,
        "podsPerSecond": if median > 0.0 { pods as f64 / median } else { 0.0 },
        "nodes": results.new_claims.len(),
        "scheduled": scheduled,
        "unschedulable": results.unschedulable.len(),
        "peakRssBytes": peak_rss_bytes(),
        "runs": times.len(),
    });
    println!("{report}");
    if results.unschedulable.is_empty() && scheduled == pods {
        ExitCode::SUCCESS
    } else {
        for u in results.unschedulable.iter().take(5) {
            eprintln!("unschedulable {}: {}", u.pod, u.reason);
        }
        ExitCode::FAILURE
    }
}

/// A solve's decisions as JSON, in the solver's own order (claims in creation order, pods in
/// placement order; requirements, requests and placements as the results hold them), so two
/// builds that decide alike print byte-equal files. Prices are printed exactly (shortest
/// round-trip form).
fn decisions(results: &Results) -> serde_json::Value {
    let claims: Vec<serde_json::Value> = results
        .new_claims
        .iter()
        .map(|c| {
            let requests: BTreeMap<&str, i64> = c.requests.iter().collect();
            serde_json::json!({
                "nodePool": c.node_pool,
                "pods": c.pods,
                "requirements": c.requirements,
                "instanceTypes": c.instance_types.iter().map(|n| n.as_ref()).collect::<Vec<&str>>(),
                "requests": requests,
                "price": c.price,
            })
        })
        .collect();
    let existing: Vec<serde_json::Value> = results
        .existing_nodes
        .iter()
        .map(|n| serde_json::json!({"node": n.node, "pods": n.pods}))
        .collect();
    let unschedulable: Vec<serde_json::Value> = results
        .unschedulable
        .iter()
        .map(|u| {
            serde_json::json!({
                "pod": u.pod,
                "reason": u.reason,
                "awaitingReservation": u.awaiting_reservation,
            })
        })
        .collect();
    serde_json::json!({
        "newClaims": claims,
        "existingNodes": existing,
        "unschedulable": unschedulable,
    })
}

/// Wall-clock timing is what a benchmark measures; this binary is outside the deterministic core.
#[allow(clippy::disallowed_methods)]
pub(crate) fn timed<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let start = std::time::Instant::now();
    let out = f();
    (start.elapsed(), out)
}

/// Peak resident set size of this process (Linux `VmHWM`), 0 where unavailable.
pub(crate) fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| {
                    l.split_whitespace()
                        .nth(1)
                        .and_then(|kb| kb.parse::<u64>().ok())
                        .map(|kb| kb * 1024)
                })
        })
        .unwrap_or(0)
}
