//! Would this user data join *this* cluster? The checks the real bootstraps make, as pure
//! parsers: nodeadm (AL2023: a YAML `NodeConfig`, or MIME parts of type
//! `application/node.eks.aws`, with the fields nodeadm's validation requires), `bootstrap.sh`
//! (AL2), Bottlerocket's TOML `settings.kubernetes`, and `Start-EKSBootstrap.ps1` (Windows).
//! A Custom AMI joins only if one of them accepts the user's own user data.
//!
//! Each returns the kubelet's view on success (labels, taints, max pods, cluster DNS) and why the
//! node would never join otherwise: the bootstrap refuses its input, the values name another
//! cluster (TLS to the wrong endpoint or with the wrong CA fails), or the kubelet refuses a label
//! (`kubernetes.io` labels it may not self-apply, `node-restriction.kubernetes.io` ones the
//! NodeRestriction admission plugin rejects).
//!
//! Written independently of the controller's user-data code on purpose: these are the world's
//! rules, and they check the controller's output.

mod al2;
mod bottlerocket;
mod nodeadm;
mod windows;

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

pub use crate::registration::Taint;

/// The AMI family an instance boots, which decides the bootstrap that reads its user data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum BootFamily {
    Al2023,
    Al2,
    Bottlerocket,
    Windows,
    /// The user's own image: joins only if one of the known bootstraps accepts the user data.
    Custom,
}

impl BootFamily {
    /// The bootstrap an image runs, read from its name as EKS and Bottlerocket publish them
    /// (`amazon-eks-node-al2023-…`, `amazon-eks-…-node-1.33-…`, `bottlerocket-aws-k8s-…`,
    /// `Windows_Server-…-EKS_Optimized-…`); any other image is the user's own (Custom).
    pub fn of_image(name: &str) -> BootFamily {
        let lower = name.to_ascii_lowercase();
        if lower.starts_with("amazon-eks-node-al2023") {
            BootFamily::Al2023
        } else if lower.starts_with("bottlerocket-") {
            BootFamily::Bottlerocket
        } else if lower.starts_with("windows_server") && lower.contains("eks_optimized") {
            BootFamily::Windows
        } else if lower.starts_with("amazon-eks-") {
            BootFamily::Al2
        } else {
            BootFamily::Custom
        }
    }
}

/// The OS build (`major.minor.build`) a Windows kubelet reports as
/// `node.kubernetes.io/windows-build`, for an EKS-optimized Windows image named
/// `Windows_Server-<year>-…-EKS_Optimized-…`; `None` for any other image (or an unknown year).
pub fn windows_build(image_name: &str) -> Option<&'static str> {
    if BootFamily::of_image(image_name) != BootFamily::Windows {
        return None;
    }
    let year = image_name.split('-').nth(1)?;
    match year {
        "2019" => Some("10.0.17763"),
        "2022" => Some("10.0.20348"),
        "2025" => Some("10.0.26100"),
        _ => None,
    }
}

/// The cluster an instance must join, as the world knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterIdentity {
    pub name: String,
    pub endpoint: String,
    /// Base64 of the PEM bundle.
    pub ca_bundle: String,
    /// The service CIDR (`10.100.0.0/16`).
    pub cidr: String,
}

/// What the kubelet starts with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeletView {
    pub labels: BTreeMap<String, String>,
    /// Sorted, without duplicates.
    pub taints: Vec<Taint>,
    pub max_pods: Option<u32>,
    pub cluster_dns: Vec<String>,
}

/// Why an instance would never join.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JoinError {
    /// The bootstrap cannot read its input (nodeadm validation, a TOML error, no bootstrap call).
    Rejected(String),
    /// The input names another cluster, endpoint or CA: the kubelet cannot authenticate.
    WrongCluster(String),
    /// The kubelet or the NodeRestriction admission plugin refuses a label or taint.
    Kubelet(String),
    /// The instance's role has no access entry in the cluster (or its profile holds no role):
    /// the API server answers the kubelet 401.
    Unauthorized(String),
}

