//! Windows (2019, 2022, 2025): one `<powershell>` block, the user's script first, then
//! `Start-EKSBootstrap.ps1` with the cluster's name, endpoint and CA, the DNS IP and the kubelet's
//! labels, taints and `spec.kubelet` in `-KubeletExtraArgs`.

use super::{BootstrapInput, UserDataError, kubelet_flags, quote_ps};

pub(super) fn generate(input: &BootstrapInput) -> Result<String, UserDataError> {
    let mut out = String::from("<powershell>\n");
    if let Some(user) = input.user_data {
        let user = user.trim();
        let user = user.strip_prefix("<powershell>").unwrap_or(user);
        let user = user.strip_suffix("</powershell>").unwrap_or(user).trim();
        if !user.is_empty() {
            out.push_str(user);
            out.push('\n');
        }
    }
    let mut extra = Vec::new();
    let labels = input.node_labels_value();
    if !labels.is_empty() {
        extra.push(format!("--node-labels=\"{labels}\""));
    }
    extra.push(format!(
        "--register-with-taints=\"{}\"",
        input.register_taints_value()
    ));
    extra.extend(kubelet_flags(input.kubelet));
    let cluster = input.cluster;
    out.push_str(
        "[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n",
    );
    out.push_str(&format!(
        "& $EKSBootstrapScriptFile -EKSClusterName {} -APIServerEndpoint {} -Base64ClusterCA {} -KubeletExtraArgs {} -DNSClusterIP {}\n",
        quote_ps(&cluster.name),
        quote_ps(&cluster.endpoint),
        quote_ps(&cluster.ca_bundle),
        quote_ps(&extra.join(" ")),
        quote_ps(&input.cluster_dns()[0]),
    ));
    out.push_str("</powershell>\n");
    Ok(out)
}
