//! Every validation rule, with a manifest that passes and one that fails at the exact field path.
//! Rules come from three places (OpenAPI schema, CEL in the CRD, runtime checks); these tests
//! exercise them all through the one entry point the CLI and the controller use.

use karpenter_core::manifest::{Outcome, check_document};
use karpenter_core::validation::Violation;
use serde_json::{Value, json};

pub fn nodepool() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {
                    "requirements": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}
                    ],
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
                }
            },
            "limits": {"cpu": 100},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m"}
        }
    })
}

pub fn nodeclaim() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "default-abcde"},
        "spec": {
            "requirements": [
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m6i.large"]}
            ],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
        }
    })
}

pub fn ec2nodeclass() -> Value {
    json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "role": "KarpenterNodeRole-demo",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]
        }
    })
}

/// Sets the field at JSON pointer `pointer` (creating missing objects on the way).
fn set(mut doc: Value, pointer: &str, value: Value) -> Value {
    let (parent, last) = pointer.rsplit_once('/').expect("pointer has a parent");
    let mut node = &mut doc;
    for part in parent.split('/').skip(1) {
        node = if let Ok(i) = part.parse::<usize>() {
            &mut node[i]
        } else {
            node.as_object_mut()
                .expect("parent is an object")
                .entry(part)
                .or_insert(json!({}))
        };
    }
    match last.parse::<usize>() {
        Ok(i) if node.is_array() => node[i] = value,
        _ => {
            node.as_object_mut()
                .expect("parent is an object")
                .insert(last.to_string(), value);
        }
    }
    doc
}

fn remove(mut doc: Value, pointer: &str) -> Value {
    let (parent, last) = pointer.rsplit_once('/').expect("pointer has a parent");
    doc.pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .expect("parent exists")
        .remove(last);
    doc
}

fn violations(doc: &Value) -> Vec<Violation> {
    match check_document(doc).outcome {
        Outcome::Invalid(violations) => violations.0,
        Outcome::Valid(_) => Vec::new(),
        Outcome::Other => panic!("not a Karpenter object: {doc}"),
    }
}

#[track_caller]
fn assert_accepted(doc: Value) {
    let found = violations(&doc);
    assert!(found.is_empty(), "expected valid, got: {found:#?}");
}

#[track_caller]
fn assert_rejected(doc: Value, path: &str, message: &str) {
    let found = violations(&doc);
    assert!(
        found
            .iter()
            .any(|v| v.path == path && v.message.contains(message)),
        "expected a violation at {path:?} containing {message:?}, got: {found:#?}"
    );
}

const REQ: &str = "/spec/template/spec/requirements";
const REQ_PATH: &str = "spec.template.spec.requirements";

fn requirement(key: &str, operator: &str, values: &[&str]) -> Value {
    json!({"key": key, "operator": operator, "values": values})
}

// ---------------------------------------------------------------- NodePool: requirements

#[test]
fn the_valid_base_manifests_are_accepted() {
    assert_accepted(nodepool());
    assert_accepted(nodeclaim());
    assert_accepted(ec2nodeclass());
}

#[test]
fn a_requirement_operator_must_be_one_upstream_supports() {
    assert_accepted(set(
        nodepool(),
        &format!("{REQ}/0"),
        requirement("kubernetes.io/arch", "Exists", &[]),
    ));
    assert_accepted(set(
        nodepool(),
        &format!("{REQ}/0"),
        requirement("karpenter.k8s.aws/instance-cpu", "Lte", &["16"]),
    ));
    assert_rejected(
        set(nodepool(), &format!("{REQ}/0/operator"), json!("Matches")),
        &format!("{REQ_PATH}[0].operator"),
        "Unsupported value: \"Matches\"",
    );
}

#[test]
fn an_in_requirement_needs_at_least_one_value() {
    assert_rejected(
        set(
            nodepool(),
            &format!("{REQ}/0"),
            requirement("kubernetes.io/arch", "In", &[]),
        ),
        &format!("{REQ_PATH}[0].values"),
        "requirements with operator 'In' must have a value defined",
    );
    assert_rejected(
        set(
            nodepool(),
            &format!("{REQ}/0"),
            json!({"key": "kubernetes.io/arch", "operator": "In"}),
        ),
        &format!("{REQ_PATH}[0].values"),
        "must have a value defined",
    );
}

#[test]
fn numeric_operators_need_one_non_negative_integer() {
    for op in ["Gt", "Lt", "Gte", "Lte"] {
        assert_accepted(set(
            nodepool(),
            &format!("{REQ}/0"),
            requirement("karpenter.k8s.aws/instance-generation", op, &["2"]),
        ));
        for values in [&["a"][..], &["-1"], &["1", "2"], &[]] {
            assert_rejected(
                set(
                    nodepool(),
                    &format!("{REQ}/0"),
                    requirement("karpenter.k8s.aws/instance-generation", op, values),
                ),
                &format!("{REQ_PATH}[0].values"),
                "must have a single positive integer value",
            );
        }
    }
}

