//! The two capacity-reservation controllers upstream runs every minute
//! (`capacityreservation.expiration`, `capacityreservation.capacitytype`):
//!
//! - **expiration**: NodeClaims in a capacity block that is `expiring` (from
//!   [`CAPACITY_BLOCK_EXPIRATION_LEAD`] before its end) are deleted, so their nodes drain
//!   gracefully before EC2 reclaims the block's instances 30 minutes before its end;
//! - **capacity type**: when an ODCR ends (expired or cancelled), EC2 keeps its instances
//!   running as ordinary on-demand instances; their NodeClaims and Nodes are relabelled
//!   `karpenter.sh/capacity-type: on-demand` and lose the reservation labels, so scheduling,
//!   disruption and the reservation accounting see them as they now are.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kube_core::ResourceExt;
use serde_json::{Value, json};

use crate::api::ec2nodeclass::ReservationState;
use crate::api::labels::{
    CAPACITY_RESERVATION_ID_LABEL, CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL,
    CAPACITY_RESERVATION_TYPE_LABEL, CAPACITY_TYPE_LABEL, REGISTERED_LABEL,
};
use crate::api::{NodeClaim, ProviderId};
use crate::catalog::CapacityType;
use crate::context::Context;
use crate::events::{EventType, Reference};
pub use crate::nodeclass::capacityreservation::CAPACITY_BLOCK_EXPIRATION_LEAD;
use crate::nodeclass::capacityreservation::status_of;
use crate::seams::KubeError;
use crate::seams::ec2::{Ec2Error, Filter, InstanceState};
use crate::seams::kube::{DeleteOptions, ObjectKey, Patch, ResourceKind};

/// How often both controllers run (upstream: every minute).
pub const CAPACITY_RESERVATION_INTERVAL: Duration = Duration::from_secs(60);

/// Operating errors of one pass; the pass is tried again at the next interval.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReservationError {
    #[error(transparent)]
    Ec2(#[from] Ec2Error),
    #[error(transparent)]
    Kube(#[from] KubeError),
}

/// What one pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReservationReport {
    /// NodeClaims deleted because their capacity block is expiring.
    pub expired: Vec<String>,
    /// NodeClaims (and their Nodes) relabelled on-demand because their reservation ended.
    pub relabelled: Vec<String>,
}

/// Both controllers over one context.
pub struct CapacityReservations {
    ctx: Arc<Context>,
}

