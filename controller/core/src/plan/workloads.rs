//! Workloads into the pods their controllers would create: Deployments, ReplicaSets and
//! StatefulSets to `replicas` (default 1), Jobs to `parallelism` (default 1, at most
//! `completions`, none while suspended), named `<owner>-<i>` in the owner's namespace.
//!
//! Input taken from a live cluster (`kubectl get ... -o yaml`) holds a workload *and* its pods,
//! and a Deployment *and* its ReplicaSets. Counting both would plan for the same replica twice,
//! so a workload only adds the replicas its controller is still missing (pods in the input whose
//! controller reference points at it, through a ReplicaSet for Deployments), and a ReplicaSet
//! owned by a Deployment in the input is left to that Deployment.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::decode::{Decoded, Object, field_error};
use super::error::PlanError;
use super::pods::{PodSource, controller_of, name, namespace};

/// A controller of pods, reduced to what expansion needs.
#[derive(Clone, Debug)]
pub(crate) struct Workload {
    pub decoded: Decoded,
    pub kind: &'static str,
    pub api_version: &'static str,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The workload's own controller `(kind, name)`: a ReplicaSet's Deployment.
    pub owner: Option<(String, String)>,
    /// Pods its controller keeps running.
    pub replicas: usize,
    pub template: PodTemplateSpec,
    /// StatefulSet `volumeClaimTemplates`.
    pub claim_templates: Vec<PersistentVolumeClaim>,
    /// First pod ordinal (StatefulSet `spec.ordinals.start`, else 0).
    pub first_ordinal: usize,
}

/// What expansion reads from one kind of workload.
struct Shape<'o> {
    kind: &'static str,
    api_version: &'static str,
    meta: &'o ObjectMeta,
    replicas: usize,
    template: &'o PodTemplateSpec,
    claims: Option<&'o Vec<PersistentVolumeClaim>>,
    first_ordinal: usize,
}

impl<'o> Shape<'o> {
    /// An `apps/v1` workload without volume claim templates.
    fn apps(
        kind: &'static str,
        meta: &'o ObjectMeta,
        replicas: usize,
        template: &'o PodTemplateSpec,
    ) -> Self {
        Self {
            kind,
            api_version: "apps/v1",
            meta,
            replicas,
            template,
            claims: None,
            first_ordinal: 0,
        }
    }
}

/// The workload `decoded` describes, if it is one. Negative counts are errors naming the field.
pub(crate) fn workload(decoded: &Decoded) -> Result<Option<Workload>, PlanError> {
    let Some(shape) = shape(decoded)? else {
        return Ok(None);
    };
    let meta = shape.meta;
    Ok(Some(Workload {
        decoded: decoded.clone(),
        kind: shape.kind,
        api_version: shape.api_version,
        namespace: meta
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string()),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        owner: controller_reference(meta),
        replicas: shape.replicas,
        template: shape.template.clone(),
        claim_templates: shape.claims.cloned().unwrap_or_default(),
        first_ordinal: shape.first_ordinal,
    }))
}

