//! Assembling the cluster from decoded objects: each object to its role (pool, node, pod,
//! workload, volume, ...), then workloads expanded, pods bound or queued with their volume
//! topology, namespaces completed, everything sorted.

use std::collections::BTreeMap;

use super::decode::{self, Decoded, Object};
use super::error::PlanError;
use super::nodes;
use super::pods::{self, PodSource, Prepared, prepare};
use super::workloads::{Workload, daemon_template, daemonset_owned, expand, workload};
use super::{Cluster, NAMESPACE_NAME_LABEL};
use crate::scheduling::volumes::Volumes;
use crate::scheduling::{ExistingNode, Unschedulable};

/// Collects decoded objects by role, then assembles the cluster.
#[derive(Default)]
pub(super) struct Builder {
    cluster: Cluster,
    volumes: Volumes,
    nodes: BTreeMap<String, ExistingNode>,
    /// Pod documents.
    pods: Vec<PodSource>,
    workloads: Vec<Workload>,
    daemons: Vec<PodSource>,
}

impl Builder {
    pub(super) fn add(&mut self, d: &Decoded) -> Result<(), PlanError> {
        let notes = &mut self.cluster.notes;
        match &d.object {
            Object::NodePool(pool) => self.cluster.node_pools.push((**pool).clone()),
            Object::NodeClass(class) => {
                // kubelet, blockDeviceMappings and instanceStorePolicy change capacity
                // (`Cluster::pool_catalogs`).
                self.cluster.node_classes.push((**class).clone());
            }
            Object::NodeClaim => notes.push(format!(
                "{} ({}): left out of provisioning (only Nodes count as existing capacity); \
                 --disrupt reads it for drift",
                d.object_ref, d.at
            )),
            Object::Pod(pod) => self.pods.push(PodSource {
                pod: (**pod).clone(),
                at: d.at.clone(),
                origin: d.object_ref.clone(),
                spec_path: "spec",
                claim_templates: BTreeMap::new(),
            }),
            Object::Deployment(_)
            | Object::ReplicaSet(_)
            | Object::StatefulSet(_)
            | Object::Job(_) => self.workloads.extend(workload(d)?),
            Object::DaemonSet(ds) => match daemon_template(d, ds) {
                Some(source) => self.daemons.push(source),
                None => {
                    return Err(decode::field_error(
                        &d.at,
                        &d.object_ref,
                        "spec",
                        "Required value: a DaemonSet needs a spec with a pod template",
                    ));
                }
            },
            Object::Node(node) => {
                let (node, node_notes) = nodes::existing_node(d, node)?;
                notes.extend(node_notes);
                self.nodes.insert(node.name.clone(), node);
            }
            Object::Namespace(ns) => {
                let name = ns.metadata.name.clone().unwrap_or_default();
                let mut labels = ns.metadata.labels.clone().unwrap_or_default();
                labels.insert(NAMESPACE_NAME_LABEL.to_string(), name.clone());
                self.cluster.namespaces.insert(name, labels);
            }
            Object::Claim(claim) => {
                let meta = &claim.metadata;
                let key = (
                    meta.namespace
                        .clone()
                        .unwrap_or_else(|| "default".to_string()),
                    meta.name.clone().unwrap_or_default(),
                );
                self.volumes.claims.insert(key, (**claim).clone());
            }
            Object::Volume(volume) => {
                let name = volume.metadata.name.clone().unwrap_or_default();
                self.volumes.volumes.insert(name, (**volume).clone());
            }
            Object::StorageClass(class) => {
                let name = class.metadata.name.clone().unwrap_or_default();
                self.volumes.classes.insert(name, (**class).clone());
            }
            Object::Budget => notes.push(format!(
                "{}: read; disruption budgets limit disruption, not provisioning",
                d.object_ref
            )),
            Object::Other => notes.push(format!(
                "{} ({}): skipped: not used by a provisioning plan",
                d.object_ref, d.at
            )),
        }
        Ok(())
    }

