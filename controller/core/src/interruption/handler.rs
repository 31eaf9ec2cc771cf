//! The interruption controller: polls the SQS queue EventBridge feeds, and turns each event into
//! at most one action per NodeClaim.
//!
//! - Spot interruption warning, AWS Health scheduled change: the claim is marked interrupted, with
//!   an eviction deadline ([`replacement::mark_interrupted`]), and deleted.
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

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube_core::ResourceExt;

use super::messages::{InterruptionMessage, Kind, parse};
use crate::api::labels::{
    CAPACITY_RESERVATION_ID_LABEL, CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, NODEPOOL_LABEL,
    ZONE_LABEL,
};
use crate::api::{NodeClaim, ProviderId};
use crate::catalog::{CapacityType, UNAVAILABLE_TTL};
use crate::context::{Context, InterruptionQueue};
use crate::events::{EventType, Reference};
use crate::metrics::{ActionLabels, DisruptedLabels, MessageTypeLabels};
use crate::replacement::{self, Interruption};
use crate::runtime::Stop;
use crate::seams::kube::{DeleteOptions, DeleteOutcome, ObjectKey, ResourceKind};
use crate::seams::sqs::{Message, RECEIVE_COUNT_MAX};
use crate::seams::{KubeError, Retryable, SqsError};

/// Most receive calls one step makes (so at most `10 × RECEIVE_COUNT_MAX` messages a step): a
/// burst of interruptions (a whole spot pool reclaimed) is handled in the same step, so its
/// replacements are planned in one provisioning pass, while a flooded queue cannot stall the
/// other controllers.
pub const RECEIVE_BATCHES_PER_STEP_MAX: usize = 10;
/// Messages of one receive batch acted on at once (upstream's interruption controller handles a
/// batch with `workqueue.ParallelizeUntil(ctx, 10, ...)`). One by one, a storm of 100 warnings
/// cost 100 × the API server's round trips before the first replacement could be planned: with
/// realistic latency, 4.5 s to the last deletion and 9.5 s to the replacements of a 183-warning
/// storm (`burst-spot-1000`). Two messages about one claim take turns (a lock per claim), the
/// first in queue order first.
pub const MESSAGES_PARALLEL_MAX: usize = 10;
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

/// The NodeClaims one receive batch acts on, each behind its own lock (messages of a batch are
/// handled side by side; two about one claim take turns), with each claim's instance id and
/// name read once (neither changes while a batch is handled).
struct BatchClaims {
    claims: Vec<tokio::sync::Mutex<NodeClaim>>,
    /// (instance id, name) by index into `claims`.
    keys: Vec<(Option<String>, String)>,
}

impl BatchClaims {
    fn new(claims: Vec<NodeClaim>) -> Self {
        let keys = claims
            .iter()
            .map(|c| {
                let instance = c
                    .status
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .and_then(ProviderId::instance_id_of);
                (instance, c.name_any())
            })
            .collect();
        Self {
            claims: claims.into_iter().map(tokio::sync::Mutex::new).collect(),
            keys,
        }
    }

    /// Indices of the claims of `ids`' instances, by claim name.
    fn of_instances(&self, ids: &[String]) -> Vec<usize> {
        let mut matched: Vec<usize> = self
            .keys
            .iter()
            .enumerate()
            .filter(|(_, (instance, _))| instance.as_ref().is_some_and(|i| ids.contains(i)))
            .map(|(i, _)| i)
            .collect();
        matched.sort_by(|a, b| self.keys[*a].1.cmp(&self.keys[*b].1));
        matched
    }
}

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
    ctx: Arc<Context>,
    queue: InterruptionQueue,
}

/// What acting on one claim did.
pub(super) enum Acted {
    Deleted,
    /// Already being deleted: nothing to do.
    AlreadyDeleting,
    /// Gone before it could be marked.
    Gone,
}

/// When eviction of a claim interrupted by `message` starts at the latest (`None`: not held).
fn eviction_deadline(message: &InterruptionMessage) -> Option<Timestamp> {
    match message {
        // A reclaimed reservation gives the same two minutes as a spot warning.
        InterruptionMessage::SpotInterruption(_)
        | InterruptionMessage::CapacityReservationInterruption(_) => {
            message.time().saturating_add(SPOT_EVICTION_HOLD_MAX).ok()
        }
        InterruptionMessage::ScheduledChange(event) => {
            let cap = message
                .time()
                .saturating_add(SCHEDULED_CHANGE_EVICTION_HOLD_MAX)
                .ok()?;
            let before_start = event
                .detail
                .start_time
                .as_deref()
                .and_then(|s| jiff::fmt::rfc2822::parse(s).ok())
                .and_then(|start| start.timestamp().checked_sub(SCHEDULED_CHANGE_MARGIN).ok());
            Some(before_start.map_or(cap, |b| b.min(cap)))
        }
        _ => None,
    }
}

