//! NodePool status conditions (review H3) and what `kubectl get` shows of them: the printer
//! columns of the committed CRDs, evaluated on the objects the controllers wrote.

use std::sync::Arc;

use karpenter_core::nodepool::Readiness;
use karpenter_core::seams::kube::ResourceKind;
use serde_json::{Value, json};

use super::api_server::{Fixtures, api_server};
use super::support::{self, objects};

/// The columns `kubectl get` prints for `kind`'s CRD (`crds/<file>`), evaluated on `object`:
/// (column name, cell). Priority-0 columns only, as `kubectl get` without `-o wide`.
fn printed(file: &str, object: &Value) -> Vec<(String, String)> {
    let path = format!("{}/../../crds/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("committed CRD");
    let crd = &karpenter_core::manifest::parse_documents(&text).expect("yaml")[0].1;
    crd["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .expect("printer columns")
        .iter()
        .filter(|c| c["priority"].as_i64().unwrap_or(0) == 0)
        .map(|c| {
            let name = c["name"].as_str().unwrap_or_default().to_string();
            let cell = json_path(object, c["jsonPath"].as_str().unwrap_or_default());
            (name, cell)
        })
        .collect()
}

/// The subset of kubectl's JSONPath the CRDs use: `.a.b` (with `\.` inside a key) and
/// `[?(@.field=="value")]` filters on lists. Missing paths print as "" (kubectl prints
/// `<none>`).
fn json_path(object: &Value, path: &str) -> String {
    let mut current = vec![object.clone()];
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("[?(@.") {
            let end = after.find(")]").expect("filter end");
            let (field, value) = after[..end].split_once("==").expect("== filter");
            let value = value.trim_matches('"');
            current = current
                .iter()
                .flat_map(|v| v.as_array().cloned().unwrap_or_default())
                .filter(|item| item[field] == json!(value))
                .collect();
            rest = &after[end + 2..];
            continue;
        }
        let after = rest.strip_prefix('.').expect("a path step");
        let mut key = String::new();
        let mut chars = after.char_indices().peekable();
        let mut consumed = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        key.push(escaped);
                    }
                }
                '.' | '[' => {
                    consumed = i;
                    break;
                }
                _ => key.push(c),
            }
        }
        current = current.iter().map(|v| v[key.as_str()].clone()).collect();
        rest = &after[consumed..];
    }
    current
        .iter()
        .filter(|v| !v.is_null())
        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
        .collect::<Vec<_>>()
        .join(" ")
}

fn cell(columns: &[(String, String)], name: &str) -> String {
    columns
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, c)| c.clone())
        .unwrap_or_else(|| panic!("no column {name}: {columns:?}"))
}

fn condition(pool: &Value, type_: &str) -> (String, String) {
    let found = pool["status"]["conditions"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["type"] == json!(type_)).cloned())
        .unwrap_or_else(|| panic!("no {type_} condition: {pool:#}"));
    (
        found["status"].as_str().unwrap_or_default().to_string(),
        found["reason"].as_str().unwrap_or_default().to_string(),
    )
}

fn ready_class() -> Value {
    let mut class = objects::default_node_class();
    class["status"] = json!({"conditions": [{
        "type": "Ready", "status": "True", "reason": "Ready", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z"
    }]});
    class
}

#[test]
fn a_nodepool_with_a_ready_class_is_ready_and_kubectl_shows_it() {
    let clock = support::clock();
    let cloud = support::cloud(&clock);
    let kube = api_server(clock.clone());
    kube.apply(&ResourceKind::EC2_NODE_CLASS, ready_class());
    kube.apply(&ResourceKind::NODE_POOL, super::validation::nodepool());
    let ctx = Arc::new(support::context(&kube, &cloud, &clock));
    let readiness = Readiness::new(ctx);
    futures::executor::block_on(readiness.reconcile_all()).expect("pass");
    let pool = kube.objects(&ResourceKind::NODE_POOL)[0].clone();
    assert_eq!(condition(&pool, "ValidationSucceeded").0, "True");
    assert_eq!(condition(&pool, "NodeClassReady").0, "True");
    assert_eq!(
        condition(&pool, "NodeRegistrationHealthy"),
        ("Unknown".into(), "AwaitingReconciliation".into())
    );
    assert_eq!(condition(&pool, "Ready").0, "True");
    let columns = printed("karpenter.sh_nodepools.yaml", &pool);
    assert_eq!(cell(&columns, "Ready"), "True", "{columns:?}");
    assert_eq!(cell(&columns, "NodeClass"), "default");
    // An idle pass writes nothing.
    let version = pool["metadata"]["resourceVersion"].clone();
    futures::executor::block_on(readiness.reconcile_all()).expect("pass");
    assert_eq!(
        kube.objects(&ResourceKind::NODE_POOL)[0]["metadata"]["resourceVersion"],
        version
    );
}

#[test]
fn a_nodepool_without_its_class_or_with_an_invalid_spec_is_not_ready_and_says_why() {
    let clock = support::clock();
    let cloud = support::cloud(&clock);
    let kube = api_server(clock.clone());
    let mut missing = super::validation::nodepool();
    missing["metadata"]["name"] = json!("missing");
    missing["spec"]["template"]["spec"]["nodeClassRef"]["name"] = json!("nowhere");
    kube.apply(&ResourceKind::NODE_POOL, missing);
    let mut invalid = super::validation::nodepool();
    invalid["metadata"]["name"] = json!("invalid");
    invalid["spec"]["template"]["spec"]["requirements"] = json!([
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["a"]}
    ]);
    kube.apply(&ResourceKind::NODE_POOL, invalid);
    kube.apply(&ResourceKind::EC2_NODE_CLASS, objects::default_node_class());
    let ctx = Arc::new(support::context(&kube, &cloud, &clock));
    futures::executor::block_on(Readiness::new(ctx).reconcile_all()).expect("pass");
    let pools = kube.objects(&ResourceKind::NODE_POOL);
    let named = |n: &str| {
        pools
            .iter()
            .find(|p| p["metadata"]["name"] == json!(n))
            .cloned()
            .expect("pool")
    };
    let missing = named("missing");
    assert_eq!(
        condition(&missing, "NodeClassReady"),
        ("False".into(), "NodeClassNotFound".into())
    );
    assert_eq!(condition(&missing, "Ready").0, "False");
    let invalid = named("invalid");
    assert_eq!(
        condition(&invalid, "ValidationSucceeded"),
        ("False".into(), "NodePoolValidationFailed".into())
    );
    // Its class exists but was never resolved: readiness unknown, not ready.
    assert_eq!(
        condition(&invalid, "NodeClassReady"),
        ("Unknown".into(), "NodeClassReadinessUnknown".into())
    );
    assert_eq!(
        cell(&printed("karpenter.sh_nodepools.yaml", &invalid), "Ready"),
        "False"
    );
}
