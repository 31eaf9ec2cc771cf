//! `startup-taints-honoured`: no pod lands on a node before the owners of its startup taints are
//! done with it.
//!
//! A NodeClaim's `spec.startupTaints` are taints some agent (a CNI, a security agent) removes once
//! it runs on the node; until then the node is not ready for ordinary pods. Upstream Karpenter
//! puts them on the node at registration (the same write that removes `karpenter.sh/unregistered`)
//! unless the node says it registered with them itself (`karpenter.sh/do-not-sync-taints`), so a
//! node whose user data leaves them out (`amiFamily: Custom`) carries them only if registration
//! adds them.
//!
//! The check: a pod bound to a node whose NodeClaim (matched by `status.providerID`) declares a
//! startup taint the pod does not tolerate, while the node's record of removed startup taints
//! (the owners' annotation, [`STARTUP_TAINTS_REMOVED_ANNOTATION`]) does not list it yet, was bound
//! before the taint's owner was done: the node did not carry the taint when the scheduler chose
//! it (the scheduler stand-in respects taints), or the scheduler ignored it. Daemon pods, mirror
//! pods and finished pods are left out; each pod is reported once. The owners run before the
//! scheduler in a step, so a pod bound in the step the owner finished is not blamed.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::pod_facts::{is_daemon, is_mirror, is_terminal, name_of, tolerates};
use super::{Check, Invariant, StepView, Violation};
use crate::kubelet::STARTUP_TAINTS_REMOVED_ANNOTATION;

/// The `startup-taints-honoured` checker.
#[derive(Debug, Default)]
pub struct StartupTaintsHonoured {
    /// Pods (uids) already reported.
    reported: BTreeSet<String>,
}

/// A startup taint a claim declares: key, value, effect.
type Declared = (String, String, String);

/// Nodes whose claim declares startup taints their owners have not removed yet, with those taints.
fn waiting_nodes(step: &StepView<'_>) -> BTreeMap<String, Vec<Declared>> {
    let mut declared: BTreeMap<&str, Vec<Declared>> = BTreeMap::new();
    for claim in step.claims() {
        let Some(provider_id) = claim["status"]["providerID"].as_str() else {
            continue;
        };
        let taints: Vec<Declared> = claim["spec"]["startupTaints"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                let field = |name: &str| t[name].as_str().unwrap_or_default().to_string();
                (field("key"), field("value"), field("effect"))
            })
            .collect();
        if !taints.is_empty() {
            declared.insert(provider_id, taints);
        }
    }
    let mut waiting = BTreeMap::new();
    if declared.is_empty() {
        return waiting;
    }
    for node in step.nodes() {
        let Some(taints) = node["spec"]["providerID"]
            .as_str()
            .and_then(|id| declared.get(id))
        else {
            continue;
        };
        let done: BTreeSet<&str> = node["metadata"]["annotations"]
            [STARTUP_TAINTS_REMOVED_ANNOTATION]
            .as_str()
            .map(|d| d.split(',').collect())
            .unwrap_or_default();
        let pending: Vec<Declared> = taints
            .iter()
            .filter(|(key, _, effect)| !done.contains(format!("{key}:{effect}").as_str()))
            .cloned()
            .collect();
        if !pending.is_empty() {
            waiting.insert(name_of(node).to_string(), pending);
        }
    }
    waiting
}

fn pod_name(pod: &Value) -> String {
    format!(
        "{}/{}",
        pod["metadata"]["namespace"].as_str().unwrap_or_default(),
        name_of(pod)
    )
}

impl Check for StartupTaintsHonoured {
    fn invariant(&self) -> Invariant {
        Invariant::StartupTaintsHonoured
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let waiting = waiting_nodes(step);
        if waiting.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for pod in step.pods() {
            let Some(taints) = pod["spec"]["nodeName"]
                .as_str()
                .and_then(|node| waiting.get(node))
            else {
                continue;
            };
            if is_daemon(pod) || is_mirror(pod) || is_terminal(pod) {
                continue;
            }
            let Some((key, _, effect)) = taints
                .iter()
                .find(|(key, value, effect)| !tolerates(pod, key, value, effect))
            else {
                continue;
            };
            let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
            if !self.reported.insert(uid.to_string()) {
                continue;
            }
            out.push(Violation::at(
                step.now,
                format!(
                    "pod {} bound to node {} before the owner of its claim's startup taint {key}:{effect} removed it",
                    pod_name(pod),
                    pod["spec"]["nodeName"].as_str().unwrap_or_default(),
                ),
            ));
        }
        out
    }
}
