//! The registration phase: once the launched instance's node joins, the claim takes it over —
//! the claim's labels and annotations go onto the node, its taints and startup taints too unless
//! the node is labelled `karpenter.sh/do-not-sync-taints: "true"` (our user data labels every
//! node so: the kubelet registers with the taints itself, which closes the race of upstream's
//! issue 1772), the `karpenter.sh/unregistered` taint comes off, the node gets the termination
//! finalizer and the claim as its owner — and the claim is marked `Registered`. The node patch
//! carries the node's resourceVersion (upstream's `MergeFromWithOptimisticLock`): a merge patch
//! replaces the taint and finalizer lists whole, so a change made since our read must not be
//! overwritten; a conflict fails the reconcile, which retries on a fresh read.

use k8s_openapi::api::core::v1::Node;
use kube_core::ResourceExt;
use serde_json::{Value, json};

use super::{Flow, Lifecycle, Step, condition_true};
use crate::api::conditions::nodeclaim as cond;
use crate::api::labels::{
    DO_NOT_SYNC_TAINTS_LABEL, NODEPOOL_LABEL, REGISTERED_LABEL, TERMINATION_FINALIZER,
    UNREGISTERED_TAINT_KEY,
};
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

    /// Syncs labels, annotations and (unless the node opts out) taints onto the node, drops the
    /// unregistered taint, takes ownership (finalizer, owner reference), marks the claim
    /// Registered.
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
            "metadata": {
                "labels": labels,
                "annotations": claim.annotations(),
                "finalizers": finalizers,
                "ownerReferences": owner,
                "resourceVersion": node.resource_version(),
            },
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
        if let Some(pool) = claim.labels().get(NODEPOOL_LABEL) {
            self.ctx
                .metrics
                .nodes_created
                .get_or_create(&crate::metrics::Metrics::nodepool(pool))
                .inc();
            crate::nodepool::readiness::record_registration(&self.ctx, pool, true).await;
        }
        Ok(Step::Registered)
    }
}

/// The node's taints without `karpenter.sh/unregistered`, plus each of the claim's taints and
/// startup taints the node does not have yet (by key and effect) unless the node is labelled
/// `karpenter.sh/do-not-sync-taints: "true"`.
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
    let sync = node
        .labels()
        .get(DO_NOT_SYNC_TAINTS_LABEL)
        .is_none_or(|v| v != "true");
    if !sync {
        return taints;
    }
    for taint in claim.spec.taints.iter().chain(&claim.spec.startup_taints) {
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