impl CapacityReservations {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self { ctx }
    }

    /// One pass of both controllers, over the NodeClaims as the watch-fed cache last saw them
    /// (the lifecycle and termination loops keep it current; no list of its own).
    pub async fn reconcile(&self) -> Result<ReservationReport, ReservationError> {
        let mut claims: Vec<NodeClaim> = {
            let mut state = self.ctx.state.lock().await;
            state.claims.sync(self.ctx.kube.as_ref()).await?;
            // Only the reserved ones are copied (a copy of every claim of a 2,000-node fleet
            // was most of the pass).
            state
                .claims
                .iter()
                .filter(|c| {
                    c.metadata.deletion_timestamp.is_none()
                        && c.labels().contains_key(CAPACITY_RESERVATION_ID_LABEL)
                })
                .map(|c| (**c).clone())
                .collect()
        };
        claims.sort_by_key(|c| c.name_any());
        let mut report = ReservationReport::default();
        if claims.is_empty() {
            return Ok(report);
        }
        report.expired = self.expire(&claims).await?;
        claims.retain(|c| !report.expired.contains(&c.name_any()));
        report.relabelled = self.sync_capacity_type(&claims).await?;
        Ok(report)
    }

    /// Deletes the claims of expiring capacity blocks.
    async fn expire(&self, claims: &[NodeClaim]) -> Result<Vec<String>, ReservationError> {
        let ids: BTreeSet<&String> = claims
            .iter()
            .filter_map(|c| c.labels().get(CAPACITY_RESERVATION_ID_LABEL))
            .collect();
        let now = self.ctx.now();
        let mut expiring = BTreeSet::new();
        for id in ids {
            let found = match self
                .ctx
                .ec2
                .describe_capacity_reservations(
                    std::slice::from_ref(id),
                    &[Filter::new("state", &["active"])],
                )
                .await
            {
                Ok(found) => found,
                // Gone from EC2: nothing to drain ahead of.
                Err(Ec2Error::NotFound { .. }) => continue,
                Err(err) => return Err(err.into()),
            };
            if found
                .iter()
                .any(|r| status_of(r, now).state == ReservationState::Expiring)
            {
                expiring.insert(id.clone());
            }
        }
        let mut deleted = Vec::new();
        for claim in claims {
            let Some(id) = claim.labels().get(CAPACITY_RESERVATION_ID_LABEL) else {
                continue;
            };
            if !expiring.contains(id) {
                continue;
            }
            let name = claim.name_any();
            self.ctx
                .recorder
                .publish(
                    Reference::claim(claim),
                    EventType::Normal,
                    "CapacityReservationExpiring",
                    format!(
                        "Capacity block {id} ends soon; draining the node before EC2 reclaims it"
                    ),
                )
                .await;
            match self
                .ctx
                .kube
                .delete(
                    &ResourceKind::NODE_CLAIM,
                    &ObjectKey::cluster(name.clone()),
                    &DeleteOptions::default(),
                )
                .await
            {
                Ok(_) | Err(KubeError::NotFound(_)) => {}
                Err(err) => return Err(err.into()),
            }
            tracing::info!(claim = %name, reservation = %id, "deleting NodeClaim of an expiring capacity block");
            deleted.push(name);
        }
        Ok(deleted)
    }

    /// Relabels claims (and nodes) whose instance no longer runs in a reservation.
    async fn sync_capacity_type(
        &self,
        claims: &[NodeClaim],
    ) -> Result<Vec<String>, ReservationError> {
        let by_instance: BTreeMap<String, &NodeClaim> = claims
            .iter()
            .filter(|c| {
                c.labels().get(CAPACITY_TYPE_LABEL).map(String::as_str)
                    == Some(CapacityType::Reserved.label())
            })
            .filter_map(|c| {
                let id = c
                    .status
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .and_then(ProviderId::instance_id_of)?;
                Some((id, c))
            })
            .collect();
        if by_instance.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = by_instance.keys().cloned().collect();
        let instances = self.ctx.ec2.describe_instances(&ids, &[]).await?;
        let mut relabelled = Vec::new();
        for instance in instances {
            let live = matches!(
                instance.state,
                InstanceState::Pending | InstanceState::Running
            );
            if !live || instance.capacity_reservation_id.is_some() {
                continue;
            }
            let Some(claim) = by_instance.get(&instance.instance_id) else {
                continue;
            };
            let patch = Patch::Merge(json!({"metadata": {"labels": on_demand_labels()}}));
            match self
                .ctx
                .kube
                .patch(
                    &ResourceKind::NODE_CLAIM,
                    &ObjectKey::cluster(claim.name_any()),
                    &patch,
                )
                .await
            {
                Ok(_) | Err(KubeError::NotFound(_)) => {}
                Err(err) => return Err(err.into()),
            }
            if let Some(node) = claim.status.as_ref().and_then(|s| s.node_name.clone()) {
                self.relabel_node(&node, &patch).await?;
            }
            relabelled.push(claim.name_any());
        }
        Ok(relabelled)
    }

    /// The node of a relabelled claim, once registered and while not deleting.
    async fn relabel_node(&self, node: &str, patch: &Patch) -> Result<(), ReservationError> {
        let key = ObjectKey::cluster(node.to_string());
        let Some(current) = self.ctx.kube.get(&ResourceKind::NODE, &key).await? else {
            return Ok(());
        };
        let labels = &current["metadata"]["labels"];
        let registered = labels[REGISTERED_LABEL].as_str() == Some("true");
        let reserved = labels[CAPACITY_TYPE_LABEL].as_str() == Some(CapacityType::Reserved.label());
        if !registered || !reserved || !current["metadata"]["deletionTimestamp"].is_null() {
            return Ok(());
        }
        match self.ctx.kube.patch(&ResourceKind::NODE, &key, patch).await {
            Ok(_) | Err(KubeError::NotFound(_)) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }
}

/// The label changes of a claim whose reservation ended: on-demand, reservation labels removed.
fn on_demand_labels() -> Value {
    json!({
        CAPACITY_TYPE_LABEL: CapacityType::OnDemand.label(),
        CAPACITY_RESERVATION_ID_LABEL: null,
        CAPACITY_RESERVATION_TYPE_LABEL: null,
        CAPACITY_RESERVATION_INTERRUPTIBLE_LABEL: null,
    })
}
