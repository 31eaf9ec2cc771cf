//! AL2: a MIME archive of the user's parts (shell scripts run before the bootstrap) followed by a
//! script calling `/etc/eks/bootstrap.sh CLUSTER --apiserver-endpoint ... --b64-cluster-ca ...`
//! with the kubelet's labels, taints and `spec.kubelet` in `--kubelet-extra-args`.

use super::merge::{self, CONTENT_TYPE_SHELL, Part};
use super::{BootstrapInput, UserDataError, kubelet_flags, quote_sh};

pub(super) fn generate(input: &BootstrapInput) -> Result<String, UserDataError> {
    let mut parts = merge::user_parts(input.user_data)?;
    // Upstream's AL2 takes non-MIME user data as a shell script whatever it looks like.
    for part in &mut parts {
        if part.content_type == merge::CONTENT_TYPE_NODECONFIG {
            part.content_type = CONTENT_TYPE_SHELL.into();
        }
    }
    parts.push(Part {
        content_type: CONTENT_TYPE_SHELL.into(),
        content: script(input),
    });
    Ok(merge::serialize(&parts))
}

fn script(input: &BootstrapInput) -> String {
    let cluster = input.cluster;
    let mut lines = vec![format!(
        "/etc/eks/bootstrap.sh {} --apiserver-endpoint {} --b64-cluster-ca {}",
        quote_sh(&cluster.name),
        quote_sh(&cluster.endpoint),
        quote_sh(&cluster.ca_bundle)
    )];
    if input.ipv6() {
        lines.push("--ip-family ipv6".into());
    }
    if input.max_pods().is_some() {
        // Otherwise bootstrap.sh computes the ENI limit itself (the catalog's formula).
        lines.push("--use-max-pods false".into());
    }
    let mut extra = Vec::new();
    let labels = input.node_labels_value();
    if !labels.is_empty() {
        extra.push(format!("--node-labels={labels}"));
    }
    extra.push(format!(
        "--register-with-taints={}",
        input.register_taints_value()
    ));
    extra.extend(kubelet_flags(input.kubelet));
    lines.push(format!(
        "--kubelet-extra-args {}",
        quote_sh(&extra.join(" "))
    ));
    if input.raid0 {
        lines.push("--local-disks raid0".into());
    }
    lines.push(format!(
        "--dns-cluster-ip {}",
        quote_sh(&input.cluster_dns()[0])
    ));
    format!(
        "#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n{}\n",
        lines.join(" \\\n")
    )
}