impl InterruptionHandler {
    /// The handler of `ctx`'s interruption queue; `None` when it has none.
    pub fn new(ctx: Arc<Context>) -> Option<Self> {
        let queue = ctx.queue.clone()?;
        Some(Self { ctx, queue })
    }

    pub fn queue_url(&self) -> &str {
        &self.queue.url
    }

    /// Receives and handles messages: up to [`RECEIVE_BATCHES_PER_STEP_MAX`] batches of
    /// [`RECEIVE_COUNT_MAX`], without waiting (the operator's step is the polling loop). A
    /// receive error ends the poll: `Err` if nothing was received before it.
    pub async fn poll(&self) -> Result<PollReport, SqsError> {
        self.poll_waiting(Duration::ZERO).await
    }

    /// [`InterruptionHandler::poll`], with the first receive long-polling up to `wait` for a
    /// message (the interruption loop's receive: it returns as soon as a message arrives).
    pub async fn poll_waiting(&self, wait: Duration) -> Result<PollReport, SqsError> {
        self.poll_waiting_until(wait, &mut Stop::never()).await
    }

    /// [`InterruptionHandler::poll_waiting`], whose first receive gives up when `stop` fires
    /// (shutdown: a message that receive took comes back after the visibility timeout). Messages
    /// already received are acted on in full.
    pub async fn poll_waiting_until(
        &self,
        wait: Duration,
        stop: &mut Stop,
    ) -> Result<PollReport, SqsError> {
        let mut report = PollReport::default();
        for batch in 0..RECEIVE_BATCHES_PER_STEP_MAX {
            let wait = if batch == 0 { wait } else { Duration::ZERO };
            let receive = self.queue.sqs.receive_messages(RECEIVE_COUNT_MAX, wait);
            let received = tokio::select! {
                biased;
                () = stop.stopped() => return Ok(report),
                received = receive => received,
            };
            let messages = match received {
                Ok(messages) => messages,
                Err(err) if batch == 0 => return Err(err),
                Err(err) => {
                    tracing::warn!(queue = %self.queue.url, %err, "receiving interruption messages failed; retrying next step");
                    break;
                }
            };
            if messages.is_empty() {
                break;
            }
            // Read once per batch, from the cache (see `Reflector::read`); claims this batch
            // deletes are updated in place, so a duplicate later in the batch sees them deleting.
            let read = self
                .ctx
                .state
                .lock()
                .await
                .claims
                .read(self.ctx.kube.as_ref())
                .await;
            let claims: Vec<NodeClaim> = match read {
                Ok(claims) => claims.iter().map(|c| NodeClaim::clone(c)).collect(),
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
            let claims = BatchClaims::new(claims);
            // Boxed one by one: a closure building them in the stream is not general enough
            // over lifetimes for the spawned loop's `Send` bound.
            let handling: Vec<futures::future::BoxFuture<'_, (Outcome, bool)>> = messages
                .iter()
                .map(|message| self.handle(message, &claims).boxed())
                .collect();
            let handled: Vec<(Outcome, bool)> = futures::stream::iter(handling)
                .buffered(MESSAGES_PARALLEL_MAX)
                .collect()
                .await;
            for (message, (outcome, deleted)) in messages.into_iter().zip(handled) {
                report.deleted += usize::from(deleted);
                report.messages.push((message.message_id, outcome));
            }
        }
        Ok(report)
    }

    /// Acts on one message and deletes it from the queue: its outcome, and whether the delete
    /// succeeded.
    async fn handle(&self, message: &Message, claims: &BatchClaims) -> (Outcome, bool) {
        let parsed = match parse(&message.body) {
            Ok(parsed) => parsed,
            Err(err) => {
                tracing::warn!(message_id = %message.message_id, %err, "deleting a queue message that is not an interruption event");
                self.ctx.metrics.interruption_malformed.inc();
                self.received("malformed");
                let deleted = self.delete(message, None).await;
                return (Outcome::Malformed(err.to_string()), deleted);
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
                return (Outcome::Retry(err.to_string()), false);
            }
            Err(err) => {
                // Retrying cannot help (RBAC, validation): dropping the message keeps the queue
                // moving; the log says what was lost.
                tracing::error!(message_id = %message.message_id, %err, kind = %kind, "interruption message could not be acted on; deleting it");
                Outcome::Failed(err.to_string())
            }
        };
        let deleted = self.delete(message, Some(parsed.time())).await;
        (outcome, deleted)
    }

    fn received(&self, message_type: &str) {
        self.ctx
            .metrics
            .interruption_received
            .get_or_create(&MessageTypeLabels {
                message_type: message_type.to_string(),
            })
            .inc();
    }

    /// Deletes `message` from the queue; whether that succeeded.
    async fn delete(&self, message: &Message, sent: Option<Timestamp>) -> bool {
        match self.queue.sqs.delete_message(&message.receipt_handle).await {
            Ok(()) => {
                self.ctx.metrics.interruption_deleted.inc();
                if let Some(sent) = sent {
                    let seconds = self.ctx.now().duration_since(sent).as_secs_f64();
                    self.ctx
                        .metrics
                        .interruption_queue_duration
                        .observe(seconds.max(0.0));
                }
                true
            }
            // The message comes back after its visibility timeout; acting again is idempotent.
            Err(err) => {
                tracing::warn!(message_id = %message.message_id, %err, "deleting an interruption message failed; it will be redelivered");
                false
            }
        }
    }

    /// The action of one parsed message on the claims of its instances.
    async fn act(
        &self,
        message: &InterruptionMessage,
        claims: &BatchClaims,
    ) -> Result<Outcome, KubeError> {
        let kind = message.kind();
        if kind == Kind::NoOp {
            return Ok(Outcome::Ignored);
        }
        let ids = message.instance_ids();
        let matched = claims.of_instances(&ids);
        if matched.is_empty() {
            return Ok(Outcome::UnknownInstance { instance_ids: ids });
        }
        if kind == Kind::RebalanceRecommendation {
            let mut names = Vec::new();
            for i in matched {
                let claim = claims.claims[i].lock().await;
                events(
                    &self.ctx,
                    &claim,
                    EventType::Normal,
                    "SpotRebalanceRecommendation",
                    "Spot rebalance recommendation was triggered",
                )
                .await;
                names.push(claim.name_any());
            }
            action(&self.ctx, "NoAction");
            return Ok(Outcome::Recorded { claims: names });
        }
        let interruption = Interruption {
            kind: kind.label(),
            eviction_deadline: eviction_deadline(message),
        };
        let mut deleted = Vec::new();
        let mut already = Vec::new();
        for i in matched {
            let mut claim = claims.claims[i].lock().await;
            let name = claim.name_any();
            match self.interrupt(&mut claim, kind, &interruption).await? {
                Acted::Deleted => deleted.push(name),
                Acted::AlreadyDeleting => already.push(name),
                Acted::Gone => {}
            }
        }
        if deleted.is_empty() {
            return Ok(Outcome::AlreadyDeleting { claims: already });
        }
        Ok(Outcome::Deleted {
            kind,
            claims: deleted,
        })
    }

    /// Marks one claim interrupted and deletes it ([`interrupt`]).
    async fn interrupt(
        &self,
        claim: &mut NodeClaim,
        kind: Kind,
        interruption: &Interruption,
    ) -> Result<Acted, KubeError> {
        // Whether or not the claim is already being deleted (expired, drifted, consolidated):
        // EC2 is taking the capacity back either way, as upstream's handler assumes.
        if kind == Kind::SpotInterrupted {
            self.mark_unavailable(claim);
        }
        // The reservation is being reclaimed: no more launches into it until the next sync.
        if kind == Kind::CapacityReservationInterrupted
            && let Some(id) = claim.labels().get(CAPACITY_RESERVATION_ID_LABEL)
        {
            self.ctx.reservations.mark_unavailable(id);
        }
        interrupt(&self.ctx, claim, kind, interruption).await
    }

    /// The interrupted (instance type, zone) is out of spot capacity for a while: the
    /// replacement is planned on other offerings.
    fn mark_unavailable(&self, claim: &NodeClaim) {
        let labels = claim.labels();
        if labels.get(CAPACITY_TYPE_LABEL).map(String::as_str) != Some(CapacityType::Spot.label()) {
            return;
        }
        if let (Some(instance_type), Some(zone)) =
            (labels.get(INSTANCE_TYPE_LABEL), labels.get(ZONE_LABEL))
        {
            self.ctx.unavailable.mark(
                instance_type,
                zone,
                CapacityType::Spot,
                self.ctx.now(),
                UNAVAILABLE_TTL,
            );
        }
    }
}

/// Marks one claim interrupted (`interruption`: its kind and eviction deadline) and deletes it,
/// with upstream's events and the `CordonAndDrain` action; `claim` is updated to what the delete
/// returned. Shared by the queue handler and the instance-status controller ([`super::health`]).
pub(super) async fn interrupt(
    ctx: &Context,
    claim: &mut NodeClaim,
    kind: Kind,
    interruption: &Interruption,
) -> Result<Acted, KubeError> {
    let name = claim.name_any();
    if claim.metadata.deletion_timestamp.is_some() {
        // Already being deleted (expired, drifted, consolidated) when the warning came: not
        // deleted again, but marked, so its pods get replacement capacity first like those of
        // any interrupted node, the ones a PodDisruptionBudget or `do-not-disrupt` keeps on it
        // included (deliberate difference 11: the instance goes whatever protects them). Unmarked,
        // the provisioner leaves those out as upstream leaves out fully blocked pods of a deleting
        // node, and they lose their node at the reclaim with nothing booted for them (swarm seed
        // 71: an expiring node whose eleven PDB-blocked pods were all lost). Upstream's handler
        // returns early for a deleting claim too; the mark is ours. A claim already marked keeps
        // its mark and deadline (a duplicate message changes nothing).
        if !replacement::is_interrupted(claim) {
            match replacement::mark_interrupted(ctx.kube.as_ref(), &name, interruption).await {
                Ok(()) | Err(KubeError::NotFound(_)) => {}
                Err(err) => return Err(err),
            }
        }
        return Ok(Acted::AlreadyDeleting);
    }
    match replacement::mark_interrupted(ctx.kube.as_ref(), &name, interruption).await {
        Ok(()) => {}
        Err(KubeError::NotFound(_)) => return Ok(Acted::Gone),
        Err(err) => return Err(err),
    }
    let (reason, text) = match kind {
        Kind::SpotInterrupted => ("SpotInterrupted", "Spot interruption warning was triggered"),
        Kind::CapacityReservationInterrupted => (
            "CapacityReservationInstanceInterrupted",
            "Capacity Reservation interruption warning was triggered",
        ),
        Kind::ScheduledChange | Kind::InstanceStatus | Kind::SystemStatus | Kind::EventStatus => (
            "InstanceUnhealthy",
            "An unhealthy warning was triggered for the instance",
        ),
        Kind::InstanceStopped => ("InstanceStopping", "Instance is stopping"),
        _ => ("InstanceTerminating", "Instance is terminating"),
    };
    events(ctx, claim, EventType::Warning, reason, text).await;
    let outcome = ctx
        .kube
        .delete(
            &ResourceKind::NODE_CLAIM,
            &ObjectKey::cluster(name),
            &DeleteOptions::default(),
        )
        .await?;
    match outcome {
        DeleteOutcome::Marked(value) => {
            if let Ok(marked) = serde_json::from_value::<NodeClaim>(value) {
                *claim = marked;
            }
        }
        DeleteOutcome::Deleted | DeleteOutcome::NotFound => {
            claim.metadata.deletion_timestamp = Some(Time(ctx.now()));
        }
    }
    // Warning, as upstream records it (alerts keyed on Warning events must see it).
    events(
        ctx,
        claim,
        EventType::Warning,
        "TerminatingOnInterruption",
        "Interruption triggered termination for the NodeClaim",
    )
    .await;
    action(ctx, "CordonAndDrain");
    let labels = claim.labels();
    ctx.metrics
        .nodeclaims_disrupted
        .get_or_create(&DisruptedLabels {
            reason: kind.label().to_string(),
            nodepool: labels.get(NODEPOOL_LABEL).cloned().unwrap_or_default(),
            capacity_type: labels.get(CAPACITY_TYPE_LABEL).cloned().unwrap_or_default(),
        })
        .inc();
    Ok(Acted::Deleted)
}

fn action(ctx: &Context, action: &str) {
    ctx.metrics
        .interruption_actions
        .get_or_create(&ActionLabels {
            action_type: action.to_string(),
        })
        .inc();
}

/// An event on the claim and, once it has one, its node. Best effort.
pub(super) async fn events(
    ctx: &Context,
    claim: &NodeClaim,
    type_: EventType,
    reason: &str,
    message: &str,
) {
    let recorder = &ctx.recorder;
    recorder
        .publish(Reference::claim(claim), type_, reason, message)
        .await;
    if let Some(node) = claim.status.as_ref().and_then(|s| s.node_name.clone()) {
        recorder
            .publish(Reference::node_named(node), type_, reason, message)
            .await;
    }
}
