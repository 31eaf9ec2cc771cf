//! Windows: EC2Launch runs the `<powershell>` block; it must invoke `Start-EKSBootstrap.ps1` with
//! `-EKSClusterName`, `-APIServerEndpoint` and `-Base64ClusterCA`. `-KubeletExtraArgs` carries the
//! kubelet's labels, taints and max pods; `-DNSClusterIP` the cluster DNS.

use super::{
    ClusterIdentity, JoinError, KubeletView, check_identity, read_kubelet_flags, shell_words,
};

const SCRIPT: &str = "Start-EKSBootstrap.ps1";

pub(super) fn join(user_data: &str, cluster: &ClusterIdentity) -> Result<KubeletView, JoinError> {
    let block = user_data
        .split_once("<powershell>")
        .and_then(|(_, rest)| rest.split_once("</powershell>"))
        .map(|(inside, _)| inside)
        .ok_or_else(|| JoinError::Rejected("no <powershell> block".into()))?;
    if !block.contains(SCRIPT) {
        return Err(JoinError::Rejected(format!(
            "the script never calls {SCRIPT}"
        )));
    }
    let line = block
        .lines()
        .find(|l| l.contains("-EKSClusterName"))
        .ok_or_else(|| {
            JoinError::Rejected(format!("{SCRIPT} is called without -EKSClusterName"))
        })?;
    let words =
        powershell_words(line).ok_or_else(|| JoinError::Rejected("unterminated quote".into()))?;
    let arg = |name: &str| {
        words
            .iter()
            .position(|w| w.eq_ignore_ascii_case(name))
            .and_then(|i| words.get(i + 1))
            .cloned()
    };
    let require = |name: &str| {
        arg(name).ok_or_else(|| JoinError::Rejected(format!("{SCRIPT} without {name}")))
    };
    check_identity(
        &require("-EKSClusterName")?,
        &require("-APIServerEndpoint")?,
        &require("-Base64ClusterCA")?,
        cluster,
    )?;
    let mut view = KubeletView::default();
    if let Some(extra) = arg("-KubeletExtraArgs") {
        let flags = shell_words(&extra)
            .ok_or_else(|| JoinError::Rejected("-KubeletExtraArgs: unterminated quote".into()))?;
        read_kubelet_flags(&flags, &mut view)?;
    }
    view.cluster_dns = arg("-DNSClusterIP").into_iter().collect();
    view.taints.sort();
    view.taints.dedup();
    Ok(view)
}

/// PowerShell words: single quotes literal with `''` for a quote, double quotes kept whole.
fn powershell_words(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '\'' if chars.peek() == Some(&'\'') => {
                            chars.next();
                            w.push('\'');
                        }
                        '\'' => break,
                        ch => w.push(ch),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '"' => break,
                        ch => w.push(ch),
                    }
                }
            }
            c if c.is_whitespace() => words.extend(word.take()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Some(words)
}
