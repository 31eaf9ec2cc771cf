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
