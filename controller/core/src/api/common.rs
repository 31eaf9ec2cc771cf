//! Types shared by NodePool, NodeClaim and EC2NodeClass: requirements, taints, quantities,
//! conditions and the node class reference. JSON shapes match upstream field for field.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize};

/// Kubernetes quantity syntax (`100m`, `4Gi`, `1e3`), as the API server checks it.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";
/// A qualified name with optional DNS-subdomain prefix (label keys, taint keys).
pub const QUALIFIED_NAME_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";
/// A label value (may be empty).
pub const LABEL_VALUE_PATTERN: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
/// `720h`, `1h30m`, `30s` or `Never`.
pub const NILLABLE_DURATION_PATTERN: &str = r"^(([0-9]+(s|m|h))+|Never)$";
/// `720h`, `1h30m`, `30s` (never `Never`).
pub const DURATION_PATTERN: &str = r"^([0-9]+(s|m|h))+$";

/// A resource quantity. Accepts both `cpu: 64` and `cpu: "64"` like the API server does
/// (`x-kubernetes-int-or-string`), and keeps the text as written.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Quantity(pub String);

impl Quantity {
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Int(i64),
            Uint(u64),
            Float(f64),
        }
        Ok(Quantity(match Raw::deserialize(deserializer)? {
            Raw::Text(s) => s,
            Raw::Int(i) => i.to_string(),
            Raw::Uint(u) => u.to_string(),
            Raw::Float(f) => f.to_string(),
        }))
    }
}

impl JsonSchema for Quantity {
    fn schema_name() -> Cow<'static, str> {
        "Quantity".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": true
        })
    }
}

/// A map of resource name to quantity (`limits`, `status.resources`, `capacity`).
pub type ResourceList = BTreeMap<String, Quantity>;

/// Operators of a node selector requirement; `Gte`/`Lte` are Karpenter extensions.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
    Gte,
    Lte,
}

/// A node selector requirement with Karpenter's `minValues` flexibility guarantee
/// (upstream `NodeSelectorRequirementWithMinValues`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = super::cel::requirement_rules()))]
pub struct Requirement {
    #[schemars(length(max = 316), regex(pattern = QUALIFIED_NAME_PATTERN))]
    #[schemars(extend("x-kubernetes-validations" = super::cel::label_key_rules(true)))]
    pub key: String,
    pub operator: Operator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(length(max = 63), regex(pattern = LABEL_VALUE_PATTERN)))]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub values: Vec<String>,
    /// Minimum number of distinct values of this key the instance-type list must still cover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 50))]
    pub min_values: Option<i64>,
}

impl Requirement {
    pub fn new(key: &str, operator: Operator, values: &[&str]) -> Self {
        Self {
            key: key.to_string(),
            operator,
            values: values.iter().map(|v| v.to_string()).collect(),
            min_values: None,
        }
    }
}

/// Effect of a taint.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

/// A node taint (core/v1 `Taint` with the key/value/effect checks upstream's CRD adds).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    #[schemars(length(min = 1), regex(pattern = QUALIFIED_NAME_PATTERN))]
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = QUALIFIED_NAME_PATTERN))]
    pub value: Option<String>,
    pub effect: TaintEffect,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<Time>,
}

/// Reference to the provider NodeClass (for AWS: `karpenter.k8s.aws/EC2NodeClass`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = super::cel::node_class_ref_rules()))]
pub struct NodeClassReference {
    #[schemars(regex(pattern = r"^[^/]*$"))]
    #[schemars(extend("x-kubernetes-validations" = super::cel::not_empty("group")))]
    pub group: String,
    #[schemars(extend("x-kubernetes-validations" = super::cel::not_empty("kind")))]
    pub kind: String,
    #[schemars(extend("x-kubernetes-validations" = super::cel::not_empty("name")))]
    pub name: String,
}

/// Status of a condition.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

/// A status condition (operatorpkg / metav1 `Condition` shape).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    #[schemars(length(max = 316))]
    pub type_: String,
    pub status: ConditionStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub observed_generation: Option<i64>,
    pub last_transition_time: Time,
    #[serde(default)]
    #[schemars(length(max = 1024))]
    pub reason: String,
    #[serde(default)]
    #[schemars(length(max = 32768))]
    pub message: String,
}

/// Marks a list as `x-kubernetes-list-type: map` keyed by `type`, as condition lists are.
pub fn conditions_schema(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = <Vec<Condition>>::json_schema(generator);
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        serde_json::json!(["type"]),
    );
    schema
}

/// Parses a duration as upstream writes it (`720h`, `1h30m`, `30s`), or `Never` as `None`.
pub fn parse_nillable_duration(text: &str) -> Result<Option<std::time::Duration>, String> {
    if text == "Never" {
        return Ok(None);
    }
    parse_duration(text).map(Some)
}

/// [`DURATION_PATTERN`], compiled once.
static DURATION_SHAPE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(DURATION_PATTERN).expect("DURATION_PATTERN is a valid regex")
});

/// Parses a duration made of `<n>h`, `<n>m` and `<n>s` parts (`1h30m`), as the CRD pattern
/// admits them. (Not `kube_core::Duration`: it computes in `f64` and panics on a value past
/// `Duration::MAX` such as `99999999999999999999h`, which the pattern admits; humantime reports
/// an overflow instead, and the controller must not panic on an object it reads.)
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    if !DURATION_SHAPE.is_match(text) {
        return Err(format!("{text:?} is not a duration like 30s, 5m or 1h30m"));
    }
    humantime::parse_duration(text).map_err(|err| format!("{text:?}: {err}"))
}
