//! What termination tells people: NodeClaim conditions (written only on change) and events on
//! the node, the claim and pods.

use super::*;

impl Termination {
    /// Sets one condition on the local list and writes the list when it changed; `event` is
    /// recorded on the node (or the claim) only then, so a wait produces one event per change,
    /// not one per step. Returns whether it changed.
    pub(super) async fn set_condition(
        &self,
        claim: &NodeClaim,
        node: Option<&Node>,
        conds: &mut Vec<Condition>,
        (type_, status, reason, message): (&str, ConditionStatus, &str, &str),
        event: Option<(&'static str, &str)>,
    ) -> Result<bool, KubeError> {
        let now = self.clock.now();
        if !conditions::set(conds, type_, status, reason, message, None, now) {
            return Ok(false);
        }
        match self
            .kube
            .patch_status(
                &ResourceKind::NODE_CLAIM,
                &ObjectKey::cluster(claim.metadata.name.clone().unwrap_or_default()),
                &Patch::Merge(json!({"status": {"conditions": conds}})),
            )
            .await
        {
            Ok(_) | Err(KubeError::NotFound(_)) => {}
            Err(err) => return Err(err),
        }
        if let Some((type_, reason)) = event {
            self.event(claim, node, type_, reason, message.to_string())
                .await;
        }
        Ok(true)
    }

    /// An event on the node when there is one, else on the claim. Best effort.
    pub(super) async fn event(
        &self,
        claim: &NodeClaim,
        node: Option<&Node>,
        type_: &'static str,
        reason: &str,
        message: String,
    ) {
        match node {
            Some(node) => self.event_on_node(node, type_, reason, message).await,
            None => {
                self.record(EventRecord {
                    involved: ResourceKind::NODE_CLAIM,
                    key: ObjectKey::cluster(claim.metadata.name.clone().unwrap_or_default()),
                    uid: claim.metadata.uid.clone(),
                    type_,
                    reason: reason.to_string(),
                    message,
                })
                .await
            }
        }
    }

    pub(super) async fn event_on_node(
        &self,
        node: &Node,
        type_: &'static str,
        reason: &str,
        message: String,
    ) {
        self.record(EventRecord {
            involved: ResourceKind::NODE,
            key: ObjectKey::cluster(node.metadata.name.clone().unwrap_or_default()),
            uid: node.metadata.uid.clone(),
            type_,
            reason: reason.to_string(),
            message,
        })
        .await
    }

    pub(super) async fn pod_event(
        &self,
        key: &ObjectKey,
        uid: &str,
        type_: &'static str,
        reason: &str,
        message: String,
    ) {
        self.record(EventRecord {
            involved: ResourceKind::POD,
            key: key.clone(),
            uid: Some(uid.to_string()),
            type_,
            reason: reason.to_string(),
            message,
        })
        .await
    }

    pub(super) async fn record(&self, event: EventRecord) {
        if let Err(err) = self.kube.record_event(&event).await {
            tracing::debug!(%err, reason = %event.reason, "event not recorded");
        }
    }
}
