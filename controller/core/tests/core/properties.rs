//! Properties of the validator over arbitrary input: it never panics, it is deterministic, and
//! whatever it accepts survives a round trip through the typed API unchanged in verdict.

use karpenter_core::manifest::{KarpenterObject, Outcome, check_document, parse_documents};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::validation::{ec2nodeclass, nodeclaim, nodepool};

/// Field names and values that occur in real manifests, so random documents reach deep rules.
const WORDS: &[&str] = &[
    "spec",
    "template",
    "requirements",
    "key",
    "operator",
    "values",
    "minValues",
    "In",
    "Gt",
    "Exists",
    "nodeClassRef",
    "group",
    "kind",
    "name",
    "disruption",
    "budgets",
    "nodes",
    "schedule",
    "duration",
    "limits",
    "cpu",
    "weight",
    "taints",
    "effect",
    "NoSchedule",
    "amiSelectorTerms",
    "alias",
    "al2023@latest",
    "id",
    "tags",
    "role",
    "instanceProfile",
    "subnetSelectorTerms",
    "kubelet",
    "expireAfter",
    "720h",
    "Never",
    "10%",
    "karpenter.sh/nodepool",
    "",
    "0",
    "-1",
    "@daily",
    "ami-1",
    "labels",
    "metadata",
];

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(WORDS).prop_map(str::to_string),
        "[ -~]{0,12}",
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        word().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(word(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Every JSON pointer into `value`.
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match value {
        Value::Object(map) => map
            .iter()
            .for_each(|(k, v)| pointers(v, format!("{at}/{k}"), out)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .for_each(|(i, v)| pointers(v, format!("{at}/{i}"), out)),
        _ => {}
    }
}

/// A valid manifest with one subtree replaced by arbitrary JSON.
fn mutated_manifest() -> impl Strategy<Value = Value> {
    (0..3usize, any::<prop::sample::Index>(), json_value()).prop_map(
        |(which, index, replacement)| {
            let mut doc = [nodepool(), nodeclaim(), ec2nodeclass()][which].clone();
            let mut all = Vec::new();
            pointers(&doc, String::new(), &mut all);
            let target = all[index.index(all.len())].clone();
            if target.is_empty() || target == "/kind" || target == "/apiVersion" {
                doc["spec"] = replacement;
            } else if let Some(slot) = doc.pointer_mut(&target) {
                *slot = replacement;
            }
            doc
        },
    )
}

/// Re-checking an accepted object after a round trip through its Rust type gives the same verdict.
fn assert_round_trip(doc: &Value) {
    let first = check_document(doc);
    assert_eq!(first, check_document(doc), "validation is deterministic");
    if let Outcome::Valid(object) = first.outcome {
        let mut again = match object {
            KarpenterObject::NodePool(o) => serde_json::to_value(o),
            KarpenterObject::NodeClaim(o) => serde_json::to_value(o),
            KarpenterObject::EC2NodeClass(o) => serde_json::to_value(o),
        }
        .expect("typed objects serialize");
        again["metadata"]["name"] = doc["metadata"]["name"].clone();
        let second = check_document(&again);
        assert!(
            matches!(second.outcome, Outcome::Valid(_)),
            "round trip broke {again}: {:?}",
            second.outcome
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_json_never_panics_the_validator(doc in json_value(), kind in prop::sample::select(&["NodePool", "NodeClaim", "EC2NodeClass"][..])) {
        let mut doc = doc;
        if let Value::Object(map) = &mut doc {
            map.insert("kind".into(), json!(kind));
            map.insert("apiVersion".into(), json!(if kind == "EC2NodeClass" { "karpenter.k8s.aws/v1" } else { "karpenter.sh/v1" }));
        }
        assert_round_trip(&doc);
    }

    #[test]
    fn mutated_manifests_never_panic_and_round_trip(doc in mutated_manifest()) {
        assert_round_trip(&doc);
    }

    #[test]
    fn arbitrary_text_never_panics_the_yaml_reader(text in "[ -~\n\t]{0,200}") {
        if let Ok(documents) = parse_documents(&text) {
            for (_, doc) in documents {
                check_document(&doc);
            }
        }
    }
}
