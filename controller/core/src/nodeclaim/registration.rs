//! The registration phase: once the launched instance's node joins, the claim takes it over —
//! the claim's labels and taints go onto the node, the `karpenter.sh/unregistered` taint comes off,
//! the node gets the termination finalizer and the claim as its owner — and the claim is marked
//! `Registered`.

use k8s_openapi::api::core::v1::Node;
use kube_core::ResourceExt;
use serde_json::{Value, json};

use super::{Flow, Lifecycle, Step, condition_true};
use crate::api::conditions::nodeclaim as cond;
use crate::api::labels::{REGISTERED_LABEL, TERMINATION_FINALIZER, UNREGISTERED_TAINT_KEY};
use crate::api::{ConditionStatus, NodeClaim};
use crate::seams::kube::{KubeError, ObjectKey, Patch, ResourceKind};

impl Lifecycle {
    /// [`super::Phase::Registration`]: a registered claim goes on; so does one whose node has not
    /// joined yet (liveness watches it); one whose node joined registers it.
    pub(super) async fn registration_phase(
        &self,
        claim: &NodeClaim,
        node: Option<&Node>,
    ) -> Result<Flow, KubeError> {
        if condition_true(claim, cond::REGISTERED) {
            return Ok(Flow::Continue);
        }
        match node {
            Some(node) => self.register(claim, node).await.map(Flow::Done),
            None => Ok(Flow::Continue),
        }
    }

    /// Syncs labels and taints onto the node, drops the unregistered taint, takes ownership
    /// (finalizer, owner reference), marks the claim Registered.
    async fn register(&self, claim: &NodeClaim, node: &Node) -> Result<Step, KubeError> {
        let node_name = node.name_any();
        let mut labels = claim.labels().clone();
        labels.insert(REGISTERED_LABEL.to_string(), "true".to_string());
        let mut finalizers = node.finalizers().to_vec();
        if !finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
            finalizers.push(TERMINATION_FINALIZER.to_string());
        }
        let owner = json!([{
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "name": claim.metadata.name, "uid": claim.metadata.uid, "blockOwnerDeletion": true
        }]);
        let patch = json!({
            "metadata": {"labels": labels, "finalizers": finalizers, "ownerReferences": owner},
            "spec": {"taints": registered_taints(claim, node)},
        });
        self.ctx
            .kube
            .patch(
                &ResourceKind::NODE,
                &ObjectKey::cluster(node_name.clone()),
                &Patch::Merge(patch),
            )
            .await?;
        self.write_condition(
            claim,
            (cond::REGISTERED, ConditionStatus::True, "Registered", ""),
            json!({"nodeName": node_name}),
        )
        .await?;
        Ok(Step::Registered)
    }
}

/// The node's taints without `karpenter.sh/unregistered`, plus each of the claim's taints the
/// node does not have yet (by key and effect).
fn registered_taints(claim: &NodeClaim, node: &Node) -> Vec<Value> {
    let mut taints: Vec<Value> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.key != UNREGISTERED_TAINT_KEY)
        .map(|t| serde_json::to_value(t).unwrap_or_default())
        .collect();
    for taint in &claim.spec.taints {
        let value = serde_json::to_value(taint).unwrap_or_default();
        if !taints
            .iter()
            .any(|t| t["key"] == value["key"] && t["effect"] == value["effect"])
        {
            taints.push(value);
        }
    }
    taints
}
