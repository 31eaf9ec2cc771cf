//! Manifests the scenarios name: files under `features/manifests/` (the user's examples, kept
//! byte for byte as given, so a scenario that uses one proves it works *as written*) or inline
//! docstrings.
//!
//! A manifest file mixes what the API server stores (NodePools, EC2NodeClasses, Namespaces) with
//! workloads (Deployments); the world takes the first kind at start, the workloads are created
//! when a step says so.
//!
//! The simulated AWS account is the one the manifests were written for: its subnets and
//! security group carry the `karpenter.sh/discovery` value the EC2NodeClasses select
//! ([`discovery_tag`]), and the AMI releases they pin exist ([`pinned_ami_releases`]). Without
//! that, the user's examples (written for clusters called `demo`, `my-cluster`, ...) could not
//! launch anything unchanged.

use std::path::PathBuf;

use fakecloud::AmiFamily;
use karpenter_core::manifest::parse_documents;
use serde_json::Value;

/// Where the manifests scenarios refer to by file name live.
pub fn directory() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("manifests")
}

/// One document of a manifest.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// 1-based position in its file.
    pub index: usize,
    pub kind: String,
    pub name: String,
    pub value: Value,
}

/// The text of `features/manifests/<file>`. Only plain file names are accepted: a scenario must
/// not depend on anything outside the crate.
pub fn read(file: &str) -> Result<String, String> {
    if file.contains('/') || file.contains("..") {
        return Err(format!(
            "manifest {file:?}: name a file in features/manifests/, not a path"
        ));
    }
    let path = directory().join(file);
    std::fs::read_to_string(&path).map_err(|e| format!("manifest {}: {e}", path.display()))
}

/// The non-empty documents of `text`, in order.
pub fn documents(text: &str) -> Result<Vec<Document>, String> {
    let parsed = parse_documents(text).map_err(|e| e.to_string())?;
    Ok(parsed
        .into_iter()
        .map(|(index, value)| Document {
            index,
            kind: value["kind"].as_str().unwrap_or_default().to_string(),
            name: value["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            value,
        })
        .collect())
}

/// The documents of `features/manifests/<file>`.
pub fn file_documents(file: &str) -> Result<Vec<Document>, String> {
    documents(&read(file)?).map_err(|e| format!("manifest {file}: {e}"))
}

/// The document of `kind` named `name`, or an error listing what the file does hold.
pub fn find<'a>(documents: &'a [Document], kind: &str, name: &str) -> Result<&'a Document, String> {
    documents
        .iter()
        .find(|d| d.kind == kind && d.name == name)
        .ok_or_else(|| {
            let held: Vec<String> = documents
                .iter()
                .map(|d| format!("{}/{}", d.kind, d.name))
                .collect();
            format!("no {kind} {name:?} here (it holds {})", held.join(", "))
        })
}

/// Whether the world applies this kind at start (the rest are workloads a step creates).
pub fn is_cluster_object(kind: &str) -> bool {
    matches!(
        kind,
        "NodePool" | "EC2NodeClass" | "NodeClaim" | "Namespace"
    )
}

/// Documents as one multi-document manifest. JSON is YAML, so each document is written as JSON:
/// no second serializer, and nothing in a value can be re-read differently.
pub fn join(documents: &[Value]) -> String {
    documents
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// The `karpenter.sh/discovery` value the first EC2NodeClass's subnet selector asks for.
pub fn discovery_tag(documents: &[Value]) -> Option<String> {
    documents
        .iter()
        .filter(|d| d["kind"] == "EC2NodeClass")
        .flat_map(|d| {
            d["spec"]["subnetSelectorTerms"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .find_map(|term| {
            term["tags"]["karpenter.sh/discovery"]
                .as_str()
                .map(str::to_string)
        })
}

/// `(family, release)` of every AMI alias pinned to a release (`al2023@v20250505`) by an
/// EC2NodeClass a NodePool in `documents` uses.
pub fn pinned_ami_releases(documents: &[Value]) -> Vec<(AmiFamily, String)> {
    let used: Vec<&str> = documents
        .iter()
        .filter(|d| d["kind"] == "NodePool")
        .filter_map(|d| d["spec"]["template"]["spec"]["nodeClassRef"]["name"].as_str())
        .collect();
    let mut out = Vec::new();
    for class in documents.iter().filter(|d| {
        d["kind"] == "EC2NodeClass"
            && d["metadata"]["name"]
                .as_str()
                .is_some_and(|n| used.contains(&n))
    }) {
        for term in class["spec"]["amiSelectorTerms"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let Some((family, release)) = term["alias"].as_str().and_then(|a| a.split_once('@'))
            else {
                continue;
            };
            let family = match family {
                "al2023" => AmiFamily::Al2023,
                "al2" => AmiFamily::Al2,
                "bottlerocket" => AmiFamily::Bottlerocket,
                _ => continue,
            };
            if release != "latest" && !out.contains(&(family, release.to_string())) {
                out.push((family, release.to_string()));
            }
        }
    }
    out
}
