//! `karpenter plan --show-launch`: the launch templates each planned NodeClaim would get, on the
//! two acceptance examples of issue 14, and the flags it needs.

use super::{karpenter, stderr, stdout};
use serde_json::Value;

const ENDPOINT: &str = "https://ABCDEF0123456789.gr7.us-west-2.eks.amazonaws.com";
/// Base64 of a PEM bundle.
const CA: &str =
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUZha2VjbG91ZENBCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K";

fn show_launch(file: &str, output: &str) -> String {
    let args = [
        "plan",
        "-f",
        file,
        "-o",
        output,
        "--show-launch",
        "--cluster-name",
        "prod",
        "--cluster-endpoint",
        ENDPOINT,
        "--cluster-ca-bundle",
        CA,
        "--cluster-cidr",
        "172.20.0.0/16",
    ];
    let out = karpenter(&args, None);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    stdout(&out)
}

fn templates(plan: &Value) -> Vec<&Value> {
    let claims = plan["nodeClaims"].as_array().expect("nodeClaims");
    assert!(!claims.is_empty(), "a plan with claims");
    claims
        .iter()
        .flat_map(|c| c["launchTemplates"].as_array().expect("launchTemplates"))
        .collect()
}

#[test]
fn seed_002_shows_bottlerocket_toml_carrying_the_taints_and_labels() {
    let plan: Value = serde_json::from_str(&show_launch(
        "examples/seed-002-bottlerocket-and-taints.yaml",
        "json",
    ))
    .expect("JSON");
    for template in templates(&plan) {
        assert_eq!(template["amiFamily"], "Bottlerocket", "{template:#}");
        let user_data = template["userData"].as_str().expect("userData");
        assert!(user_data.contains("[settings.kubernetes]"), "{user_data}");
        assert!(user_data.contains(ENDPOINT), "{user_data}");
        assert!(
            user_data.contains("example.com/special-taint"),
            "{user_data}"
        );
        assert!(user_data.contains("team-a"), "{user_data}");
        for key in [
            "blockDeviceMappings",
            "metadataOptions",
            "tags",
            "instanceProfile",
        ] {
            assert!(!template[key].is_null(), "{key} in {template:#}");
        }
        assert_eq!(template["metadataOptions"]["httpTokens"], "required");
        assert_eq!(template["tags"]["eks:eks-cluster-name"], "prod");
    }
}

#[test]
fn seed_000_shows_an_al2023_mime_document_whose_node_config_names_endpoint_ca_and_cidr() {
    let plan: Value =
        serde_json::from_str(&show_launch("examples/seed-000-default.yaml", "json")).expect("JSON");
    for template in templates(&plan) {
        assert_eq!(template["amiFamily"], "AL2023", "{template:#}");
        let user_data = template["userData"].as_str().expect("userData");
        assert!(user_data.starts_with("MIME-Version: 1.0"), "{user_data}");
        assert!(user_data.contains("kind: NodeConfig"), "{user_data}");
        assert!(user_data.contains(ENDPOINT), "{user_data}");
        assert!(user_data.contains(CA), "{user_data}");
        assert!(user_data.contains("172.20.0.0/16"), "{user_data}");
        assert!(
            user_data.contains("172.20.0.10"),
            "the DNS IP from the CIDR: {user_data}"
        );
    }
}

#[test]
fn the_table_output_prints_the_user_data() {
    let text = show_launch("examples/seed-000-default.yaml", "table");
    assert!(text.contains("user data:"), "{text}");
    assert!(text.contains("kind: NodeConfig"), "{text}");
}

#[test]
fn show_launch_without_the_cluster_flags_is_refused() {
    let out = karpenter(
        &[
            "plan",
            "-f",
            "examples/seed-000-default.yaml",
            "--show-launch",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "stderr:\n{}", stderr(&out));
}

#[test]
fn a_cluster_endpoint_that_is_not_https_is_a_clear_error() {
    let out = karpenter(
        &[
            "plan",
            "-f",
            "examples/seed-000-default.yaml",
            "--show-launch",
            "--cluster-name",
            "prod",
            "--cluster-endpoint",
            "http://insecure",
            "--cluster-ca-bundle",
            CA,
            "--cluster-cidr",
            "172.20.0.0/16",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("https://"), "{}", stderr(&out));
}
