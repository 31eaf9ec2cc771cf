//! AL2023: a MIME archive of the user's parts followed by Karpenter's nodeadm `NodeConfig`, which
//! names the cluster (name, `apiServerEndpoint`, `certificateAuthority`, `cidr`: nodeadm refuses a
//! NodeConfig without them), the kubelet's inline config (`clusterDNS`, `registerWithTaints`,
//! `spec.kubelet`) and its `--node-labels` flag.

use serde_json::{Map, Value, json};

use super::merge::{self, CONTENT_TYPE_NODECONFIG, Part};
use super::{BootstrapInput, UserDataError};

pub(super) fn generate(input: &BootstrapInput) -> Result<String, UserDataError> {
    let mut parts = merge::user_parts(input.user_data)?;
    parts.push(Part {
        content_type: CONTENT_TYPE_NODECONFIG.into(),
        content: node_config(input)?,
    });
    Ok(merge::serialize(&parts))
}

/// Karpenter's NodeConfig document.
pub fn node_config(input: &BootstrapInput) -> Result<String, UserDataError> {
    let mut cluster = Map::new();
    cluster.insert("name".into(), json!(input.cluster.name));
    cluster.insert("apiServerEndpoint".into(), json!(input.cluster.endpoint));
    cluster.insert(
        "certificateAuthority".into(),
        json!(input.cluster.ca_bundle),
    );
    if let Some(cidr) = &input.cluster.service_cidr {
        cluster.insert("cidr".into(), json!(cidr.to_string()));
    }
    let mut config = match input.kubelet.map(serde_json::to_value) {
        Some(Ok(Value::Object(map))) => map,
        Some(Err(e)) => return Err(UserDataError::Render(e.to_string())),
        _ => Map::new(),
    };
    config.insert("clusterDNS".into(), json!(input.cluster_dns()));
    let taints: Vec<Value> = input
        .boot_taints()
        .iter()
        .map(|t| {
            let mut taint = json!({"key": t.key, "effect": t.effect});
            if !t.value.is_empty() {
                taint["value"] = json!(t.value);
            }
            taint
        })
        .collect();
    config.insert("registerWithTaints".into(), Value::Array(taints));
    let mut kubelet = json!({ "config": config });
    let labels = input.node_labels_value();
    if !labels.is_empty() {
        kubelet["flags"] = json!([format!("--node-labels=\"{labels}\"")]);
    }
    let mut spec = json!({ "cluster": cluster, "kubelet": kubelet });
    if input.raid0 {
        spec["instance"] = json!({"localStorage": {"strategy": "RAID0"}});
    }
    let document = json!({
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": spec,
    });
    let yaml =
        serde_yaml::to_string(&document).map_err(|e| UserDataError::Render(e.to_string()))?;
    Ok(format!("# Karpenter Generated NodeConfig\n{yaml}"))
}
