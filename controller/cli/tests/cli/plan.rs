//! `karpenter plan` as a user runs it: the plans it makes for the example manifests, its JSON and
//! table output, determinism, and exit code 2 with file, document and field on bad input.

use super::{karpenter, root, stderr, stdout};
use std::collections::BTreeSet;

use karpenter_core::api::labels::{
    ARCH_LABEL, INSTANCE_CATEGORY_LABEL, INSTANCE_FAMILY_LABEL, INSTANCE_GENERATION_LABEL,
};
use karpenter_core::catalog::{Catalog, InstanceType};
use karpenter_core::resources::CPU;
use serde_json::Value;

/// Runs `plan` with `args`, expects exit 0, returns the JSON plan.
fn plan(args: &[&str], stdin: Option<&str>) -> Value {
    let mut all = vec!["plan"];
    all.extend_from_slice(args);
    let output = karpenter(&all, stdin);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{args:?}: stderr:\n{}",
        stderr(&output)
    );
    serde_json::from_str(&stdout(&output))
        .unwrap_or_else(|e| panic!("{args:?}: stdout is JSON ({e}):\n{}", stdout(&output)))
}

fn claims(plan: &Value) -> &Vec<Value> {
    plan["nodeClaims"].as_array().expect("nodeClaims is a list")
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("a list, got {value}"))
        .iter()
        .map(|v| v.as_str().expect("a string").to_string())
        .collect()
}

/// Every pod the plan puts on a new NodeClaim.
fn planned_pods(plan: &Value) -> BTreeSet<String> {
    claims(plan)
        .iter()
        .flat_map(|c| strings(&c["pods"]))
        .collect()
}

/// The values of a claim's requirement on `key` (operator `In`).
fn requirement(claim: &Value, key: &str) -> Option<Vec<String>> {
    claim["requirements"]
        .as_array()
        .expect("requirements is a list")
        .iter()
        .find(|r| r["key"] == key)
        .map(|r| {
            assert_eq!(r["operator"], "In", "{r}");
            strings(&r["values"])
        })
}

fn catalog_type(name: &str) -> &'static InstanceType {
    Catalog::builtin_ref()
        .get(name)
        .unwrap_or_else(|| panic!("{name} is in the built-in catalog"))
}

fn label<'a>(it: &'a InstanceType, key: &str) -> &'a str {
    it.labels
        .get(key)
        .map(String::as_str)
        .unwrap_or_else(|| panic!("{} has {key}", it.name))
}

fn pods_named(prefix: &str, count: usize) -> BTreeSet<String> {
    (0..count)
        .map(|i| format!("default/{prefix}-{i}"))
        .collect()
}

#[test]
fn seed_000_puts_the_ten_nginx_pods_on_c_m_r_instances_newer_than_generation_2_without_waste() {
    let plan = plan(&["-f", "examples/seed-000-default.yaml"], None);
    assert_eq!(planned_pods(&plan), pods_named("nginx", 10));
    assert!(strings(&plan["unschedulable"]).is_empty());
    let mut cheapest_cpu = 0;
    for claim in claims(&plan) {
        assert_eq!(claim["nodePool"], "default");
        let types = strings(&claim["instanceTypes"]);
        assert!(!types.is_empty());
        for name in &types {
            let it = catalog_type(name);
            assert!(
                ["c", "m", "r"].contains(&label(it, INSTANCE_CATEGORY_LABEL)),
                "{name}"
            );
            let generation: u32 = label(it, INSTANCE_GENERATION_LABEL)
                .parse()
                .expect("numeric generation");
            assert!(generation > 2, "{name}");
            assert_eq!(label(it, ARCH_LABEL), "amd64", "{name}");
        }
        cheapest_cpu += catalog_type(&types[0]).allocatable.get(CPU);
        let capacity_types =
            requirement(claim, "karpenter.sh/capacity-type").expect("a capacity-type requirement");
        assert!(
            capacity_types
                .iter()
                .all(|c| ["spot", "on-demand", "reserved"].contains(&c.as_str())),
            "{capacity_types:?}"
        );
    }
    // 10 x 500m = 5 vCPU: the cheapest types of the claims hold it, and not wildly more.
    assert!(cheapest_cpu >= 5000, "{cheapest_cpu}m for 5000m of pods");
    assert!(cheapest_cpu <= 10_000, "{cheapest_cpu}m for 5000m of pods");
}

