//! The kinds served over HTTP: every kind the controller and the stand-ins use, plus the
//! Deployments and ConfigMaps a user applies with kubectl. One table drives discovery, OpenAPI,
//! routing and Table output, so a kind is either fully served or not at all.

use std::sync::OnceLock;

use karpenter_core::seams::kube::ResourceKind;
use serde_json::Value;

/// `apps/v1` Deployments: stored by fakekube like any kind; the sim's ReplicaSet stand-in keeps
/// their pods (the controller never reads them).
pub const DEPLOYMENT: ResourceKind = ResourceKind {
    group: "apps",
    version: "v1",
    kind: "Deployment",
    plural: "deployments",
    namespaced: true,
};

/// `v1` ConfigMaps: nothing reads them; served so manifests that carry one apply.
pub const CONFIG_MAP: ResourceKind = ResourceKind {
    group: "",
    version: "v1",
    kind: "ConfigMap",
    plural: "configmaps",
    namespaced: true,
};

/// One served kind.
#[derive(Clone, Debug)]
pub struct Served {
    pub kind: ResourceKind,
    pub singular: &'static str,
    pub short_names: Vec<String>,
    /// Has a `/status` subresource (writes to the main resource ignore status).
    pub status: bool,
    /// Has a `/scale` subresource (`kubectl scale`).
    pub scale: bool,
    /// Has the `/eviction` subresource (pods).
    pub eviction: bool,
    /// Has the `/binding` subresource (pods): how a scheduler assigns a pod to a node.
    pub binding: bool,
    /// Printer columns after NAME (`kubectl get`), from the CRD for Karpenter's kinds.
    pub columns: Vec<Column>,
}

/// A printer column: a CRD's `additionalPrinterColumns` entry, or one of a built-in kind's.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    pub name: String,
    /// `string`, `integer`, `date`, ...
    pub type_: String,
    pub json_path: String,
    pub priority: i64,
    pub description: String,
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "get",
    "list",
    "patch",
    "update",
    "watch",
    "deletecollection",
];

/// The verbs every served kind answers (deletecollection is advertised only so kubectl's
/// discovery matches a real server's shape; it answers 405).
pub fn verbs() -> &'static [&'static str] {
    &VERBS[..7]
}

/// The three Karpenter CRDs as generated into `crds/` (the printer columns come from them).
const CRDS: [&str; 3] = [
    include_str!("../../../crds/karpenter.sh_nodepools.yaml"),
    include_str!("../../../crds/karpenter.sh_nodeclaims.yaml"),
    include_str!("../../../crds/karpenter.k8s.aws_ec2nodeclasses.yaml"),
];

/// Every served kind, in discovery order.
pub fn all() -> &'static [Served] {
    static ALL: OnceLock<Vec<Served>> = OnceLock::new();
    ALL.get_or_init(build)
}

/// The served kind of `group`/`version` with REST plural `plural`.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static Served> {
    all()
        .iter()
        .find(|s| s.kind.group == group && s.kind.version == version && s.kind.plural == plural)
}

/// The served kind of `apiVersion` and `kind` (as written in a manifest).
pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static Served> {
    all()
        .iter()
        .find(|s| s.kind.api_version() == api_version && s.kind.kind == kind)
}

/// `(group, version)` pairs served, in discovery order (the core group first).
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for served in all() {
        let gv = (served.kind.group, served.kind.version);
        if !out.contains(&gv) {
            out.push(gv);
        }
    }
    out
}

fn column(name: &str, type_: &str, json_path: &str, priority: i64) -> Column {
    Column {
        name: name.to_string(),
        type_: type_.to_string(),
        json_path: json_path.to_string(),
        priority,
        description: String::new(),
    }
}

