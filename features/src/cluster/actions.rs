//! What `When` steps do to the running cluster, as a user or AWS would (create, scale, apply,
//! delete, patch, terminate, empty a pool), and which node they single out for later steps.

use fakecloud::Pool;
use fakekube::ApiServer;
use karpenter_core::seams::ec2::Instance;
use karpenter_core::seams::kube::{DeleteOptions, DeleteOutcome, ObjectKey, Patch, ResourceKind};
use karpenter_core::seams::{Ec2, KubeApi, KubeError};
use karpenter_sim::workloads::{DaemonSet, Deployment};
use serde_json::Value;
use std::collections::BTreeMap;

use super::{SimWorld, Subject};

impl SimWorld {
    /// Marks "now" for [`SimWorld::launched_since_mark`]: every action step calls it.
    pub fn mark(&mut self) {
        self.track_instances();
        self.baseline = self.launch_order.len();
    }

    /// Every instance ever launched, in launch order.
    pub fn launched(&mut self) -> Vec<Instance> {
        self.track_instances();
        self.launch_order
            .iter()
            .filter_map(|id| self.launched.get(id).cloned())
            .collect()
    }

    /// Instances launched since the last action step.
    pub fn launched_since_mark(&mut self) -> Vec<Instance> {
        self.track_instances();
        self.launch_order[self.baseline.min(self.launch_order.len())..]
            .iter()
            .filter_map(|id| self.launched.get(id).cloned())
            .collect()
    }

    /// Ids of the instances launched before the last action step (what a change drifts).
    pub fn launched_before_mark(&mut self) -> std::collections::BTreeSet<String> {
        self.track_instances();
        self.launch_order[..self.baseline.min(self.launch_order.len())]
            .iter()
            .cloned()
            .collect()
    }

    /// Creates a Deployment: its pods exist when this returns.
    pub async fn create_deployment(&mut self, deployment: Deployment) {
        self.world().await;
        self.mark();
        if self.deployments.contains_key(&deployment.name) {
            self.fail(format!("Deployment {} exists already", deployment.name));
        }
        self.deployments.insert(deployment.name.clone(), deployment);
        self.run_deployments().await;
    }

    /// The Deployment `name`, which a step created earlier.
    pub fn deployment(&mut self, name: &str) -> &mut Deployment {
        if !self.deployments.contains_key(name) {
            self.fail(format!("no Deployment {name} was created"));
        }
        match self.deployments.get_mut(name) {
            Some(deployment) => deployment,
            None => unreachable!("checked above"),
        }
    }

    /// Sets a Deployment's replica count; pods are added or removed at once.
    pub async fn scale(&mut self, name: &str, replicas: usize) {
        self.world().await;
        self.mark();
        self.deployment(name).replicas = replicas;
        self.run_deployments().await;
    }

    /// Deletes a Deployment and its pods.
    pub async fn delete_deployment(&mut self, name: &str) {
        self.scale(name, 0).await;
        self.deployments.remove(name);
    }

    /// Applies one manifest to the running cluster, as `kubectl apply` of a new object would:
    /// a Karpenter object is validated first (an invalid one fails the step, as the API server
    /// would refuse it), a Deployment starts its pods, anything else the API server stores is
    /// created (a PodDisruptionBudget, a Namespace, a DaemonSet, ...).
    pub async fn apply(&mut self, document: Value) {
        let checked = karpenter_core::manifest::check_document(&document);
        if let karpenter_core::manifest::Outcome::Invalid(violations) = &checked.outcome {
            self.fail(format!(
                "{}/{} is invalid: {violations}",
                checked.kind, checked.name
            ));
        }
        if checked.kind == "Deployment" {
            let deployment = Deployment::from_manifest(&document).unwrap_or_else(|e| self.fail(e));
            return self.create_deployment(deployment).await;
        }
        // A DaemonSet is stored (the provisioner reserves room for its pods) and run.
        let daemonset = (checked.kind == "DaemonSet")
            .then(|| DaemonSet::from_manifest(&document).unwrap_or_else(|e| self.fail(e)));
        let kind = match checked.kind.as_str() {
            "NodePool" => ResourceKind::NODE_POOL,
            "EC2NodeClass" => ResourceKind::EC2_NODE_CLASS,
            "Namespace" => ResourceKind::NAMESPACE,
            "PodDisruptionBudget" => ResourceKind::POD_DISRUPTION_BUDGET,
            "DaemonSet" => ResourceKind::DAEMON_SET,
            "PersistentVolumeClaim" => ResourceKind::PERSISTENT_VOLUME_CLAIM,
            "PersistentVolume" => ResourceKind::PERSISTENT_VOLUME,
            "StorageClass" => ResourceKind::STORAGE_CLASS,
            other => self.fail(format!("applying a {other} is not supported")),
        };
        self.world().await;
        self.mark();
        let mut document = document;
        if kind.namespaced && document["metadata"]["namespace"].is_null() {
            document["metadata"]["namespace"] = Value::from("default");
        }
        let result = match self.world.as_ref() {
            Some(world) => {
                let create = async |api: &ApiServer| api.create(&kind, document).await;
                world.api().without_faults(create).await
            }
            None => unreachable!("built above"),
        };
        if let Err(err) = result {
            self.fail(format!(
                "the API server refused {}/{}: {err}",
                checked.kind, checked.name
            ));
        }
        if let Some(daemonset) = daemonset {
            self.daemonsets.insert(daemonset.name.clone(), daemonset);
            self.run_deployments().await;
        }
    }

