//! The garbage collector's part `karpenter-sim serve` needs: fakekube follows no
//! ownerReferences, so NodeClaims whose owning NodePool is gone (by uid) are deleted here, as
//! Kubernetes' garbage collector deletes them after `kubectl delete nodepool` (background
//! propagation). The controller's finalizer then terminates their instances.

use std::collections::BTreeSet;

use karpenter_core::seams::kube::{DeleteOptions, ListOptions, ObjectKey, ResourceKind};
use karpenter_core::seams::{KubeApi, KubeError};
use serde_json::Value;

/// Deletes NodeClaims owned by a NodePool uid that no longer exists; returns how many.
pub async fn collect_node_claims(api: &dyn KubeApi) -> Result<usize, KubeError> {
    let all = ListOptions::default();
    let pools: BTreeSet<String> = api
        .list(&ResourceKind::NODE_POOL, &all)
        .await?
        .items
        .iter()
        .filter_map(|p| p["metadata"]["uid"].as_str().map(String::from))
        .collect();
    let claims = api.list(&ResourceKind::NODE_CLAIM, &all).await?.items;
    let mut deleted = 0;
    for claim in claims.iter().filter(|c| orphaned(c, &pools)) {
        let name = claim["metadata"]["name"].as_str().unwrap_or_default();
        api.delete(
            &ResourceKind::NODE_CLAIM,
            &ObjectKey::cluster(name),
            &DeleteOptions::default(),
        )
        .await?;
        deleted += 1;
    }
    Ok(deleted)
}

fn orphaned(claim: &Value, pools: &BTreeSet<String>) -> bool {
    claim["metadata"]["deletionTimestamp"].is_null()
        && claim["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|owners| {
                owners.iter().any(|o| {
                    o["kind"] == "NodePool"
                        && o["uid"].as_str().is_some_and(|uid| !pools.contains(uid))
                })
            })
}
