//! `karpenter plan --disrupt`: the commands successive disruption passes would start on a
//! cluster dump, in the JSON shape the issue fixes, the same in prose, and `--now`.

use super::{karpenter, stderr, stdout};
use serde_json::Value;

const DUMP: &str = "examples/dumps/three-half-empty.yaml";
const NOW: &str = "2026-01-01T12:00:00Z";

fn disruption(args: &[&str]) -> Value {
    let mut all = vec!["plan", "-f", DUMP, "--disrupt"];
    all.extend_from_slice(args);
    let output = karpenter(&all, None);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr:\n{}",
        stderr(&output)
    );
    let plan: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    plan["disruption"].clone()
}

#[test]
fn three_half_empty_nodes_are_consolidated_within_the_budget_and_the_rest_explained() {
    let d = disruption(&["--now", NOW]);
    let commands = d["commands"].as_array().expect("commands");
    assert_eq!(commands.len(), 1, "{d:#}");
    let command = &commands[0];
    assert_eq!(command["method"], "Underutilized");
    assert_eq!(command["nodes"], serde_json::json!(["node-a", "node-b"]));
    let replacements = command["replacements"].as_array().expect("replacements");
    assert_eq!(replacements.len(), 1);
    assert_eq!(replacements[0]["capacityType"], "on-demand");
    assert!(
        !replacements[0]["instanceTypes"]
            .as_array()
            .expect("types")
            .is_empty()
    );
    assert!(
        !replacements[0]["zones"]
            .as_array()
            .expect("zones")
            .is_empty()
    );
    assert!(command["savingsPerHour"].as_f64().expect("savings") > 0.0);
    let blocked = d["blocked"].as_array().expect("blocked");
    assert_eq!(blocked.len(), 1);
    assert_eq!(blocked[0]["node"], "node-c");
    assert!(blocked[0]["reason"].as_str().is_some_and(|r| !r.is_empty()));
}

#[test]
fn before_consolidate_after_has_passed_nothing_is_disrupted_and_every_node_says_why() {
    // The nodes were created at 08:00 and consolidateAfter is 5m.
    let d = disruption(&["--now", "2026-01-01T08:03:00Z"]);
    assert_eq!(d["commands"], serde_json::json!([]));
    let blocked = d["blocked"].as_array().expect("blocked");
    assert_eq!(blocked.len(), 3);
    for b in blocked {
        assert!(
            b["reason"]
                .as_str()
                .expect("reason")
                .contains("consolidateAfter"),
            "{b}"
        );
    }
}

#[test]
fn the_table_says_the_same_in_prose() {
    let output = karpenter(
        &["plan", "-f", DUMP, "--disrupt", "--now", NOW, "-o", "table"],
        None,
    );
    assert_eq!(output.status.code(), Some(0));
    let text = stdout(&output);
    assert!(
        text.contains("disruption at 2026-01-01T12:00:00Z"),
        "{text}"
    );
    assert!(
        text.contains("1. Underutilized: replace nodes node-a and node-b with 1 new node"),
        "{text}"
    );
    assert!(text.contains("kept:") && text.contains("node-c:"), "{text}");
}

#[test]
fn a_now_that_is_not_rfc3339_is_an_input_error() {
    let output = karpenter(&["plan", "-f", DUMP, "--disrupt", "--now", "noon"], None);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--now"));
}

#[test]
fn the_users_examples_plan_disruption_without_error() {
    for file in [
        "examples/seed-000-default.yaml",
        "examples/seed-003-spot-inflate.yaml",
    ] {
        let output = karpenter(&["plan", "-f", file, "--disrupt", "--now", NOW], None);
        assert_eq!(output.status.code(), Some(0), "{file}: {}", stderr(&output));
        let plan: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
        assert!(plan["disruption"]["commands"].is_array(), "{file}");
        assert!(plan["disruption"]["blocked"].is_array(), "{file}");
    }
}

#[test]
fn node_claims_in_the_dump_drift_on_their_image_and_their_nodepool_hash() {
    let output = karpenter(
        &[
            "plan",
            "-f",
            "examples/dumps/ami-released.yaml",
            "--disrupt",
            "--now",
            NOW,
        ],
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let plan: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    let d = &plan["disruption"];
    let commands = d["commands"].as_array().expect("commands");
    let drifted: Vec<&Value> = commands
        .iter()
        .filter(|c| c["method"] == "Drifted")
        .flat_map(|c| c["nodes"].as_array().expect("nodes"))
        .collect();
    // node-a runs an image the class no longer lists, node-c's claim another template's hash;
    // node-b runs the current image and is kept.
    assert_eq!(drifted, ["node-a", "node-c"], "{d:#}");
    let blocked = d["blocked"].as_array().expect("blocked");
    assert!(blocked.iter().any(|b| b["node"] == "node-b"), "{d:#}");
}