#[test]
fn min_values_must_not_exceed_the_values_listed_and_stays_within_1_to_50() {
    let with_min = |n: i64| {
        set(
            nodepool(),
            &format!("{REQ}/0"),
            json!({"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5", "c5"], "minValues": n}),
        )
    };
    assert_accepted(with_min(2));
    assert_rejected(
        with_min(3),
        &format!("{REQ_PATH}[0].minValues"),
        "at least that many values",
    );
    assert_rejected(
        with_min(0),
        &format!("{REQ_PATH}[0].minValues"),
        "greater than or equal to 1",
    );
    assert_rejected(
        with_min(51),
        &format!("{REQ_PATH}[0].minValues"),
        "less than or equal to 50",
    );
}

#[test]
fn the_karpenter_sh_label_domain_is_restricted_except_well_known_keys() {
    assert_accepted(set(
        nodepool(),
        &format!("{REQ}/0"),
        requirement("karpenter.sh/capacity-type", "In", &["spot"]),
    ));
    assert_rejected(
        set(
            nodepool(),
            &format!("{REQ}/0"),
            requirement("karpenter.sh/custom", "In", &["x"]),
        ),
        &format!("{REQ_PATH}[0].key"),
        "label domain \"karpenter.sh\" is restricted",
    );
    assert_rejected(
        set(
            nodepool(),
            &format!("{REQ}/0"),
            requirement("sub.karpenter.sh/custom", "In", &["x"]),
        ),
        &format!("{REQ_PATH}[0].key"),
        "label domain \"karpenter.sh\" is restricted",
    );
}

#[test]
fn a_nodepool_may_not_require_its_own_nodepool_label_but_a_nodeclaim_carries_it() {
    assert_rejected(
        set(
            nodepool(),
            &format!("{REQ}/0"),
            requirement("karpenter.sh/nodepool", "In", &["x"]),
        ),
        &format!("{REQ_PATH}[0].key"),
        "label \"karpenter.sh/nodepool\" is restricted",
    );
    assert_accepted(nodeclaim());
}

#[test]
fn the_hostname_label_is_restricted() {
    assert_rejected(
        set(
            nodepool(),
            &format!("{REQ}/0"),
            requirement("kubernetes.io/hostname", "In", &["a"]),
        ),
        &format!("{REQ_PATH}[0].key"),
        "label \"kubernetes.io/hostname\" is restricted",
    );
}

#[test]
fn the_karpenter_k8s_aws_domain_allows_only_instance_attribute_labels() {
    assert_accepted(set(
        nodepool(),
        &format!("{REQ}/0"),
        requirement("karpenter.k8s.aws/instance-family", "In", &["m5"]),
    ));
    assert_rejected(
        set(
            nodepool(),
            &format!("{REQ}/0"),
            requirement("karpenter.k8s.aws/made-up", "In", &["x"]),
        ),
        &format!("{REQ_PATH}[0].key"),
        "label domain \"karpenter.k8s.aws\" is restricted",
    );
}

#[test]
fn requirement_keys_and_values_must_be_label_syntax() {
    assert_accepted(set(
        nodepool(),
        &format!("{REQ}/0"),
        requirement("example.com/team", "NotIn", &["a-b.c_d"]),
    ));
    assert_rejected(
        set(
            nodepool(),
            &format!("{REQ}/0"),
            requirement("Bad Key", "In", &["x"]),
        ),
        &format!("{REQ_PATH}[0].key"),
        "should match",
    );
    assert_rejected(
        set(
            nodepool(),
            &format!("{REQ}/0"),
            requirement("team", "In", &["not ok"]),
        ),
        &format!("{REQ_PATH}[0].values[0]"),
        "should match",
    );
    let long = "x".repeat(64);
    assert_rejected(
        set(
            nodepool(),
            &format!("{REQ}/0"),
            requirement("team", "In", &[&long]),
        ),
        &format!("{REQ_PATH}[0].values[0]"),
        "Too long",
    );
}

#[test]
fn capacity_type_requirements_must_name_a_known_capacity_type() {
    assert_accepted(set(
        nodepool(),
        &format!("{REQ}/1"),
        requirement("karpenter.sh/capacity-type", "In", &["reserved"]),
    ));
    assert_rejected(
        set(
            nodepool(),
            &format!("{REQ}/1"),
            requirement("karpenter.sh/capacity-type", "In", &["cheap"]),
        ),
        &format!("{REQ_PATH}[1].values"),
        "no valid values found",
    );
}

#[test]
fn at_most_100_requirements() {
    let many: Vec<Value> = (0..101)
        .map(|i| requirement(&format!("example.com/k{i}"), "Exists", &[]))
        .collect();
    assert_rejected(
        set(nodepool(), REQ, json!(many)),
        REQ_PATH,
        "must have at most 100 items",
    );
    let enough: Vec<Value> = (0..100)
        .map(|i| requirement(&format!("example.com/k{i}"), "Exists", &[]))
        .collect();
    assert_accepted(set(nodepool(), REQ, json!(enough)));
}

// ---------------------------------------------------------------- NodePool: template