#[test]
fn instance_types_are_listed_cheapest_first() {
    let plan = plan(&["-f", "examples/seed-003-spot-inflate.yaml"], None);
    for claim in claims(&plan) {
        let prices: Vec<f64> = strings(&claim["instanceTypes"])
            .iter()
            .map(|name| {
                catalog_type(name)
                    .offerings
                    .iter()
                    .filter(|o| o.capacity_type.label() == "spot")
                    .map(|o| o.price)
                    .fold(f64::MAX, f64::min)
            })
            .collect();
        assert!(
            prices.windows(2).all(|w| w[0] <= w[1]),
            "prices not ascending: {prices:?}"
        );
        assert_eq!(claim["pricePerHour"].as_f64(), prices.first().copied());
    }
}

const INFLATE: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: inflate}
spec:
  replicas: 6
  selector: {matchLabels: {app: inflate}}
  template:
    metadata: {labels: {app: inflate}}
    spec:
      containers: [{name: app, image: app, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
"#;

#[test]
fn seed_001_uses_only_the_four_listed_instance_types() {
    let empty = plan(&["-f", "examples/seed-001-general.yaml"], None);
    assert!(
        claims(&empty).is_empty(),
        "seed-001 has no pods: nothing to launch"
    );
    let plan = plan(
        &["-f", "examples/seed-001-general.yaml", "-f", "-"],
        Some(INFLATE),
    );
    assert_eq!(planned_pods(&plan), pods_named("inflate", 6));
    let allowed = ["m6i.large", "m6i.xlarge", "m7i.large", "c6i.large"];
    for claim in claims(&plan) {
        assert_eq!(claim["nodePool"], "general");
        let types = strings(&claim["instanceTypes"]);
        assert!(!types.is_empty());
        assert!(
            types.iter().all(|t| allowed.contains(&t.as_str())),
            "{types:?}"
        );
        let written = requirement(claim, "node.kubernetes.io/instance-type")
            .expect("the NodeClaim lists its instance types");
        assert_eq!(written, types);
    }
}

#[test]
fn seed_002_pods_tolerate_the_taint_and_land_in_zones_a_or_b_on_allowed_families() {
    let plan = plan(
        &["-f", "examples/seed-002-bottlerocket-and-taints.yaml"],
        None,
    );
    assert_eq!(planned_pods(&plan), pods_named("myapp", 3));
    let families = ["m5", "m5d", "c5", "c5d", "c4", "r4"];
    for claim in claims(&plan) {
        assert_eq!(claim["nodePool"], "team-a");
        for name in strings(&claim["instanceTypes"]) {
            let it = catalog_type(&name);
            assert!(
                ["c", "m", "r", "t"].contains(&label(it, INSTANCE_CATEGORY_LABEL)),
                "{name}"
            );
            assert!(
                families.contains(&label(it, INSTANCE_FAMILY_LABEL)),
                "{name}"
            );
        }
        let zones = requirement(claim, "topology.kubernetes.io/zone").expect("a zone requirement");
        assert!(
            !zones.is_empty() && zones.iter().all(|z| z == "us-west-2a" || z == "us-west-2b"),
            "{zones:?}"
        );
        let zone = claim["cheapestOffering"]["zone"].as_str().expect("a zone");
        assert!(zones.iter().any(|z| z == zone), "{zone} not in {zones:?}");
        assert_eq!(requirement(claim, "team"), Some(vec!["team-a".to_string()]));
    }
}

#[test]
fn seed_002_pods_without_the_toleration_are_unschedulable_with_a_reason() {
    let text =
        std::fs::read_to_string(root().join("examples/seed-002-bottlerocket-and-taints.yaml"))
            .expect("example readable");
    let start = text
        .find("      tolerations:")
        .expect("the toleration block");
    let end = text[start..].find("      containers:").expect("containers") + start;
    let untolerating = format!("{}{}", &text[..start], &text[end..]);
    let plan = plan(&["-f", "-"], Some(&untolerating));
    assert!(claims(&plan).is_empty(), "{plan}");
    let unschedulable = plan["unschedulable"].as_array().expect("a list");
    let pods: BTreeSet<String> = unschedulable
        .iter()
        .map(|u| u["pod"].as_str().expect("pod").to_string())
        .collect();
    assert_eq!(pods, pods_named("myapp", 3));
    assert!(
        unschedulable
            .iter()
            .all(|u| !u["reason"].as_str().unwrap_or_default().is_empty())
    );
}

#[test]
fn seed_003_plans_spot_capacity_only() {
    let plan = plan(&["-f", "examples/seed-003-spot-inflate.yaml"], None);
    assert_eq!(planned_pods(&plan), pods_named("inflate", 10));
    for claim in claims(&plan) {
        assert_eq!(
            requirement(claim, "karpenter.sh/capacity-type"),
            Some(vec!["spot".to_string()])
        );
        assert_eq!(claim["cheapestOffering"]["capacityType"], "spot");
        for name in strings(&claim["instanceTypes"]) {
            let it = catalog_type(&name);
            assert!(
                ["c", "m", "r"].contains(&label(it, INSTANCE_CATEGORY_LABEL)),
                "{name}"
            );
        }
    }
}

#[test]
fn the_same_input_gives_byte_identical_output() {
    for file in [
        "examples/seed-000-default.yaml",
        "examples/seed-001-general.yaml",
        "examples/seed-002-bottlerocket-and-taints.yaml",
        "examples/seed-003-spot-inflate.yaml",
    ] {
        for format in ["json", "table"] {
            let args = ["plan", "-f", file, "-o", format];
            let first = karpenter(&args, None);
            let second = karpenter(&args, None);
            assert_eq!(first.status.code(), Some(0), "{file}");
            assert!(!first.stdout.is_empty(), "{file} {format}");
            assert_eq!(first.stdout, second.stdout, "{file} -o {format}");
        }
    }
}

#[test]
fn json_is_the_default_output() {
    let default = karpenter(&["plan", "-f", "examples/seed-000-default.yaml"], None);
    let json = karpenter(
        &["plan", "-f", "examples/seed-000-default.yaml", "-o", "json"],
        None,
    );
    assert_eq!(default.stdout, json.stdout);
}

#[test]
fn the_table_has_a_row_per_node_claim_a_total_and_the_unschedulable_pods() {
    let json = plan(&["-f", "examples/seed-000-default.yaml"], None);
    let output = karpenter(
        &[
            "plan",
            "-f",
            "examples/seed-000-default.yaml",
            "-o",
            "table",
        ],
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let table = stdout(&output);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("NODEPOOL") && lines[0].contains("$/HOUR"),
        "{table}"
    );
    let rows = lines.iter().filter(|l| l.starts_with("default ")).count();
    assert_eq!(rows, claims(&json).len(), "{table}");
    for claim in claims(&json) {
        let cheapest = strings(&claim["instanceTypes"])[0].clone();
        assert!(table.contains(&cheapest), "{cheapest} in:\n{table}");
    }
    let total = lines
        .iter()
        .find(|l| l.starts_with("total: "))
        .unwrap_or_else(|| panic!("a total line in:\n{table}"));
    let nodes = claims(&json).len();
    assert!(
        total.starts_with(&format!(
            "total: {nodes} new node{}, 10 pods, ${:.4}/hour",
            if nodes == 1 { "" } else { "s" },
            json["total"]["pricePerHour"].as_f64().expect("a price")
        )),
        "{total}"
    );

    let mut missing_claim = std::fs::read_to_string(root().join("examples/seed-000-default.yaml"))
        .expect("example readable");
    missing_claim.push_str(
        r#"
---
apiVersion: v1
kind: Pod
metadata: {name: stateful}
spec:
  containers: [{name: app, image: app}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
"#,
    );
    let output = karpenter(&["plan", "-f", "-", "-o", "table"], Some(&missing_claim));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let table = stdout(&output);
    let section = table
        .split("\nunschedulable:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("an unschedulable section in:\n{table}"));
    assert!(
        section.contains("default/stateful: persistentvolumeclaim \"data\" not found"),
        "{table}"
    );
}

#[test]
fn existing_nodes_take_pods_before_new_claims_in_both_outputs() {
    let mut input = std::fs::read_to_string(root().join("examples/seed-003-spot-inflate.yaml"))
        .expect("example readable");
    input.push_str(
        r#"
---
apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels: {topology.kubernetes.io/zone: us-west-2a, kubernetes.io/arch: amd64, kubernetes.io/os: linux}
status:
  allocatable: {cpu: "16", memory: 64Gi, pods: "110"}
"#,
    );
    let plan = plan(&["-f", "-"], Some(&input));
    assert!(claims(&plan).is_empty(), "{plan}");
    let nodes = plan["existingNodes"].as_array().expect("a list");
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0]["name"], "node-a");
    assert_eq!(
        strings(&nodes[0]["pods"])
            .into_iter()
            .collect::<BTreeSet<_>>(),
        pods_named("inflate", 10)
    );
    let output = karpenter(&["plan", "-f", "-", "-o", "table"], Some(&input));
    let table = stdout(&output);
    assert!(table.contains("no new NodeClaims"), "{table}");
    assert!(
        table.contains("existing nodes:\n  node-a: default/inflate-0, default/inflate-1,"),
        "{table}"
    );
}

#[test]
fn a_node_pool_whose_node_class_is_absent_still_plans_and_says_so() {
    let text = std::fs::read_to_string(root().join("examples/seed-003-spot-inflate.yaml"))
        .expect("example readable");
    let without_class: Vec<&str> = text
        .split("\n---\n")
        .filter(|doc| !doc.lines().any(|line| line == "kind: EC2NodeClass"))
        .collect();
    let input = without_class.join("\n---\n");
    let output = karpenter(&["plan", "-f", "-"], Some(&input));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("note: NodePool/default: nodeClassRef names EC2NodeClass/default"),
        "{}",
        stderr(&output)
    );
    let plan: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(planned_pods(&plan), pods_named("inflate", 10));
}

#[test]
fn a_catalog_file_replaces_the_built_in_instance_types() {
    let catalog = r#"
instanceTypes:
  - name: tiny.large
    cpu: "2"
    memory: 4Gi
    labels: {karpenter.k8s.aws/instance-category: c, karpenter.k8s.aws/instance-generation: "9"}
    offerings:
      - {zone: us-west-2a, capacityType: spot, price: 0.01}
      - {zone: us-west-2a, capacityType: on-demand, price: 0.03}
"#;
    let plan = plan(
        &["-f", "examples/seed-000-default.yaml", "--catalog", "-"],
        Some(catalog),
    );
    assert_eq!(planned_pods(&plan), pods_named("nginx", 10));
    for claim in claims(&plan) {
        assert_eq!(strings(&claim["instanceTypes"]), ["tiny.large"]);
    }
    // 2 vCPU less kube-reserved holds three 500m pods: four nodes for ten pods.
    assert_eq!(claims(&plan).len(), 4);
}

// ---- bad input: exit 2, naming file, document and field ----

fn fails(args: &[&str], stdin: Option<&str>) -> String {
    let output = karpenter(args, stdin);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{args:?}: stdout:\n{}\nstderr:\n{}",
        stdout(&output),
        stderr(&output)
    );
    assert!(
        stdout(&output).is_empty(),
        "no plan on bad input: {}",
        stdout(&output)
    );
    stderr(&output)
}

