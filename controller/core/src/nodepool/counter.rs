//! The NodePool counter: each NodePool's `status.nodes` and `status.resources` (the summed
//! capacity of its NodeClaims), written only when they change so an idle pass makes no writes
//! and no watch events.

use std::sync::Arc;

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
}

impl Counter {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self { ctx }
    }

    /// Writes each NodePool's counts where they changed.
    pub async fn count(&self) -> Result<(), KubeError> {
        let (pools, claims) = {
            let mut state = self.ctx.state.lock().await;
            state.pools.sync(self.ctx.kube.as_ref()).await?;
            let pools = state.pools.to_vec();
            state.claims.sync(self.ctx.kube.as_ref()).await?;
            (pools, state.claims.to_vec())
        };
        let mut errors = PassErrors::default();
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
        errors.finish(())
    }
}
