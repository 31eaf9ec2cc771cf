//! User data per AMI family, as upstream's `amifamily/bootstrap` writes it: from the cluster's
//! join data ([`ClusterInfo`]), the claim's labels and taints, `spec.kubelet` and the user's own
//! `spec.userData`.
//!
//! | family | format |
//! |---|---|
//! | AL2023 | MIME multipart: the user's parts, then Karpenter's nodeadm `NodeConfig` |
//! | AL2 | MIME multipart: the user's parts, then a script calling `/etc/eks/bootstrap.sh` |
//! | Bottlerocket | TOML: the user's settings with `settings.kubernetes` overwritten and labels merged |
//! | Windows | `<powershell>`: the user's script, then `Start-EKSBootstrap.ps1` |
//! | Custom | the user's user data verbatim |
//!
//! Labels the kubelet may not set on itself (the `kubernetes.io`, `k8s.io` and
//! `node-restriction.kubernetes.io` domains) are left out of the bootstrap and applied after
//! registration instead ([`labels_to_sync`]). The text returned is what the instance reads
//! (decoded); whoever calls EC2 base64-encodes it.

mod al2;
mod al2023;
mod bottlerocket;
mod custom;
pub mod merge;
mod windows;

use std::collections::BTreeMap;

use super::cluster::{ClusterInfo, IpFamily};
use crate::api::EC2NodeClass;
use crate::api::common::Taint;
use crate::api::ec2nodeclass::{AmiFamily, KubeletConfiguration};
use crate::api::labels::{DO_NOT_SYNC_TAINTS_LABEL, UNREGISTERED_TAINT_KEY};
use crate::scheduling::pod::effect_name;

/// Why user data could not be generated (the user's own part is malformed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UserDataError {
    #[error("userData is not a valid MIME multipart archive: {0}")]
    Mime(String),
    #[error("userData is not valid TOML: {0}")]
    Toml(String),
    #[error("cannot render user data: {0}")]
    Render(String),
}

/// A taint as the kubelet registers it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct BootTaint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

impl BootTaint {
    fn from_api(taint: &Taint) -> BootTaint {
        BootTaint {
            key: taint.key.clone(),
            value: taint.value.clone().unwrap_or_default(),
            effect: effect_name(taint.effect).to_string(),
        }
    }

    /// `key=value:Effect`, the kubelet flag's form.
    fn flag(&self) -> String {
        format!("{}={}:{}", self.key, self.value, self.effect)
    }
}

/// Everything a bootstrap needs besides the family.
#[derive(Clone, Debug)]
pub struct BootstrapInput<'a> {
    pub cluster: &'a ClusterInfo,
    /// The claim's labels plus `karpenter.sh/capacity-type`; filtered here.
    pub labels: BTreeMap<String, String>,
    /// The claim's taints then its startup taints (the unregistered taint is added here).
    pub taints: Vec<Taint>,
    pub kubelet: Option<&'a KubeletConfiguration>,
    /// `spec.userData`.
    pub user_data: Option<&'a str>,
    /// `spec.instanceStorePolicy: RAID0`.
    pub raid0: bool,
}

