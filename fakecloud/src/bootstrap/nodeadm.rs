//! nodeadm (AL2023): user data is one YAML `NodeConfig`, or a MIME archive whose
//! `application/node.eks.aws` parts are NodeConfigs merged in order (later values win, lists
//! append). nodeadm's validation requires `cluster.name`, `apiServerEndpoint`,
//! `certificateAuthority` and `cidr`.

use serde_yaml::{Mapping, Value};

use super::{
    ClusterIdentity, JoinError, KubeletView, check_identity, mime_parts, read_kubelet_flags, taint,
};

const API_VERSIONS: [&str; 2] = ["node.eks.aws/v1alpha1", "node.eks.aws/v1beta1"];

pub(super) fn join(user_data: &str, cluster: &ClusterIdentity) -> Result<KubeletView, JoinError> {
    let documents: Vec<String> = match mime_parts(user_data) {
        Some(parts) => parts?
            .into_iter()
            .filter(|(ct, _)| ct.starts_with("application/node.eks.aws"))
            .map(|(_, body)| body)
            .collect(),
        None => vec![user_data.to_string()],
    };
    if documents.is_empty() {
        return Err(JoinError::Rejected("no NodeConfig in the user data".into()));
    }
    let mut merged = Value::Mapping(Mapping::new());
    for document in &documents {
        let value: Value = serde_yaml::from_str(document)
            .map_err(|e| JoinError::Rejected(format!("NodeConfig is not YAML: {e}")))?;
        let kind = value.get("kind").and_then(Value::as_str);
        let api = value.get("apiVersion").and_then(Value::as_str);
        if kind != Some("NodeConfig") || !api.is_some_and(|a| API_VERSIONS.contains(&a)) {
            return Err(JoinError::Rejected(format!(
                "not a NodeConfig (kind {kind:?}, apiVersion {api:?})"
            )));
        }
        merge(&mut merged, value);
    }
    let cluster_field = |name: &str| {
        merged
            .get("spec")
            .and_then(|s| s.get("cluster"))
            .and_then(|c| c.get(name))
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .ok_or_else(|| {
                JoinError::Rejected(format!(
                    "Name is missing in cluster configuration: spec.cluster.{name} is required"
                ))
            })
    };
    let name = cluster_field("name")?;
    let endpoint = cluster_field("apiServerEndpoint")?;
    let ca = cluster_field("certificateAuthority")?;
    let cidr = cluster_field("cidr")?;
    check_identity(&name, &endpoint, &ca, cluster)?;
    if cidr != cluster.cidr {
        return Err(JoinError::WrongCluster(format!(
            "service CIDR {cidr}, not {}",
            cluster.cidr
        )));
    }
    kubelet_view(&merged)
}

/// Deep merge: mappings key by key, sequences appended, anything else replaced.
fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Mapping(a), Value::Mapping(b)) => {
            for (k, v) in b {
                match a.get_mut(&k) {
                    Some(existing) => merge(existing, v),
                    None => {
                        a.insert(k, v);
                    }
                }
            }
        }
        (Value::Sequence(a), Value::Sequence(b)) => a.extend(b),
        (slot, value) => *slot = value,
    }
}

fn kubelet_view(config: &Value) -> Result<KubeletView, JoinError> {
    let kubelet = config.get("spec").and_then(|s| s.get("kubelet"));
    let mut view = KubeletView::default();
    let flags: Vec<String> = kubelet
        .and_then(|k| k.get("flags"))
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect();
    read_kubelet_flags(&flags, &mut view)?;
    let inline = kubelet.and_then(|k| k.get("config"));
    for t in inline
        .and_then(|c| c.get("registerWithTaints"))
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
    {
        let field = |n: &str| t.get(n).and_then(Value::as_str).unwrap_or_default();
        let parsed = taint(field("key"), field("value"), field("effect"))
            .ok_or_else(|| JoinError::Kubelet(format!("invalid registerWithTaints entry {t:?}")))?;
        view.taints.push(parsed);
    }
    if let Some(max) = inline.and_then(|c| c.get("maxPods")) {
        let max = max
            .as_u64()
            .and_then(|m| u32::try_from(m).ok())
            .ok_or_else(|| JoinError::Kubelet(format!("maxPods {max:?} is not a count")))?;
        view.max_pods = Some(max);
    }
    view.cluster_dns = inline
        .and_then(|c| c.get("clusterDNS"))
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .filter_map(|d| d.as_str().map(str::to_string))
        .collect();
    view.taints.sort();
    view.taints.dedup();
    Ok(view)
}
