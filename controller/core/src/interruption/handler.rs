//! The interruption controller: polls the SQS queue EventBridge feeds, and turns each event into
//! at most one action per NodeClaim.
//!
//! - Spot interruption warning, AWS Health scheduled change: the claim is marked
//!   ([`INTERRUPTION_ANNOTATION`] plus [`INTERRUPTION_EVICTION_DEADLINE_ANNOTATION`]) and deleted.
//!   Replacement capacity comes first: the provisioner provisions for pods on deleting claims and
//!   links the new claims to the old ones, and termination holds the old claim's eviction until
//!   they are initialized, at most until the deadline. A spot warning also marks its offering
//!   unavailable, so the replacement is planned elsewhere (upstream does the same).
//! - EC2 state change to stopping, stopped, shutting-down or terminated: marked and deleted with
//!   no deadline (the instance is going now; nothing is gained by waiting for a replacement).
//! - Rebalance recommendation: an event only (upstream takes no action either).
//! - Unknown instance, an event the controller does not act on, a malformed body: the message is
//!   deleted (malformed ones logged and counted), so nothing blocks the queue.
//!
//! A message is deleted only after its action succeeded; after a retryable failure it is left for
//! redelivery (SQS redelivers it after its visibility timeout). Delivery is at least once, so every
//! action is idempotent: a claim already being deleted is not acted on again, and the annotations
//! and the delete are the same writes when repeated.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde_json::json;

use super::messages::{InterruptionMessage, Kind, parse};
use crate::api::NodeClaim;
use crate::api::labels::{
    CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, INTERRUPTION_ANNOTATION,
    INTERRUPTION_EVICTION_DEADLINE_ANNOTATION, ZONE_LABEL,
};
use crate::catalog::CapacityType;
use crate::lifecycle::UnavailableOfferings;
use crate::lifecycle::ice::ICE_TTL;
use crate::metrics::{ActionLabels, MessageTypeLabels, Metrics};
use crate::seams::kube::{
    DeleteOptions, DeleteOutcome, EventRecord, ObjectKey, Patch, ResourceKind,
};
use crate::seams::sqs::{Message, RECEIVE_COUNT_MAX};
use crate::seams::{Clock, KubeApi, KubeApiExt, KubeError, Retryable, Sqs, SqsError};

/// Most receive calls one step makes (so at most `10 × RECEIVE_COUNT_MAX` messages a step): a
/// burst of interruptions (a whole spot pool reclaimed) is handled in the same step, so its
/// replacements are planned in one provisioning pass, while a flooded queue cannot stall the
/// other controllers.
pub const RECEIVE_BATCHES_PER_STEP_MAX: usize = 10;
/// Attempts at acting on one message within a poll before it is left for redelivery. A message
/// left in the queue comes back only after its visibility timeout (30 s by default), a quarter of
/// a spot instance's two-minute notice: one transient API error (a 5xx, a conflict) must not cost
/// that. (Found by the simulation swarm: a single conflict on the claim's annotation patch delayed
/// the replacement past the reclaim.)
pub const ACT_ATTEMPTS_MAX: u32 = 3;
/// Eviction of a spot-interrupted node starts at the latest this long after the warning's time,
/// replacement ready or not: EC2 reclaims the instance 2 minutes after the warning, and this
/// leaves the remaining 30 s for pods to shut down gracefully (Kubernetes' default
/// terminationGracePeriodSeconds).
pub const SPOT_EVICTION_HOLD_MAX: Duration = Duration::from_secs(90);
/// Eviction of a node with a scheduled change (maintenance) starts at the latest this long after
/// the event, or [`SCHEDULED_CHANGE_MARGIN`] before the change starts if that is sooner.
pub const SCHEDULED_CHANGE_EVICTION_HOLD_MAX: Duration = Duration::from_secs(10 * 60);
/// Time left between the end of the replacement wait and a scheduled change's start, for the
/// drain itself.
pub const SCHEDULED_CHANGE_MARGIN: Duration = Duration::from_secs(5 * 60);

