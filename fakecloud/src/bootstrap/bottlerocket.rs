//! Bottlerocket: user data is TOML; `settings.kubernetes` must hold `cluster-name`,
//! `api-server` and `cluster-certificate`. Labels come from `node-labels`, taints from
//! `node-taints` (`key = ["value:Effect", ...]`), max pods from `max-pods`.

use toml::{Table, Value};

use super::{ClusterIdentity, JoinError, KubeletView, check_identity, parse_taint};

pub(super) fn join(user_data: &str, cluster: &ClusterIdentity) -> Result<KubeletView, JoinError> {
    let root: Table = user_data
        .parse()
        .map_err(|e: toml::de::Error| JoinError::Rejected(format!("not TOML: {}", e.message())))?;
    let kubernetes = root
        .get("settings")
        .and_then(|s| s.get("kubernetes"))
        .and_then(Value::as_table)
        .ok_or_else(|| JoinError::Rejected("no [settings.kubernetes]".into()))?;
    let field = |name: &str| {
        kubernetes
            .get(name)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| JoinError::Rejected(format!("settings.kubernetes.{name} is required")))
    };
    check_identity(
        field("cluster-name")?,
        field("api-server")?,
        field("cluster-certificate")?,
        cluster,
    )?;
    let mut view = KubeletView::default();
    for (key, value) in kubernetes
        .get("node-labels")
        .and_then(Value::as_table)
        .into_iter()
        .flatten()
    {
        let value = value
            .as_str()
            .ok_or_else(|| JoinError::Rejected(format!("node-labels.{key} is not a string")))?;
        view.labels.insert(key.clone(), value.to_string());
    }
    for (key, values) in kubernetes
        .get("node-taints")
        .and_then(Value::as_table)
        .into_iter()
        .flatten()
    {
        let values = values
            .as_array()
            .ok_or_else(|| JoinError::Rejected(format!("node-taints.{key} is not a list")))?;
        for value in values {
            let text = value
                .as_str()
                .ok_or_else(|| JoinError::Rejected(format!("node-taints.{key}: not a string")))?;
            view.taints.push(parse_taint(&format!("{key}={text}"))?);
        }
    }
    if let Some(max) = kubernetes.get("max-pods") {
        let max = max
            .as_integer()
            .and_then(|m| u32::try_from(m).ok())
            .ok_or_else(|| JoinError::Rejected("max-pods is not a count".into()))?;
        view.max_pods = Some(max);
    }
    view.cluster_dns = match kubernetes.get("cluster-dns-ip") {
        Some(Value::String(ip)) => vec![ip.clone()],
        Some(Value::Array(ips)) => ips
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    view.taints.sort();
    view.taints.dedup();
    Ok(view)
}
