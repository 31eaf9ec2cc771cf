//! The shipped IAM policy allows exactly the actions in `karpenter_aws::actions::ACTIONS`, each
//! scoped as its row says; the CloudFormation template embeds that policy word for word and routes
//! the EventBridge events the core parses to the interruption queue.
//!
//! Each check is a function returning the problems it finds, so the tests at the end can show on
//! altered copies of the policy that a wider grant or a lost condition is caught.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use karpenter_aws::actions::{ACTIONS, Scoping};
use karpenter_core::interruption::messages as m;
use serde_json::{Value, json};

/// The policy documents, relative to the workspace root, and the template resource embedding each.
const POLICIES: [(&str, &str); 2] = [
    (
        "deploy/iam/controller-policy.json",
        "KarpenterControllerPolicy",
    ),
    (
        "deploy/iam/controller-iam-policy.json",
        "KarpenterControllerIAMPolicy",
    ),
];
const TEMPLATE: &str = "deploy/cloudformation.yaml";

/// IAM's limit on a managed policy document, in characters without whitespace.
const MANAGED_POLICY_CHARS_MAX: usize = 6_144;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read_json(path: &str) -> Value {
    let text = std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn template() -> Value {
    let text = std::fs::read_to_string(root().join(TEMPLATE))
        .unwrap_or_else(|e| panic!("{TEMPLATE}: {e}"));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{TEMPLATE}: {e}"))
}

/// All statements of the shipped documents.
fn statements() -> Vec<Value> {
    POLICIES
        .iter()
        .flat_map(|(path, _)| {
            read_json(path)["Statement"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

/// A string-or-list field as a list.
fn list(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().unwrap_or("<not a string>").to_string())
            .collect(),
        _ => Vec::new(),
    }
}

/// The resource type of an ARN (`instance` in `arn:...:instance/*`).
fn resource_type(arn: &str) -> &str {
    let tail = arn.rsplit(':').next().unwrap_or(arn);
    tail.split('/').next().unwrap_or(tail)
}

/// Problems with the statements' shape: only Allow, no Not* elements, no wildcard actions.
fn shape_problems(statements: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    for s in statements {
        let sid = s["Sid"].as_str().unwrap_or("<no Sid>");
        if s["Effect"] != "Allow" {
            problems.push(format!("{sid}: only Allow statements are expected"));
        }
        for key in ["NotAction", "NotResource", "NotPrincipal"] {
            if !s[key].is_null() {
                problems.push(format!("{sid}: {key} widens the grant"));
            }
        }
        for action in list(&s["Action"]) {
            if action.contains('*') {
                problems.push(format!("{sid}: wildcard action {action}"));
            }
        }
    }
    problems
}

/// Differences between the actions the statements allow and the table.
fn action_problems(statements: &[Value]) -> Vec<String> {
    let allowed: BTreeSet<String> = statements.iter().flat_map(|s| list(&s["Action"])).collect();
    let table: BTreeSet<String> = ACTIONS.iter().map(|a| a.action.to_string()).collect();
    let extra = allowed
        .difference(&table)
        .map(|a| format!("allowed but not in controller/aws/src/actions.rs: {a}"));
    let missing = table
        .difference(&allowed)
        .map(|a| format!("in controller/aws/src/actions.rs but not allowed: {a}"));
    extra.chain(missing).collect()
}

/// The condition value under `operator` / `key`, if any.
fn condition<'a>(s: &'a Value, operator: &str, key: &str) -> &'a Value {
    &s["Condition"][operator][key]
}

/// Whether a statement limits its resources to this cluster's and `owner_tag`'s, as request tags
/// (resources being created) or as resource tags (existing ones).
fn cluster_owned(s: &Value, owner_tag: &str) -> bool {
    ["aws:RequestTag", "aws:ResourceTag"].iter().any(|tag| {
        condition(
            s,
            "StringEquals",
            &format!("{tag}/kubernetes.io/cluster/${{ClusterName}}"),
        ) == "owned"
            && condition(s, "StringLike", &format!("{tag}/{owner_tag}")) == "*"
    })
}

/// Problems with one statement's scoping of `action` against its row.
fn scoping_problems_of(s: &Value, action: &str, scoping: Scoping) -> Vec<String> {
    let sid = s["Sid"].as_str().unwrap_or("<no Sid>");
    let resources = list(&s["Resource"]);
    let mut problems = Vec::new();
    let mut problem = |what: String| problems.push(format!("{sid}: {action} {what}"));
    match scoping {
        Scoping::Region => {
            if condition(s, "StringEquals", "aws:RequestedRegion") != "${AWS::Region}" {
                problem("is not limited to the cluster's region".into());
            }
        }
        Scoping::Global => {}
        Scoping::Resources(allowed) => {
            for r in resources.iter().filter(|r| !allowed.contains(&r.as_str())) {
                problem(format!("allowed on {r}, only on {allowed:?}"));
            }
        }
        Scoping::ClusterOwned { owner_tag, inputs } => {
            for r in &resources {
                if r == "*" {
                    problem("allowed on every resource".into());
                } else if !inputs.contains(&resource_type(r)) && !cluster_owned(s, owner_tag) {
                    problem(format!(
                        "allowed on {r} without the cluster-ownership and {owner_tag} tag conditions"
                    ));
                }
            }
        }
    }
    problems
}

/// Problems with every statement's scoping of every action it allows.
fn scoping_problems(statements: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    for s in statements {
        for action in list(&s["Action"]) {
            if let Some(row) = ACTIONS.iter().find(|a| a.action == action) {
                problems.extend(scoping_problems_of(s, &action, row.scoping));
            }
        }
    }
    problems
}

fn all_problems(statements: &[Value]) -> Vec<String> {
    let mut problems = shape_problems(statements);
    problems.extend(action_problems(statements));
    problems.extend(scoping_problems(statements));
    problems
}

#[test]
fn the_policy_allows_exactly_the_table_each_action_scoped_as_its_row_says() {
    let problems = all_problems(&statements());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_node_role_is_passed_to_ec2_only() {
    let pass: Vec<Value> = statements()
        .into_iter()
        .filter(|s| list(&s["Action"]).contains(&"iam:PassRole".to_string()))
        .collect();
    assert_eq!(pass.len(), 1);
    assert_eq!(
        condition(&pass[0], "StringEquals", "iam:PassedToService"),
        &json!(["ec2.amazonaws.com", "ec2.amazonaws.com.cn"])
    );
}

#[test]
fn the_table_has_one_row_per_action_and_every_seam_method_has_a_row() {
    let names: BTreeSet<&str> = ACTIONS.iter().map(|a| a.action).collect();
    assert_eq!(names.len(), ACTIONS.len(), "an action is listed twice");
    let seams = root().join("controller/core/src/seams");
    for (file, trait_name) in [
        ("ec2.rs", "Ec2"),
        ("sqs.rs", "Sqs"),
        ("iam.rs", "InstanceProfiles"),
        ("eks.rs", "Eks"),
        ("catalog.rs", "CatalogSource"),
    ] {
        let text = std::fs::read_to_string(seams.join(file)).expect("seam source");
        let body = text
            .split(&format!("pub trait {trait_name}"))
            .nth(1)
            .unwrap_or_else(|| panic!("no trait {trait_name} in {file}"));
        let methods: Vec<&str> = body
            .split("async fn ")
            .skip(1)
            .map(|rest| rest.split('(').next().unwrap_or_default().trim())
            .collect();
        assert!(!methods.is_empty(), "no methods found in {trait_name}");
        for method in methods {
            let needle = format!("{trait_name}::{method}");
            assert!(
                ACTIONS.iter().any(|a| a.called_by.contains(&needle)),
                "{needle} has no row in controller/aws/src/actions.rs"
            );
        }
    }
}

#[test]
fn reads_scoped_by_region_or_globally_are_only_describe_get_or_list_calls() {
    for a in ACTIONS {
        if matches!(a.scoping, Scoping::Region | Scoping::Global) {
            let name = a.action.split(':').nth(1).unwrap_or_default();
            assert!(
                ["Describe", "Get", "List"]
                    .iter()
                    .any(|p| name.starts_with(p)),
                "{} is not a read but is allowed on every resource",
                a.action
            );
        }
    }
}

#[test]
fn each_policy_document_fits_a_managed_policy_for_a_100_character_cluster_name() {
    for (path, _) in POLICIES {
        let text = std::fs::read_to_string(root().join(path)).expect("policy");
        let longest = text
            .replace("${AWS::Partition}", "aws-us-gov")
            .replace("${AWS::Region}", "ap-southeast-2")
            .replace("${AWS::AccountId}", "123456789012")
            .replace("${ClusterName}", &"c".repeat(100))
            .replace(
                "${KarpenterInterruptionQueue.Arn}",
                &format!(
                    "arn:aws-us-gov:sqs:ap-southeast-2:123456789012:{}",
                    "c".repeat(100)
                ),
            )
            .replace(
                "${KarpenterNodeRole.Arn}",
                &format!(
                    "arn:aws-us-gov:iam::123456789012:role/KarpenterNodeRole-{}",
                    "c".repeat(46)
                ),
            );
        let chars = longest.chars().filter(|c| !c.is_whitespace()).count();
        assert!(
            chars <= MANAGED_POLICY_CHARS_MAX,
            "{path}: {chars} characters"
        );
    }
}

#[test]
fn the_template_embeds_each_policy_document_word_for_word() {
    let template = template();
    for (path, resource) in POLICIES {
        let embedded = template["Resources"][resource]["Properties"]["PolicyDocument"]["Fn::Sub"]
            .as_str()
            .unwrap_or_else(|| panic!("{resource}: no Fn::Sub policy document"));
        let embedded: Value = serde_json::from_str(embedded).expect("embedded policy is JSON");
        assert_eq!(embedded, read_json(path), "{resource} differs from {path}");
    }
}

#[test]
fn the_template_routes_every_event_the_core_parses_to_the_queue() {
    let template = template();
    let mut routed = BTreeSet::new();
    for resource in template["Resources"]
        .as_object()
        .expect("resources")
        .values()
    {
        if resource["Type"] != "AWS::Events::Rule" {
            continue;
        }
        let pattern = &resource["Properties"]["EventPattern"];
        for source in list(&pattern["source"]) {
            for detail in list(&pattern["detail-type"]) {
                routed.insert((source.clone(), detail));
            }
        }
        assert_eq!(
            resource["Properties"]["Targets"][0]["Arn"]["Fn::GetAtt"],
            json!(["KarpenterInterruptionQueue", "Arn"])
        );
    }
    let parsed: BTreeSet<(String, String)> = [
        (m::SOURCE_EC2, m::DETAIL_TYPE_SPOT_INTERRUPTION),
        (m::SOURCE_EC2, m::DETAIL_TYPE_REBALANCE_RECOMMENDATION),
        (m::SOURCE_HEALTH, m::DETAIL_TYPE_SCHEDULED_CHANGE),
        (m::SOURCE_EC2, m::DETAIL_TYPE_STATE_CHANGE),
    ]
    .iter()
    .map(|(s, d)| (s.to_string(), d.to_string()))
    .collect();
    assert_eq!(routed, parsed);
}

// ---- the checks catch a wider policy ----

fn altered(change: impl Fn(&mut Vec<Value>)) -> Vec<String> {
    let mut statements = statements();
    change(&mut statements);
    all_problems(&statements)
}

fn statement<'a>(statements: &'a mut [Value], sid: &str) -> &'a mut Value {
    statements
        .iter_mut()
        .find(|s| s["Sid"] == sid)
        .unwrap_or_else(|| panic!("no statement {sid}"))
}

