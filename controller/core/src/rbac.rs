//! The Kubernetes permissions the controller needs, as data: what the chart's ClusterRoles and
//! Role grant its ServiceAccount, no more and no less.
//!
//! Each row comes from a call the controllers make through the `KubeApi` seam
//! (`karpenter_core::seams::kube`): `get`, `list` and `watch` read, `create`/`patch`/`delete` write
//! the main resource, `patch_status` writes the `status` subresource, `evict` creates
//! `pods/eviction`, and `record_event` creates (and, for a repeated event, patches) an
//! `events.k8s.io/v1` Event. Leader election reads, creates and renews one Lease.
//!
//! Three checks keep the rows honest: `controller/kube/tests/rbac_table.rs` fails when the core
//! calls the seam for a kind (or, with the kind spelled out, a verb) that has no row here,
//! `controller/kube/tests/chart_rbac.rs` (run by the chart check, `cargo xtask chart`) fails when
//! the rendered chart grants anything more or less than these rows, and the simulation's
//! controller seam refuses every call [`authorize`] refuses, as the API server's authorizer
//! would (a 403), so a controller that needs a permission the chart does not grant fails there.
//!
//! Lives in the core (it is pure data) so that the simulation can enforce it; `karpenter_kube`
//! re-exports it.

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
        &["get", "list", "watch"],
        "state reflectors; provisioning snapshot; NodePool readiness reads the pool it writes",
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
        &["create", "delete", "get", "list", "patch", "watch"],
        "provisioner creates; lifecycle reads the claim it reconciles; lifecycle, termination, \
         interruption and drift annotate, finalize, delete",
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
        &["get", "list", "patch", "watch"],
        "state reflectors; provisioning snapshot; lifecycle reads the claim's class at launch; \
         the EC2NodeClass status controller stamps the hash annotations",
    ),
    grant(
        "EC2NodeClass",
        "karpenter.k8s.aws",
        "ec2nodeclasses/status",
        &["patch"],
        "EC2NodeClass status controller: subnets, security groups, AMIs, instance profile, \
         capacity reservations, conditions",
    ),
    grant(
        "Node",
        "",
        "nodes",
        &["delete", "get", "list", "patch", "watch"],
        "lifecycle labels, taints and finalizers; termination taints, finalizes, deletes; the \
         capacity-type controller reads a node before relabelling it",
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
        "ReplicaSet",
        "apps",
        "replicasets",
        &["list", "watch"],
        "state reflectors, with default topology spreads configured (deduced selectors)",
    ),
    grant(
        "StatefulSet",
        "apps",
        "statefulsets",
        &["list", "watch"],
        "state reflectors, with default topology spreads configured (deduced selectors)",
    ),
    grant(
        "Service",
        "",
        "services",
        &["list", "watch"],
        "state reflectors, with default topology spreads configured (deduced selectors)",
    ),
    grant(
        "ReplicationController",
        "",
        "replicationcontrollers",
        &["list", "watch"],
        "state reflectors, with default topology spreads configured (deduced selectors)",
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

/// What the API server's RBAC authorizer decides for one request of the controller's
/// ServiceAccount bound to [`GRANTS`]: `Ok` if a row grants `verb` on `group`/`resource`
/// (`resource/subresource` for a subresource) for the object `name` in `namespace`, else why
/// not. `name` is `None` for requests without one (list, watch, create), which a row limited to
/// `resource_names` does not grant; `release_namespace` is where the chart is installed.
pub fn authorize(
    group: &str,
    resource: &str,
    verb: &str,
    name: Option<&str>,
    namespace: Option<&str>,
    release_namespace: &str,
) -> Result<(), String> {
    let granted = GRANTS.iter().any(|g| {
        g.group == group
            && g.resource == resource
            && g.verbs.contains(&verb)
            && (g.resource_names.is_empty() || name.is_some_and(|n| g.resource_names.contains(&n)))
            && match g.scope {
                Scope::Cluster => true,
                Scope::ReleaseNamespace => namespace == Some(release_namespace),
            }
    });
    if granted {
        return Ok(());
    }
    let group = if group.is_empty() { "core" } else { group };
    let on = match (namespace, name) {
        (Some(ns), Some(n)) => format!(" {ns}/{n}"),
        (None, Some(n)) => format!(" {n}"),
        (Some(ns), None) => format!(" in {ns}"),
        (None, None) => String::new(),
    };
    Err(format!(
        "{verb} on {group}/{resource}{on} is not granted to the controller's ServiceAccount \
         (controller/core/src/rbac.rs and the chart's roles)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_controller_may_patch_ec2nodeclass_status_but_nobody_may_delete_a_class() {
        let ok = authorize(
            "karpenter.k8s.aws",
            "ec2nodeclasses/status",
            "patch",
            Some("default"),
            None,
            "karpenter",
        );
        assert_eq!(ok, Ok(()));
        let delete = authorize(
            "karpenter.k8s.aws",
            "ec2nodeclasses",
            "delete",
            Some("default"),
            None,
            "karpenter",
        );
        assert!(
            delete.is_err_and(
                |why| why.contains("delete on karpenter.k8s.aws/ec2nodeclasses default")
            )
        );
    }

    #[test]
    fn the_lease_is_granted_by_name_in_the_release_namespace_only() {
        let lease = |name, ns| {
            authorize(
                "coordination.k8s.io",
                "leases",
                "patch",
                Some(name),
                Some(ns),
                "karpenter",
            )
        };
        assert_eq!(lease(LEADER_ELECTION_LEASE, "karpenter"), Ok(()));
        assert!(lease("someone-else", "karpenter").is_err());
        assert!(lease(LEADER_ELECTION_LEASE, "default").is_err());
    }
}