/// What happened to one message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Claims marked and deleted.
    Deleted { kind: Kind, claims: Vec<String> },
    /// An event recorded (rebalance recommendation).
    Recorded { claims: Vec<String> },
    /// Every matching claim was already being deleted (a duplicate or a late event).
    AlreadyDeleting { claims: Vec<String> },
    /// No NodeClaim has the instance.
    UnknownInstance { instance_ids: Vec<String> },
    /// A well-formed event the controller does not act on.
    Ignored,
    /// Not an interruption event (logged, counted).
    Malformed(String),
    /// Acting failed with a retryable error: the message stays for redelivery.
    Retry(String),
    /// Acting failed in a way retrying cannot fix (logged): the message is deleted.
    Failed(String),
}

/// What one poll did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PollReport {
    /// (message id, outcome), in receive order.
    pub messages: Vec<(String, Outcome)>,
    /// Messages deleted from the queue.
    pub deleted: usize,
}

/// Polls the interruption queue and acts on its messages.
pub struct InterruptionHandler {
    kube: Arc<dyn KubeApi>,
    sqs: Arc<dyn Sqs>,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    ice: Option<Arc<UnavailableOfferings>>,
    queue_url: String,
}

fn claim_name(claim: &NodeClaim) -> String {
    claim.metadata.name.clone().unwrap_or_default()
}

fn rfc3339(time: Timestamp) -> String {
    Timestamp::from_second(time.as_second())
        .unwrap_or(time)
        .to_string()
}

fn plus(time: Timestamp, by: Duration) -> Timestamp {
    time.saturating_add(SignedDuration::try_from(by).unwrap_or(SignedDuration::MAX))
        .unwrap_or(time)
}

impl InterruptionHandler {
    pub fn new(
        kube: Arc<dyn KubeApi>,
        sqs: Arc<dyn Sqs>,
        clock: Arc<dyn Clock>,
        metrics: Arc<Metrics>,
        queue_url: String,
    ) -> Self {
        Self {
            kube,
            sqs,
            clock,
            metrics,
            ice: None,
            queue_url,
        }
    }

