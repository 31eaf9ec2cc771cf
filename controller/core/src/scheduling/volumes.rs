//! Volume topology: where a pending pod's persistent volumes let it run, as alternatives of node
//! requirements (the pod must land on a node satisfying one of them). One implementation for
//! the controller (its snapshot, from the watch-fed caches) and `karpenter plan` (from files).
//!
//! - A claim bound to a PersistentVolume (`spec.volumeName`): the PV's
//!   `spec.nodeAffinity.required` terms, ORed. Local and hostPath volumes lose their hostname term:
//!   a new node can never be the volume's old host, and upstream Karpenter drops it for the same
//!   reason.
//! - An unbound claim: its StorageClass's `allowedTopologies` terms, ORed; the provisioner will
//!   create the volume inside them. Upstream Karpenter applies them whatever the binding mode
//!   (with `Immediate` the volume lands in one of them before the pod is placed), and so does
//!   this. A claim without `storageClassName` gets the cluster's default class, as the API server
//!   would assign it.
//! - Several volumes: the cross product of their alternatives, each combination intersected;
//!   combinations that contradict themselves (zone a and zone b) are dropped.
//!
//! A claim, volume or class that the input does not hold makes the pod unschedulable with the
//! reason: upstream Karpenter ignores such a pod (and the pod gets a FailedScheduling event) until
//! the object exists.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    NodeSelectorTerm, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec, Pod,
};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};

use crate::api::Operator;
use crate::api::labels::{HOSTNAME_LABEL, ZONE_LABEL, normalize_label};
use crate::scheduling::requirements::{Requirement, Requirements};

/// The EBS CSI driver's zone key on the PVs it provisions. The AWS provider of upstream Karpenter
/// normalizes it to `topology.kubernetes.io/zone` (which nodes carry); without that, every EBS
/// volume would look impossible to satisfy.
const EBS_CSI_ZONE_LABEL: &str = "topology.ebs.csi.aws.com/zone";
/// The EBS CSI driver, which also serves in-tree EBS volumes since CSI migration.
pub const EBS_CSI_DRIVER: &str = "ebs.csi.aws.com";
/// The in-tree EBS provisioner a StorageClass may still name (migrated to [`EBS_CSI_DRIVER`]).
const IN_TREE_EBS_PROVISIONER: &str = "kubernetes.io/aws-ebs";

/// Annotations that mark the default StorageClass (GA and the older beta spelling).
const DEFAULT_CLASS_ANNOTATIONS: [&str; 2] = [
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
];

/// The pre-`storageClassName` way of naming a claim's class, still honoured by Kubernetes.
const CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// PVCs, PVs and StorageClasses of the input.
#[derive(Clone, Debug, Default)]
pub struct Volumes {
    /// By `(namespace, name)`.
    pub claims: BTreeMap<(String, String), PersistentVolumeClaim>,
    pub volumes: BTreeMap<String, PersistentVolume>,
    pub classes: BTreeMap<String, StorageClass>,
    /// CSI attach limits by node, then driver (`CSINode.spec.drivers[].allocatable.count`).
    pub attach_limits: BTreeMap<String, BTreeMap<String, i64>>,
}

/// A claim's spec with the class the API server would have given it.
struct Claim<'a> {
    name: String,
    /// `None` for a claim written without a spec.
    spec: Option<&'a PersistentVolumeClaimSpec>,
    annotated_class: Option<&'a str>,
}

