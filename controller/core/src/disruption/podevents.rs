//! The pod-events controller: keeps each NodeClaim's `status.lastPodEventTime` — the last time a
//! pod was bound to its node or left it — which `consolidateAfter` is measured from.
//!
//! It compares the pods bound to each node with what it saw on its previous pass; a node whose
//! set changed gets `now` written, at most once per [`POD_EVENT_DEDUP`] (upstream's 10 s). The
//! first pass after a start only takes stock (it cannot tell what changed while it was down).
//! A node whose write failed stays changed until a later pass writes it (upstream's reconcile is
//! requeued on the error and writes then): the pass has already taken stock of its pods, so
//! without that the event would be lost and `consolidateAfter` measured from an older one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube_core::ResourceExt;
use serde_json::json;

use crate::context::Context;
use crate::replacement::rfc3339;
use crate::seams::KubeError;
use crate::seams::kube::{ObjectKey, Patch, ResourceKind};

/// Shortest interval between two writes of one claim's `lastPodEventTime`.
pub const POD_EVENT_DEDUP: Duration = Duration::from_secs(10);

/// The pod-events controller.
pub struct PodEvents {
    ctx: Arc<Context>,
    /// Pod uid → node, as last seen (`None` before the first pass).
    seen: Mutex<Option<BTreeMap<String, String>>>,
    /// Nodes whose pods changed but whose claim's write failed: written on a later pass.
    unwritten: Mutex<BTreeSet<String>>,
}

impl PodEvents {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self {
            ctx,
            seen: Mutex::new(None),
            unwritten: Mutex::new(BTreeSet::new()),
        }
    }

    /// One pass; returns the claims written.
    pub async fn pass(&self) -> Result<Vec<String>, KubeError> {
        let now = self.ctx.now();
        let (current, claims) = {
            let mut state = self.ctx.state.lock().await;
            state.claims.sync(self.ctx.kube.as_ref()).await?;
            state.pods.sync(self.ctx.kube.as_ref()).await?;
            let current: BTreeMap<String, String> = state
                .pods
                .iter()
                .filter(|p| {
                    p.metadata.deletion_timestamp.is_none()
                        && !matches!(
                            p.status.as_ref().and_then(|s| s.phase.as_deref()),
                            Some("Succeeded" | "Failed")
                        )
                })
                .filter_map(|p| {
                    let node = p.spec.as_ref()?.node_name.clone()?;
                    Some((p.metadata.uid.clone().unwrap_or_else(|| p.name_any()), node))
                })
                .collect();
            (current, state.claims.iter().cloned().collect::<Vec<_>>())
        };
        let previous = {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            seen.replace(current.clone())
        };
        let Some(previous) = previous else {
            return Ok(Vec::new());
        };
        let mut changed: BTreeSet<String> =
            std::mem::take(&mut *self.unwritten.lock().unwrap_or_else(|e| e.into_inner()));
        for (uid, node) in &current {
            if previous.get(uid) != Some(node) {
                changed.insert(node.clone());
            }
        }
        for (uid, node) in &previous {
            if current.get(uid) != Some(node) {
                changed.insert(node.clone());
            }
        }
        let result = self.write(&claims, &changed, now).await;
        if let Err((failed, _)) = &result {
            let mut unwritten = self.unwritten.lock().unwrap_or_else(|e| e.into_inner());
            unwritten.extend(failed.iter().cloned());
        }
        result.map_err(|(_, err)| err)
    }

    /// Writes `now` on the claims of the `changed` nodes (not within the de-duplication window);
    /// on an error, the nodes not written and the first error.
    async fn write(
        &self,
        claims: &[std::sync::Arc<crate::api::NodeClaim>],
        changed: &BTreeSet<String>,
        now: jiff::Timestamp,
    ) -> Result<Vec<String>, (BTreeSet<String>, KubeError)> {
        let mut failed = BTreeSet::new();
        let mut first_error = None;
        let mut written = Vec::new();
        for claim in claims {
            let status = claim.status.as_ref();
            let Some(node) = status.and_then(|s| s.node_name.as_deref()) else {
                continue;
            };
            if !changed.contains(node) || claim.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let recent = status
                .and_then(|s| s.last_pod_event_time.as_ref())
                .is_some_and(|t| now.duration_since(t.0).unsigned_abs() < POD_EVENT_DEDUP);
            if recent {
                continue;
            }
            let patch = Patch::Merge(json!({"status": {"lastPodEventTime": rfc3339(now)}}));
            match self
                .ctx
                .kube
                .patch_status(
                    &ResourceKind::NODE_CLAIM,
                    &ObjectKey::cluster(claim.name_any()),
                    &patch,
                )
                .await
            {
                Ok(object) => {
                    self.ctx.state.lock().await.claims.observe(object);
                    written.push(claim.name_any());
                }
                Err(KubeError::NotFound(_)) => {}
                Err(err) => {
                    failed.insert(node.to_string());
                    first_error.get_or_insert(err);
                }
            }
        }
        match first_error {
            Some(err) => Err((failed, err)),
            None => Ok(written),
        }
    }
}