#[test]
fn a_missing_file_exits_2_naming_the_file() {
    let err = fails(&["plan", "-f", "examples/no-such-file.yaml"], None);
    assert!(err.contains("error: examples/no-such-file.yaml: "), "{err}");
}

#[test]
fn a_yaml_syntax_error_exits_2_with_line_and_column() {
    let err = fails(
        &["plan", "-f", "-"],
        Some("apiVersion: v1\nkind: Pod\nmetadata: {name: [\n"),
    );
    assert!(err.contains("error: -:"), "{err}");
    assert!(err.contains("YAML syntax error"), "{err}");
    let location = err
        .split("error: -:")
        .nth(1)
        .and_then(|rest| rest.split(": ").next())
        .unwrap_or_default();
    let parts: Vec<&str> = location.split(':').collect();
    assert!(
        parts.len() == 2 && parts.iter().all(|p| p.parse::<usize>().is_ok()),
        "line:column in {err}"
    );
}

#[test]
fn a_non_integer_replicas_exits_2_naming_file_document_and_field() {
    let text = std::fs::read_to_string(root().join("examples/seed-000-default.yaml"))
        .expect("example readable");
    let bad = text.replace("replicas: 10", "replicas: ten");
    let err = fails(&["plan", "-f", "-"], Some(&bad));
    assert!(
        err.contains("error: -: document 3: Deployment/default/nginx: spec.replicas: "),
        "{err}"
    );
}

#[test]
fn an_invalid_karpenter_object_exits_2_with_its_violations() {
    let text = std::fs::read_to_string(root().join("examples/seed-000-default.yaml"))
        .expect("example readable");
    let bad = text.replace("values: [\"2\"]", "values: [\"two\"]");
    assert_ne!(bad, text);
    let err = fails(&["plan", "-f", "-"], Some(&bad));
    assert!(
        err.contains("error: -: document 1: invalid NodePool/default: spec.template.spec.requirements[4].values"),
        "{err}"
    );
}

#[test]
fn an_unreadable_catalog_exits_2_naming_it() {
    let err = fails(
        &[
            "plan",
            "-f",
            "examples/seed-000-default.yaml",
            "--catalog",
            "examples/no-such-catalog.yaml",
        ],
        None,
    );
    assert!(
        err.contains("error: examples/no-such-catalog.yaml: "),
        "{err}"
    );
}