/// The shape of the workload kinds that have one.
fn shape(decoded: &Decoded) -> Result<Option<Shape<'_>>, PlanError> {
    let count = |field: &str, value: Option<i32>, default: i32| -> Result<usize, PlanError> {
        let value = value.unwrap_or(default);
        usize::try_from(value).map_err(|_| {
            field_error(
                &decoded.at,
                &decoded.object_ref,
                field,
                format!("Invalid value: {value}: must be greater than or equal to 0"),
            )
        })
    };
    let missing_spec = || {
        field_error(
            &decoded.at,
            &decoded.object_ref,
            "spec",
            "Required value: a workload needs a spec with a pod template",
        )
    };
    let shape = match &decoded.object {
        Object::Deployment(d) => {
            let spec = d.spec.as_ref().ok_or_else(missing_spec)?;
            let replicas = count("spec.replicas", spec.replicas, 1)?;
            Shape::apps("Deployment", &d.metadata, replicas, &spec.template)
        }
        Object::ReplicaSet(r) => {
            let spec = r.spec.as_ref().ok_or_else(missing_spec)?;
            let replicas = count("spec.replicas", spec.replicas, 1)?;
            let template = spec.template.as_ref().ok_or_else(missing_spec)?;
            Shape::apps("ReplicaSet", &r.metadata, replicas, template)
        }
        Object::StatefulSet(s) => {
            let spec = s.spec.as_ref().ok_or_else(missing_spec)?;
            let replicas = count("spec.replicas", spec.replicas, 1)?;
            let start = spec.ordinals.as_ref().and_then(|o| o.start);
            Shape {
                first_ordinal: count("spec.ordinals.start", start, 0)?,
                claims: spec.volume_claim_templates.as_ref(),
                ..Shape::apps("StatefulSet", &s.metadata, replicas, &spec.template)
            }
        }
        Object::Job(j) => {
            let spec = j.spec.as_ref().ok_or_else(missing_spec)?;
            let parallelism = count("spec.parallelism", spec.parallelism, 1)?;
            let completions = match spec.completions {
                Some(c) => count("spec.completions", Some(c), 1)?,
                None => usize::MAX,
            };
            // The job controller runs at most `parallelism` pods, never more than the
            // completions still needed, and none while the Job is suspended.
            let active = if spec.suspend == Some(true) {
                0
            } else {
                parallelism.min(completions)
            };
            Shape {
                api_version: "batch/v1",
                ..Shape::apps("Job", &j.metadata, active, &spec.template)
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(shape))
}

fn controller_reference(meta: &ObjectMeta) -> Option<(String, String)> {
    meta.owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| (o.kind.clone(), o.name.clone()))
}

/// `(namespace, kind, name)` of a workload.
type WorkloadKey = (String, String, String);

/// The pods `workloads` still need, given the live `pods` already in the input.
pub(crate) fn expand(workloads: &[Workload], pods: &[PodSource]) -> Vec<PodSource> {
    let key = |w: &Workload| (w.namespace.clone(), w.kind.to_string(), w.name.clone());
    let present: BTreeSet<WorkloadKey> = workloads.iter().map(key).collect();
    // ReplicaSets standing in for a Deployment of the input: (namespace, name) -> Deployment.
    let delegated: BTreeMap<(String, String), String> = workloads
        .iter()
        .filter(|w| w.kind == "ReplicaSet")
        .filter_map(|w| {
            let (kind, owner) = w.owner.as_ref()?;
            let deployment = (w.namespace.clone(), kind.clone(), owner.clone());
            (kind == "Deployment" && present.contains(&deployment))
                .then(|| ((w.namespace.clone(), w.name.clone()), owner.clone()))
        })
        .collect();
    let mut running: BTreeMap<WorkloadKey, usize> = BTreeMap::new();
    for pod in pods.iter().filter(|p| !p.is_terminal()) {
        let Some((kind, owner)) = pod.controller() else {
            continue;
        };
        let ns = namespace(&pod.pod).to_string();
        let owner_key = match deployment_of(kind, owner, &ns, &delegated, &present) {
            Some(deployment) => (ns, "Deployment".to_string(), deployment),
            None => (ns, kind.to_string(), owner.to_string()),
        };
        *running.entry(owner_key).or_default() += 1;
    }
    let mut taken: BTreeSet<(String, String)> = pods
        .iter()
        .map(|p| (namespace(&p.pod).to_string(), name(&p.pod).to_string()))
        .collect();
    let mut out = Vec::new();
    for w in workloads {
        if w.kind == "ReplicaSet" && delegated.contains_key(&(w.namespace.clone(), w.name.clone()))
        {
            continue;
        }
        let missing = w
            .replicas
            .saturating_sub(running.get(&key(w)).copied().unwrap_or(0));
        let mut ordinal = w.first_ordinal;
        for _ in 0..missing {
            while taken.contains(&(w.namespace.clone(), format!("{}-{ordinal}", w.name))) {
                ordinal += 1;
            }
            let pod_name = format!("{}-{ordinal}", w.name);
            taken.insert((w.namespace.clone(), pod_name.clone()));
            out.push(replica(w, &pod_name, ordinal));
            ordinal += 1;
        }
    }
    out
}

