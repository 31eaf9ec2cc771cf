//! The per-node filters of kube-scheduler that need nothing but the pod and the one node, in
//! upstream's order (readiness first, which upstream expresses as the `not-ready` taint): the
//! first failing filter gives the node's reasons, worded as upstream words them so the
//! `Unschedulable` message reads like a real cluster's.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, NodeSelector, Pod, Taint, Toleration};
use karpenter_core::resources::{PODS, Resources};

use super::matching::{Labels, node_selector_matches, tolerated, untolerated};

pub(crate) const REASON_NOT_READY: &str = "node(s) were not ready";
pub(crate) const REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";
pub(crate) const REASON_NODE_AFFINITY: &str = "node(s) didn't match Pod's node affinity/selector";
pub(crate) const REASON_PORTS: &str = "node(s) didn't have free ports for the requested pod ports";
pub(crate) const REASON_TOO_MANY_PODS: &str = "Too many pods";
pub(crate) const REASON_VOLUME_AFFINITY: &str = "node(s) had volume node affinity conflict";

/// The taint `kubectl cordon` stands for; a pod tolerating it may land on a cordoned node.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// A node as the scheduler sees it during one step, including the pods bound so far.
#[derive(Clone, Debug)]
pub(crate) struct NodeView {
    pub name: String,
    pub labels: Labels,
    pub taints: Vec<Taint>,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    pub allocatable: Resources,
    /// Sum of the requests of the pods bound to it (terminal pods excluded).
    pub requested: Resources,
    /// How many pods are bound to it (terminal pods excluded).
    pub pods: i64,
    pub host_ports: Vec<HostPort>,
}

impl NodeView {
    /// Accounts for a pod now bound to this node.
    pub(crate) fn add(&mut self, requests: &Resources, ports: &[HostPort]) {
        self.requested = self.requested.plus(requests);
        self.pods += 1;
        self.host_ports.extend_from_slice(ports);
    }
}

/// A host port a container claims.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct HostPort {
    pub ip: String,
    pub protocol: String,
    pub port: i32,
}

impl HostPort {
    /// Two claims conflict on the same port and protocol when their IPs are equal or either is
    /// the wildcard.
    fn conflicts(&self, other: &HostPort) -> bool {
        let wildcard = |ip: &str| ip == "0.0.0.0";
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || wildcard(&self.ip) || wildcard(&other.ip))
    }
}

/// Host ports of the pod's containers and sidecar init containers (those run alongside).
pub(crate) fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = &pod.spec else {
        return Vec::new();
    };
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    spec.containers
        .iter()
        .chain(sidecars)
        .flat_map(|c: &Container| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|port| *port > 0)?;
            Some(HostPort {
                ip: p
                    .host_ip
                    .clone()
                    .filter(|ip| !ip.is_empty())
                    .unwrap_or_else(|| "0.0.0.0".to_string()),
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".to_string()),
                port,
            })
        })
        .collect()
}

/// What the per-node filters need of the pod being scheduled.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    pub requests: Resources,
    pub host_ports: Vec<HostPort>,
    pub tolerations: Vec<Toleration>,
    pub node_selector: BTreeMap<String, String>,
    pub required_affinity: Option<NodeSelector>,
    /// Required node affinity of the persistent volumes its claims are bound to.
    pub volume_affinity: Vec<NodeSelector>,
}

impl Candidate {
    pub(crate) fn new(pod: &Pod, requests: Resources, volume_affinity: Vec<NodeSelector>) -> Self {
        let spec = pod.spec.as_ref();
        Self {
            requests,
            host_ports: host_ports(pod),
            tolerations: spec.and_then(|s| s.tolerations.clone()).unwrap_or_default(),
            node_selector: spec
                .and_then(|s| s.node_selector.clone())
                .unwrap_or_default(),
            required_affinity: spec
                .and_then(|s| s.affinity.as_ref())
                .and_then(|a| a.node_affinity.as_ref())
                .and_then(|a| {
                    a.required_during_scheduling_ignored_during_execution
                        .clone()
                }),
            volume_affinity,
        }
    }

    /// `nodeSelector` and required node affinity (what topology spread's `nodeAffinityPolicy:
    /// Honor` also applies when counting domains).
    pub(crate) fn matches_node_affinity(&self, node: &NodeView) -> bool {
        self.node_selector
            .iter()
            .all(|(k, v)| node.labels.get(k) == Some(v))
            && self
                .required_affinity
                .as_ref()
                .is_none_or(|s| node_selector_matches(s, &node.name, &node.labels))
    }

    /// No untolerated `NoSchedule`/`NoExecute` taint (topology spread's `nodeTaintsPolicy:
    /// Honor`).
    pub(crate) fn tolerates_node(&self, node: &NodeView) -> bool {
        untolerated(&node.taints, &self.tolerations).is_none()
    }

    /// The per-node filters; `Err` carries the reasons of the first filter that fails.
    pub(crate) fn check(&self, node: &NodeView) -> Result<(), Vec<String>> {
        if !node.ready {
            return Err(vec![REASON_NOT_READY.to_string()]);
        }
        if node.unschedulable {
            let cordon = Taint {
                key: UNSCHEDULABLE_TAINT.to_string(),
                effect: "NoSchedule".to_string(),
                ..Taint::default()
            };
            if !tolerated(&self.tolerations, &cordon) {
                return Err(vec![REASON_UNSCHEDULABLE.to_string()]);
            }
        }
        if let Some(taint) = untolerated(&node.taints, &self.tolerations) {
            return Err(vec![format!(
                "node(s) had untolerated taint {{{}: {}}}",
                taint.key,
                taint.value.as_deref().unwrap_or_default()
            )]);
        }
        if !self.matches_node_affinity(node) {
            return Err(vec![REASON_NODE_AFFINITY.to_string()]);
        }
        if self
            .host_ports
            .iter()
            .any(|wanted| node.host_ports.iter().any(|used| wanted.conflicts(used)))
        {
            return Err(vec![REASON_PORTS.to_string()]);
        }
        self.check_resources(node)?;
        if !self
            .volume_affinity
            .iter()
            .all(|s| node_selector_matches(s, &node.name, &node.labels))
        {
            return Err(vec![REASON_VOLUME_AFFINITY.to_string()]);
        }
        Ok(())
    }

    /// `NodeResourcesFit`: one more pod within `allocatable.pods`, and every resource the pod
    /// requests (a positive amount) within what allocatable leaves after the bound pods. Every
    /// insufficient resource is a reason, as upstream reports them all.
    fn check_resources(&self, node: &NodeView) -> Result<(), Vec<String>> {
        let mut reasons = Vec::new();
        if node.pods + 1 > node.allocatable.get(PODS) {
            reasons.push(REASON_TOO_MANY_PODS.to_string());
        }
        for (name, amount) in self.requests.iter() {
            if name == PODS || amount <= 0 {
                continue;
            }
            let free = node.allocatable.get(name) - node.requested.get(name);
            if amount > free {
                reasons.push(format!("Insufficient {name}"));
            }
        }
        if reasons.is_empty() {
            Ok(())
        } else {
            Err(reasons)
        }
    }
}