#[test]
fn an_action_the_controller_does_not_call_is_caught() {
    let problems = altered(|s| {
        s.push(
            json!({"Sid": "More", "Effect": "Allow", "Resource": "*", "Action": "ec2:DeleteVpc"}),
        )
    });
    assert_eq!(
        problems,
        ["allowed but not in controller/aws/src/actions.rs: ec2:DeleteVpc"]
    );
}

#[test]
fn a_termination_without_the_ownership_conditions_is_caught() {
    let problems = altered(|s| {
        statement(s, "DeleteOwned")
            .as_object_mut()
            .expect("statement")
            .remove("Condition");
    });
    assert_eq!(problems.len(), 4, "{problems:?}");
    assert!(
        problems
            .iter()
            .all(|p| p.contains("without the cluster-ownership"))
    );
}

#[test]
fn a_launch_on_every_resource_is_caught() {
    let problems = altered(|s| statement(s, "LaunchInputs")["Resource"] = json!("*"));
    assert_eq!(
        problems,
        [
            "LaunchInputs: ec2:CreateFleet allowed on every resource",
            "LaunchInputs: ec2:RunInstances allowed on every resource"
        ]
    );
}

#[test]
fn passing_any_role_is_caught() {
    let problems = altered(|s| statement(s, "PassNodeRole")["Resource"] = json!("*"));
    assert_eq!(
        problems,
        [r#"PassNodeRole: iam:PassRole allowed on *, only on ["${KarpenterNodeRole.Arn}"]"#]
    );
}

#[test]
fn reads_in_every_region_and_wildcard_actions_are_caught() {
    let problems = altered(|s| {
        statement(s, "RegionalReads")
            .as_object_mut()
            .expect("statement")
            .remove("Condition");
        s.push(json!({"Sid": "All", "Effect": "Allow", "Resource": "*", "Action": "sqs:*"}));
    });
    assert!(problems.contains(&"All: wildcard action sqs:*".to_string()));
    assert!(problems.contains(
        &"RegionalReads: ec2:DescribeImages is not limited to the cluster's region".to_string()
    ));
}
