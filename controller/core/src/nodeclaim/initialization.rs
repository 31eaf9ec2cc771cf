//! The initialization phase: a registered claim is `Initialized` once its node is Ready, its
//! startup taints and the known ephemeral taints are gone and every resource the claim requested
//! is allocatable (upstream's `lifecycle/initialization.go`); the node gets the
//! `karpenter.sh/initialized` label. Until then `Initialized` is Unknown with upstream's reason.

use k8s_openapi::api::core::v1::Node;
use kube_core::ResourceExt;
use serde_json::json;

use super::{Flow, Lifecycle, Step, condition_true};
use crate::api::conditions::{self, nodeclaim as cond};
use crate::api::labels::INITIALIZED_LABEL;
use crate::api::{ConditionStatus, NodeClaim};
use crate::provisioning::snapshot::EPHEMERAL_TAINTS;
use crate::resources::parse_quantity;
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
        if let Some((reason, message)) = not_initialized(claim, node) {
            // Upstream's Unknown reasons, so `kubectl describe nodeclaim` says what it waits
            // for; written only when they change (one write per reason, not per reconcile).
            let current = claim
                .status
                .as_ref()
                .and_then(|s| conditions::get(&s.conditions, cond::INITIALIZED));
            let same = current.is_some_and(|c| {
                c.status == ConditionStatus::Unknown && c.reason == reason && c.message == message
            });
            if !same {
                self.write_condition(
                    claim,
                    (
                        cond::INITIALIZED,
                        ConditionStatus::Unknown,
                        reason,
                        &message,
                    ),
                    json!({}),
                )
                .await?;
            }
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

/// `key=value:Effect`, as upstream formats a taint in its messages.
fn taint_text(key: &str, value: Option<&str>, effect: &str) -> String {
    match value.filter(|v| !v.is_empty()) {
        Some(value) => format!("{key}={value}:{effect}"),
        None => format!("{key}:{effect}"),
    }
}

/// Why the node is not initialized yet, as upstream's `Initialized=Unknown` reason and message,
/// checked in upstream's order: Ready, the claim's startup taints gone, the taints every new
/// node carries for a while gone ([`EPHEMERAL_TAINTS`]), and every resource the claim requested
/// allocatable and non-zero. Only requested resources count: a GPU type chosen for CPU pods
/// initializes without a device plugin, as upstream.
fn not_initialized(claim: &NodeClaim, node: &Node) -> Option<(&'static str, String)> {
    let status = node.status.clone().unwrap_or_default();
    let ready = status
        .conditions
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    if !ready {
        return Some(("NodeNotReady", "Node status is NotReady".into()));
    }
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let startup_left = claim.spec.startup_taints.iter().find(|s| {
        taints
            .iter()
            .any(|t| t.key == s.key && t.effect == effect_name(s.effect))
    });
    if let Some(taint) = startup_left {
        let text = taint_text(
            &taint.key,
            taint.value.as_deref(),
            effect_name(taint.effect),
        );
        return Some((
            "StartupTaintsExist",
            format!("StartupTaint {text:?} still exists"),
        ));
    }
    let ephemeral = taints.iter().find(|t| {
        EPHEMERAL_TAINTS
            .iter()
            .any(|(key, effect)| t.key == *key && t.effect == effect_name(*effect))
    });
    if let Some(taint) = ephemeral {
        let text = taint_text(&taint.key, taint.value.as_deref(), &taint.effect);
        return Some((
            "KnownEphemeralTaintsExist",
            format!("KnownEphemeralTaint {text:?} still exists"),
        ));
    }
    let allocatable = status.allocatable.unwrap_or_default();
    let requests = claim
        .spec
        .resources
        .as_ref()
        .map(|r| &r.requests)
        .cloned()
        .unwrap_or_default();
    for (name, quantity) in &requests {
        let requested = parse_quantity(name, &quantity.0).unwrap_or(0);
        if requested == 0 {
            continue;
        }
        let registered = allocatable
            .get(name)
            .and_then(|q| parse_quantity(name, &q.0).ok())
            .unwrap_or(0);
        if registered == 0 {
            return Some((
                "ResourceNotRegistered",
                format!("Resource {name:?} was requested but not registered"),
            ));
        }
    }
    None
}
