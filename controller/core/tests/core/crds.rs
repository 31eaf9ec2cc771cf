//! The generated CRDs: committed copies are current, schemas are structural, CEL rules compile
//! and carry upstream's semantics (including transition rules, checked with an old object).

use std::path::PathBuf;

use karpenter_core::api::crd::{self, schema_of};
use karpenter_core::validation::cel_compilation_errors;
use kube_core::cel::Validator;
use serde_json::{Value, json};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn committed_crds_match_what_the_code_generates() {
    for generated in crd::all() {
        for dir in ["crds", "charts/karpenter/crds"] {
            let path = repo_root().join(dir).join(generated.file_name);
            let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| {
                panic!(
                    "{} is missing ({e}); run `cargo xtask crds`",
                    path.display()
                )
            });
            assert!(
                committed == generated.to_yaml(),
                "{} is stale: run `cargo xtask crds` and commit the result",
                path.display()
            );
        }
    }
}

/// Walks a schema, calling `visit(path, node)` on every schema node.
fn walk(node: &Value, path: &str, visit: &mut dyn FnMut(&str, &Value)) {
    visit(path, node);
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            walk(child, &format!("{path}.{name}"), visit);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = node.get(key).filter(|c| c.is_object()) {
            walk(child, &format!("{path}[{key}]"), visit);
        }
    }
}

#[test]
fn every_schema_node_is_structural() {
    for generated in crd::all() {
        let mut problems = Vec::new();
        walk(schema_of(&generated.crd), "", &mut |path, node| {
            let int_or_string = node.get("x-kubernetes-int-or-string") == Some(&json!(true));
            if node.get("type").is_none() && !int_or_string {
                problems.push(format!("{path}: no type"));
            }
            if node.get("x-kubernetes-preserve-unknown-fields").is_some() {
                problems.push(format!("{path}: preserve-unknown-fields (upstream has it only on the untyped kubelet map, which we type)"));
            }
            for banned in ["$ref", "nullable", "oneOf", "allOf", "not"] {
                if node.get(banned).is_some() {
                    problems.push(format!("{path}: has {banned}"));
                }
            }
            if node.get("anyOf").is_some() && !int_or_string {
                problems.push(format!("{path}: anyOf outside int-or-string"));
            }
        });
        assert!(
            problems.is_empty(),
            "{}: {problems:#?}",
            generated.file_name
        );
    }
}

#[test]
fn every_cel_rule_compiles() {
    let errors = cel_compilation_errors();
    assert!(errors.is_empty(), "{errors:#?}");
}

fn rules(generated: &Value) -> Vec<String> {
    let mut found = Vec::new();
    walk(schema_of(generated), "", &mut |_, node| {
        for rule in node
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            found.push(rule["message"].as_str().unwrap_or_default().to_string());
        }
    });
    found
}

#[test]
fn the_crds_carry_upstreams_cel_rules() {
    let all = crd::all();
    let by_name = |name: &str| {
        &all.iter()
            .find(|c| c.file_name == name)
            .expect("generated")
            .crd
    };
    let pools = rules(by_name("karpenter.sh_nodepools.yaml"));
    for message in [
        "'schedule' must be set with 'duration'",
        "requirements with operator 'In' must have a value defined",
        "label domain \"karpenter.sh\" is restricted",
        "nodeClassRef.group is immutable",
    ] {
        assert!(
            pools.iter().any(|m| m == message),
            "NodePool CRD lacks {message:?}"
        );
    }
    let claims = rules(by_name("karpenter.sh_nodeclaims.yaml"));
    assert!(claims.iter().any(|m| m == "spec is immutable"));
    let classes = rules(by_name("karpenter.k8s.aws_ec2nodeclasses.yaml"));
    for message in [
        "must specify exactly one of ['role', 'instanceProfile']",
        "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
        "must have only one blockDeviceMappings with rootVolume",
    ] {
        assert!(
            classes.iter().any(|m| m == message),
            "EC2NodeClass CRD lacks {message:?}"
        );
    }
}

#[test]
fn transition_rules_reject_changes_to_immutable_fields() {
    let all = crd::all();
    let claims = &all
        .iter()
        .find(|c| c.file_name == "karpenter.sh_nodeclaims.yaml")
        .expect("generated")
        .crd;
    let old = json!({"spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "a"}}});
    let mut new = old.clone();
    new["spec"]["nodeClassRef"]["name"] = json!("b");
    let errors = Validator::new()
        .validate(schema_of(claims), &new, Some(&old))
        .expect_err("spec change rejected");
    assert!(
        errors.iter().any(|e| e.message == "spec is immutable"),
        "{errors:?}"
    );
    assert!(
        Validator::new()
            .validate(schema_of(claims), &old, Some(&old))
            .is_ok()
    );

    let pools = &all
        .iter()
        .find(|c| c.file_name == "karpenter.sh_nodepools.yaml")
        .expect("generated")
        .crd;
    let pool = |kind: &str| json!({"spec": {"template": {"spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": kind, "name": "a"}}}, "disruption": {"consolidateAfter": "0s"}}});
    let errors = Validator::new()
        .validate(
            schema_of(pools),
            &pool("Other"),
            Some(&pool("EC2NodeClass")),
        )
        .expect_err("kind change rejected");
    assert!(
        errors
            .iter()
            .any(|e| e.message == "nodeClassRef.kind is immutable"),
        "{errors:?}"
    );
}

#[test]
fn crds_have_upstreams_names_columns_and_subresources() {
    let all = crd::all();
    let class = &all
        .iter()
        .find(|c| c.file_name == "karpenter.k8s.aws_ec2nodeclasses.yaml")
        .expect("generated")
        .crd;
    assert_eq!(
        class["spec"]["names"]["shortNames"],
        json!(["ec2nc", "ec2ncs"])
    );
    assert_eq!(class["spec"]["scope"], json!("Cluster"));
    for generated in &all {
        let version = &generated.crd["spec"]["versions"][0];
        assert_eq!(
            version["subresources"]["status"],
            json!({}),
            "{}",
            generated.file_name
        );
        assert!(
            version["additionalPrinterColumns"]
                .as_array()
                .is_some_and(|c| c.len() >= 3)
        );
        assert_eq!(
            generated.crd["spec"]["names"]["categories"],
            json!(["karpenter"])
        );
    }
}