    pub(super) fn finish(mut self, errors: &mut Vec<PlanError>) -> Cluster {
        let expanded = expand(&self.workloads, &self.pods);
        let sources: Vec<PodSource> = std::mem::take(&mut self.pods)
            .into_iter()
            .chain(expanded)
            .collect();
        let mut used_namespaces: Vec<String> = Vec::new();
        for source in &sources {
            used_namespaces.push(pods::namespace(&source.pod).to_string());
            if let Err(e) = self.place(source) {
                errors.push(e);
            }
        }
        for source in std::mem::take(&mut self.daemons) {
            used_namespaces.push(pods::namespace(&source.pod).to_string());
            match prepare(&source, Vec::new()) {
                Ok(Prepared::Ready(info)) => self.cluster.daemonsets.push(*info),
                Ok(Prepared::Unschedulable(reason)) => self.cluster.notes.push(format!(
                    "{}: left out of daemon overhead: {reason}",
                    source.origin
                )),
                Err(e) => errors.push(e),
            }
        }
        let mut cluster = self.cluster;
        for namespace in used_namespaces {
            cluster
                .namespaces
                .entry(namespace.clone())
                .or_insert_with(|| BTreeMap::from([(NAMESPACE_NAME_LABEL.to_string(), namespace)]));
        }
        let classes: Vec<&str> = cluster
            .node_classes
            .iter()
            .filter_map(|c| c.metadata.name.as_deref())
            .collect();
        let mut missing_class_notes = Vec::new();
        for pool in &cluster.node_pools {
            let class_ref = &pool.spec.template.spec.node_class_ref;
            if !classes.contains(&class_ref.name.as_str()) {
                missing_class_notes.push(format!(
                    "NodePool/{}: nodeClassRef names {}/{}, which is not in the input; planned \
                     as if it existed and were ready",
                    pool.metadata.name.as_deref().unwrap_or_default(),
                    class_ref.kind,
                    class_ref.name
                ));
            }
        }
        cluster.notes.extend(missing_class_notes);
        cluster
            .node_pools
            .sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        cluster
            .node_classes
            .sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        cluster.nodes = self.nodes.into_values().collect();
        for node in &mut cluster.nodes {
            node.pods.sort_by(|a, b| a.key.cmp(&b.key));
        }
        cluster.daemonsets.sort_by(|a, b| a.key.cmp(&b.key));
        cluster.pods.sort_by(|a, b| a.key.cmp(&b.key));
        cluster.unschedulable.sort_by(|a, b| a.pod.cmp(&b.pod));
        cluster
    }

    /// Puts one pod where it belongs: on its node when bound, in the pending list (with its
    /// volume topology) otherwise, or among the unschedulable with the reason.
    fn place(&mut self, source: &PodSource) -> Result<(), PlanError> {
        if source.is_terminal() {
            return Ok(());
        }
        let key = source.key();
        if let Some(node_name) = source.node_name() {
            let Some(node) = self.nodes.get_mut(node_name) else {
                self.cluster.notes.push(format!(
                    "Pod/{key}: bound to node {node_name}, which is not in the input; left out"
                ));
                return Ok(());
            };
            match prepare(source, Vec::new())? {
                Prepared::Ready(info) => node.pods.push(*info),
                Prepared::Unschedulable(reason) => self.cluster.notes.push(format!(
                    "Pod/{key}: bound to node {node_name} but left out of its usage: {reason}"
                )),
            }
            return Ok(());
        }
        if daemonset_owned(&source.pod) {
            self.cluster.notes.push(format!(
                "Pod/{key}: pending DaemonSet pod; its DaemonSet places it, Karpenter does not \
                 provision for it"
            ));
            return Ok(());
        }
        let terms = self.volumes.terms(&source.pod, &source.claim_templates);
        // Prepared even when a volume is missing, so a malformed spec is still reported.
        let prepared = prepare(source, terms.clone().unwrap_or_default())?;
        let prepared = match terms {
            Ok(_) => prepared,
            Err(reason) => Prepared::Unschedulable(reason),
        };
        match prepared {
            Prepared::Ready(mut info) => {
                info.csi_volumes = self
                    .volumes
                    .csi_volumes(&source.pod, &source.claim_templates);
                self.cluster.pods.push(*info)
            }
            Prepared::Unschedulable(reason) => self.cluster.unschedulable.push(Unschedulable {
                pod: key,
                reason,
                awaiting_reservation: false,
            }),
        }
        Ok(())
    }
}
