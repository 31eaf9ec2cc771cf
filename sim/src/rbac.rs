//! The API server's RBAC authorizer for the controller's requests: every call of the
//! controller's Kubernetes seam is checked against the ServiceAccount's grants (the chart's
//! roles, `karpenter_core::rbac::GRANTS`) and refused with a 403 when nothing grants it, as a real
//! cluster installed from the chart refuses it. Without it, a controller that patches a
//! subresource the chart does not grant passes every simulation and fails on EKS (which is how
//! the EC2NodeClass status controller's writes went unnoticed).
//!
//! The kube-scheduler stand-in, the kubelet stand-in and the harness are other principals and
//! are not checked.

use async_trait::async_trait;
use karpenter_core::rbac::authorize;
use karpenter_core::seams::kube::ResourceKind;
use karpenter_core::seams::layered::{KubeCall, KubeLayer, KubeReply};
use karpenter_core::seams::{KubeApi, KubeError};

use crate::process::replicas::LEASE_NAMESPACE;

/// The authorizer layer (see the module doc).
pub struct Authorized;

/// `(group, resource, verb, name, namespace)` of the REST request a seam call makes.
fn request<'a>(
    call: &'a KubeCall<'a>,
) -> (
    &'a str,
    String,
    &'static str,
    Option<&'a str>,
    Option<&'a str>,
) {
    let plain = |kind: &'a ResourceKind| kind.plural.to_string();
    match call {
        KubeCall::Get { kind, key } => (
            kind.group,
            plain(kind),
            "get",
            Some(key.name.as_str()),
            key.namespace.as_deref(),
        ),
        KubeCall::List { kind, options } => (
            kind.group,
            plain(kind),
            "list",
            None,
            options.namespace.as_deref(),
        ),
        KubeCall::Watch { kind, options, .. } => (
            kind.group,
            plain(kind),
            "watch",
            None,
            options.namespace.as_deref(),
        ),
        KubeCall::Create { kind, object } => (
            kind.group,
            plain(kind),
            "create",
            None,
            object["metadata"]["namespace"].as_str(),
        ),
        KubeCall::Patch { kind, key, .. } => (
            kind.group,
            plain(kind),
            "patch",
            Some(key.name.as_str()),
            key.namespace.as_deref(),
        ),
        KubeCall::PatchStatus { kind, key, .. } => (
            kind.group,
            format!("{}/status", kind.plural),
            "patch",
            Some(key.name.as_str()),
            key.namespace.as_deref(),
        ),
        KubeCall::Delete { kind, key, .. } => (
            kind.group,
            plain(kind),
            "delete",
            Some(key.name.as_str()),
            key.namespace.as_deref(),
        ),
        KubeCall::Evict { pod, .. } => (
            "",
            "pods/eviction".to_string(),
            "create",
            Some(pod.name.as_str()),
            pod.namespace.as_deref(),
        ),
        // An `events.k8s.io/v1` Event: created, or patched when it repeats (created here).
        KubeCall::RecordEvent { .. } => {
            ("events.k8s.io", "events".to_string(), "create", None, None)
        }
    }
}

/// Why the authorizer refuses `call`, if it does.
pub fn refusal(call: &KubeCall<'_>) -> Option<String> {
    let (group, resource, verb, name, namespace) = request(call);
    authorize(group, &resource, verb, name, namespace, LEASE_NAMESPACE).err()
}

#[async_trait]
impl KubeLayer for Authorized {
    async fn call(&self, call: KubeCall<'_>, next: &dyn KubeApi) -> KubeReply {
        match refusal(&call) {
            None => call.send(next).await,
            Some(why) => call.fail(KubeError::Forbidden(why)),
        }
    }
}