/// The Deployment of the input a pod controlled by `kind`/`owner` belongs to: through a ReplicaSet
/// of the input, or, when the dump left ReplicaSets out, through the ReplicaSet's name, which the
/// Deployment controller always makes `<deployment>-<pod-template-hash>` (a hash has no `-`).
fn deployment_of(
    kind: &str,
    owner: &str,
    namespace: &str,
    delegated: &BTreeMap<(String, String), String>,
    present: &BTreeSet<WorkloadKey>,
) -> Option<String> {
    if kind != "ReplicaSet" {
        return None;
    }
    if let Some(deployment) = delegated.get(&(namespace.to_string(), owner.to_string())) {
        return Some(deployment.clone());
    }
    let replica_set = (namespace.to_string(), kind.to_string(), owner.to_string());
    if present.contains(&replica_set) {
        return None;
    }
    let (deployment, _hash) = owner.rsplit_once('-')?;
    let key = (
        namespace.to_string(),
        "Deployment".to_string(),
        deployment.to_string(),
    );
    present.contains(&key).then(|| deployment.to_string())
}

/// One replica of `w`, as its controller would create it.
fn replica(w: &Workload, pod_name: &str, ordinal: usize) -> PodSource {
    let mut pod = pod_from_template(
        &w.template,
        &w.namespace,
        pod_name,
        OwnerReference {
            api_version: w.api_version.to_string(),
            kind: w.kind.to_string(),
            name: w.name.clone(),
            uid: w.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        },
    );
    // The StatefulSet controller mounts claim `<template>-<set>-<ordinal>` as volume `<template>`
    // and creates the claim from the template when it does not exist.
    let mut claim_templates = BTreeMap::new();
    for template in &w.claim_templates {
        let volume = template.metadata.name.clone().unwrap_or_default();
        let claim = format!("{volume}-{}-{ordinal}", w.name);
        let spec = pod.spec.get_or_insert_with(Default::default);
        let volumes = spec.volumes.get_or_insert_with(Vec::new);
        volumes.retain(|v| v.name != volume);
        volumes.push(Volume {
            name: volume,
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.clone(),
                read_only: None,
            }),
            ..Default::default()
        });
        claim_templates.insert(claim, template.spec.clone().unwrap_or_default());
    }
    PodSource {
        pod,
        at: w.decoded.at.clone(),
        origin: w.decoded.object_ref.clone(),
        spec_path: "spec.template.spec",
        claim_templates,
    }
}

/// The DaemonSet's pod template as the daemon overhead the scheduler adds to every node it fits.
pub(crate) fn daemon_template(decoded: &Decoded, daemonset: &DaemonSet) -> Option<PodSource> {
    let spec = daemonset.spec.as_ref()?;
    let meta = &daemonset.metadata;
    let namespace = meta
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_string());
    let name = meta.name.clone().unwrap_or_default();
    let pod = pod_from_template(
        &spec.template,
        &namespace,
        &name,
        OwnerReference {
            api_version: "apps/v1".to_string(),
            kind: "DaemonSet".to_string(),
            name: name.clone(),
            uid: meta.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        },
    );
    Some(PodSource {
        pod,
        at: decoded.at.clone(),
        origin: decoded.object_ref.clone(),
        spec_path: "spec.template.spec",
        claim_templates: BTreeMap::new(),
    })
}

fn pod_from_template(
    template: &PodTemplateSpec,
    namespace: &str,
    name: &str,
    owner: OwnerReference,
) -> Pod {
    let mut meta = template.metadata.clone().unwrap_or_default();
    meta.name = Some(name.to_string());
    meta.generate_name = None;
    meta.namespace = Some(namespace.to_string());
    meta.uid = Some(format!("{namespace}/{name}"));
    meta.owner_references = Some(vec![owner]);
    Pod {
        metadata: meta,
        spec: template.spec.clone(),
        status: None,
    }
}

/// Whether `pod` belongs to a DaemonSet: its controller places it, Karpenter never provisions
/// for it.
pub(crate) fn daemonset_owned(pod: &Pod) -> bool {
    controller_of(pod).is_some_and(|(kind, _)| kind == "DaemonSet")
}
