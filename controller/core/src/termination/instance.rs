//! The instance and the finalizers: terminate until EC2 reports the instance gone (allowing for
//! EC2's eventual consistency), then drop the finalizer from the Node and the NodeClaim.

use super::*;
use crate::metrics::CloudMethod;

/// The `controller` label of termination's cloud-provider calls (upstream's
/// `node.termination`, which terminates instances and checks they are gone).
pub(super) const TERMINATION_CONTROLLER: &str = "node.termination";

impl Termination {
    /// Whether EC2 says the instance is gone (terminated or shutting down, or absent after the
    /// consistency window): the NotReady shortcut's test.
    pub(super) fn instance_gone_for_good(&self, id: &str, claim: &NodeClaim, view: &View) -> bool {
        let Ok(instances) = &view.instances else {
            return false;
        };
        match instances.get(id) {
            Some(InstanceState::Terminated | InstanceState::ShuttingDown) => true,
            Some(_) => false,
            None => self.outside_consistency_window(claim),
        }
    }

    pub(super) fn outside_consistency_window(&self, claim: &NodeClaim) -> bool {
        let launched = claim
            .status
            .as_ref()
            .and_then(|s| conditions::get(&s.conditions, cond::LAUNCHED))
            .map(|c| c.last_transition_time.0);
        launched.is_none_or(|t| {
            self.ctx.now().duration_since(t).unsigned_abs() >= EC2_CONSISTENCY_WINDOW
        })
    }

    /// Terminates the instance until EC2 reports it terminated; true once it has. Idempotent:
    /// called every step until then.
    pub(super) async fn ensure_terminated(
        &self,
        id: &str,
        claim: &NodeClaim,
        view: &View,
    ) -> Result<bool, Ec2Error> {
        let instances = view.instances.as_ref().map_err(Clone::clone)?;
        let ids = [id.to_string()];
        match instances.get(id) {
            Some(InstanceState::Terminated) => Ok(true),
            Some(InstanceState::ShuttingDown) => Ok(false),
            Some(_) => {
                self.terminate(&ids).await?;
                Ok(false)
            }
            // Not visible: just launched (EC2 is eventually consistent) or long forgotten.
            None => match self.terminate(&ids).await {
                Ok(known) if known.iter().any(|k| k == id) => Ok(false),
                Ok(_) | Err(Ec2Error::NotFound { .. }) => {
                    Ok(self.outside_consistency_window(claim))
                }
                Err(err) => Err(err),
            },
        }
    }

    /// Upstream's `Delete`: one TerminateInstances, timed and its error counted (an instance
    /// EC2 no longer knows is `NodeClaimNotFoundError`, as upstream's Delete answers).
    async fn terminate(&self, ids: &[String]) -> Result<Vec<String>, Ec2Error> {
        let call = self.ctx.ec2.terminate_instances(ids);
        let metrics = &self.ctx.metrics;
        metrics
            .cloud_call(TERMINATION_CONTROLLER, CloudMethod::Delete, call)
            .await
    }

    pub(super) async fn remove_node_finalizer(
        &self,
        node: &Node,
        nodepool: &str,
        started: Timestamp,
        now: Timestamp,
    ) -> Result<(), KubeError> {
        if !has_finalizer(node.finalizers()) {
            return Ok(());
        }
        if self
            .drop_finalizer(&ResourceKind::NODE, &node.metadata)
            .await?
        {
            let labels = Metrics::nodepool(nodepool);
            let metrics = &self.ctx.metrics;
            metrics.nodes_terminated.get_or_create(&labels).inc();
            metrics
                .nodes_termination_duration
                .get_or_create(&labels)
                .observe(now.duration_since(started).as_secs_f64().max(0.0));
            if let Some(created) = node.metadata.creation_timestamp.as_ref() {
                metrics
                    .nodes_lifetime_duration
                    .get_or_create(&labels)
                    .observe(now.duration_since(created.0).as_secs_f64().max(0.0));
            }
        }
        Ok(())
    }

    /// Removes `karpenter.sh/termination` from a Node's or NodeClaim's finalizers. Returns
    /// whether this write removed it (`false` when the object is already gone).
    pub(super) async fn drop_finalizer(
        &self,
        kind: &ResourceKind,
        metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) -> Result<bool, KubeError> {
        let finalizers: Vec<&String> = metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != TERMINATION_FINALIZER)
            .collect();
        // Conditional on the version read: another controller's finalizer added meanwhile is a
        // conflict and a retry, not lost.
        let name = metadata.name.clone().unwrap_or_default();
        let version = self.version(kind, metadata);
        let written = self
            .ctx
            .kube
            .patch(
                kind,
                &ObjectKey::cluster(name.clone()),
                &Patch::Merge(
                    json!({"metadata": {"finalizers": finalizers, "resourceVersion": version}}),
                ),
            )
            .await;
        match self.wrote(kind, &name, written) {
            Ok(_) => Ok(true),
            Err(KubeError::NotFound(_)) => Ok(false),
            Err(err) => Err(err),
        }
    }
}