#[test]
fn template_labels_may_not_use_restricted_domains_or_bad_syntax() {
    let labels = "/spec/template/metadata/labels";
    assert_accepted(set(
        nodepool(),
        labels,
        json!({"team": "a", "example.com/tier": "gold"}),
    ));
    assert_rejected(
        set(nodepool(), labels, json!({"karpenter.sh/custom": "x"})),
        "spec.template.metadata.labels",
        "label domain \"karpenter.sh\" is restricted",
    );
    assert_rejected(
        set(nodepool(), labels, json!({"karpenter.sh/nodepool": "x"})),
        "spec.template.metadata.labels",
        "label \"karpenter.sh/nodepool\" is restricted",
    );
    assert_rejected(
        set(nodepool(), labels, json!({"kubernetes.io/hostname": "x"})),
        "spec.template.metadata.labels",
        "label \"kubernetes.io/hostname\" is restricted",
    );
    assert_rejected(
        set(nodepool(), labels, json!({"bad key!": "x"})),
        "spec.template.metadata.labels[bad key!]",
        "invalid key",
    );
    assert_rejected(
        set(nodepool(), labels, json!({"team": "not ok"})),
        "spec.template.metadata.labels[team]",
        "should match",
    );
}

#[test]
fn taints_need_a_key_and_a_known_effect_and_may_not_repeat() {
    let taints = "/spec/template/spec/taints";
    let startup = "/spec/template/spec/startupTaints";
    assert_accepted(set(
        nodepool(),
        taints,
        json!([{"key": "example.com/gpu", "value": "true", "effect": "NoSchedule"}]),
    ));
    assert_rejected(
        set(nodepool(), taints, json!([{"key": "a", "effect": "NoWay"}])),
        "spec.template.spec.taints[0].effect",
        "Unsupported value",
    );
    assert_rejected(
        set(
            nodepool(),
            taints,
            json!([{"key": "", "effect": "NoSchedule"}]),
        ),
        "spec.template.spec.taints[0].key",
        "at least 1 chars",
    );
    assert_rejected(
        set(nodepool(), taints, json!([{"key": "a"}])),
        "spec.template.spec.taints[0].effect",
        "Required value",
    );
    let doc = set(
        nodepool(),
        taints,
        json!([{"key": "a", "effect": "NoSchedule"}]),
    );
    assert_rejected(
        set(doc, startup, json!([{"key": "a", "effect": "NoSchedule"}])),
        "spec.template.spec.startupTaints[0]",
        "duplicate taint Key/Effect pair a=NoSchedule",
    );
    let doc = set(
        nodepool(),
        taints,
        json!([{"key": "a", "effect": "NoSchedule"}]),
    );
    assert_accepted(set(
        doc,
        startup,
        json!([{"key": "a", "effect": "NoExecute"}]),
    ));
}

#[test]
fn the_node_class_reference_needs_group_kind_and_name() {
    let r = "/spec/template/spec/nodeClassRef";
    assert_rejected(
        remove(nodepool(), &format!("{r}/group")),
        "spec.template.spec.nodeClassRef.group",
        "Required value",
    );
    assert_rejected(
        remove(nodepool(), &format!("{r}/kind")),
        "spec.template.spec.nodeClassRef.kind",
        "Required value",
    );
    assert_rejected(
        set(nodepool(), &format!("{r}/name"), json!("")),
        "spec.template.spec.nodeClassRef.name",
        "name may not be empty",
    );
    assert_rejected(
        set(nodepool(), &format!("{r}/group"), json!("a/b")),
        "spec.template.spec.nodeClassRef.group",
        "should match",
    );
    assert_rejected(
        remove(nodepool(), r),
        "spec.template.spec.nodeClassRef",
        "Required value",
    );
}

#[test]
fn expire_after_is_a_duration_or_never_and_the_grace_period_a_duration() {
    let e = "/spec/template/spec/expireAfter";
    let g = "/spec/template/spec/terminationGracePeriod";
    for ok in ["720h", "1h30m", "90s", "Never"] {
        assert_accepted(set(nodepool(), e, json!(ok)));
    }
    assert_rejected(
        set(nodepool(), e, json!("30d")),
        "spec.template.spec.expireAfter",
        "should match",
    );
    assert_accepted(set(nodepool(), g, json!("48h")));
    assert_rejected(
        set(nodepool(), g, json!("Never")),
        "spec.template.spec.terminationGracePeriod",
        "should match",
    );
}

// ---------------------------------------------------------------- NodePool: disruption, limits, weight

#[test]
fn consolidate_after_is_required_when_disruption_is_written() {
    assert_rejected(
        remove(nodepool(), "/spec/disruption/consolidateAfter"),
        "spec.disruption.consolidateAfter",
        "Required value",
    );
    assert_accepted(remove(nodepool(), "/spec/disruption"));
    assert_accepted(set(
        nodepool(),
        "/spec/disruption/consolidateAfter",
        json!("Never"),
    ));
    assert_rejected(
        set(
            nodepool(),
            "/spec/disruption/consolidateAfter",
            json!("soon"),
        ),
        "spec.disruption.consolidateAfter",
        "should match",
    );
}

#[test]
fn consolidation_policy_is_one_of_the_v1_policies() {
    for ok in ["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"] {
        assert_accepted(set(
            nodepool(),
            "/spec/disruption/consolidationPolicy",
            json!(ok),
        ));
    }
    assert_rejected(
        set(
            nodepool(),
            "/spec/disruption/consolidationPolicy",
            json!("WhenUnderutilized"),
        ),
        "spec.disruption.consolidationPolicy",
        "Unsupported value",
    );
}