impl BootstrapInput<'_> {
    /// The labels the kubelet registers with: the allowed ones plus `do-not-sync-taints`.
    pub fn kubelet_labels(&self) -> BTreeMap<String, String> {
        let mut labels = kubelet_labels(&self.labels);
        labels.insert(DO_NOT_SYNC_TAINTS_LABEL.into(), "true".into());
        labels
    }

    /// The taints to register with, the unregistered taint last.
    pub fn boot_taints(&self) -> Vec<BootTaint> {
        let mut taints: Vec<BootTaint> = self.taints.iter().map(BootTaint::from_api).collect();
        let unregistered = BootTaint {
            key: UNREGISTERED_TAINT_KEY.into(),
            value: String::new(),
            effect: "NoExecute".into(),
        };
        if !taints.contains(&unregistered) {
            taints.push(unregistered);
        }
        taints
    }

    /// The DNS IP the kubelet hands pods: `spec.kubelet.clusterDNS`, else the cluster's.
    pub fn cluster_dns(&self) -> Vec<String> {
        self.kubelet
            .and_then(|k| k.cluster_dns.clone())
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| vec![self.cluster.dns_ip.to_string()])
    }

    pub fn max_pods(&self) -> Option<i32> {
        self.kubelet.and_then(|k| k.max_pods)
    }

    pub fn ipv6(&self) -> bool {
        self.cluster.ip_family() == IpFamily::Ipv6
    }

    /// `--node-labels=a=b,c=d` (sorted); `None` without labels.
    fn node_labels_value(&self) -> String {
        self.kubelet_labels()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn register_taints_value(&self) -> String {
        self.boot_taints()
            .iter()
            .map(BootTaint::flag)
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Whether the kubelet may not set `key` on its own Node: upstream's `RejectForbiddenLabels`
/// (the NodeRestriction admission plugin and the kubelet refuse these domains).
pub fn is_restricted_label(key: &str) -> bool {
    let Some((domain, _)) = key.split_once('/') else {
        return false;
    };
    ["node-restriction.kubernetes.io", "kubernetes.io", "k8s.io"]
        .iter()
        .any(|r| domain == *r || domain.ends_with(&format!(".{r}")))
}

/// The labels the bootstrap passes to the kubelet.
pub fn kubelet_labels(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    labels
        .iter()
        .filter(|(k, _)| !is_restricted_label(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The labels registration must patch onto the Node, because the bootstrap could not pass them.
pub fn labels_to_sync(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    labels
        .iter()
        .filter(|(k, _)| is_restricted_label(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The class's AMI family: `spec.amiFamily`, else its alias's, else AL2023 (upstream's default).
pub fn family(class: &EC2NodeClass) -> AmiFamily {
    class.spec.ami_family.unwrap_or_else(|| {
        class
            .spec
            .ami_selector_terms
            .iter()
            .filter_map(|t| t.alias.as_deref())
            .filter_map(|a| AmiFamily::from_alias_family(a.split('@').next().unwrap_or(a)))
            .next()
            .unwrap_or(AmiFamily::AL2023)
    })
}

/// The user data of `family` for `input`.
pub fn generate(family: AmiFamily, input: &BootstrapInput) -> Result<String, UserDataError> {
    match family {
        AmiFamily::AL2023 => al2023::generate(input),
        AmiFamily::AL2 => al2::generate(input),
        AmiFamily::Bottlerocket => bottlerocket::generate(input),
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
            windows::generate(input)
        }
        AmiFamily::Custom => Ok(custom::generate(input)),
    }
}

/// `spec.kubelet` as kubelet command-line flags (AL2 and Windows pass them this way).
pub fn kubelet_flags(kubelet: Option<&KubeletConfiguration>) -> Vec<String> {
    let Some(k) = kubelet else {
        return Vec::new();
    };
    let map = |m: &Option<BTreeMap<String, String>>, sep: &str| {
        m.as_ref().filter(|m| !m.is_empty()).map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}{sep}{v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
    };
    let mut flags = Vec::new();
    let mut push = |name: &str, value: Option<String>| {
        if let Some(v) = value {
            flags.push(format!("--{name}={v}"));
        }
    };
    push("max-pods", k.max_pods.map(|v| v.to_string()));
    push("pods-per-core", k.pods_per_core.map(|v| v.to_string()));
    push("system-reserved", map(&k.system_reserved, "="));
    push("kube-reserved", map(&k.kube_reserved, "="));
    push("eviction-hard", map(&k.eviction_hard, "<"));
    push("eviction-soft", map(&k.eviction_soft, "<"));
    push(
        "eviction-soft-grace-period",
        map(&k.eviction_soft_grace_period, "="),
    );
    push(
        "eviction-max-pod-grace-period",
        k.eviction_max_pod_grace_period.map(|v| v.to_string()),
    );
    push(
        "image-gc-high-threshold",
        k.image_gc_high_threshold_percent.map(|v| v.to_string()),
    );
    push(
        "image-gc-low-threshold",
        k.image_gc_low_threshold_percent.map(|v| v.to_string()),
    );
    push("cpu-cfs-quota", k.cpu_cfs_quota.map(|v| v.to_string()));
    flags
}

/// Single-quotes `value` for a POSIX shell or PowerShell (`'` doubled or escaped as each wants).
fn quote_sh(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

fn quote_ps(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}
