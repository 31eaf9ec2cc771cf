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

/// Adds to `changed` the node of every pod bound, moved or gone between `previous` and
/// `current` (both pod uid → node): one walk over the two sorted maps side by side.
fn changed_nodes(
    previous: &BTreeMap<String, String>,
    current: &BTreeMap<String, String>,
    changed: &mut BTreeSet<String>,
) {
    let mut before = previous.iter().peekable();
    let mut now = current.iter().peekable();
    loop {
        match (before.peek(), now.peek()) {
            (None, None) => break,
            (Some((_, node)), None) => {
                changed.insert((*node).clone());
                before.next();
            }
            (None, Some((_, node))) => {
                changed.insert((*node).clone());
                now.next();
            }
            (Some((old_uid, old_node)), Some((uid, node))) => match old_uid.cmp(uid) {
                std::cmp::Ordering::Less => {
                    changed.insert((*old_node).clone());
                    before.next();
                }
                std::cmp::Ordering::Greater => {
                    changed.insert((*node).clone());
                    now.next();
                }
                std::cmp::Ordering::Equal => {
                    if old_node != node {
                        changed.insert((*old_node).clone());
                        changed.insert((*node).clone());
                    }
                    before.next();
                    now.next();
                }
            },
        }
    }
}

/// The pod-events controller.
pub struct PodEvents {
    ctx: Arc<Context>,
    /// Pod uid → node, as last seen (`None` before the first pass), and the pod cache's
    /// revision it was taken from ([`crate::state::Reflector::changes`]).
    seen: Mutex<Option<(BTreeMap<String, String>, u64)>>,
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
            let revision = state.pods.changes();
            let unchanged = self
                .seen()
                .as_ref()
                .is_some_and(|(_, seen)| *seen == revision);
            if unchanged && self.unwritten().is_empty() {
                // The pods are those of the last pass: no pod event (a pass per simulated
                // second over 3,000 pods was a fifth of a burst's CPU).
                return Ok(Vec::new());
            }
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
            ((current, revision), state.claims.to_vec())
        };
        let mut changed: BTreeSet<String> = std::mem::take(&mut *self.unwritten());
        let first = {
            let mut seen = self.seen();
            if let Some((previous, _)) = seen.as_ref() {
                changed_nodes(previous, &current.0, &mut changed);
            }
            seen.replace(current).is_none()
        };
        if first {
            return Ok(Vec::new());
        }
        let result = self.write(&claims, &changed, now).await;
        if let Err((failed, _)) = &result {
            self.unwritten().extend(failed.iter().cloned());
        }
        result.map_err(|(_, err)| err)
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Option<(BTreeMap<String, String>, u64)>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn unwritten(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.unwritten.lock().unwrap_or_else(|e| e.into_inner())
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
