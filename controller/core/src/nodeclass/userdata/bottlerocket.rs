//! Bottlerocket: TOML. The user's TOML is read, then Karpenter overwrites
//! `settings.kubernetes.{cluster-name, api-server, cluster-certificate, cluster-dns-ip, max-pods,
//! kubelet settings}`, merges its labels into `node-labels` and its taints into `node-taints`
//! (the user's other tables, e.g. `settings.network`, are kept).

use std::collections::BTreeMap;

use toml::{Table, Value};

use super::{BootstrapInput, UserDataError};

pub(super) fn generate(input: &BootstrapInput) -> Result<String, UserDataError> {
    let mut root: Table = match input.user_data.filter(|u| !u.trim().is_empty()) {
        Some(text) => text
            .parse()
            .map_err(|e: toml::de::Error| UserDataError::Toml(e.message().to_string()))?,
        None => Table::new(),
    };
    let settings = table_at(&mut root, "settings")?;
    let kubernetes = table_at(settings, "kubernetes")?;
    let cluster = input.cluster;
    let mut set = |key: &str, value: Value| {
        kubernetes.insert(key.to_string(), value);
    };
    set("cluster-name", Value::from(cluster.name.clone()));
    set("api-server", Value::from(cluster.endpoint.clone()));
    set(
        "cluster-certificate",
        Value::from(cluster.ca_bundle.clone()),
    );
    let dns = input.cluster_dns();
    set(
        "cluster-dns-ip",
        if dns.len() == 1 {
            Value::from(dns[0].clone())
        } else {
            Value::Array(dns.into_iter().map(Value::from).collect())
        },
    );
    kubelet_settings(input, kubernetes);
    let labels = table_at(kubernetes, "node-labels")?;
    for (key, value) in input.kubelet_labels() {
        labels.insert(key, Value::from(value));
    }
    let taints = table_at(kubernetes, "node-taints")?;
    for taint in input.boot_taints() {
        let entry = taints
            .entry(taint.key.clone())
            .or_insert_with(|| Value::Array(Vec::new()));
        let item = Value::from(format!("{}:{}", taint.value, taint.effect));
        match entry {
            Value::Array(values) if !values.contains(&item) => values.push(item),
            Value::Array(_) => {}
            other => *other = Value::Array(vec![item]),
        }
    }
    toml::to_string(&root).map_err(|e| UserDataError::Render(e.to_string()))
}

/// The table at `key` in `parent`, created if missing; an error if `key` holds something else.
fn table_at<'t>(parent: &'t mut Table, key: &str) -> Result<&'t mut Table, UserDataError> {
    match parent
        .entry(key.to_string())
        .or_insert_with(|| Value::Table(Table::new()))
    {
        Value::Table(table) => Ok(table),
        _ => Err(UserDataError::Toml(format!("{key} is not a table"))),
    }
}

/// `spec.kubelet` in Bottlerocket's setting names.
fn kubelet_settings(input: &BootstrapInput, kubernetes: &mut Table) {
    let Some(k) = input.kubelet else {
        return;
    };
    let int = |v: Option<i32>| v.map(|v| Value::Integer(i64::from(v)));
    let map = |m: &Option<BTreeMap<String, String>>| {
        m.as_ref().map(|m| {
            Value::Table(
                m.iter()
                    .map(|(k, v)| (k.clone(), Value::from(v.clone())))
                    .collect(),
            )
        })
    };
    let settings = [
        ("max-pods", int(k.max_pods)),
        ("pods-per-core", int(k.pods_per_core)),
        ("system-reserved", map(&k.system_reserved)),
        ("kube-reserved", map(&k.kube_reserved)),
        ("eviction-hard", map(&k.eviction_hard)),
        ("eviction-soft", map(&k.eviction_soft)),
        (
            "eviction-soft-grace-period",
            map(&k.eviction_soft_grace_period),
        ),
        (
            "eviction-max-pod-grace-period",
            int(k.eviction_max_pod_grace_period),
        ),
        (
            "image-gc-high-threshold-percent",
            int(k.image_gc_high_threshold_percent),
        ),
        (
            "image-gc-low-threshold-percent",
            int(k.image_gc_low_threshold_percent),
        ),
        (
            "cpu-cfs-quota-enforced",
            k.cpu_cfs_quota.map(Value::Boolean),
        ),
    ];
    for (key, value) in settings {
        if let Some(value) = value {
            kubernetes.insert(key.to_string(), value);
        }
    }
}
