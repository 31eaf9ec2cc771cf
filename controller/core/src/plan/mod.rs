//! `karpenter plan`'s pure half: manifests in, a scheduling [`Input`] out.
//!
//! A dry run is only worth trusting if it sees the cluster the manifests describe, the way the
//! API server and the workload controllers would make it: Karpenter objects pass the same
//! validation `karpenter validate` applies; workloads become the pods their controllers would
//! create; DaemonSets become daemon overhead; Nodes and the pods bound to them
//! become existing capacity; persistent volumes pin pods to zones;
//! Namespaces give `namespaceSelector`s their labels. Malformed input is an error naming the file,
//! the document and the field ([`PlanError`]), never a silently smaller plan. Reading files and
//! printing the plan are the CLI's.

// A `PlanError` carries where (file, document, object) and what (field, message): ~150 bytes.
// It is built at most once per bad document and only on the way out, so boxing it would buy
// nothing but noise at every construction and match.
#![allow(clippy::result_large_err)]

mod build;
mod decode;
mod error;
pub mod launch;
mod nodes;
mod pods;
mod workloads;

use std::collections::BTreeMap;

use serde_json::Value;

pub use error::{ObjectRef, PlanError, PlanErrors, Position};
pub use nodes::DEFAULT_MAX_PODS;

use crate::api::{EC2NodeClass, NodePool};
use crate::catalog::Catalog;
use crate::manifest::{ParseError, parse_documents};
use crate::scheduling::{ExistingNode, Input, Options, PodInfo, Results, Unschedulable, solve};
use build::Builder;
use decode::{Decoded, Object, decode};

/// The label the API server puts on every Namespace: `namespaceSelector`s rely on it, so a
/// namespace the input only mentions still has it.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// One parsed manifest document and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// File name (or `-` for stdin), as errors should name it.
    pub source: String,
    /// 1-based position among the source's documents, counting empty ones (as an editor would).
    pub number: usize,
    pub value: Value,
}

/// Splits `text` (multi-document YAML or JSON) read from `source` into documents.
pub fn documents(source: &str, text: &str) -> Result<Vec<Document>, ParseError> {
    Ok(parse_documents(text)?
        .into_iter()
        .map(|(number, value)| Document {
            source: source.to_string(),
            number,
            value,
        })
        .collect())
}

/// The cluster the documents describe, ready to plan: owned, sorted, deterministic.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    /// Sorted by name.
    pub node_pools: Vec<NodePool>,
    /// Sorted by name. Their root volume and kubelet settings change the capacity of their
    /// pools' instance types ([`Cluster::pool_catalogs`]).
    pub node_classes: Vec<EC2NodeClass>,
    /// Sorted by name, each with its bound pods sorted by key.
    pub nodes: Vec<ExistingNode>,
    /// One template pod per DaemonSet, sorted by key.
    pub daemonsets: Vec<PodInfo>,
    /// Pending pods, sorted by key.
    pub pods: Vec<PodInfo>,
    /// Labels of every namespace the input declares or uses.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// Pending pods that cannot be considered at all (a missing claim), sorted by pod.
    pub unschedulable: Vec<Unschedulable>,
    /// What the plan assumed or left out, one sentence each, in input order.
    pub notes: Vec<String>,
}

impl Cluster {
    /// Reads `documents` into a cluster. Every error in the input is reported, not just the
    /// first.
    pub fn from_documents(documents: &[Document]) -> Result<Cluster, PlanErrors> {
        let mut errors = Vec::new();
        let decoded = decode_all(documents, &mut errors);
        let mut builder = Builder::default();
        for d in &decoded {
            if let Err(e) = builder.add(d) {
                errors.push(e);
            }
        }
        let cluster = builder.finish(&mut errors);
        if errors.is_empty() {
            Ok(cluster)
        } else {
            // In input order: files as given, then documents and items within each.
            let rank = |source: &str| documents.iter().position(|d| d.source == source);
            errors.sort_by_key(|e| {
                let at = e.position();
                (rank(&at.source), at.document, at.item)
            });
            Err(PlanErrors(errors))
        }
    }

    /// The scheduling input over this cluster, `catalog`, and the catalogs of pools whose
    /// EC2NodeClass changes instance-type capacity (see [`Cluster::pool_catalogs`]).
    pub fn input<'a>(
        &'a self,
        catalog: &'a Catalog,
        pool_catalogs: &'a BTreeMap<String, Catalog>,
        options: Options,
    ) -> Input<'a> {
        Input {
            node_pools: &self.node_pools,
            catalog,
            pool_catalogs,
            nodes: &self.nodes,
            daemonsets: &self.daemonsets,
            pods: &self.pods,
            namespaces: &self.namespaces,
            options,
        }
    }

    /// By NodePool: `catalog` as the pool's EC2NodeClass (when the input holds it) launches it,
    /// for pools whose class changes capacity — the controller's rule
    /// ([`crate::catalog::nodeclass`]).
    pub fn pool_catalogs(&self, catalog: &Catalog) -> BTreeMap<String, Catalog> {
        self.node_pools
            .iter()
            .filter_map(|pool| {
                let wanted = &pool.spec.template.spec.node_class_ref.name;
                let class = self
                    .node_classes
                    .iter()
                    .find(|c| c.metadata.name.as_deref() == Some(wanted.as_str()))?;
                let adjusted = crate::catalog::nodeclass::for_node_class(catalog, class)?;
                Some((pool.metadata.name.clone().unwrap_or_default(), adjusted))
            })
            .collect()
    }

    /// Runs the scheduling simulation; the pods set aside while reading the input join its
    /// unschedulable list (sorted by pod).
    pub fn plan(&self, catalog: &Catalog, options: Options) -> Results {
        let pool_catalogs = self.pool_catalogs(catalog);
        let mut results = solve(self.input(catalog, &pool_catalogs, options));
        results
            .unschedulable
            .extend(self.unschedulable.iter().cloned());
        results.unschedulable.sort_by(|a, b| a.pod.cmp(&b.pod));
        results
    }
}