fn plain(kind: ResourceKind, singular: &'static str, short: &'static [&'static str]) -> Served {
    Served {
        kind,
        singular,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        status: false,
        scale: false,
        eviction: false,
        binding: false,
        columns: vec![column("Age", "date", ".metadata.creationTimestamp", 0)],
    }
}

fn build() -> Vec<Served> {
    let mut out = vec![
        plain(ResourceKind::NAMESPACE, "namespace", &["ns"]),
        Served {
            status: true,
            columns: vec![
                column("Status", "string", "status", 0),
                column("Roles", "string", "roles", 0),
                column("Age", "date", ".metadata.creationTimestamp", 0),
                column("Version", "string", ".status.nodeInfo.kubeletVersion", 0),
                column("Internal-IP", "string", "internal-ip", 1),
            ],
            ..plain(ResourceKind::NODE, "node", &["no"])
        },
        Served {
            status: true,
            eviction: true,
            binding: true,
            columns: vec![
                column("Ready", "string", "ready", 0),
                column("Status", "string", "phase", 0),
                column("Restarts", "integer", "restarts", 0),
                column("Age", "date", ".metadata.creationTimestamp", 0),
                column("IP", "string", ".status.podIP", 1),
                column("Node", "string", ".spec.nodeName", 1),
            ],
            ..plain(ResourceKind::POD, "pod", &["po"])
        },
        plain(CONFIG_MAP, "configmap", &["cm"]),
        plain(
            ResourceKind::PERSISTENT_VOLUME_CLAIM,
            "persistentvolumeclaim",
            &["pvc"],
        ),
        plain(ResourceKind::PERSISTENT_VOLUME, "persistentvolume", &["pv"]),
        Served {
            status: true,
            scale: true,
            columns: vec![
                column("Ready", "string", "deployment-ready", 0),
                column("Up-to-date", "integer", ".status.updatedReplicas", 0),
                column("Available", "integer", ".status.availableReplicas", 0),
                column("Age", "date", ".metadata.creationTimestamp", 0),
            ],
            ..plain(DEPLOYMENT, "deployment", &["deploy"])
        },
        Served {
            status: true,
            ..plain(ResourceKind::DAEMON_SET, "daemonset", &["ds"])
        },
        Served {
            status: true,
            ..plain(
                ResourceKind::POD_DISRUPTION_BUDGET,
                "poddisruptionbudget",
                &["pdb"],
            )
        },
        // What `--scheduler-config` default spreads deduce pod selectors from: the controller
        // watches them when that setting is given, as a real API server serves them.
        Served {
            status: true,
            ..plain(ResourceKind::SERVICE, "service", &["svc"])
        },
        Served {
            status: true,
            scale: true,
            ..plain(ResourceKind::REPLICA_SET, "replicaset", &["rs"])
        },
        Served {
            status: true,
            scale: true,
            ..plain(ResourceKind::STATEFUL_SET, "statefulset", &["sts"])
        },
        Served {
            status: true,
            scale: true,
            ..plain(
                ResourceKind::REPLICATION_CONTROLLER,
                "replicationcontroller",
                &["rc"],
            )
        },
        plain(ResourceKind::STORAGE_CLASS, "storageclass", &["sc"]),
        plain(ResourceKind::CSI_NODE, "csinode", &[]),
        plain(ResourceKind::VOLUME_ATTACHMENT, "volumeattachment", &[]),
        plain(ResourceKind::LEASE, "lease", &[]),
    ];
    for text in CRDS {
        out.push(from_crd(text));
    }
    out
}

/// A Karpenter kind from its CRD: names, status subresource and printer columns.
fn from_crd(text: &str) -> Served {
    let crd: Value = serde_yaml::from_str(text).unwrap_or(Value::Null);
    let spec = &crd["spec"];
    let version = &spec["versions"][0];
    let kind = [
        ResourceKind::NODE_POOL,
        ResourceKind::NODE_CLAIM,
        ResourceKind::EC2_NODE_CLASS,
    ]
    .into_iter()
    .find(|k| spec["names"]["plural"] == k.plural)
    .unwrap_or(ResourceKind::NODE_POOL);
    let columns = version["additionalPrinterColumns"]
        .as_array()
        .map(|columns| {
            columns
                .iter()
                .map(|c| Column {
                    name: c["name"].as_str().unwrap_or_default().to_string(),
                    type_: c["type"].as_str().unwrap_or("string").to_string(),
                    json_path: c["jsonPath"].as_str().unwrap_or_default().to_string(),
                    priority: c["priority"].as_i64().unwrap_or(0),
                    description: c["description"].as_str().unwrap_or_default().to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    let short_names = spec["names"]["shortNames"]
        .as_array()
        .map(|names| {
            names
                .iter()
                .filter_map(|n| n.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    Served {
        kind,
        singular: match kind.plural {
            "nodepools" => "nodepool",
            "nodeclaims" => "nodeclaim",
            _ => "ec2nodeclass",
        },
        short_names,
        status: !version["subresources"]["status"].is_null(),
        scale: false,
        eviction: false,
        binding: false,
        columns,
    }
}
