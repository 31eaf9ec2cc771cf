//! The StatefulSet stand-in: pods `<set>-<ordinal>` with stable names, each with its own
//! PersistentVolumeClaim `data-<set>-<ordinal>` made from the set's claim template before the pod
//! (as the StatefulSet controller makes them). A deleted or lost pod comes back under the same
//! name; scaling down deletes the highest ordinals and keeps their claims (the default
//! `persistentVolumeClaimRetentionPolicy`, `Retain`), so a pod scaled back up finds its volume,
//! and with it its zone.

use std::borrow::Borrow;

use karpenter_core::seams::kube::{DeleteOptions, ObjectKey, ResourceKind};
use karpenter_core::seams::{KubeApi, KubeError};
use serde_json::{Value, json};

/// A StatefulSet the scenario created: `replicas` pods of one container requesting `cpu` and
/// `memory`, each mounting a claim of `storage` from StorageClass `storage_class`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatefulSet {
    pub name: String,
    pub namespace: String,
    pub replicas: usize,
    pub cpu: String,
    pub memory: String,
    pub storage: String,
    pub storage_class: String,
    /// Its pods spread over zones (`maxSkew: 1`, `DoNotSchedule`).
    pub spread_by_zone: bool,
    /// The zone spread's `minDomains`, if any.
    pub min_domains: Option<u32>,
    /// Its pods' `nodeSelector`.
    pub node_selector: std::collections::BTreeMap<String, String>,
}

impl StatefulSet {
    /// The claim of ordinal `i` (`<template>-<set>-<ordinal>`, the template being `data`).
    pub fn claim_name(&self, i: usize) -> String {
        format!("data-{}-{i}", self.name)
    }

    fn pod_name(&self, i: usize) -> String {
        format!("{}-{i}", self.name)
    }

    /// Whether `pod` is one of this set's.
    pub fn owns(&self, pod: &Value) -> bool {
        pod["metadata"]["namespace"] == json!(self.namespace)
            && pod["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|refs| {
                    refs.iter().any(|r| {
                        r["kind"] == "StatefulSet"
                            && r["controller"] == true
                            && r["name"] == json!(self.name)
                    })
                })
    }

    fn claim(&self, i: usize) -> Value {
        json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": self.claim_name(i), "namespace": self.namespace,
                         "labels": {"app": self.name}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": self.storage_class,
                     "resources": {"requests": {"storage": self.storage}}}
        })
    }

    fn pod(&self, i: usize) -> Value {
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": self.pod_name(i), "namespace": self.namespace,
                "labels": {"app": self.name, "statefulset.kubernetes.io/pod-name": self.pod_name(i)},
                "ownerReferences": [{
                    "apiVersion": "apps/v1", "kind": "StatefulSet", "name": self.name,
                    "uid": format!("uid-sts-{}", self.name), "controller": true,
                    "blockOwnerDeletion": true
                }]
            },
            "spec": {
                "containers": [{"name": "app", "image": "registry.example/db:1",
                                "resources": {"requests": {"cpu": self.cpu, "memory": self.memory}},
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": self.claim_name(i)}}]
            },
            "status": {"phase": "Pending"}
        });
        if self.spread_by_zone {
            let mut spread = json!({
                "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": self.name}}
            });
            if let Some(min_domains) = self.min_domains {
                spread["minDomains"] = json!(min_domains);
            }
            pod["spec"]["topologySpreadConstraints"] = json!([spread]);
        }
        if !self.node_selector.is_empty() {
            pod["spec"]["nodeSelector"] = json!(self.node_selector);
        }
        pod
    }

    /// One pass of the StatefulSet controller: for every ordinal below `replicas`, its claim
    /// (created if missing) and its pod (created if missing; a finished pod is deleted so it can
    /// come back); pods at or above `replicas` are deleted, their claims kept. `claims` are the
    /// namespace's claim names. Returns how many pods it created and deleted.
    pub async fn reconcile(
        &self,
        kube: &dyn KubeApi,
        pods: &[impl Borrow<Value>],
        claims: &[String],
    ) -> Result<(usize, usize), KubeError> {
        let mine: Vec<&Value> = pods
            .iter()
            .map(Borrow::borrow)
            .filter(|p| self.owns(p))
            .collect();
        let (mut created, mut deleted) = (0, 0);
        for i in 0..self.replicas {
            if !claims.contains(&self.claim_name(i)) {
                kube.create(&ResourceKind::PERSISTENT_VOLUME_CLAIM, self.claim(i))
                    .await?;
            }
            let name = self.pod_name(i);
            match mine.iter().find(|p| p["metadata"]["name"] == json!(name)) {
                None => {
                    kube.create(&ResourceKind::POD, self.pod(i)).await?;
                    created += 1;
                }
                Some(pod)
                    if pod["metadata"]["deletionTimestamp"].is_null()
                        && matches!(
                            pod["status"]["phase"].as_str(),
                            Some("Succeeded" | "Failed")
                        ) =>
                {
                    self.delete(kube, &name).await?;
                    deleted += 1;
                }
                Some(_) => {}
            }
        }
        for pod in &mine {
            let name = pod["metadata"]["name"].as_str().unwrap_or_default();
            let ordinal = name
                .rsplit('-')
                .next()
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            if ordinal >= self.replicas && pod["metadata"]["deletionTimestamp"].is_null() {
                self.delete(kube, name).await?;
                deleted += 1;
            }
        }
        Ok((created, deleted))
    }

    async fn delete(&self, kube: &dyn KubeApi, name: &str) -> Result<(), KubeError> {
        match kube
            .delete(
                &ResourceKind::POD,
                &ObjectKey::namespaced(self.namespace.clone(), name),
                &DeleteOptions::default(),
            )
            .await
        {
            Ok(_) | Err(KubeError::NotFound(_)) => Ok(()),
            Err(err) => Err(err),
        }
    }
}