#[test]
fn budget_nodes_is_a_count_or_a_percentage_up_to_100() {
    let b = "/spec/disruption/budgets";
    for ok in ["0", "5", "10%", "100%"] {
        assert_accepted(set(nodepool(), b, json!([{"nodes": ok}])));
    }
    for bad in ["101%", "ten", "-1", "5.5%"] {
        assert_rejected(
            set(nodepool(), b, json!([{"nodes": bad}])),
            "spec.disruption.budgets[0].nodes",
            "should match",
        );
    }
}

#[test]
fn a_budget_schedule_comes_with_a_duration_and_parses_as_cron() {
    let b = "/spec/disruption/budgets";
    assert_accepted(set(
        nodepool(),
        b,
        json!([{"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"}]),
    ));
    assert_accepted(set(
        nodepool(),
        b,
        json!([{"nodes": "0", "schedule": "@midnight", "duration": "1h30m"}]),
    ));
    assert_rejected(
        set(
            nodepool(),
            b,
            json!([{"nodes": "0", "schedule": "0 9 * * *"}]),
        ),
        "spec.disruption.budgets[0]",
        "'schedule' must be set with 'duration'",
    );
    assert_rejected(
        set(nodepool(), b, json!([{"nodes": "0", "duration": "1h"}])),
        "spec.disruption.budgets[0]",
        "'schedule' must be set with 'duration'",
    );
    assert_rejected(
        set(
            nodepool(),
            b,
            json!([{"nodes": "0", "schedule": "61 * * * *", "duration": "1h"}]),
        ),
        "spec.disruption.budgets[0].schedule",
        "invalid cron schedule",
    );
    assert_rejected(
        set(
            nodepool(),
            b,
            json!([{"nodes": "0", "schedule": "hourly", "duration": "1h"}]),
        ),
        "spec.disruption.budgets[0].schedule",
        "should match",
    );
    assert_rejected(
        set(
            nodepool(),
            b,
            json!([{"nodes": "0", "schedule": "@daily", "duration": "30s"}]),
        ),
        "spec.disruption.budgets[0].duration",
        "should match",
    );
}

#[test]
fn budget_reasons_are_known_and_unique_and_budgets_are_at_most_50() {
    let b = "/spec/disruption/budgets";
    assert_accepted(set(
        nodepool(),
        b,
        json!([{"nodes": "1", "reasons": ["Drifted", "Empty"]}]),
    ));
    assert_rejected(
        set(
            nodepool(),
            b,
            json!([{"nodes": "1", "reasons": ["Expired"]}]),
        ),
        "spec.disruption.budgets[0].reasons[0]",
        "Unsupported value",
    );
    assert_rejected(
        set(
            nodepool(),
            b,
            json!([{"nodes": "1", "reasons": ["Empty", "Empty"]}]),
        ),
        "spec.disruption.budgets[0].reasons[1]",
        "Duplicate value",
    );
    let many: Vec<Value> = (0..51).map(|_| json!({"nodes": "1"})).collect();
    assert_rejected(
        set(nodepool(), b, json!(many)),
        "spec.disruption.budgets",
        "at most 50 items",
    );
}

#[test]
fn limits_are_kubernetes_quantities_written_as_numbers_or_strings() {
    assert_accepted(set(
        nodepool(),
        "/spec/limits",
        json!({"cpu": 64, "memory": "1000Gi", "nodes": "10", "nvidia.com/gpu": 2}),
    ));
    assert_rejected(
        set(nodepool(), "/spec/limits", json!({"cpu": "10 cores"})),
        "spec.limits[cpu]",
        "should match",
    );
    assert_rejected(
        set(nodepool(), "/spec/limits", json!({"cpu": true})),
        "spec.limits[cpu]",
        "must be an integer or a string",
    );
}

#[test]
fn weight_is_between_1_and_100() {
    assert_accepted(set(nodepool(), "/spec/weight", json!(100)));
    assert_rejected(
        set(nodepool(), "/spec/weight", json!(0)),
        "spec.weight",
        "greater than or equal to 1",
    );
    assert_rejected(
        set(nodepool(), "/spec/weight", json!(101)),
        "spec.weight",
        "less than or equal to 100",
    );
    assert_rejected(
        set(nodepool(), "/spec/weight", json!("high")),
        "spec.weight",
        "must be of type integer",
    );
}

#[test]
fn unknown_fields_and_a_missing_name_are_reported() {
    assert_rejected(
        set(
            nodepool(),
            "/spec/template/spec/kubelet",
            json!({"maxPods": 110}),
        ),
        "spec.template.spec.kubelet",
        "unknown field",
    );
    assert_rejected(
        remove(nodepool(), "/metadata/name"),
        "metadata.name",
        "Required value",
    );
    assert_rejected(
        remove(nodepool(), "/spec/template"),
        "spec.template",
        "Required value",
    );
}

// ---------------------------------------------------------------- NodeClaim

