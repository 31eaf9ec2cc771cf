//! The `karpenter` binary as a user runs it: output lines and exit codes.

use super::{karpenter, stderr, stdout};

#[test]
fn validate_reports_ok_for_every_object_of_the_v1_examples_and_exits_0() {
    for (file, expected) in [
        (
            "examples/seed-000-default.yaml",
            &["ok NodePool/default", "ok EC2NodeClass/default"][..],
        ),
        (
            "examples/seed-001-general.yaml",
            &["ok EC2NodeClass/default", "ok NodePool/general"],
        ),
        (
            "examples/seed-002-bottlerocket-and-taints.yaml",
            &[
                "ok NodePool/team-a",
                "ok EC2NodeClass/bottlerocket",
                "ok EC2NodeClass/bottlerocket-pinned",
                "ok EC2NodeClass/custom-ami",
            ],
        ),
        (
            "examples/seed-003-spot-inflate.yaml",
            &["ok NodePool/default", "ok EC2NodeClass/default"],
        ),
    ] {
        let output = karpenter(&["validate", "-f", file], None);
        assert_eq!(output.status.code(), Some(0), "{file}: {}", stdout(&output));
        let out = stdout(&output);
        for line in expected {
            assert!(
                out.lines().any(|l| l == *line),
                "{file}: missing {line:?} in:\n{out}"
            );
        }
        assert!(
            out.lines()
                .all(|l| l.starts_with("ok ") || l.starts_with("skip ")),
            "{out}"
        );
    }
}

#[test]
fn validate_explains_the_v1beta1_example_and_exits_1() {
    let output = karpenter(
        &["validate", "-f", "examples/seed-004-v1beta1-ray.yaml"],
        None,
    );
    assert_eq!(output.status.code(), Some(1));
    let out = stdout(&output);
    assert!(out.contains("invalid EC2NodeClass/ray-worker-node-class: apiVersion: karpenter.k8s.aws/v1beta1 is the older v1beta1 API"), "{out}");
    assert!(out.contains("invalid NodePool/ray-worker-nodepool: apiVersion: karpenter.sh/v1beta1 is the older v1beta1 API"), "{out}");
}

#[test]
fn validate_names_the_exact_field_of_an_invalid_object_and_exits_1() {
    let manifest = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: x}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: kubernetes.io/os, operator: In, values: [linux]}
        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["two"]}
"#;
    let output = karpenter(&["validate", "-f", "-"], Some(manifest));
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stdout(&output).trim(),
        "invalid NodePool/x: spec.template.spec.requirements[2].values: requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"
    );
}

#[test]
fn validate_exits_2_on_a_missing_file_or_a_yaml_syntax_error_with_its_position() {
    let missing = karpenter(&["validate", "-f", "no/such/file.yaml"], None);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("no/such/file.yaml"),
        "{}",
        stderr(&missing)
    );

    let broken = karpenter(
        &["validate", "-f", "-"],
        Some("apiVersion: karpenter.sh/v1\nkind: [NodePool\n"),
    );
    assert_eq!(broken.status.code(), Some(2));
    let err = stderr(&broken);
    assert!(
        err.contains("error: -:") && err.contains("YAML syntax error"),
        "{err}"
    );
    assert!(
        err.contains(":3:1:") || err.contains(":2:"),
        "position missing: {err}"
    );
}

#[test]
fn validate_skips_other_kinds_with_a_note() {
    let output = karpenter(
        &["validate", "-f", "-"],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"),
    );
    assert_eq!(output.status.code(), Some(0));
    assert!(
        stdout(&output).starts_with("skip ConfigMap/c: not a Karpenter object"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn crds_check_passes_on_the_committed_files_and_fails_on_an_edited_copy() {
    // Both committed copies: `crds/` and the chart's. This test is CI's staleness check (`cargo
    // xtask test` runs no separate `cargo run` of the CLI: that would build aws-sdk once more
    // with another feature set).
    for committed in ["crds", "charts/karpenter/crds"] {
        let ok = karpenter(&["crds", "--check", "--out", committed], None);
        assert_eq!(ok.status.code(), Some(0), "{committed}: {}", stderr(&ok));
    }

    let dir = std::env::temp_dir().join(format!("karpenter-crds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let written = karpenter(&["crds", "--out", dir.to_str().expect("utf-8 path")], None);
    assert_eq!(written.status.code(), Some(0));
    let file = dir.join("karpenter.sh_nodepools.yaml");
    let text = std::fs::read_to_string(&file).expect("written");
    std::fs::write(&file, text.replace("maxItems: 100", "maxItems: 99")).expect("edit");
    let stale = karpenter(
        &[
            "crds",
            "--check",
            "--out",
            dir.to_str().expect("utf-8 path"),
        ],
        None,
    );
    assert_eq!(stale.status.code(), Some(1));
    assert!(stderr(&stale).contains("stale"), "{}", stderr(&stale));
    std::fs::remove_dir_all(&dir).ok();
}
