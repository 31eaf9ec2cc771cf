//! `karpenter bench-scheduling`: one benchmark size as one JSON line.

use crate::{karpenter, stdout};

#[test]
fn a_small_benchmark_run_schedules_every_pod_on_at_most_one_node_per_five_pods() {
    let output = karpenter(&["bench-scheduling", "--pods", "500", "--runs", "1"], None);
    let report: serde_json::Value =
        serde_json::from_str(stdout(&output).trim()).expect("one JSON object");
    assert!(output.status.success(), "{report}");
    assert_eq!(report["unschedulable"], 0, "{report}");
    assert_eq!(report["scheduled"], 500, "{report}");
    let nodes = report["nodes"].as_u64().expect("a node count");
    assert!(nodes <= 100, "{nodes} nodes for 500 pods");
}

#[test]
fn the_preference_benchmark_places_every_pod_and_ignoring_preferences_packs_them() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "bench-scheduling",
            "--pods",
            "200",
            "--runs",
            "1",
            "--workload",
            "preferences",
        ];
        args.extend_from_slice(extra);
        let output = karpenter(&args, None);
        let report: serde_json::Value =
            serde_json::from_str(stdout(&output).trim()).expect("one JSON object");
        assert!(output.status.success(), "{report}");
        assert_eq!(report["scheduled"], 200, "{report}");
        report
    };
    let respect = run(&[]);
    let ignore = run(&["--ignore-preferences"]);
    assert_eq!(respect["preferencePolicy"], "Respect");
    assert_eq!(ignore["preferencePolicy"], "Ignore");
    // The hostname anti-affinity preference (weight 1) can be met: one pod per node.
    assert_eq!(respect["nodes"], 200, "{respect}");
    let packed = ignore["nodes"].as_u64().expect("a node count");
    assert!(
        packed <= 40,
        "{packed} nodes for 200 pods with preferences ignored"
    );
}

#[test]
fn the_decisions_dump_names_every_pod_once_and_is_byte_equal_on_a_second_run() {
    let dir = std::env::temp_dir().join(format!("karpenter-bench-dump-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let dump = |name: &str| {
        let path = dir.join(name);
        let file = path.to_str().expect("a UTF-8 path");
        let args = [
            "bench-scheduling",
            "--pods",
            "300",
            "--runs",
            "1",
            "--dump-claims",
            file,
        ];
        let output = karpenter(&args, None);
        assert!(output.status.success(), "{}", stdout(&output));
        std::fs::read(&path).expect("the dump is written")
    };
    let first = dump("first.json");
    let second = dump("second.json");
    std::fs::remove_dir_all(&dir).ok();
    assert!(first == second, "two runs of one build decided differently");
    let decisions: serde_json::Value = serde_json::from_slice(&first).expect("JSON");
    let mut pods: Vec<&str> = decisions["newClaims"]
        .as_array()
        .expect("claims")
        .iter()
        .flat_map(|c| c["pods"].as_array().expect("pods"))
        .map(|p| p.as_str().expect("a pod key"))
        .collect();
    pods.sort_unstable();
    let placed = pods.len();
    pods.dedup();
    assert_eq!((placed, pods.len()), (300, 300), "every pod placed once");
    let claim = &decisions["newClaims"][0];
    for field in [
        "nodePool",
        "requirements",
        "instanceTypes",
        "requests",
        "price",
    ] {
        assert!(!claim[field].is_null(), "{field} missing from {claim}");
    }
}
