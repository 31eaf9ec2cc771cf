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
