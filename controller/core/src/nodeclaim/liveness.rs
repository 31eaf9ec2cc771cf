//! The liveness phase: a launched claim whose node has not registered within the registration
//! timeout is deleted (its instance never joined; termination cleans up and provisioning plans
//! again).

use super::{Flow, Lifecycle, Step, condition_true};
use kube_core::ResourceExt;

use crate::api::NodeClaim;
use crate::api::conditions::nodeclaim as cond;
use crate::api::labels::NODEPOOL_LABEL;
use crate::seams::kube::KubeError;

impl Lifecycle {
    /// [`super::Phase::Liveness`]: a registered claim goes on; an unregistered one (its node has
    /// not joined: registration let it through) waits, or is deleted once it timed out.
    pub(super) async fn liveness_phase(&self, claim: &NodeClaim) -> Result<Flow, KubeError> {
        if condition_true(claim, cond::REGISTERED) {
            return Ok(Flow::Continue);
        }
        let now = self.ctx.now();
        let created = claim
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(now, |t| t.0);
        let timeout = self.ctx.options.lifecycle.registration_timeout;
        if now.duration_since(created).unsigned_abs() < timeout {
            return Ok(Flow::Done(Step::Waiting));
        }
        let message = format!("node did not register within {timeout:?}");
        self.delete_with_event(claim, "FailedLaunch", message)
            .await?;
        if let Some(pool) = claim.labels().get(NODEPOOL_LABEL) {
            crate::nodepool::readiness::record_registration(&self.ctx, pool, false).await;
        }
        Ok(Flow::Done(Step::DeletedRegistrationTimeout))
    }
}
