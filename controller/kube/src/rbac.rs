//! The Kubernetes permissions the controller needs, as data: what the chart's ClusterRoles and
//! Role grant its ServiceAccount, no more and no less.
//!
//! Each row comes from a call the controllers make through the `KubeApi` seam
//! (`karpenter_core::seams::kube`): `get`, `list` and `watch` read, `create`/`patch`/`delete` write
//! the main resource, `patch_status` writes the `status` subresource, `evict` creates
//! `pods/eviction`, and `record_event` creates (and, for a repeated event, patches) an
//! `events.k8s.io/v1` Event. Leader election reads, creates and renews one Lease.
//!
//! Two tests keep the rows honest: `tests/rbac_table.rs` fails when the core calls the seam for a
//! kind that has no row here, and `tests/chart_rbac.rs` (run by the chart check,
//! `cargo xtask chart`) fails when the rendered chart grants anything more or less than these rows.

/// Where a grant applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Every namespace and the cluster-scoped kinds: a ClusterRole bound by a ClusterRoleBinding.
    Cluster,
    /// The namespace the chart is installed in: a Role bound by a RoleBinding.
    ReleaseNamespace,
}

/// Verbs on one resource (or subresource) of one API group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The kind the resource serves (for readers; RBAC itself names resources).
    pub kind: &'static str,
    /// API group; `""` for the core group.
    pub group: &'static str,
    /// REST resource, with `/subresource` where the call goes to one (`pods/eviction`).
    pub resource: &'static str,
    /// RBAC verbs, sorted.
    pub verbs: &'static [&'static str],
    /// Objects the grant is limited to; empty means all objects of the resource.
    pub resource_names: &'static [&'static str],
    pub scope: Scope,
    /// Which controllers make the calls, so a reviewer can check each need.
    pub used_by: &'static str,
}

/// The Lease of leader election (upstream's name; the chart's Role names it, so the binary must
/// keep `LEADER_ELECTION_NAME` at this default).
pub const LEADER_ELECTION_LEASE: &str = "karpenter-leader-election";

const fn grant(
    kind: &'static str,
    group: &'static str,
    resource: &'static str,
    verbs: &'static [&'static str],
    used_by: &'static str,
) -> Grant {
    Grant {
        kind,
        group,
        resource,
        verbs,
        resource_names: &[],
        scope: Scope::Cluster,
        used_by,
    }
}

/// Everything the controller's ServiceAccount is granted.
pub const GRANTS: &[Grant] = &[
    grant(
        "NodePool",
        "karpenter.sh",
        "nodepools",
        &["list", "watch"],
        "state reflectors; provisioning snapshot",
    ),
    grant(
        "NodePool",
        "karpenter.sh",
        "nodepools/status",
        &["patch"],
        "lifecycle: NodePool node and resource counters",
    ),
    grant(
        "NodeClaim",
        "karpenter.sh",
        "nodeclaims",
        &["create", "delete", "list", "patch", "watch"],
        "provisioner creates; lifecycle, termination and interruption annotate, finalize, delete",
    ),
    grant(
        "NodeClaim",
        "karpenter.sh",
        "nodeclaims/status",
        &["patch"],
        "lifecycle and termination conditions",
    ),
    grant(
        "EC2NodeClass",
        "karpenter.k8s.aws",
        "ec2nodeclasses",
        &["get", "list", "watch"],
        "state reflectors; provisioning snapshot; lifecycle reads the claim's class at launch",
    ),
    grant(
        "Node",
        "",
        "nodes",
        &["delete", "list", "patch", "watch"],
        "lifecycle labels, taints and finalizers; termination taints, finalizes, deletes",
    ),
    grant(
        "Pod",
        "",
        "pods",
        &["delete", "list", "watch"],
        "state reflectors; termination deletes pods past the grace deadline",
    ),
    grant(
        "Eviction",
        "",
        "pods/eviction",
        &["create"],
        "termination drains through the Eviction API (PodDisruptionBudgets apply)",
    ),
    grant(
        "Namespace",
        "",
        "namespaces",
        &["list", "watch"],
        "state reflectors (namespace selectors of pod affinity)",
    ),
    grant(
        "PersistentVolumeClaim",
        "",
        "persistentvolumeclaims",
        &["get", "list", "watch"],
        "state reflectors (volume topology of pending pods); termination: volumes of pods that \
         stay on the node",
    ),
    grant(
        "PersistentVolume",
        "",
        "persistentvolumes",
        &["list", "watch"],
        "state reflectors: the zone a bound claim's volume lives in",
    ),
    grant(
        "StorageClass",
        "storage.k8s.io",
        "storageclasses",
        &["list", "watch"],
        "state reflectors: allowed topologies and the default class of unbound claims",
    ),
    grant(
        "CSINode",
        "storage.k8s.io",
        "csinodes",
        &["list", "watch"],
        "state reflectors: how many volumes each node's CSI drivers may attach",
    ),
    grant(
        "PodDisruptionBudget",
        "policy",
        "poddisruptionbudgets",
        &["list", "watch"],
        "state reflectors; disruption leaves a node whose pods a PDB lets none be evicted",
    ),
    grant(
        "DaemonSet",
        "apps",
        "daemonsets",
        &["list", "watch"],
        "state reflectors (daemon overhead of new nodes)",
    ),
    grant(
        "VolumeAttachment",
        "storage.k8s.io",
        "volumeattachments",
        &["list"],
        "termination waits for volumes to detach",
    ),
    grant(
        "Event",
        "events.k8s.io",
        "events",
        &["create", "patch"],
        "record_event on pods, nodes and NodeClaims (a repeat patches the event's series)",
    ),
    Grant {
        kind: "Lease",
        group: "coordination.k8s.io",
        resource: "leases",
        verbs: &["get", "patch"],
        resource_names: &[LEADER_ELECTION_LEASE],
        scope: Scope::ReleaseNamespace,
        used_by: "leader election reads and renews its Lease",
    },
    Grant {
        kind: "Lease",
        group: "coordination.k8s.io",
        resource: "leases",
        verbs: &["create"],
        resource_names: &[],
        scope: Scope::ReleaseNamespace,
        used_by: "leader election creates the Lease (RBAC cannot limit create by name)",
    },
];
