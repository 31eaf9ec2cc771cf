//! Pod binding: how a scheduler assigns a pending pod to a node.
//!
//! Kubernetes forbids setting `spec.nodeName` by updating a pod; a scheduler creates a `v1`
//! `Binding` (the `pods/{name}/binding` subresource, or the `bindings` resource that names the
//! pod in `metadata.name`). The API server then, in one write under its own retry loop:
//! - refuses (409) a pod being deleted, a pod already bound, a pod with scheduling gates, and a
//!   binding whose `metadata.uid` or `metadata.resourceVersion` (preconditions, both optional)
//!   no longer match the pod;
//! - sets `spec.nodeName`, copies the binding's annotations onto the pod, and sets the pod's
//!   `PodScheduled` condition to `True` (reason and message cleared, `lastTransitionTime` moved
//!   only when the status changes);
//! - answers a `Status` of success; the binding itself is not stored.
//!
//! Because the server re-reads the pod until its own write lands, a binding is never refused for
//! a resourceVersion the caller did not send: an injected conflict rate does not apply to it
//! (it is a `create`, see [`crate::ApiOperation::can_conflict`]).

use std::sync::Arc;

use karpenter_core::seams::KubeError;
use karpenter_core::seams::kube::{ObjectKey, ResourceKind, SharedObject};
use serde_json::{Value, json};

use crate::store::{State, check_uid_precondition, format_timestamp, is_marked, resource};

/// `v1` Binding: create-only, never stored. Served as the pods' `binding` subresource.
pub const BINDING: ResourceKind = ResourceKind {
    group: "",
    version: "v1",
    kind: "Binding",
    plural: "bindings",
    namespaced: true,
};

/// The pod condition a binding sets.
const POD_SCHEDULED: &str = "PodScheduled";

impl State {
    /// Applies a `Binding` to the pod it names; see the module docs.
    pub(crate) fn bind(&mut self, binding: &Value) -> Result<SharedObject, KubeError> {
        let metadata = &binding["metadata"];
        let text = |value: &Value| value.as_str().filter(|s| !s.is_empty()).map(str::to_string);
        let Some(name) = text(&metadata["name"]) else {
            return Err(invalid("metadata.name (the pod's name) is required"));
        };
        let namespace = text(&metadata["namespace"]).unwrap_or_else(|| "default".into());
        match binding["target"]["kind"].as_str() {
            None | Some("" | "Node") => {}
            Some(other) => {
                return Err(invalid(&format!(
                    "target.kind: Unsupported value: {other:?}: supported values: \"Node\""
                )));
            }
        }
        let Some(node) = text(&binding["target"]["name"]) else {
            return Err(invalid("target.name (the node's name) is required"));
        };
        let key = ObjectKey::namespaced(namespace, name);
        let pods = resource(&ResourceKind::POD);
        let Some(current) = self.lookup(pods, &key).cloned() else {
            return Err(KubeError::NotFound(format!(
                "pods {}/{} not found",
                key.namespace.as_deref().unwrap_or_default(),
                key.name
            )));
        };
        check_uid_precondition(
            &ResourceKind::POD,
            &key,
            &current,
            text(&metadata["uid"]).as_deref(),
        )?;
        let refused = |why: String| {
            Err(KubeError::Conflict(format!(
                "Operation cannot be fulfilled on pods/binding \"{}\": {why}",
                key.name
            )))
        };
        if let Some(wanted) = text(&metadata["resourceVersion"])
            && current["metadata"]["resourceVersion"].as_str() != Some(wanted.as_str())
        {
            return refused(format!(
                "precondition failed: resourceVersion {wanted} is not the pod's"
            ));
        }
        if is_marked(&current) {
            return refused(format!(
                "pod {} is being deleted, cannot be assigned to a host",
                key.name
            ));
        }
        if let Some(bound) = text(&current["spec"]["nodeName"]) {
            return refused(format!(
                "pod {} is already assigned to node {bound:?}",
                key.name
            ));
        }
        if current["spec"]["schedulingGates"]
            .as_array()
            .is_some_and(|gates| !gates.is_empty())
        {
            return refused(format!(
                "pod {} has non-empty .spec.schedulingGates",
                key.name
            ));
        }
        let mut next = Value::clone(&current);
        next["spec"]["nodeName"] = json!(node);
        if let Some(annotations) = metadata["annotations"].as_object() {
            if !annotations.values().all(Value::is_string) {
                return Err(invalid("metadata.annotations must map strings to strings"));
            }
            if !next["metadata"]["annotations"].is_object() {
                next["metadata"]["annotations"] = json!({});
            }
            for (k, v) in annotations {
                next["metadata"]["annotations"][k] = v.clone();
            }
        }
        set_scheduled(&mut next, &format_timestamp(self.now));
        self.replace(pods, &key, &current, next);
        Ok(Arc::new(json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        })))
    }
}

/// Kubernetes' `UpdatePodCondition` with `PodScheduled=True`: the condition is replaced whole,
/// keeping its `lastTransitionTime` when it was already `True`.
fn set_scheduled(pod: &mut Value, now: &str) {
    let mut conditions: Vec<Value> = pod["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut written = json!({"type": POD_SCHEDULED, "status": "True", "lastTransitionTime": now});
    match conditions.iter_mut().find(|c| c["type"] == POD_SCHEDULED) {
        Some(slot) => {
            if slot["status"] == "True" && !slot["lastTransitionTime"].is_null() {
                written["lastTransitionTime"] = slot["lastTransitionTime"].clone();
            }
            *slot = written;
        }
        None => conditions.push(written),
    }
    if !pod["status"].is_object() {
        pod["status"] = json!({});
    }
    pod["status"]["conditions"] = Value::Array(conditions);
}

fn invalid(why: &str) -> KubeError {
    KubeError::Invalid(format!("bindings: {why}"))
}
