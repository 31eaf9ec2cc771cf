//! The Deployment controller stand-in of `karpenter-sim serve`: `apps/v1` Deployments applied
//! with kubectl are kept at their replica count by the simulation's ReplicaSet stand-in
//! ([`crate::workloads::Deployment`]), their status (replicas, readyReplicas, the `Available`
//! condition that `kubectl wait` and `kubectl rollout status` read) is written back, and the
//! pods of a deleted Deployment are deleted (the garbage collector's part).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use jiff::Timestamp;
use karpenter_core::seams::kube::{DeleteOptions, ListOptions, ObjectKey, Patch, ResourceKind};
use karpenter_core::seams::{KubeApi, KubeError};
use karpenter_core::state::Reflector;
use serde_json::{Value, json};

use crate::workloads::Deployment;

/// `apps/v1` Deployments (the seam names only the kinds the controller reads).
pub const DEPLOYMENT: ResourceKind = ResourceKind {
    group: "apps",
    version: "v1",
    kind: "Deployment",
    plural: "deployments",
    namespaced: true,
};

/// The stand-in's memory: each Deployment's ReplicaSet state, by (namespace, name), and a
/// watch-fed cache of the pods (a list per pass copied all 20,000 pods of `fleet-2000`).
pub struct Deployments {
    known: BTreeMap<(String, String), Deployment>,
    pods: Reflector<Value>,
}

impl Default for Deployments {
    fn default() -> Self {
        Self {
            known: BTreeMap::new(),
            pods: Reflector::new(ResourceKind::POD),
        }
    }
}

impl Deployments {
    /// One pass over every Deployment; returns (pods created, pods deleted).
    pub async fn reconcile(
        &mut self,
        api: &dyn KubeApi,
        now: Timestamp,
    ) -> Result<(usize, usize), KubeError> {
        let all = ListOptions::default();
        let deployments = api.list(&DEPLOYMENT, &all).await?.items;
        self.pods.sync(api).await?;
        let pods = self.pods.to_vec();
        let (mut created, mut deleted) = (0, 0);
        let mut seen = BTreeSet::new();
        for object in &deployments {
            let Ok(wanted) = Deployment::from_manifest(object) else {
                continue;
            };
            let key = (wanted.namespace.clone(), wanted.name.clone());
            seen.insert(key.clone());
            let deployment = self.known.entry(key).or_insert_with(|| wanted.clone());
            deployment.replicas = wanted.replicas;
            deployment.set_template(wanted.template.clone());
            let (c, d) = deployment.reconcile(api, &pods).await?;
            created += c;
            deleted += d;
            write_status(api, object, deployment, &pods, now).await?;
        }
        let gone: Vec<_> = self
            .known
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            if let Some(deployment) = self.known.remove(&key) {
                let owner = deployment.owner();
                for pod in pods.iter().filter(|p| owner.owns(p)) {
                    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
                    api.delete(
                        &ResourceKind::POD,
                        &ObjectKey::namespaced(key.0.clone(), name),
                        &DeleteOptions::default(),
                    )
                    .await?;
                    deleted += 1;
                }
            }
        }
        Ok((created, deleted))
    }
}

fn is_ready(pod: &Value) -> bool {
    pod["status"]["phase"] == "Running"
        && pod["status"]["conditions"].as_array().is_none_or(|c| {
            !c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] != "True")
        })
}

/// Writes the Deployment's status when its counts or conditions changed.
async fn write_status(
    api: &dyn KubeApi,
    object: &Value,
    deployment: &Deployment,
    pods: &[Arc<Value>],
    now: Timestamp,
) -> Result<(), KubeError> {
    let owner = deployment.owner();
    let owned: Vec<&Arc<Value>> = pods
        .iter()
        .filter(|p| owner.owns(p) && p["metadata"]["deletionTimestamp"].is_null())
        .collect();
    let ready = owned.iter().filter(|p| is_ready(p)).count();
    let available = ready >= deployment.replicas;
    let condition = |type_: &str, ok: bool, reason: &str| {
        let old = object["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == type_).cloned());
        let status = if ok { "True" } else { "False" };
        let since = match &old {
            Some(old) if old["status"] == status => old["lastTransitionTime"].clone(),
            _ => json!(now.to_string()),
        };
        json!({"type": type_, "status": status, "reason": reason,
            "lastTransitionTime": since, "lastUpdateTime": since})
    };
    let status = json!({
        "observedGeneration": object["metadata"]["generation"],
        "replicas": owned.len(),
        "updatedReplicas": owned.len(),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "conditions": [
            condition("Available", available,
                if available { "MinimumReplicasAvailable" } else { "MinimumReplicasUnavailable" }),
            condition("Progressing", true, "NewReplicaSetAvailable"),
        ],
    });
    if object["status"] == status {
        return Ok(());
    }
    let key = ObjectKey::namespaced(deployment.namespace.clone(), deployment.name.clone());
    let patch = Patch::Merge(json!({"status": status}));
    match api.patch_status(&DEPLOYMENT, &key, &patch).await {
        // Deleted or changed since the list: the next pass sees it as it is.
        Ok(_) | Err(KubeError::NotFound(_) | KubeError::Conflict(_)) => Ok(()),
        Err(e) => Err(e),
    }
}
