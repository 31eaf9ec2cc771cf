//! The NodePool counter: each NodePool's `status.nodes` and `status.resources` (the summed
//! capacity of its NodeClaims), written only when they change so an idle pass makes no writes
//! and no watch events.

use std::sync::{Arc, Mutex};

use kube_core::ResourceExt;
use serde_json::json;

use crate::api::labels::NODEPOOL_LABEL;
use crate::context::Context;
use crate::resources::Resources;
use crate::runtime::{PassErrors, gone_is_done};
use crate::seams::KubeError;
use crate::seams::kube::{ObjectKey, Patch, ResourceKind};

/// The NodePool counter controller.
pub struct Counter {
    ctx: Arc<Context>,
    /// The cache revisions (NodePools, NodeClaims) of the last pass that found every count
    /// current: the same revisions mean the same counts, so the pass is skipped (summing every
    /// claim's capacity each step was a visible part of a 2,000-node fleet's idle step).
    counted: Mutex<Option<(u64, u64)>>,
}

impl Counter {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self {
            ctx,
            counted: Mutex::new(None),
        }
    }

    /// Writes each NodePool's counts where they changed.
    pub async fn count(&self) -> Result<(), KubeError> {
        let (pools, claims, revisions) = {
            let mut state = self.ctx.state.lock().await;
            state.pools.sync(self.ctx.kube.as_ref()).await?;
            let pools = state.pools.to_vec();
            state.claims.sync(self.ctx.kube.as_ref()).await?;
            let revisions = (state.pools.changes(), state.claims.changes());
            (pools, state.claims.to_vec(), revisions)
        };
        if *self.counted() == Some(revisions) {
            return Ok(());
        }
        let mut errors = PassErrors::default();
        let mut wrote = false;
        for pool in pools {
            let name = pool.name_any();
            let mine: Vec<_> = claims
                .iter()
                .filter(|c| c.labels().get(NODEPOOL_LABEL) == Some(&name))
                .collect();
            let mut total = Resources::new();
            for status in mine.iter().filter_map(|c| c.status.as_ref()) {
                total = total.plus(&Resources::from_list(&status.capacity).unwrap_or_default());
            }
            let current = pool.status.clone().unwrap_or_default();
            let resources = total.to_list();
            if current.nodes == mine.len() as i64 && current.resources == resources {
                continue; // unchanged: no write, no watch event
            }
            wrote = true;
            let status = json!({"status": {"nodes": mine.len(), "resources": resources}});
            let written = self
                .ctx
                .kube
                .patch_status(
                    &ResourceKind::NODE_POOL,
                    &ObjectKey::cluster(name),
                    &Patch::Merge(status),
                )
                .await
                .map(|_| ());
            // A pool deleted since the cache saw it has nothing to count; one that fails does
            // not keep the others' counts stale ([`crate::runtime::pass`]).
            errors.keep(gone_is_done(written));
        }
        if !wrote {
            *self.counted() = Some(revisions);
        }
        errors.finish(())
    }

    fn counted(&self) -> std::sync::MutexGuard<'_, Option<(u64, u64)>> {
        self.counted.lock().unwrap_or_else(|p| p.into_inner())
    }
}
