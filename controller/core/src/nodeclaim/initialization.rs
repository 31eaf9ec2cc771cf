//! The initialization phase: a registered claim is `Initialized` once its node is Ready, its
//! startup taints are gone and every extended resource the instance type promises is allocatable
//! (upstream's definition); the node gets the `karpenter.sh/initialized` label.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use kube_core::ResourceExt;
use serde_json::json;

use super::{Flow, Lifecycle, Step, condition_true};
use crate::api::conditions::nodeclaim as cond;
use crate::api::labels::INITIALIZED_LABEL;
use crate::api::{ConditionStatus, NodeClaim};
use crate::scheduling::pod::effect_name;
use crate::seams::kube::{KubeError, ObjectKey, Patch, ResourceKind};

impl Lifecycle {
    /// [`super::Phase::Initialization`]: an initialized claim goes on; otherwise the reconcile
    /// ends here, initializing the node or waiting for it.
    pub(super) async fn initialization_phase(
        &self,
        claim: &NodeClaim,
        node: Option<&Node>,
    ) -> Result<Flow, KubeError> {
        if condition_true(claim, cond::INITIALIZED) {
            return Ok(Flow::Continue);
        }
        match node {
            Some(node) => self.initialize(claim, node).await.map(Flow::Done),
            None => Ok(Flow::Done(Step::Waiting)),
        }
    }

    async fn initialize(&self, claim: &NodeClaim, node: &Node) -> Result<Step, KubeError> {
        if !is_initialized(claim, node) {
            return Ok(Step::Waiting);
        }
        self.ctx
            .kube
            .patch(
                &ResourceKind::NODE,
                &ObjectKey::cluster(node.name_any()),
                &Patch::Merge(json!({"metadata": {"labels": {INITIALIZED_LABEL: "true"}}})),
            )
            .await?;
        self.write_condition(
            claim,
            (cond::INITIALIZED, ConditionStatus::True, "Initialized", ""),
            json!({}),
        )
        .await?;
        Ok(Step::Initialized)
    }
}

/// Ready, no startup taint of the claim left, every extended resource in the claim's capacity
/// allocatable.
fn is_initialized(claim: &NodeClaim, node: &Node) -> bool {
    let status = node.status.clone().unwrap_or_default();
    let ready = status
        .conditions
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let startup_left = claim.spec.startup_taints.iter().any(|s| {
        taints
            .iter()
            .any(|t| t.key == s.key && t.effect == effect_name(s.effect))
    });
    let allocatable: BTreeSet<String> =
        status.allocatable.unwrap_or_default().into_keys().collect();
    let resources_ready = claim
        .status
        .as_ref()
        .map(|s| {
            s.capacity
                .keys()
                .filter(|k| k.contains('/'))
                .cloned()
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .iter()
        .all(|r| allocatable.contains(r));
    ready && !startup_left && resources_ready
}
