//! Recognises objects of the older `karpenter.sh/v1beta1` / `karpenter.k8s.aws/v1beta1` APIs and
//! explains what must change for v1, naming the fields this particular manifest uses.
//!
//! Upstream v1.1+ no longer serves v1beta1 (the conversion webhook is gone), so such a manifest
//! is rejected by the API server with a terse "no matches for kind". We say why and how to fix it.

use serde_json::Value;

/// The v1beta1 API groups/versions and the kinds they held.
pub fn is_v1beta1(api_version: &str) -> bool {
    matches!(
        api_version,
        "karpenter.sh/v1beta1" | "karpenter.k8s.aws/v1beta1"
    )
}

/// A one-line explanation of why `object` (a v1beta1 `kind`) is not accepted and what changed.
pub fn explain(kind: &str, object: &Value) -> String {
    let target = match kind {
        "EC2NodeClass" => "karpenter.k8s.aws/v1",
        _ => "karpenter.sh/v1",
    };
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let mut changes = match kind {
        "NodePool" => nodepool_changes(object),
        "EC2NodeClass" => ec2nodeclass_changes(object),
        "NodeClaim" => {
            vec!["NodeClaims are created by Karpenter; do not apply them by hand".into()]
        }
        _ => Vec::new(),
    };
    if changes.is_empty() {
        changes.push(format!("set apiVersion: {target}"));
    }
    format!(
        "{api_version} is the older v1beta1 API, which Karpenter v1 no longer serves; \
         rewrite it as {target}: {}",
        changes.join("; ")
    )
}

fn nodepool_changes(object: &Value) -> Vec<String> {
    let spec = &object["spec"];
    let template_spec = &spec["template"]["spec"];
    let mut changes = vec!["set apiVersion: karpenter.sh/v1".to_string()];
    if let Some(expire) = spec["disruption"].get("expireAfter") {
        changes.push(format!(
            "spec.disruption.expireAfter moved to spec.template.spec.expireAfter (set expireAfter: {})",
            expire.as_str().map_or_else(|| expire.to_string(), str::to_string)
        ));
    }
    let node_class_ref = &template_spec["nodeClassRef"];
    if node_class_ref.is_object()
        && (node_class_ref.get("group").is_none() || node_class_ref.get("kind").is_none())
    {
        changes.push(
            "spec.template.spec.nodeClassRef needs group: karpenter.k8s.aws and kind: EC2NodeClass \
             besides name (apiVersion is gone)"
                .into(),
        );
    }
    if spec["disruption"]["consolidationPolicy"].as_str() == Some("WhenUnderutilized") {
        changes.push(
            "spec.disruption.consolidationPolicy WhenUnderutilized is now WhenEmptyOrUnderutilized"
                .into(),
        );
    }
    if template_spec.get("kubelet").is_some() {
        changes.push("spec.template.spec.kubelet moved to the EC2NodeClass's spec.kubelet".into());
    }
    if spec["disruption"].is_object() && spec["disruption"].get("consolidateAfter").is_none() {
        changes.push("spec.disruption.consolidateAfter is required in v1 (e.g. 0s)".into());
    }
    changes
}

fn ec2nodeclass_changes(object: &Value) -> Vec<String> {
    let spec = &object["spec"];
    let mut changes = vec!["set apiVersion: karpenter.k8s.aws/v1".to_string()];
    let family = spec["amiFamily"].as_str();
    let has_terms = spec["amiSelectorTerms"]
        .as_array()
        .is_some_and(|t| !t.is_empty());
    if !has_terms {
        let alias = match family {
            Some("AL2") => Some("al2@latest"),
            Some("AL2023") => Some("al2023@latest"),
            Some("Bottlerocket") => Some("bottlerocket@latest"),
            Some("Windows2019") => Some("windows2019@latest"),
            Some("Windows2022") => Some("windows2022@latest"),
            _ => None,
        };
        changes.push(match alias {
            Some(alias) => format!(
                "spec.amiSelectorTerms is required in v1: replace amiFamily: {} with \
                 amiSelectorTerms: [{{alias: {alias}}}] (pin a version instead of latest for production)",
                family.unwrap_or_default()
            ),
            None => "spec.amiSelectorTerms is required in v1 (an alias such as al2023@latest, or \
                     id/name/tags terms with amiFamily)"
                .into(),
        });
    }
    if spec["metadataOptions"]
        .get("httpPutResponseHopLimit")
        .is_none()
    {
        changes.push(
            "note: the default metadataOptions.httpPutResponseHopLimit changed from 2 to 1".into(),
        );
    }
    changes
}