/// What `karpenter plan --disrupt` decides on: the cluster's scheduling half as [`Cluster`] read
/// it, plus the Nodes, NodeClaims, bound Pods and PodDisruptionBudgets of `documents` as plain
/// objects (they already passed [`Cluster::from_documents`]; one that does not decode is left
/// out). The same [`crate::disruption::ClusterView`] the controller builds from its caches.
pub fn disruption_view(
    documents: &[Document],
    cluster: &Cluster,
    catalog: &Catalog,
    now: jiff::Timestamp,
) -> crate::disruption::ClusterView {
    use k8s_openapi::api::core::v1::{Node, Pod};
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    let (mut nodes, mut claims, mut pods, mut pdbs) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for document in documents {
        for (_, value) in items(document) {
            let decoded = value.clone();
            match value["kind"].as_str() {
                Some("Node") => nodes.extend(serde_json::from_value::<Node>(decoded).ok()),
                Some("NodeClaim") => {
                    claims.extend(serde_json::from_value::<crate::api::NodeClaim>(decoded).ok())
                }
                Some("Pod") => pods.extend(serde_json::from_value::<Pod>(decoded).ok()),
                Some("PodDisruptionBudget") => {
                    pdbs.extend(serde_json::from_value::<PodDisruptionBudget>(decoded).ok())
                }
                _ => {}
            }
        }
    }
    for claim in &mut claims {
        mark_drift(claim, cluster, now);
    }
    let nodes: Vec<&Node> = nodes.iter().collect();
    let claims: Vec<&crate::api::NodeClaim> = claims.iter().collect();
    let pods: Vec<&Pod> = pods.iter().collect();
    let pdbs: Vec<&PodDisruptionBudget> = pdbs.iter().collect();
    let mut view = crate::disruption::ClusterView::build(
        now,
        crate::disruption::Scheduling {
            pools: cluster.node_pools.clone(),
            nodes: cluster.nodes.clone(),
            daemonsets: cluster.daemonsets.clone(),
            pending: cluster.pods.clone(),
            namespaces: cluster.namespaces.clone(),
        },
        crate::disruption::Objects {
            nodes: &nodes,
            claims: &claims,
            pods: &pods,
            pdbs: &pdbs,
        },
    );
    view.pool_catalogs = cluster.pool_catalogs(catalog);
    view
}

/// Decides drift for a NodeClaim given to `plan --disrupt` as the controller would (its hash
/// annotations against the NodePool and EC2NodeClass given, its image against the class's
/// `status.amis`) and sets `Drifted=True` on it when it drifted. A claim that already says
/// `Drifted` keeps it. Subnet and security-group drift need the instance and are not decided
/// offline.
fn mark_drift(claim: &mut crate::api::NodeClaim, cluster: &Cluster, now: jiff::Timestamp) {
    use crate::api::conditions::{self, nodeclaim as claim_conditions};
    use crate::nodeclaim::drift::{Verdict, detect};
    use kube_core::ResourceExt;
    let pool = claim
        .labels()
        .get(crate::api::labels::NODEPOOL_LABEL)
        .and_then(|name| cluster.node_pools.iter().find(|p| p.name_any() == *name));
    let class = cluster
        .node_classes
        .iter()
        .find(|c| c.name_any() == claim.spec.node_class_ref.name);
    let Verdict::Drifted(reason, message) = detect(claim, pool, class, None) else {
        return;
    };
    let generation = claim.metadata.generation;
    let status = claim.status.get_or_insert_default();
    if conditions::is_true(&status.conditions, claim_conditions::DRIFTED) {
        return;
    }
    conditions::set(
        &mut status.conditions,
        claim_conditions::DRIFTED,
        crate::api::ConditionStatus::True,
        reason,
        &message,
        generation,
        now,
    );
}

/// Decodes every document (and every item of `kind: List` documents), rejecting duplicates.
fn decode_all(documents: &[Document], errors: &mut Vec<PlanError>) -> Vec<Decoded> {
    let mut out = Vec::new();
    let mut seen: BTreeMap<ObjectRef, Position> = BTreeMap::new();
    for document in documents {
        for (at, value) in items(document) {
            match decode(at, value) {
                Ok(d) if matches!(d.object, Object::Other) => out.push(d),
                Ok(d) => match seen.get(&d.object_ref) {
                    Some(first) => errors.push(PlanError::Duplicate {
                        at: d.at,
                        object: d.object_ref,
                        first: first.clone(),
                    }),
                    None => {
                        seen.insert(d.object_ref.clone(), d.at.clone());
                        out.push(d);
                    }
                },
                Err(e) => errors.push(e),
            }
        }
    }
    out
}

/// The objects of one document: itself, or the items of a `v1 List` (what `kubectl get -o yaml`
/// prints for several objects).
fn items(document: &Document) -> Vec<(Position, &Value)> {
    let at = |item| Position {
        source: document.source.clone(),
        document: document.number,
        item,
    };
    let value = &document.value;
    if value["kind"] == "List" && value["apiVersion"] == "v1" {
        value["items"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, item)| (at(Some(i)), item))
            .collect()
    } else {
        vec![(at(None), value)]
    }
}