impl Volumes {
    /// The claims, volumes and classes a cluster holds.
    pub fn from_objects<'a>(
        claims: impl IntoIterator<Item = &'a PersistentVolumeClaim>,
        volumes: impl IntoIterator<Item = &'a PersistentVolume>,
        classes: impl IntoIterator<Item = &'a StorageClass>,
    ) -> Self {
        let mut out = Self::default();
        for claim in claims {
            let key = (
                claim
                    .metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".to_string()),
                claim.metadata.name.clone().unwrap_or_default(),
            );
            out.claims.insert(key, claim.clone());
        }
        for volume in volumes {
            let name = volume.metadata.name.clone().unwrap_or_default();
            out.volumes.insert(name, volume.clone());
        }
        for class in classes {
            let name = class.metadata.name.clone().unwrap_or_default();
            out.classes.insert(name, class.clone());
        }
        out
    }

    /// Whether `pod` mounts a claim (directly or as a generic ephemeral volume): only such pods
    /// need [`Volumes::terms`].
    pub fn uses_claims(pod: &Pod) -> bool {
        pod.spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .any(|v| {
                v.persistent_volume_claim.is_some()
                    || v.ephemeral
                        .as_ref()
                        .is_some_and(|e| e.volume_claim_template.is_some())
            })
    }

    /// The pod's volume alternatives (empty: unconstrained), or why it cannot be scheduled.
    /// `claim_templates` are claims its controller creates with it, used when the input does not
    /// hold them yet.
    pub fn terms(
        &self,
        pod: &Pod,
        claim_templates: &BTreeMap<String, PersistentVolumeClaimSpec>,
    ) -> Result<Vec<Requirements>, String> {
        let mut alternatives: Vec<Requirements> = vec![Requirements::new()];
        let mut constrained_by: Vec<String> = Vec::new();
        for claim in self.claims_of(pod, claim_templates) {
            let claim = claim?;
            let terms = self.claim_terms(&claim)?;
            if terms.is_empty() {
                continue;
            }
            constrained_by.push(claim.name);
            alternatives = cross(&alternatives, &terms);
            if alternatives.is_empty() {
                return Err(format!(
                    "volumes of claims {} allow no common topology",
                    constrained_by
                        .iter()
                        .map(|c| format!("\"{c}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        alternatives.retain(|a| !a.is_empty());
        Ok(alternatives)
    }

    /// The same, with the attach limits of these CSINodes.
    pub fn with_csi_nodes<'a>(mut self, csi_nodes: impl IntoIterator<Item = &'a CSINode>) -> Self {
        for csi in csi_nodes {
            let node = csi.metadata.name.clone().unwrap_or_default();
            let limits: BTreeMap<String, i64> = csi
                .spec
                .drivers
                .iter()
                .filter_map(|d| {
                    let count = d.allocatable.as_ref()?.count?;
                    Some((d.name.clone(), i64::from(count)))
                })
                .collect();
            if !limits.is_empty() {
                self.attach_limits.insert(node, limits);
            }
        }
        self
    }

    /// The claims of the pod's volumes (a generic ephemeral volume's claim is `<pod>-<volume>`,
    /// created with the pod, so its template stands in until it exists; `claim_templates` are
    /// those its controller creates with it), each `Err` with why when it does not exist.
    fn claims_of<'a>(
        &'a self,
        pod: &'a Pod,
        claim_templates: &'a BTreeMap<String, PersistentVolumeClaimSpec>,
    ) -> impl Iterator<Item = Result<Claim<'a>, String>> + 'a {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
        pod.spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(move |volume| {
                let ephemeral_template = volume
                    .ephemeral
                    .as_ref()
                    .and_then(|e| e.volume_claim_template.as_ref())
                    .map(|t| &t.spec);
                let claim_name = match (&volume.persistent_volume_claim, ephemeral_template) {
                    (Some(source), _) => source.claim_name.clone(),
                    (None, Some(_)) => format!("{pod_name}-{}", volume.name),
                    (None, None) => return None,
                };
                let key = (namespace.to_string(), claim_name.clone());
                Some(match self.claims.get(&key) {
                    Some(found) => Ok(Claim {
                        name: claim_name,
                        spec: found.spec.as_ref(),
                        annotated_class: found
                            .metadata
                            .annotations
                            .as_ref()
                            .and_then(|a| a.get(CLASS_ANNOTATION))
                            .map(String::as_str),
                    }),
                    None => match claim_templates.get(&claim_name).or(ephemeral_template) {
                        Some(spec) => Ok(Claim {
                            name: claim_name,
                            spec: Some(spec),
                            annotated_class: None,
                        }),
                        None => Err(format!(
                            "persistentvolumeclaim \"{claim_name}\" not found in namespace \
                             {namespace}: Karpenter ignores the pod until the claim exists"
                        )),
                    },
                })
            })
    }

    /// The pod's persistent volumes by CSI driver, for CSI attach limits (upstream's
    /// `volumeusage.go`): a bound claim's volume by its name (the driver from `spec.csi`, or
    /// the EBS CSI driver for a migrated in-tree `awsElasticBlockStore` volume); an unbound
    /// claim by `namespace/claim` under its StorageClass's provisioner. Claims, volumes or classes
    /// that are missing count nowhere ([`Volumes::terms`] reports them).
    pub fn csi_volumes(
        &self,
        pod: &Pod,
        claim_templates: &BTreeMap<String, PersistentVolumeClaimSpec>,
    ) -> BTreeMap<String, BTreeSet<String>> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for claim in self.claims_of(pod, claim_templates).flatten() {
            let (spec, annotated, claim_name) = (claim.spec, claim.annotated_class, claim.name);
            let bound = spec
                .and_then(|s| s.volume_name.as_deref())
                .filter(|v| !v.is_empty());
            let found = match bound {
                Some(name) => self.volumes.get(name).and_then(|pv| {
                    let spec = pv.spec.as_ref()?;
                    let driver = match (&spec.csi, &spec.aws_elastic_block_store) {
                        (Some(csi), _) => csi.driver.clone(),
                        (None, Some(_)) => EBS_CSI_DRIVER.to_string(),
                        (None, None) => return None,
                    };
                    Some((driver, name.to_string()))
                }),
                None => {
                    let class = spec
                        .and_then(|s| s.storage_class_name.clone())
                        .or(annotated.map(String::from))
                        .or_else(|| self.default_class())
                        .filter(|c| !c.is_empty());
                    class
                        .and_then(|c| self.classes.get(&c))
                        .map(|c| match c.provisioner.as_str() {
                            IN_TREE_EBS_PROVISIONER => EBS_CSI_DRIVER.to_string(),
                            other => other.to_string(),
                        })
                        .map(|driver| (driver, format!("{namespace}/{claim_name}")))
                }
            };
            if let Some((driver, id)) = found {
                out.entry(driver).or_default().insert(id);
            }
        }
        out
    }

    /// One claim's alternatives; empty when it does not constrain the node.
    fn claim_terms(&self, claim: &Claim<'_>) -> Result<Vec<Requirements>, String> {
        let bound_to = claim.spec.and_then(|s| s.volume_name.as_deref());
        if let Some(volume_name) = bound_to.filter(|v| !v.is_empty()) {
            let volume = self.volumes.get(volume_name).ok_or_else(|| {
                format!(
                    "persistentvolume \"{volume_name}\" bound to claim \"{}\" not found",
                    claim.name
                )
            })?;
            return Ok(volume_terms(volume));
        }
        let class = claim.spec.and_then(|s| s.storage_class_name.as_deref());
        let class_name = match class.or(claim.annotated_class) {
            // An explicit empty class: bind only to pre-provisioned volumes without a class.
            Some("") => return Ok(Vec::new()),
            Some(name) => name.to_string(),
            None => match self.default_class() {
                Some(name) => name,
                None => return Ok(Vec::new()),
            },
        };
        let class = self.classes.get(&class_name).ok_or_else(|| {
            format!(
                "storageclass \"{class_name}\" of claim \"{}\" not found",
                claim.name
            )
        })?;
        Ok(class
            .allowed_topologies
            .iter()
            .flatten()
            .map(|term| {
                let mut reqs = Requirements::new();
                for expr in term.match_label_expressions.iter().flatten() {
                    reqs.add(node_label(&expr.key), Requirement::any_of(&expr.values));
                }
                reqs
            })
            .collect())
    }

    /// The default StorageClass, if one is marked; with several, the first by name (Kubernetes
    /// picks the newest, which a manifest rarely records).
    fn default_class(&self) -> Option<String> {
        self.classes
            .iter()
            .find(|(_, class)| {
                let annotations = class.metadata.annotations.as_ref();
                DEFAULT_CLASS_ANNOTATIONS.iter().any(|key| {
                    annotations
                        .and_then(|a| a.get(*key))
                        .is_some_and(|v| v == "true")
                })
            })
            .map(|(name, _)| name.clone())
    }
}

/// A PV's required node affinity as alternatives (empty: anywhere).
fn volume_terms(volume: &PersistentVolume) -> Vec<Requirements> {
    let Some(spec) = &volume.spec else {
        return Vec::new();
    };
    let node_bound = spec.local.is_some() || spec.host_path.is_some();
    let terms: Vec<Requirements> = spec
        .node_affinity
        .as_ref()
        .and_then(|a| a.required.as_ref())
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|term| term_requirements(term, node_bound))
        .collect();
    // One unconstrained alternative makes the whole volume unconstrained.
    if terms.iter().any(Requirements::is_empty) {
        return Vec::new();
    }
    terms
}

fn term_requirements(term: &NodeSelectorTerm, skip_hostname: bool) -> Requirements {
    let mut reqs = Requirements::new();
    for expr in term.match_expressions.iter().flatten() {
        let key = node_label(&expr.key);
        if skip_hostname && key == HOSTNAME_LABEL {
            continue;
        }
        let operator = match expr.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::Gt,
            "Lt" => Operator::Lt,
            // The API server admits no other operator; if one got through, match no node.
            _ => Operator::DoesNotExist,
        };
        reqs.add(
            key,
            Requirement::new(operator, expr.values.as_deref().unwrap_or_default()),
        );
    }
    reqs
}

/// The node label a volume topology key stands for.
fn node_label(key: &str) -> &str {
    if key == EBS_CSI_ZONE_LABEL {
        ZONE_LABEL
    } else {
        normalize_label(key)
    }
}

/// Every combination of one alternative from each side, intersected; contradictory ones dropped.
fn cross(left: &[Requirements], right: &[Requirements]) -> Vec<Requirements> {
    let mut out: Vec<Requirements> = Vec::new();
    for a in left {
        for b in right {
            if let Some(both) = intersect(a, b)
                && !out.contains(&both)
            {
                out.push(both);
            }
        }
    }
    out
}

/// `a` and `b` together, unless some key both constrain has no common value.
fn intersect(a: &Requirements, b: &Requirements) -> Option<Requirements> {
    for (key, theirs) in b.iter() {
        if let Some(ours) = a.get(key)
            && !ours.is_empty()
            && !theirs.is_empty()
            && !ours.intersects(theirs)
        {
            return None;
        }
    }
    let mut out = a.clone();
    out.add_all(b);
    Some(out)
}