    /// Spot warnings mark their offering unavailable in `cache` (shared with the provisioner).
    pub fn with_unavailable_offerings(mut self, cache: Arc<UnavailableOfferings>) -> Self {
        self.ice = Some(cache);
        self
    }

    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }

    /// Receives and handles messages: up to [`RECEIVE_BATCHES_PER_STEP_MAX`] batches of
    /// [`RECEIVE_COUNT_MAX`], without waiting (the operator's step is the polling loop). A
    /// receive error ends the poll: `Err` if nothing was received before it.
    pub async fn poll(&self) -> Result<PollReport, SqsError> {
        let mut report = PollReport::default();
        for batch in 0..RECEIVE_BATCHES_PER_STEP_MAX {
            let messages = match self
                .sqs
                .receive_messages(RECEIVE_COUNT_MAX, Duration::ZERO)
                .await
            {
                Ok(messages) => messages,
                Err(err) if batch == 0 => return Err(err),
                Err(err) => {
                    tracing::warn!(queue = %self.queue_url, %err, "receiving interruption messages failed; retrying next step");
                    break;
                }
            };
            if messages.is_empty() {
                break;
            }
            // Read once per batch; claims this batch deletes are updated in place, so a duplicate
            // later in the batch sees them deleting.
            let mut claims: Vec<NodeClaim> = match self
                .kube
                .list_decodable(&ResourceKind::NODE_CLAIM, &Default::default())
                .await
            {
                Ok(claims) => claims,
                Err(err) => {
                    tracing::warn!(%err, "listing NodeClaims failed; interruption messages left for redelivery");
                    for message in messages {
                        report
                            .messages
                            .push((message.message_id, Outcome::Retry(err.to_string())));
                    }
                    break;
                }
            };
            for message in messages {
                let outcome = self.handle(&message, &mut claims, &mut report).await;
                report.messages.push((message.message_id, outcome));
            }
        }
        Ok(report)
    }

    async fn handle(
        &self,
        message: &Message,
        claims: &mut [NodeClaim],
        report: &mut PollReport,
    ) -> Outcome {
        let parsed = match parse(&message.body) {
            Ok(parsed) => parsed,
            Err(err) => {
                tracing::warn!(message_id = %message.message_id, %err, "deleting a queue message that is not an interruption event");
                self.metrics.interruption_malformed.inc();
                self.received("malformed");
                self.delete(message, None, report).await;
                return Outcome::Malformed(err.to_string());
            }
        };
        let kind = parsed.kind();
        self.received(kind.label());
        // Actions are idempotent, so a transient failure is retried at once: left for redelivery,
        // the message would come back only after its visibility timeout.
        let mut attempt = 1;
        let acted = loop {
            match self.act(&parsed, claims).await {
                Err(err) if err.is_retryable() && attempt < ACT_ATTEMPTS_MAX => {
                    tracing::debug!(message_id = %message.message_id, %err, attempt, "acting on an interruption message failed; retrying");
                    attempt += 1;
                }
                result => break result,
            }
        };
        let outcome = match acted {
            Ok(outcome) => outcome,
            Err(err) if err.is_retryable() => {
                tracing::info!(message_id = %message.message_id, %err, "acting on an interruption message failed; leaving it for redelivery");
                return Outcome::Retry(err.to_string());
            }
            Err(err) => {
                // Retrying cannot help (RBAC, validation): dropping the message keeps the queue
                // moving; the log says what was lost.
                tracing::error!(message_id = %message.message_id, %err, kind = %kind, "interruption message could not be acted on; deleting it");
                Outcome::Failed(err.to_string())
            }
        };
        self.delete(message, Some(parsed.time()), report).await;
        outcome
    }

    fn received(&self, message_type: &str) {
        self.metrics
            .interruption_received
            .get_or_create(&MessageTypeLabels {
                message_type: message_type.to_string(),
            })
            .inc();
    }

    async fn delete(&self, message: &Message, sent: Option<Timestamp>, report: &mut PollReport) {
        match self.sqs.delete_message(&message.receipt_handle).await {
            Ok(()) => {
                report.deleted += 1;
                self.metrics.interruption_deleted.inc();
                if let Some(sent) = sent {
                    let seconds = self.clock.now().duration_since(sent).as_secs_f64();
                    self.metrics
                        .interruption_queue_duration
                        .observe(seconds.max(0.0));
                }
            }
            // The message comes back after its visibility timeout; acting again is idempotent.
            Err(err) => {
                tracing::warn!(message_id = %message.message_id, %err, "deleting an interruption message failed; it will be redelivered");
            }
        }
    }

    /// The action of one parsed message on the claims of its instances.
    async fn act(
        &self,
        message: &InterruptionMessage,
        claims: &mut [NodeClaim],
    ) -> Result<Outcome, KubeError> {
        let kind = message.kind();
        if kind == Kind::NoOp {
            return Ok(Outcome::Ignored);
        }
        let ids = message.instance_ids();
        let mut matched: Vec<usize> = claims
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                let provider = c
                    .status
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .unwrap_or_default();
                ids.iter()
                    .any(|id| provider.rsplit('/').next() == Some(id.as_str()))
            })
            .map(|(i, _)| i)
            .collect();
        matched.sort_by_key(|i| claim_name(&claims[*i]));
        if matched.is_empty() {
            return Ok(Outcome::UnknownInstance { instance_ids: ids });
        }
        if kind == Kind::RebalanceRecommendation {
            let mut names = Vec::new();
            for i in matched {
                self.events(
                    &claims[i],
                    "Normal",
                    "SpotRebalanceRecommendation",
                    "Spot rebalance recommendation was triggered",
                )
                .await;
                names.push(claim_name(&claims[i]));
            }
            self.action("NoAction");
            return Ok(Outcome::Recorded { claims: names });
        }
        let deadline = match (kind, message) {
            (Kind::SpotInterrupted, _) => Some(plus(message.time(), SPOT_EVICTION_HOLD_MAX)),
            (Kind::ScheduledChange, InterruptionMessage::ScheduledChange(event)) => {
                let cap = plus(message.time(), SCHEDULED_CHANGE_EVICTION_HOLD_MAX);
                let before_start = event
                    .detail
                    .start_time
                    .as_deref()
                    .and_then(|s| jiff::fmt::rfc2822::parse(s).ok())
                    .map(|z| z.timestamp())
                    .and_then(|start| {
                        start
                            .checked_sub(
                                SignedDuration::try_from(SCHEDULED_CHANGE_MARGIN)
                                    .unwrap_or(SignedDuration::ZERO),
                            )
                            .ok()
                    });
                Some(before_start.map_or(cap, |b| b.min(cap)))
            }
            _ => None,
        };
        let (reason, text) = match kind {
            Kind::SpotInterrupted => ("SpotInterrupted", "Spot interruption warning was triggered"),
            Kind::ScheduledChange => (
                "InstanceUnhealthy",
                "An unhealthy warning was triggered for the instance",
            ),
            Kind::InstanceStopped => ("InstanceStopping", "Instance is stopping"),
            _ => ("InstanceTerminating", "Instance is terminating"),
        };
        let mut deleted = Vec::new();
        let mut already = Vec::new();
        for i in matched {
            let name = claim_name(&claims[i]);
            if claims[i].metadata.deletion_timestamp.is_some() {
                already.push(name);
                continue;
            }
            if kind == Kind::SpotInterrupted {
                self.mark_unavailable(&claims[i]);
            }
            let mut annotations = BTreeMap::from([(
                INTERRUPTION_ANNOTATION.to_string(),
                kind.label().to_string(),
            )]);
            if let Some(deadline) = deadline {
                annotations.insert(
                    INTERRUPTION_EVICTION_DEADLINE_ANNOTATION.to_string(),
                    rfc3339(deadline),
                );
            }
            let key = ObjectKey::cluster(name.clone());
            match self
                .kube
                .patch(
                    &ResourceKind::NODE_CLAIM,
                    &key,
                    &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
                )
                .await
            {
                Ok(_) => {}
                Err(KubeError::NotFound(_)) => continue,
                Err(err) => return Err(err),
            }
            self.events(&claims[i], "Warning", reason, text).await;
            match self
                .kube
                .delete(&ResourceKind::NODE_CLAIM, &key, &DeleteOptions::default())
                .await?
            {
                DeleteOutcome::Marked(value) => {
                    if let Ok(marked) = serde_json::from_value::<NodeClaim>(value) {
                        claims[i] = marked;
                    }
                }
                DeleteOutcome::Deleted | DeleteOutcome::NotFound => {
                    claims[i].metadata.deletion_timestamp = Some(
                        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(self.clock.now()),
                    );
                }
            }
            self.events(
                &claims[i],
                "Normal",
                "TerminatingOnInterruption",
                "Interruption triggered termination for the NodeClaim",
            )
            .await;
            self.action("CordonAndDrain");
            deleted.push(name);
        }
        if deleted.is_empty() {
            return Ok(Outcome::AlreadyDeleting { claims: already });
        }
        Ok(Outcome::Deleted {
            kind,
            claims: deleted,
        })
    }

    fn action(&self, action: &str) {
        self.metrics
            .interruption_actions
            .get_or_create(&ActionLabels {
                action_type: action.to_string(),
            })
            .inc();
    }

    /// The interrupted (instance type, zone) is out of spot capacity for a while: the
    /// replacement is planned on other offerings.
    fn mark_unavailable(&self, claim: &NodeClaim) {
        let (Some(ice), Some(labels)) = (&self.ice, claim.metadata.labels.as_ref()) else {
            return;
        };
        if labels.get(CAPACITY_TYPE_LABEL).map(String::as_str) != Some(CapacityType::Spot.label()) {
            return;
        }
        if let (Some(it), Some(zone)) = (labels.get(INSTANCE_TYPE_LABEL), labels.get(ZONE_LABEL)) {
            ice.mark(it, zone, CapacityType::Spot, self.clock.now(), ICE_TTL);
        }
    }

    /// An event on the claim and, once it has one, its node. Best effort.
    async fn events(&self, claim: &NodeClaim, type_: &'static str, reason: &str, message: &str) {
        let mut records = vec![EventRecord {
            involved: ResourceKind::NODE_CLAIM,
            key: ObjectKey::cluster(claim_name(claim)),
            uid: claim.metadata.uid.clone(),
            type_,
            reason: reason.to_string(),
            message: message.to_string(),
        }];
        if let Some(node) = claim.status.as_ref().and_then(|s| s.node_name.clone()) {
            records.push(EventRecord {
                involved: ResourceKind::NODE,
                key: ObjectKey::cluster(node),
                uid: None,
                type_,
                reason: reason.to_string(),
                message: message.to_string(),
            });
        }
        for record in records {
            if let Err(err) = self.kube.record_event(&record).await {
                tracing::debug!(%err, reason, "event not recorded");
            }
        }
    }
}
