//! Static hashes of NodePools and EC2NodeClasses: the fields whose change drifts a NodeClaim
//! launched from them. A claim carries the hash of its pool and class as they were at creation
//! (`karpenter.sh/nodepool-hash`, `karpenter.k8s.aws/ec2nodeclass-hash`) with the version of
//! the hashing rules; drift compares it with the current hash only when the versions agree, so a
//! controller upgrade that changes the rules re-stamps claims instead of rolling the fleet.
//!
//! Which fields count follows upstream: for a NodePool, `spec.template` except `requirements`
//! (requirements drift is checked against labels instead), `expireAfter` and
//! `terminationGracePeriod`; nothing outside the template (disruption, budgets, limits, weight).
//! For an EC2NodeClass, the spec except the selector terms (subnets, security groups, AMIs and
//! capacity reservations drift through the resolved status instead). Like upstream's hashing,
//! lists count as sets and unset, empty, zero and false values are the same as absent, so adding
//! `taints: []` or reordering tags changes nothing.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{EC2NodeClass, NodePool};

/// Version of the NodePool hashing rules (upstream's current one).
pub const NODEPOOL_HASH_VERSION: &str = "v3";
/// Version of the EC2NodeClass hashing rules (upstream's current one).
pub const EC2NODECLASS_HASH_VERSION: &str = "v4";

/// The static hash of `pool`: its template without requirements, `expireAfter` and
/// `terminationGracePeriod`.
pub fn nodepool_hash(pool: &NodePool) -> String {
    let mut value = serde_json::to_value(&pool.spec.template).unwrap_or(Value::Null);
    if let Some(spec) = value.get_mut("spec").and_then(Value::as_object_mut) {
        for ignored in ["requirements", "expireAfter", "terminationGracePeriod"] {
            spec.remove(ignored);
        }
    }
    digest(&value)
}

/// The static hash of `class`: its spec without the selector terms.
pub fn ec2nodeclass_hash(class: &EC2NodeClass) -> String {
    let mut value = serde_json::to_value(&class.spec).unwrap_or(Value::Null);
    if let Some(spec) = value.as_object_mut() {
        for ignored in [
            "subnetSelectorTerms",
            "securityGroupSelectorTerms",
            "amiSelectorTerms",
            "capacityReservationSelectorTerms",
        ] {
            spec.remove(ignored);
        }
    }
    digest(&value)
}

/// A decimal 64-bit digest of the canonical form of `value` (the shape of upstream's hashes).
fn digest(value: &Value) -> String {
    let canonical = canonical(value).unwrap_or(Value::Null);
    let bytes = Sha256::digest(canonical.to_string().as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&bytes[..8]);
    u64::from_be_bytes(first).to_string()
}

/// `value` with zero values dropped (`None` for a zero value) and arrays sorted and deduplicated
/// (sets). Object keys are already ordered (`serde_json`'s map is a `BTreeMap`).
fn canonical(value: &Value) -> Option<Value> {
    match value {
        Value::Null | Value::Bool(false) => None,
        Value::String(s) if s.is_empty() => None,
        Value::Number(n) if n.as_f64() == Some(0.0) => None,
        Value::Array(items) => {
            let mut items: Vec<Value> = items.iter().filter_map(canonical).collect();
            items.sort_by_key(Value::to_string);
            items.dedup();
            (!items.is_empty()).then_some(Value::Array(items))
        }
        Value::Object(fields) => {
            let fields: Map<String, Value> = fields
                .iter()
                .filter_map(|(k, v)| canonical(v).map(|v| (k.clone(), v)))
                .collect();
            (!fields.is_empty()).then_some(Value::Object(fields))
        }
        other => Some(other.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(yaml: &str) -> NodePool {
        serde_yaml::from_str(yaml).expect("test pool parses")
    }

    const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  weight: 10
  limits: {cpu: "100"}
  disruption: {consolidateAfter: 0s, budgets: [{nodes: "10%"}]}
  template:
    metadata: {labels: {team: a}}
    spec:
      expireAfter: 720h
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"#;

    #[test]
    fn weights_limits_budgets_requirements_and_expiry_do_not_change_the_pool_hash() {
        let base = nodepool_hash(&pool(POOL));
        let changed = POOL
            .replace("weight: 10", "weight: 20")
            .replace("cpu: \"100\"", "cpu: \"200\"")
            .replace("10%", "20%")
            .replace("[spot]", "[on-demand]")
            .replace("720h", "24h");
        assert_eq!(nodepool_hash(&pool(&changed)), base);
    }

    #[test]
    fn a_template_label_taint_or_class_change_changes_the_pool_hash() {
        let base = nodepool_hash(&pool(POOL));
        assert_ne!(
            nodepool_hash(&pool(&POOL.replace("team: a", "team: b"))),
            base
        );
        let tainted = POOL.replace(
            "      expireAfter",
            "      taints: [{key: k, effect: NoSchedule}]\n      expireAfter",
        );
        assert_ne!(nodepool_hash(&pool(&tainted)), base);
        assert_ne!(
            nodepool_hash(&pool(&POOL.replace("name: default}", "name: other}"))),
            base
        );
    }

    #[test]
    fn an_empty_list_counts_as_absent_and_list_order_does_not_matter() {
        let base = nodepool_hash(&pool(POOL));
        let empty = POOL.replace("      expireAfter", "      taints: []\n      expireAfter");
        assert_eq!(nodepool_hash(&pool(&empty)), base);
        let two = |a: &str, b: &str| {
            POOL.replace(
                "      expireAfter",
                &format!(
                    "      taints: [{{key: {a}, effect: NoSchedule}}, {{key: {b}, effect: NoSchedule}}]\n      expireAfter"
                ),
            )
        };
        assert_eq!(
            nodepool_hash(&pool(&two("x", "y"))),
            nodepool_hash(&pool(&two("y", "x")))
        );
    }

    const CLASS: &str = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-test
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
  tags: {team: a}
"#;

    fn class(yaml: &str) -> EC2NodeClass {
        serde_yaml::from_str(yaml).expect("test class parses")
    }

    #[test]
    fn selector_term_changes_do_not_change_the_class_hash_but_tags_do() {
        let base = ec2nodeclass_hash(&class(CLASS));
        let terms = CLASS
            .replace("al2023@latest", "al2023@v20240807")
            .replace("discovery: test}}]\n  tags", "discovery: other}}]\n  tags");
        assert_eq!(ec2nodeclass_hash(&class(&terms)), base);
        assert_ne!(
            ec2nodeclass_hash(&class(&CLASS.replace("team: a", "team: b"))),
            base
        );
    }
}
