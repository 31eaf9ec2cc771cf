//! The kinds the suite reads and writes, as kube-rs `ApiResource`s over `DynamicObject`.

use kube::core::ApiResource;
use serde_json::Value;

use crate::{E2eError, Outcome};

/// One served kind.
#[derive(Clone, Copy, Debug)]
pub struct Kind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
}

impl Kind {
    pub fn resource(&self) -> ApiResource {
        let api_version = if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        };
        ApiResource {
            group: self.group.into(),
            version: self.version.into(),
            api_version,
            kind: self.kind.into(),
            plural: self.plural.into(),
        }
    }
}

const fn kind(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> Kind {
    Kind {
        group,
        version,
        kind,
        plural,
        namespaced,
    }
}

pub const NODE_POOL: Kind = kind("karpenter.sh", "v1", "NodePool", "nodepools", false);
pub const NODE_CLAIM: Kind = kind("karpenter.sh", "v1", "NodeClaim", "nodeclaims", false);
pub const EC2_NODE_CLASS: Kind = kind(
    "karpenter.k8s.aws",
    "v1",
    "EC2NodeClass",
    "ec2nodeclasses",
    false,
);
pub const NODE: Kind = kind("", "v1", "Node", "nodes", false);
pub const POD: Kind = kind("", "v1", "Pod", "pods", true);
pub const EVENT: Kind = kind("", "v1", "Event", "events", true);
/// The `events.k8s.io/v1` view of Events (what Karpenter writes: `regarding`, `note`).
pub const EVENT_V1: Kind = kind("events.k8s.io", "v1", "Event", "events", true);
pub const DEPLOYMENT: Kind = kind("apps", "v1", "Deployment", "deployments", true);
pub const PDB: Kind = kind(
    "policy",
    "v1",
    "PodDisruptionBudget",
    "poddisruptionbudgets",
    true,
);

const ALL: [Kind; 8] = [
    NODE_POOL,
    NODE_CLAIM,
    EC2_NODE_CLASS,
    NODE,
    POD,
    EVENT,
    DEPLOYMENT,
    PDB,
];

/// The kind of a manifest document, from its `apiVersion` and `kind`.
pub fn of(object: &Value) -> Outcome<(ApiResource, bool)> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let name = object["kind"].as_str().unwrap_or_default();
    ALL.iter()
        .find(|k| k.kind == name && k.resource().api_version == api_version)
        .map(|k| (k.resource(), k.namespaced))
        .ok_or_else(|| {
            E2eError::Manifest(format!(
                "{api_version} {name} is not a kind the suite applies"
            ))
        })
}