#[test]
fn a_nodeclaim_is_checked_like_its_template() {
    assert_rejected(
        set(
            nodeclaim(),
            "/spec/requirements/1",
            requirement("karpenter.sh/capacity-type", "In", &["free"]),
        ),
        "spec.requirements[1].values",
        "no valid values found",
    );
    assert_rejected(
        set(
            nodeclaim(),
            "/spec/requirements/1",
            requirement("kubernetes.io/hostname", "In", &["a"]),
        ),
        "spec.requirements[1].key",
        "is restricted",
    );
    let doc = set(
        nodeclaim(),
        "/spec/taints",
        json!([{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoSchedule"}]),
    );
    assert_rejected(doc, "spec.taints[1]", "duplicate taint");
    assert_accepted(set(
        nodeclaim(),
        "/spec/resources",
        json!({"requests": {"cpu": "1500m", "pods": 3}}),
    ));
}

// ---------------------------------------------------------------- EC2NodeClass

#[test]
fn exactly_one_of_role_and_instance_profile() {
    assert_accepted(set(
        remove(ec2nodeclass(), "/spec/role"),
        "/spec/instanceProfile",
        json!("profile"),
    ));
    assert_rejected(
        set(ec2nodeclass(), "/spec/instanceProfile", json!("profile")),
        "spec",
        "exactly one of ['role', 'instanceProfile']",
    );
    assert_rejected(
        remove(ec2nodeclass(), "/spec/role"),
        "spec",
        "exactly one of ['role', 'instanceProfile']",
    );
    assert_rejected(
        set(ec2nodeclass(), "/spec/role", json!("")),
        "spec.role",
        "role cannot be empty",
    );
}

#[test]
fn an_alias_is_family_at_version_of_a_known_family() {
    let a = "/spec/amiSelectorTerms";
    for ok in [
        "al2023@latest",
        "al2023@v20250505",
        "bottlerocket@v1.20.3",
        "al2@latest",
        "windows2022@latest",
    ] {
        assert_accepted(set(ec2nodeclass(), a, json!([{"alias": ok}])));
    }
    assert_rejected(
        set(ec2nodeclass(), a, json!([{"alias": "al2023"}])),
        "spec.amiSelectorTerms[0].alias",
        "improperly formatted",
    );
    assert_rejected(
        set(ec2nodeclass(), a, json!([{"alias": "ubuntu@latest"}])),
        "spec.amiSelectorTerms[0].alias",
        "family is not supported",
    );
    assert_rejected(
        set(ec2nodeclass(), a, json!([{"alias": "windows2022@v1"}])),
        "spec.amiSelectorTerms[0].alias",
        "may only specify version 'latest'",
    );
    assert_rejected(
        set(
            ec2nodeclass(),
            a,
            json!([{"alias": "bottlerocket@v1.20.3-really-long-version"}]),
        ),
        "spec.amiSelectorTerms[0].alias",
        "Too long",
    );
}

#[test]
fn ami_selector_terms_are_exclusive_in_upstreams_ways() {
    let a = "/spec/amiSelectorTerms";
    let with_family = |terms: Value| {
        set(
            set(ec2nodeclass(), a, terms),
            "/spec/amiFamily",
            json!("AL2023"),
        )
    };
    assert_accepted(with_family(
        json!([{"id": "ami-0abc123"}, {"name": "my-ami-*", "owner": "self"}]),
    ));
    assert_accepted(with_family(
        json!([{"tags": {"team": "a"}}, {"ssmParameter": "/my/ami"}]),
    ));
    assert_rejected(
        set(ec2nodeclass(), a, json!([])),
        "spec.amiSelectorTerms",
        "at least 1 items",
    );
    assert_rejected(
        with_family(json!([{}])),
        "spec.amiSelectorTerms",
        "expected at least one, got none",
    );
    assert_rejected(
        with_family(json!([{"id": "ami-1", "name": "x"}])),
        "spec.amiSelectorTerms",
        "'id' is mutually exclusive",
    );
    assert_rejected(
        set(
            ec2nodeclass(),
            a,
            json!([{"alias": "al2023@latest", "tags": {"a": "b"}}]),
        ),
        "spec.amiSelectorTerms",
        "'alias' is mutually exclusive, cannot be set with a combination of other fields",
    );
    assert_rejected(
        set(
            ec2nodeclass(),
            a,
            json!([{"alias": "al2023@latest"}, {"id": "ami-1"}]),
        ),
        "spec.amiSelectorTerms",
        "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
    );
    assert_rejected(
        with_family(json!([{"id": "img-1"}])),
        "spec.amiSelectorTerms[0].id",
        "should match",
    );
    let many: Vec<Value> = (0..31).map(|i| json!({"id": format!("ami-{i}")})).collect();
    assert_rejected(
        with_family(json!(many)),
        "spec.amiSelectorTerms",
        "at most 30 items",
    );
}

#[test]
fn ami_family_must_agree_with_the_alias_and_is_required_without_one() {
    assert_accepted(set(ec2nodeclass(), "/spec/amiFamily", json!("AL2023")));
    assert_accepted(set(ec2nodeclass(), "/spec/amiFamily", json!("Custom")));
    assert_rejected(
        set(ec2nodeclass(), "/spec/amiFamily", json!("AL2")),
        "spec",
        "amiFamily must be 'AL2023' or 'Custom'",
    );
    assert_rejected(
        set(ec2nodeclass(), "/spec/amiFamily", json!("Ubuntu")),
        "spec.amiFamily",
        "Unsupported value",
    );
    assert_rejected(
        set(
            ec2nodeclass(),
            "/spec/amiSelectorTerms",
            json!([{"id": "ami-123"}]),
        ),
        "spec",
        "must specify amiFamily if amiSelectorTerms does not contain an alias",
    );
}

#[test]
fn subnet_terms_are_tags_or_an_id_never_both() {
    let s = "/spec/subnetSelectorTerms";
    assert_accepted(set(
        ec2nodeclass(),
        s,
        json!([{"id": "subnet-0abc"}, {"tags": {"Name": "*"}}]),
    ));
    assert_rejected(
        set(ec2nodeclass(), s, json!([])),
        "spec.subnetSelectorTerms",
        "subnetSelectorTerms cannot be empty",
    );
    assert_rejected(
        set(ec2nodeclass(), s, json!([{}])),
        "spec.subnetSelectorTerms[0]",
        "expected at least one, got none, ['tags', 'id']",
    );
    assert_rejected(
        set(
            ec2nodeclass(),
            s,
            json!([{"tags": {"a": "b"}}, {"id": "subnet-1", "tags": {"a": "b"}}]),
        ),
        "spec.subnetSelectorTerms[1]",
        "'id' is mutually exclusive",
    );
    assert_rejected(
        set(ec2nodeclass(), s, json!([{"tags": {"a": ""}}])),
        "spec.subnetSelectorTerms[0].tags",
        "empty tag keys or values",
    );
    assert_rejected(
        set(ec2nodeclass(), s, json!([{"id": "sn-1"}])),
        "spec.subnetSelectorTerms[0].id",
        "should match",
    );
    remove(ec2nodeclass(), "/spec/subnetSelectorTerms");
    assert_rejected(
        remove(ec2nodeclass(), "/spec/subnetSelectorTerms"),
        "spec.subnetSelectorTerms",
        "Required value",
    );
}

#[test]
fn security_group_terms_are_tags_an_id_or_a_name() {
    let s = "/spec/securityGroupSelectorTerms";
    assert_accepted(set(
        ec2nodeclass(),
        s,
        json!([{"id": "sg-0abc"}, {"name": "nodes"}, {"tags": {"a": "b"}}]),
    ));
    assert_rejected(
        set(ec2nodeclass(), s, json!([])),
        "spec.securityGroupSelectorTerms",
        "cannot be empty",
    );
    assert_rejected(
        set(ec2nodeclass(), s, json!([{"id": "sg-1", "name": "x"}])),
        "spec.securityGroupSelectorTerms[0]",
        "'id' is mutually exclusive",
    );
    assert_rejected(
        set(
            ec2nodeclass(),
            s,
            json!([{"name": "x", "tags": {"a": "b"}}]),
        ),
        "spec.securityGroupSelectorTerms[0]",
        "'name' is mutually exclusive",
    );
}

#[test]
fn tags_may_not_use_keys_karpenter_owns() {
    assert_accepted(set(
        ec2nodeclass(),
        "/spec/tags",
        json!({"team": "a", "ManagedBy": "Karpenter"}),
    ));
    for (key, message) in [
        ("kubernetes.io/cluster/demo", "kubernetes.io/cluster/"),
        ("eks:eks-cluster-name", "eks:eks-cluster-name"),
        ("karpenter.sh/nodepool", "karpenter.sh/nodepool"),
        ("karpenter.sh/nodeclaim", "karpenter.sh/nodeclaim"),
        (
            "karpenter.k8s.aws/ec2nodeclass",
            "karpenter.k8s.aws/ec2nodeclass",
        ),
    ] {
        assert_rejected(
            set(ec2nodeclass(), "/spec/tags", json!({key: "x"})),
            "spec.tags",
            message,
        );
    }
}

#[test]
fn metadata_options_are_defaulted_and_bounded() {
    let checked = check_document(&ec2nodeclass());
    let Outcome::Valid(karpenter_core::manifest::KarpenterObject::EC2NodeClass(class)) =
        checked.outcome
    else {
        panic!("expected a valid EC2NodeClass");
    };
    let options = class.spec.metadata_options.expect("defaulted");
    assert_eq!(options.http_put_response_hop_limit, 1);
    assert_eq!(
        options.http_tokens,
        karpenter_core::api::ec2nodeclass::HttpTokens::Required
    );
    assert_rejected(
        set(
            ec2nodeclass(),
            "/spec/metadataOptions",
            json!({"httpTokens": "maybe"}),
        ),
        "spec.metadataOptions.httpTokens",
        "Unsupported value",
    );
    assert_rejected(
        set(
            ec2nodeclass(),
            "/spec/metadataOptions",
            json!({"httpPutResponseHopLimit": 65}),
        ),
        "spec.metadataOptions.httpPutResponseHopLimit",
        "less than or equal to 64",
    );
}

#[test]
fn block_devices_have_one_root_and_a_size_or_snapshot() {
    let b = "/spec/blockDeviceMappings";
    assert_accepted(set(
        ec2nodeclass(),
        b,
        json!([{"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {"volumeSize": "100Gi", "volumeType": "gp3", "encrypted": true}}]),
    ));
    assert_rejected(
        set(
            ec2nodeclass(),
            b,
            json!([{"rootVolume": true, "ebs": {"volumeSize": "20Gi"}}, {"rootVolume": true, "ebs": {"volumeSize": "20Gi"}}]),
        ),
        "spec.blockDeviceMappings",
        "only one blockDeviceMappings with rootVolume",
    );
    assert_rejected(
        set(ec2nodeclass(), b, json!([{"ebs": {"volumeType": "gp3"}}])),
        "spec.blockDeviceMappings[0].ebs",
        "snapshotID or volumeSize must be defined",
    );
    assert_rejected(
        set(
            ec2nodeclass(),
            b,
            json!([{"ebs": {"volumeSize": "70000Gi"}}]),
        ),
        "spec.blockDeviceMappings[0].ebs.volumeSize",
        "should match",
    );
    assert_rejected(
        set(
            ec2nodeclass(),
            b,
            json!([{"ebs": {"volumeSize": "20Gi", "volumeType": "gp4"}}]),
        ),
        "spec.blockDeviceMappings[0].ebs.volumeType",
        "Unsupported value",
    );
    assert_rejected(
        set(
            ec2nodeclass(),
            b,
            json!([{"ebs": {"volumeSize": "20Gi", "volumeInitializationRate": 200}}]),
        ),
        "spec.blockDeviceMappings[0].ebs",
        "snapshotID must be set when volumeInitializationRate is set",
    );
}

#[test]
fn kubelet_settings_follow_upstreams_rules() {
    let k = "/spec/kubelet";
    assert_accepted(set(
        ec2nodeclass(),
        k,
        json!({
            "maxPods": 110, "systemReserved": {"cpu": "100m", "memory": "100Mi"},
            "evictionHard": {"memory.available": "5%"}, "evictionSoft": {"nodefs.available": "10%"},
            "evictionSoftGracePeriod": {"nodefs.available": "1m30s"},
            "imageGCHighThresholdPercent": 85, "imageGCLowThresholdPercent": 80, "clusterDNS": ["10.0.0.10"]
        }),
    ));
    assert_rejected(
        set(
            ec2nodeclass(),
            k,
            json!({"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60}),
        ),
        "spec.kubelet",
        "must be greater than imageGCLowThresholdPercent",
    );
    assert_rejected(
        set(ec2nodeclass(), k, json!({"systemReserved": {"gpu": "1"}})),
        "spec.kubelet.systemReserved",
        "valid keys for systemReserved",
    );
    assert_rejected(
        set(ec2nodeclass(), k, json!({"kubeReserved": {"cpu": "-1"}})),
        "spec.kubelet.kubeReserved",
        "cannot be a negative",
    );
    assert_rejected(
        set(
            ec2nodeclass(),
            k,
            json!({"evictionHard": {"disk.available": "5%"}}),
        ),
        "spec.kubelet.evictionHard",
        "valid keys for evictionHard",
    );
    assert_rejected(
        set(
            ec2nodeclass(),
            k,
            json!({"evictionSoft": {"memory.available": "5%"}}),
        ),
        "spec.kubelet",
        "does not have a matching evictionSoftGracePeriod",
    );
    assert_rejected(
        set(ec2nodeclass(), k, json!({"maxPods": -1})),
        "spec.kubelet.maxPods",
        "greater than or equal to 0",
    );
    assert_rejected(
        set(ec2nodeclass(), k, json!({"swap": true})),
        "spec.kubelet.swap",
        "unknown field",
    );
}

#[test]
fn other_launch_knobs_are_checked() {
    let doc = ec2nodeclass;
    assert_rejected(
        set(doc(), "/spec/instanceStorePolicy", json!("RAID1")),
        "spec.instanceStorePolicy",
        "Unsupported value",
    );
    assert_accepted(set(doc(), "/spec/instanceStorePolicy", json!("RAID0")));
    assert_rejected(
        set(
            doc(),
            "/spec/capacityReservationSelectorTerms",
            json!([{"id": "cr-1", "ownerID": "012345678901"}]),
        ),
        "spec.capacityReservationSelectorTerms[0]",
        "'id' is mutually exclusive",
    );
    assert_rejected(
        set(
            doc(),
            "/spec/capacityReservationSelectorTerms",
            json!([{"ownerID": "12"}]),
        ),
        "spec.capacityReservationSelectorTerms[0].ownerID",
        "should match",
    );
    assert_accepted(set(
        doc(),
        "/spec/capacityReservationSelectorTerms",
        json!([{"tags": {"a": "b"}, "ownerID": "012345678901"}]),
    ));
    assert_rejected(
        set(
            doc(),
            "/spec/networkInterfaces",
            json!([{"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "interface"}]),
        ),
        "spec.networkInterfaces",
        "must include a primary interface",
    );
    assert_rejected(
        set(
            doc(),
            "/spec/networkInterfaces",
            json!([{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}, {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}]),
        ),
        "spec.networkInterfaces",
        "must not have duplicate",
    );
    assert_rejected(
        set(doc(), "/spec/connectionTracking", json!({})),
        "spec.connectionTracking",
        "at least one of tcpEstablishedTimeout",
    );
    assert_rejected(
        set(doc(), "/spec/connectionTracking", json!({"udpTimeout": 10})),
        "spec.connectionTracking.udpTimeout",
        "greater than or equal to 30",
    );
    assert_rejected(
        set(
            doc(),
            "/spec/placementGroupSelector",
            json!({"name": "a", "id": "pg-1"}),
        ),
        "spec.placementGroupSelector",
        "mutually exclusive",
    );
    assert_rejected(
        set(doc(), "/spec/placementGroupSelector", json!({})),
        "spec.placementGroupSelector",
        "expected at least one",
    );
    assert_rejected(
        set(doc(), "/spec/associatePublicIPAddress", json!("yes")),
        "spec.associatePublicIPAddress",
        "must be of type boolean",
    );
}

// ---------------------------------------------------------------- documents

#[test]
fn v1beta1_objects_get_an_explanation_of_what_changed() {
    let mut pool = nodepool();
    pool["apiVersion"] = json!("karpenter.sh/v1beta1");
    pool["spec"]["disruption"]["expireAfter"] = json!("360h");
    pool["spec"]["template"]["spec"]["nodeClassRef"] = json!({"name": "default"});
    assert_rejected(
        pool,
        "apiVersion",
        "spec.disruption.expireAfter moved to spec.template.spec.expireAfter",
    );
    let mut class = ec2nodeclass();
    class["apiVersion"] = json!("karpenter.k8s.aws/v1beta1");
    class["spec"] = json!({"amiFamily": "AL2", "role": "r"});
    assert_rejected(
        class,
        "apiVersion",
        "amiSelectorTerms: [{alias: al2@latest}]",
    );
}

#[test]
fn other_kinds_are_identified_and_left_alone() {
    let deployment =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}});
    assert_eq!(check_document(&deployment).outcome, Outcome::Other);
    let wrong = set(nodepool(), "/apiVersion", json!("karpenter.sh/v2"));
    assert_rejected(wrong, "apiVersion", "NodePool is served as karpenter.sh/v1");
    assert_rejected(json!({"kind": "NodePool"}), "apiVersion", "Required value");
}

/// `validate_nodepool` remembers verdicts by the object's content: a NodePool changed after a
/// verdict must be judged again, and one that differs only in what the API server and the
/// controllers write (resourceVersion, status) keeps its verdict.
#[test]
fn a_remembered_nodepool_verdict_follows_the_spec_not_the_bookkeeping() {
    use karpenter_core::api::NodePool;
    use karpenter_core::validation::validate_nodepool;
    let mut pool: NodePool = serde_json::from_value(nodepool()).expect("a valid NodePool");
    pool.metadata.resource_version = Some("1".into());
    assert!(validate_nodepool(&pool).is_ok());
    pool.metadata.resource_version = Some("2".into());
    assert!(validate_nodepool(&pool).is_ok());
    let mut invalid = set(
        nodepool(),
        "/spec/template/spec/requirements/0/key",
        json!("karpenter.sh/nodepool"),
    );
    invalid["metadata"]["resourceVersion"] = json!("3");
    let invalid: NodePool = serde_json::from_value(invalid).expect("a NodePool of the right shape");
    let violations =
        validate_nodepool(&invalid).expect_err("a requirement on the nodepool label is rejected");
    assert!(
        violations.to_string().contains("requirements[0]"),
        "{violations}"
    );
    assert!(
        validate_nodepool(&pool).is_ok(),
        "the valid pool keeps its verdict"
    );
}

/// A watch cache's NodePool is judged once per object: the shared verdict is the typed one, and
/// a replaced object (a new `Arc`, as a watch event makes) is judged afresh, not given the
/// verdict of the object it replaced.
#[test]
fn a_shared_nodepool_gets_the_verdict_of_its_own_content_even_after_a_valid_one() {
    use karpenter_core::api::NodePool;
    use karpenter_core::validation::{validate_nodepool, validate_nodepool_shared};
    use std::sync::Arc;
    let valid: NodePool = serde_json::from_value(nodepool()).expect("a NodePool");
    let valid = Arc::new(valid);
    assert!(validate_nodepool_shared(&valid).is_ok());
    assert!(
        validate_nodepool_shared(&valid).is_ok(),
        "the remembered verdict"
    );
    let invalid: NodePool = serde_json::from_value(set(
        nodepool(),
        &format!("{REQ}/0"),
        requirement("kubernetes.io/hostname", "In", &["a"]),
    ))
    .expect("a NodePool");
    let invalid = Arc::new(invalid);
    assert_eq!(
        validate_nodepool_shared(&invalid).map_err(|v| v.to_string()),
        validate_nodepool(&invalid).map_err(|v| v.to_string())
    );
    assert!(validate_nodepool_shared(&invalid).is_err());
    drop(valid);
    assert!(
        validate_nodepool_shared(&invalid).is_err(),
        "still its own verdict"
    );
}
