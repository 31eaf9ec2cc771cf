//! The end-to-end suite: each test drives the cluster named by `E2E_KUBECONFIG` (see the
//! `karpenter_e2e` crate docs) as a user would and checks what Karpenter did, within a time
//! bound; without a target every test skips, printing why. `cargo xtask e2e` runs them against
//! `karpenter-sim serve --no-controller` and two real `karpenter controller` replicas.

// Waiting on a real cluster: wall-clock deadlines.
#![allow(clippy::disallowed_methods)]

mod consolidation;
mod drift;
mod interruption;
mod provisioning;
mod termination;

use karpenter_e2e::{Case, E2eError, Outcome, fail, name};
use serde_json::Value;

/// The instance id of a NodeClaim (from `status.providerID`).
fn claim_instance(claim: &Value) -> Outcome<String> {
    claim["status"]["providerID"]
        .as_str()
        .and_then(karpenter_e2e::cloud::instance_id)
        .map(String::from)
        .ok_or_else(|| E2eError::Check(format!("NodeClaim {} has no providerID", name(claim))))
}

/// The NodeClaim whose node is `node` (`status.nodeName`).
fn claim_of_node<'a>(claims: &'a [Value], node: &str) -> Option<&'a Value> {
    claims.iter().find(|c| c["status"]["nodeName"] == node)
}

/// Waits until EC2 shows instance `id` shutting down or terminated (or no longer lists it).
async fn until_instance_ends(case: &Case, id: &str) -> Outcome<()> {
    let cloud = case.cloud()?;
    case.until(&format!("instance {id} ended"), || async move {
        let state = cloud.instance_state(id).await?;
        Ok(state
            .is_none_or(|s| s == "terminated" || s == "shutting-down")
            .then_some(()))
    })
    .await
}

/// Waits until the NodeClaim `claim` no longer exists.
async fn until_claim_gone(case: &Case, claim: &str) -> Outcome<()> {
    case.until(&format!("NodeClaim {claim} gone"), || async move {
        Ok(case
            .get(&karpenter_e2e::kinds::NODE_CLAIM, claim)
            .await?
            .is_none()
            .then_some(()))
    })
    .await
}

/// The one NodeClaim of `pool` once its node runs the case's pods and it has registered; fails
/// on more than one.
async fn single_claim(case: &Case, pool: &str) -> Outcome<Value> {
    let claims = case.registered_claims(pool).await?;
    match claims.as_slice() {
        [claim] => Ok(claim.clone()),
        _ => fail(format!(
            "NodePool {pool} has {} NodeClaims, expected 1",
            claims.len()
        )),
    }
}
