//! `NodeClaim` (`karpenter.sh/v1`): Karpenter's request for one node. Its spec is immutable.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    Condition, DURATION_PATTERN, NILLABLE_DURATION_PATTERN, NodeClassReference, Quantity,
    Requirement, Taint, conditions_schema,
};

fn default_expire_after() -> String {
    "720h".to_string()
}

#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodeClaim",
    plural = "nodeclaims",
    singular = "nodeclaim",
    category = "karpenter",
    status = "NodeClaimStatus",
    crates(kube_core = "::kube_core"),
    derive = "PartialEq",
    doc = "NodeClaim is Karpenter's request for one node; its spec is immutable.",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".metadata.labels.node\\.kubernetes\\.io/instance-type"}"#,
    printcolumn = r#"{"name":"Capacity","type":"string","jsonPath":".metadata.labels.karpenter\\.sh/capacity-type"}"#,
    printcolumn = r#"{"name":"Zone","type":"string","jsonPath":".metadata.labels.topology\\.kubernetes\\.io/zone"}"#,
    printcolumn = r#"{"name":"Node","type":"string","jsonPath":".status.nodeName"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"ImageID","type":"string","jsonPath":".status.imageID","priority":1}"#,
    printcolumn = r#"{"name":"ID","type":"string","jsonPath":".status.providerID","priority":1}"#,
    printcolumn = r#"{"name":"NodePool","type":"string","jsonPath":".metadata.labels.karpenter\\.sh/nodepool","priority":1}"#,
    printcolumn = r#"{"name":"NodeClass","type":"string","jsonPath":".spec.nodeClassRef.name","priority":1}"#,
    printcolumn = r#"{"name":"Drifted","type":"string","jsonPath":".status.conditions[?(@.type==\"Drifted\")].status","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = super::cel::immutable_spec()))]
pub struct NodeClaimSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub taints: Vec<Taint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub startup_taints: Vec<Taint>,
    #[schemars(length(max = 100))]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub requirements: Vec<Requirement>,
    /// Resources the scheduled pods (and daemon overhead) need from the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    pub node_class_ref: NodeClassReference,
    #[serde(default = "default_expire_after")]
    #[schemars(regex(pattern = NILLABLE_DURATION_PATTERN))]
    pub expire_after: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN))]
    pub termination_grace_period: Option<String>,
}

/// `spec.resources`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceRequirements {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
}

/// `status` of a NodeClaim, filled at launch and registration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    #[serde(default, rename = "imageID", skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    /// Last time a pod was bound to or left the node (deduplicated to 10 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pod_event_time: Option<Time>,
}
