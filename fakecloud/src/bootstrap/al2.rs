//! AL2: cloud-init runs the user data's shell scripts (the whole text if it starts with `#!`,
//! else the `text/x-shellscript` parts of a MIME archive); one of them must call
//! `/etc/eks/bootstrap.sh CLUSTER --apiserver-endpoint E --b64-cluster-ca C`. Its
//! `--kubelet-extra-args` carry the kubelet's labels, taints and max pods.

use super::{
    ClusterIdentity, JoinError, KubeletView, check_identity, mime_parts, read_kubelet_flags,
    shell_words,
};

const BOOTSTRAP: &str = "/etc/eks/bootstrap.sh";

pub(super) fn join(user_data: &str, cluster: &ClusterIdentity) -> Result<KubeletView, JoinError> {
    let scripts: Vec<String> = match mime_parts(user_data) {
        Some(parts) => parts?
            .into_iter()
            .filter(|(ct, _)| ct.starts_with("text/x-shellscript"))
            .map(|(_, body)| body)
            .collect(),
        None if user_data.trim_start().starts_with("#!") => vec![user_data.to_string()],
        None => Vec::new(),
    };
    let call = scripts
        .iter()
        .find_map(|s| bootstrap_call(s))
        .ok_or_else(|| JoinError::Rejected(format!("no shell script calls {BOOTSTRAP}")))??;
    let mut cluster_name = None;
    let mut endpoint = None;
    let mut ca = None;
    let mut view = KubeletView::default();
    let mut args = call.into_iter();
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| JoinError::Rejected(format!("{arg} needs a value")))
        };
        match arg.as_str() {
            "--apiserver-endpoint" => endpoint = Some(value()?),
            "--b64-cluster-ca" => ca = Some(value()?),
            "--dns-cluster-ip" => view.cluster_dns = vec![value()?],
            "--kubelet-extra-args" => {
                let extra = shell_words(&value()?).ok_or_else(|| {
                    JoinError::Rejected("--kubelet-extra-args: unterminated quote".into())
                })?;
                read_kubelet_flags(&extra, &mut view)?;
            }
            flag if flag.starts_with("--") => {
                // Other bootstrap.sh options take one value, except these switches.
                if !matches!(
                    flag,
                    "--local-disks" | "--ip-family" | "--use-max-pods" | "--container-runtime"
                ) {
                    continue;
                }
                value()?;
            }
            positional if cluster_name.is_none() => cluster_name = Some(positional.to_string()),
            other => {
                return Err(JoinError::Rejected(format!(
                    "unexpected bootstrap.sh argument {other:?}"
                )));
            }
        }
    }
    let require = |v: Option<String>, what: &str| {
        v.ok_or_else(|| JoinError::Rejected(format!("bootstrap.sh without {what}")))
    };
    check_identity(
        &require(cluster_name, "the cluster name")?,
        &require(endpoint, "--apiserver-endpoint")?,
        &require(ca, "--b64-cluster-ca")?,
        cluster,
    )?;
    view.taints.sort();
    view.taints.dedup();
    Ok(view)
}

/// The arguments of the first `bootstrap.sh` call in `script` (continuation lines joined).
fn bootstrap_call(script: &str) -> Option<Result<Vec<String>, JoinError>> {
    let joined = script.replace("\\\n", " ");
    let line = joined
        .lines()
        .find(|l| l.trim_start().starts_with(BOOTSTRAP))?;
    let words = match shell_words(line) {
        Some(words) => words,
        None => {
            return Some(Err(JoinError::Rejected(
                "bootstrap.sh: unterminated quote".into(),
            )));
        }
    };
    Some(Ok(words.into_iter().skip(1).collect()))
}