impl std::fmt::Display for JoinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JoinError::Rejected(why) => write!(f, "bootstrap rejects the user data: {why}"),
            JoinError::WrongCluster(why) => write!(f, "names another cluster: {why}"),
            JoinError::Kubelet(why) => write!(f, "kubelet refuses to register: {why}"),
            JoinError::Unauthorized(why) => write!(f, "the cluster refuses its credentials: {why}"),
        }
    }
}

impl std::error::Error for JoinError {}

/// The outcome of booting `family` with (decoded) `user_data` in `cluster`.
pub fn join(
    family: BootFamily,
    user_data: &str,
    cluster: &ClusterIdentity,
) -> Result<KubeletView, JoinError> {
    let view = match family {
        BootFamily::Al2023 => nodeadm::join(user_data, cluster),
        BootFamily::Al2 => al2::join(user_data, cluster),
        BootFamily::Bottlerocket => bottlerocket::join(user_data, cluster),
        BootFamily::Windows => windows::join(user_data, cluster),
        BootFamily::Custom => custom(user_data, cluster),
    }?;
    check_labels(&view.labels)?;
    Ok(view)
}

fn custom(user_data: &str, cluster: &ClusterIdentity) -> Result<KubeletView, JoinError> {
    let attempts = [
        nodeadm::join(user_data, cluster),
        al2::join(user_data, cluster),
        bottlerocket::join(user_data, cluster),
        windows::join(user_data, cluster),
    ];
    let mut first_err = None;
    for attempt in attempts {
        match attempt {
            Ok(view) => return Ok(view),
            Err(err) => {
                first_err.get_or_insert(err);
            }
        }
    }
    Err(JoinError::Rejected(format!(
        "no known bootstrap accepts the custom user data ({})",
        first_err.map(|e| e.to_string()).unwrap_or_default()
    )))
}

/// Labels in `kubernetes.io` / `k8s.io` the kubelet may set on itself (the kubelet's own list).
const KUBELET_ALLOWED_LABELS: [&str; 11] = [
    "kubernetes.io/hostname",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];

/// The kubelet refuses unknown `kubernetes.io`/`k8s.io` labels in `--node-labels`; the
/// NodeRestriction plugin rejects a Node carrying `node-restriction.kubernetes.io/*`.
fn check_labels(labels: &BTreeMap<String, String>) -> Result<(), JoinError> {
    for key in labels.keys() {
        let Some((domain, _)) = key.split_once('/') else {
            continue;
        };
        let within = |d: &str| domain == d || domain.ends_with(&format!(".{d}"));
        if within("node-restriction.kubernetes.io") {
            return Err(JoinError::Kubelet(format!(
                "NodeRestriction forbids the node to set label {key}"
            )));
        }
        let allowed = KUBELET_ALLOWED_LABELS.contains(&key.as_str())
            || within("kubelet.kubernetes.io")
            || within("node.kubernetes.io");
        if (within("kubernetes.io") || within("k8s.io")) && !allowed {
            return Err(JoinError::Kubelet(format!(
                "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: {key}"
            )));
        }
    }
    Ok(())
}

/// Compares what the user data names with the cluster: name, endpoint and CA (decoded).
fn check_identity(
    name: &str,
    endpoint: &str,
    ca: &str,
    cluster: &ClusterIdentity,
) -> Result<(), JoinError> {
    if name != cluster.name {
        return Err(JoinError::WrongCluster(format!(
            "cluster name {name:?}, not {:?}",
            cluster.name
        )));
    }
    if endpoint.trim_end_matches('/') != cluster.endpoint.trim_end_matches('/') {
        return Err(JoinError::WrongCluster(format!(
            "endpoint {endpoint:?}, not {:?}",
            cluster.endpoint
        )));
    }
    let decode = |s: &str| STANDARD.decode(s.trim()).ok();
    match (decode(ca), decode(&cluster.ca_bundle)) {
        (Some(have), Some(want)) if have == want => Ok(()),
        (None, _) => Err(JoinError::Rejected("the CA bundle is not base64".into())),
        _ => Err(JoinError::WrongCluster(
            "the CA bundle is not the cluster's".into(),
        )),
    }
}

