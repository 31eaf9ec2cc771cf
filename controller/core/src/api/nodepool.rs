//! `NodePool` (`karpenter.sh/v1`): the template and policy for the nodes Karpenter may launch.

use std::collections::BTreeMap;

use kube_derive::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use super::common::{
    Condition, DURATION_PATTERN, LABEL_VALUE_PATTERN, NILLABLE_DURATION_PATTERN,
    NodeClassReference, Quantity, Requirement, ResourceList, Taint, conditions_schema,
};

/// Budget `nodes`: an absolute count or a percentage (0-100).
pub const BUDGET_NODES_PATTERN: &str = r"^((100|[0-9]{1,2})%|[0-9]+)$";
/// Budget `schedule`: a 5-field cron expression or a `@daily`-style macro.
pub const BUDGET_SCHEDULE_PATTERN: &str =
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$";
/// Budget `duration`: hours and/or minutes.
pub const BUDGET_DURATION_PATTERN: &str = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$";

#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodePool",
    plural = "nodepools",
    singular = "nodepool",
    category = "karpenter",
    status = "NodePoolStatus",
    crates(kube_core = "::kube_core"),
    derive = "PartialEq",
    doc = "NodePool sets constraints on the nodes Karpenter may create and the pods that can run on them.",
    printcolumn = r#"{"name":"NodeClass","type":"string","jsonPath":".spec.template.spec.nodeClassRef.name"}"#,
    printcolumn = r#"{"name":"Nodes","type":"string","jsonPath":".status.nodes"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Weight","type":"integer","jsonPath":".spec.weight","priority":1}"#,
    printcolumn = r#"{"name":"CPU","type":"string","jsonPath":".status.resources.cpu","priority":1}"#,
    printcolumn = r#"{"name":"Memory","type":"string","jsonPath":".status.resources.memory","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolSpec {
    /// Template for the NodeClaims this pool creates.
    pub template: NodeClaimTemplate,
    /// How and when nodes of this pool may be disrupted.
    #[serde(default)]
    #[schemars(extend("default" = {"consolidateAfter": "0s"}))]
    pub disruption: Disruption,
    /// Upper bound on the summed capacity (and `nodes` count) of this pool's NodeClaims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ResourceList>,
    /// Priority among pools: higher is tried first; unset counts as 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub weight: Option<i32>,
}

/// `spec.template`: metadata and spec stamped onto each NodeClaim.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NodeClaimTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    pub spec: NodeClaimTemplateSpec,
}

/// Labels and annotations copied onto NodeClaims and Nodes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TemplateMetadata {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend(
        "additionalProperties" = {"type": "string", "maxLength": 63, "pattern": LABEL_VALUE_PATTERN},
        "maxProperties" = 100,
        "x-kubernetes-map-type" = "atomic",
        "x-kubernetes-validations" = super::cel::label_map_rules()
    ))]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("x-kubernetes-map-type" = "granular"))]
    pub annotations: BTreeMap<String, String>,
}

fn default_expire_after() -> String {
    "720h".to_string()
}

/// `spec.template.spec`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub taints: Vec<Taint>,
    /// Taints present at registration that something else removes; ignored by scheduling.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub startup_taints: Vec<Taint>,
    #[schemars(schema_with = "template_requirements_schema")]
    pub requirements: Vec<Requirement>,
    pub node_class_ref: NodeClassReference,
    /// Lifetime of a node, from NodeClaim creation, or `Never`.
    #[serde(default = "default_expire_after")]
    #[schemars(regex(pattern = NILLABLE_DURATION_PATTERN))]
    pub expire_after: String,
    /// Longest a drain may take before pods are force-deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub termination_grace_period: Option<String>,
}

/// Requirements of a NodePool template: like a NodeClaim's, but `karpenter.sh/nodepool` is
/// Karpenter's to set.
fn template_requirements_schema(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = <Vec<Requirement>>::json_schema(generator);
    schema.insert("maxItems".into(), 100.into());
    schema.insert("x-kubernetes-list-type".into(), "atomic".into());
    if let Some(key) = schema
        .get_mut("items")
        .and_then(|items| items.get_mut("properties"))
        .and_then(|props| props.get_mut("key"))
        .and_then(|key| key.as_object_mut())
    {
        key.insert(
            "x-kubernetes-validations".into(),
            super::cel::label_key_rules(false),
        );
    }
    schema
}

/// Which nodes consolidation may remove.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConsolidationPolicy {
    WhenEmpty,
    #[default]
    WhenEmptyOrUnderutilized,
    Balanced,
}

/// Reasons a budget can be scoped to.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum DisruptionReason {
    Underutilized,
    Empty,
    Drifted,
}

fn default_consolidate_after() -> String {
    "0s".to_string()
}

fn default_budgets() -> Vec<Budget> {
    vec![Budget {
        nodes: default_budget_nodes(),
        schedule: None,
        duration: None,
        reasons: None,
    }]
}

/// `spec.disruption`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// Quiet time after the last pod event before a node may be consolidated, or `Never`.
    #[schemars(regex(pattern = NILLABLE_DURATION_PATTERN))]
    pub consolidate_after: String,
    #[serde(default)]
    pub consolidation_policy: ConsolidationPolicy,
    /// Caps on how many nodes may be disrupting at once.
    #[serde(default = "default_budgets")]
    #[schemars(length(max = 50))]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub budgets: Vec<Budget>,
}

impl Default for Disruption {
    fn default() -> Self {
        Self {
            consolidate_after: default_consolidate_after(),
            consolidation_policy: ConsolidationPolicy::default(),
            budgets: default_budgets(),
        }
    }
}

fn default_budget_nodes() -> String {
    "10%".to_string()
}

/// One disruption budget.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = super::cel::budget_rules()))]
pub struct Budget {
    /// `"N"` nodes or `"P%"` of the pool's nodes (rounded up).
    #[serde(default = "default_budget_nodes")]
    #[schemars(regex(pattern = BUDGET_NODES_PATTERN))]
    pub nodes: String,
    /// Cron schedule (UTC) at which the budget becomes active for `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = BUDGET_SCHEDULE_PATTERN))]
    pub schedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = BUDGET_DURATION_PATTERN))]
    pub duration: Option<String>,
    /// Disruption reasons this budget constrains; empty means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 50))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub reasons: Option<Vec<DisruptionReason>>,
}

/// `status` of a NodePool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    /// Summed capacity of the pool's nodes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, Quantity>,
    /// Number of nodes in the pool.
    #[serde(default)]
    pub nodes: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}

impl Budget {
    /// The budget's cron schedule, parsed as upstream does: five fields (minute hour day-of-month
    /// month day-of-week) or a macro (`@daily`, `@midnight`, ...), evaluated in UTC.
    pub fn parsed_schedule(&self) -> Option<Result<croner::Cron, String>> {
        self.schedule.as_deref().map(parse_schedule)
    }
}

/// Parses a budget schedule. `@midnight` is robfig/cron's alias of `@daily`.
pub fn parse_schedule(text: &str) -> Result<croner::Cron, String> {
    let normalized = if text.trim().eq_ignore_ascii_case("@midnight") {
        "@daily"
    } else {
        text
    };
    croner::parser::CronParser::new()
        .parse(normalized)
        .map_err(|err| format!("invalid cron schedule {text:?}: {err}"))
}