    /// Deletes an object as a user would (`kubectl delete`), with the API server's injected
    /// faults switched off (they are for the controller).
    pub async fn delete_object(
        &mut self,
        kind: &ResourceKind,
        key: &ObjectKey,
    ) -> Result<DeleteOutcome, KubeError> {
        self.world().await;
        self.mark();
        let world = self.built();
        let delete = async |api: &ApiServer| api.delete(kind, key, &DeleteOptions::default()).await;
        let result = world.api().without_faults(delete).await;
        self.observe_now();
        result
    }

    /// Patches an object as a user would (`kubectl annotate`, `kubectl label`), with the API
    /// server's injected faults switched off.
    pub async fn patch_object(
        &mut self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<Value, KubeError> {
        self.world().await;
        self.mark();
        let world = self.built();
        let result = world
            .api()
            .without_faults(async |api: &ApiServer| api.patch(kind, key, patch).await)
            .await;
        self.observe_now();
        result.map(std::sync::Arc::unwrap_or_clone)
    }

    /// Terminates an instance through the EC2 API as a user would (the console, a script), with
    /// fakecloud's standing fault rates switched off (they are for the controller). EC2 sends the
    /// state changes to the interruption queue as it would for any termination.
    pub async fn terminate_instance(&mut self, instance_id: &str) -> Result<Vec<String>, String> {
        self.world().await;
        self.mark();
        if let Some(world) = self.world.as_mut() {
            world.note_external_termination(instance_id);
        }
        let world = self.built();
        let mut saved = BTreeMap::new();
        world
            .cloud()
            .configure(|c| saved = std::mem::take(&mut c.faults));
        let result = world
            .cloud()
            .terminate_instances(&[instance_id.to_string()])
            .await;
        world.cloud().configure(|c| c.faults = saved);
        self.observe_now();
        result.map_err(|e| e.to_string())
    }

    /// Singles out the one node the pods of `deployment` run on, with its NodeClaim and
    /// instance, for "that node" steps. Fails if its pods are spread over several nodes or none:
    /// a step about "the node running X" must not pick one silently.
    pub async fn single_out(&mut self, deployment: &str) -> Subject {
        let snapshot = self.snapshot().await;
        let nodes = snapshot.nodes_of(deployment);
        let [node] = nodes.as_slice() else {
            let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
            self.fail(format!(
                "the pods of {deployment} run on {} nodes ({names:?}), want exactly one",
                names.len()
            ));
        };
        let Some(claim) = snapshot
            .claims
            .iter()
            .find(|c| c.node_name.as_deref() == Some(node.name.as_str()))
        else {
            self.fail(format!("node {} has no NodeClaim", node.name));
        };
        let Some(instance_id) = node.instance_id.clone() else {
            self.fail(format!("node {} has no provider id", node.name));
        };
        let subject = Subject {
            node: node.name.clone(),
            claim: claim.name.clone(),
            instance_id,
            at: self.now(),
        };
        self.subject = Some(subject.clone());
        subject
    }

    /// The node a step singled out earlier.
    pub fn subject(&self) -> Subject {
        match &self.subject {
            Some(subject) => subject.clone(),
            None => self.fail(
                "no node was singled out: say which one first (e.g. \"the NodeClaim of the node running ...\")",
            ),
        }
    }

    /// Sets the free capacity of one pool now (a capacity wave mid-scenario).
    pub async fn set_pool_capacity(&mut self, pool: Pool, units: u32) {
        self.mark();
        let world = self.world().await;
        if !world.cloud().set_pool_capacity(&pool, units) {
            self.fail(format!("the cloud offers no pool {pool}"));
        }
    }
}