/// Reads kubelet flags (`--node-labels=`, `--register-with-taints=`, `--max-pods=`) into `view`.
fn read_kubelet_flags(flags: &[String], view: &mut KubeletView) -> Result<(), JoinError> {
    for flag in flags {
        let value = |name: &str| {
            flag.strip_prefix(name)
                .map(|v| v.trim_matches('"').to_string())
        };
        if let Some(labels) = value("--node-labels=") {
            for pair in labels.split(',').filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once('=').ok_or_else(|| {
                    JoinError::Kubelet(format!("--node-labels: {pair:?} is not key=value"))
                })?;
                view.labels.insert(k.to_string(), v.to_string());
            }
        } else if let Some(taints) = value("--register-with-taints=") {
            for taint in taints.split(',').filter(|t| !t.is_empty()) {
                view.taints.push(parse_taint(taint)?);
            }
        } else if let Some(max) = value("--max-pods=") {
            view.max_pods =
                Some(max.parse().map_err(|_| {
                    JoinError::Kubelet(format!("--max-pods={max} is not a number"))
                })?);
        }
    }
    Ok(())
}

/// `key=value:Effect` or `key:Effect`, with an effect the kubelet knows.
fn parse_taint(text: &str) -> Result<Taint, JoinError> {
    let bad = || JoinError::Kubelet(format!("invalid taint {text:?}"));
    let (key_value, effect) = text.trim().rsplit_once(':').ok_or_else(bad)?;
    let (key, value) = key_value.split_once('=').unwrap_or((key_value, ""));
    taint(key, value, effect).ok_or_else(bad)
}

fn taint(key: &str, value: &str, effect: &str) -> Option<Taint> {
    let known = ["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect);
    (known && !key.is_empty()).then(|| Taint {
        key: key.to_string(),
        value: value.to_string(),
        effect: effect.to_string(),
    })
}

/// A MIME multipart archive's parts as (content type, body), or `None` if `text` is not MIME.
fn mime_parts(text: &str) -> Option<Result<Vec<(String, String)>, JoinError>> {
    let text = text.replace("\r\n", "\n");
    let head = text.trim_start();
    if !(head.starts_with("MIME-Version:") || head.starts_with("Content-Type:")) {
        return None;
    }
    let bad = |why: &str| Some(Err(JoinError::Rejected(format!("MIME: {why}"))));
    let Some((headers, body)) = head.split_once("\n\n") else {
        return bad("no body");
    };
    let Some(boundary) = headers
        .lines()
        .filter(|l| l.to_ascii_lowercase().starts_with("content-type:"))
        .find_map(|l| l.split_once("boundary=").map(|(_, b)| b))
        .map(|b| b.trim().trim_matches('"').to_string())
        .filter(|b| !b.is_empty())
    else {
        return bad("no boundary");
    };
    let delimiter = format!("--{boundary}");
    let Some(body) = body.split(&format!("{delimiter}--")).next() else {
        return bad("not closed");
    };
    if !text.contains(&format!("{delimiter}--")) {
        return bad("not closed");
    }
    let mut parts = Vec::new();
    for chunk in body.split(&delimiter).skip(1) {
        let chunk = chunk.strip_prefix('\n').unwrap_or(chunk);
        let Some((part_headers, content)) = chunk.split_once("\n\n") else {
            return bad("a part without a body");
        };
        let content_type = part_headers
            .lines()
            .find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.trim()
                    .eq_ignore_ascii_case("content-type")
                    .then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| "text/plain".into());
        parts.push((content_type, content.to_string()));
    }
    Some(Ok(parts))
}

/// Shell words of `text` (single quotes literal, double quotes with backslash escapes, backslash
/// line continuations); `None` on an unterminated quote.
fn shell_words(text: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
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
                        '\\' => w.push(chars.next()?),
                        ch => w.push(ch),
                    }
                }
            }
            '\\' if chars.peek() == Some(&'\n') => {
                chars.next();
            }
            '\\' => word.get_or_insert_with(String::new).push(chars.next()?),
            c if c.is_whitespace() => words.extend(word.take()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Some(words)
}
