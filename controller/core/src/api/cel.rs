//! CEL validation rules (`x-kubernetes-validations`) shared by the CRD schemas.
//!
//! Rules are built from the same constants the Rust validation uses, so the API server and
//! `karpenter validate` cannot drift apart. Where upstream places a rule on a whole list, we place
//! it on the item with a `fieldPath`, so that both the API server and our validator point at the
//! exact offending field (`requirements[2].values`) instead of the list.

use serde_json::{Value, json};

use super::labels::{AWS_GROUP, AWS_WELL_KNOWN_LABELS, GROUP, HOSTNAME_LABEL, NODEPOOL_LABEL};

/// One rule as it appears in the CRD.
pub fn rule(rule: &str, message: &str) -> Value {
    json!({ "rule": rule, "message": message })
}

/// A rule whose failure is reported at `field_path` (relative to the node carrying the rule).
pub fn rule_at(rule: &str, message: &str, field_path: &str) -> Value {
    json!({ "rule": rule, "message": message, "fieldPath": field_path })
}

fn cel_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("'{i}'")).collect();
    format!("[{}]", quoted.join(", "))
}

/// `expr` is a label key whose domain is `domain` or a subdomain of it.
fn in_domain(expr: &str, domain: &str) -> String {
    format!(
        "({expr}.contains('/') && ({expr}.split('/')[0] == '{domain}' || \
         {expr}.split('/')[0].endsWith('.{domain}')))"
    )
}

/// Rules for one label key (`self` is the key) in requirements.
/// `allow_nodepool`: NodeClaims carry the nodepool requirement, NodePool templates may not.
pub fn label_key_rules(allow_nodepool: bool) -> Value {
    let karpenter_allowed = cel_list(&["karpenter.sh/capacity-type", NODEPOOL_LABEL]);
    let aws_allowed = cel_list(&AWS_WELL_KNOWN_LABELS);
    let mut rules = vec![
        rule(
            &format!(
                "self in {karpenter_allowed} || !{}",
                in_domain("self", GROUP)
            ),
            "label domain \"karpenter.sh\" is restricted",
        ),
        rule(
            &format!("self != '{HOSTNAME_LABEL}'"),
            "label \"kubernetes.io/hostname\" is restricted",
        ),
        rule(
            &format!("self in {aws_allowed} || !{}", in_domain("self", AWS_GROUP)),
            "label domain \"karpenter.k8s.aws\" is restricted",
        ),
    ];
    if !allow_nodepool {
        rules.insert(
            1,
            rule(
                &format!("self != '{NODEPOOL_LABEL}'"),
                "label \"karpenter.sh/nodepool\" is restricted",
            ),
        );
    }
    Value::Array(rules)
}

/// Rules for a map of labels (`self` is the map; keys are checked with `all`).
pub fn label_map_rules() -> Value {
    let karpenter_allowed = cel_list(&["karpenter.sh/capacity-type", NODEPOOL_LABEL]);
    let aws_allowed = cel_list(&AWS_WELL_KNOWN_LABELS);
    json!([
        rule(
            &format!(
                "self.all(x, x in {karpenter_allowed} || !{})",
                in_domain("x", GROUP)
            ),
            "label domain \"karpenter.sh\" is restricted",
        ),
        rule(
            &format!("self.all(x, x != '{NODEPOOL_LABEL}')"),
            "label \"karpenter.sh/nodepool\" is restricted",
        ),
        rule(
            &format!("self.all(x, x != '{HOSTNAME_LABEL}')"),
            "label \"kubernetes.io/hostname\" is restricted",
        ),
        rule(
            &format!(
                "self.all(x, x in {aws_allowed} || !{})",
                in_domain("x", AWS_GROUP)
            ),
            "label domain \"karpenter.k8s.aws\" is restricted",
        ),
    ])
}

/// Rules on one requirement (`self` is the requirement).
pub fn requirement_rules() -> Value {
    json!([
        rule_at(
            "self.operator == 'In' ? (has(self.values) && self.values.size() != 0) : true",
            "requirements with operator 'In' must have a value defined",
            ".values",
        ),
        rule_at(
            "(self.operator == 'Gt' || self.operator == 'Lt' || self.operator == 'Gte' || \
             self.operator == 'Lte') ? (has(self.values) && self.values.size() == 1 && \
             self.values[0].matches('^[0-9]+$')) : true",
            "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
            ".values",
        ),
        rule_at(
            "(self.operator == 'In' && has(self.minValues)) ? \
             (has(self.values) && self.values.size() >= self.minValues) : true",
            "requirements with 'minValues' must have at least that many values specified in the 'values' field",
            ".minValues",
        ),
    ])
}

/// Rules on a nodeClassRef.
pub fn node_class_ref_rules() -> Value {
    json!([
        rule(
            "self.group == oldSelf.group",
            "nodeClassRef.group is immutable"
        ),
        rule(
            "self.kind == oldSelf.kind",
            "nodeClassRef.kind is immutable"
        ),
    ])
}

pub fn not_empty(field: &str) -> Value {
    json!([rule("self != ''", &format!("{field} may not be empty"))])
}

/// Rules on a disruption budget (`self` is the budget).
pub fn budget_rules() -> Value {
    json!([rule(
        "has(self.schedule) == has(self.duration)",
        "'schedule' must be set with 'duration'"
    )])
}

/// NodeClaim spec immutability.
pub fn immutable_spec() -> Value {
    json!([rule("self == oldSelf", "spec is immutable")])
}
