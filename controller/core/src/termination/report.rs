//! What termination tells people: NodeClaim conditions (written only on change) and events on
//! the node or the claim (events on pods are recorded where they are evicted).

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
        event: Option<(EventType, &str)>,
    ) -> Result<bool, KubeError> {
        let now = self.ctx.now();
        if !conditions::set(conds, type_, status, reason, message, None, now) {
            return Ok(false);
        }
        // The whole list is written: conditional on the version it was computed from.
        let version = self.version(&ResourceKind::NODE_CLAIM, &claim.metadata);
        let written = self
            .ctx
            .kube
            .patch_status(
                &ResourceKind::NODE_CLAIM,
                &ObjectKey::cluster(claim.name_any()),
                &Patch::Merge(json!({
                    "metadata": {"resourceVersion": version},
                    "status": {"conditions": conds},
                })),
            )
            .await;
        match self.wrote(&ResourceKind::NODE_CLAIM, &claim.name_any(), written) {
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
        type_: EventType,
        reason: &str,
        message: String,
    ) {
        let regarding = match node {
            Some(node) => Reference::node(node),
            None => Reference::claim(claim),
        };
        self.ctx
            .recorder
            .publish(regarding, type_, reason, message)
            .await
    }
}
