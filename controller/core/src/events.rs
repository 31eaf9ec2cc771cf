//! Kubernetes Events, the way every controller records them (kube-rs's `events::Recorder` habit):
//! one [`Recorder`] over the Kubernetes seam, an [`EventType`] instead of a string, and a
//! [`Reference`] naming the object an event is about.
//!
//! Events are best effort, as upstream treats them: a failed write is logged at debug level and
//! never fails the reconcile that recorded it (the state it reports lives in conditions). When
//! the operator runs its loops ([`crate::operator::Operator::spawn`]) events are handed to a
//! writer task through a bounded queue (client-go's broadcaster: queued, dropped when full), so a
//! pass that nominates a thousand pods does not wait a thousand API round trips.
//!
//! Events are deduplicated and rate limited before they are queued, as upstream's recorder
//! (`events/recorder.go`) and its scheduling events (`scheduling/events.go`) do, so a thousand
//! pods retried every 10 s do not write ~100 events/s into etcd:
//! - an event about the same object with the same reason and message is recorded once per
//!   [`EVENT_DEDUPE_WINDOW`] (2 min, upstream's default);
//! - `FailedScheduling` is recorded once per pod per [`FAILED_SCHEDULING_DEDUPE_WINDOW`] (5 min),
//!   whatever its message, and `Nominated` once per pod per [`EVENT_DEDUPE_WINDOW`];
//! - `Nominated` events share one token bucket of [`NOMINATIONS_PER_SECOND`] with a burst of
//!   [`NOMINATIONS_BURST`]; an event over the limit is dropped (and not remembered, so the pod's
//!   next nomination can be recorded).
//!
//! One deliberate difference: upstream keys events that name no dedupe values by reason alone;
//! here every key names the object, so two nodes' `Disrupted` events are both recorded.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;

use tokio::sync::mpsc;

use k8s_openapi::api::core::v1::Node;
use kube_core::ResourceExt;

use crate::api::NodeClaim;
use crate::seams::kube::{EventRecord, ObjectKey, ResourceKind};
use crate::seams::{Clock, KubeApi};

pub use crate::seams::kube::EventType;

/// The object an event is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    pub kind: ResourceKind,
    pub key: ObjectKey,
    pub uid: Option<String>,
}

impl Reference {
    pub fn claim(claim: &NodeClaim) -> Self {
        Self {
            kind: ResourceKind::NODE_CLAIM,
            key: ObjectKey::cluster(claim.name_any()),
            uid: claim.uid(),
        }
    }

    pub fn node(node: &Node) -> Self {
        Self {
            kind: ResourceKind::NODE,
            key: ObjectKey::cluster(node.name_any()),
            uid: node.uid(),
        }
    }

    /// A node known only by name (from a claim's `status.nodeName`).
    pub fn node_named(name: impl Into<String>) -> Self {
        Self {
            kind: ResourceKind::NODE,
            key: ObjectKey::cluster(name),
            uid: None,
        }
    }

    pub fn pod(key: ObjectKey, uid: Option<String>) -> Self {
        Self {
            kind: ResourceKind::POD,
            key,
            uid,
        }
    }
}

/// Events queued for the writer task at most; more are dropped (client-go's broadcaster queue
/// holds 1000).
pub const EVENTS_QUEUED_MAX: usize = 1_000;
/// Event writes the writer task has in flight at once.
pub const EVENT_WRITES_PARALLEL_MAX: usize = 10;

/// How long an event is not recorded again after it was (upstream's recorder default).
pub const EVENT_DEDUPE_WINDOW: Duration = Duration::from_secs(2 * 60);
/// How long a pod's `FailedScheduling` is not recorded again, whatever its message (upstream's
/// `PodFailedToScheduleEvent`). Provisioning retries unschedulable pods every 10 s.
pub const FAILED_SCHEDULING_DEDUPE_WINDOW: Duration = Duration::from_secs(5 * 60);
/// `Nominated` events recorded per second at most, across all pods (upstream's
/// `PodNominationRateLimiter`).
pub const NOMINATIONS_PER_SECOND: u32 = 5;
/// `Nominated` events recorded at once before [`NOMINATIONS_PER_SECOND`] applies.
pub const NOMINATIONS_BURST: u32 = 10;
/// Dedupe keys remembered at most. Expired keys are dropped first; past the bound the keys
/// closest to expiry go, so the cost is a repeated event, never unbounded memory. 10,000 holds
/// every pod's key in a 5,000-pod burst with room for node and claim events.
pub const EVENT_DEDUPE_ENTRIES_MAX: usize = 10_000;

/// How one event is deduplicated and limited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Policy {
    window: Duration,
    /// Whether the message is part of the key (else only object and reason are).
    by_message: bool,
    rate_limited: bool,
}

impl Policy {
    fn of(reason: &str) -> Self {
        match reason {
            "FailedScheduling" => Self {
                window: FAILED_SCHEDULING_DEDUPE_WINDOW,
                by_message: false,
                rate_limited: false,
            },
            "Nominated" => Self {
                window: EVENT_DEDUPE_WINDOW,
                by_message: false,
                rate_limited: true,
            },
            _ => Self {
                window: EVENT_DEDUPE_WINDOW,
                by_message: true,
                rate_limited: false,
            },
        }
    }
}

/// What one event is deduplicated by.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct DedupeKey {
    kind: &'static str,
    namespace: Option<String>,
    name: String,
    uid: Option<String>,
    reason: String,
    message: Option<String>,
}

/// The recorder's memory: recent keys with when they expire, and the nomination token bucket.
#[derive(Debug)]
struct Limiter {
    seen: BTreeMap<DedupeKey, Timestamp>,
    /// Tokens left, in thousandths of an event (integer, so runs replay bit for bit).
    nomination_tokens_milli: u64,
    refilled_at: Option<Timestamp>,
}

impl Limiter {
    fn new() -> Self {
        Self {
            seen: BTreeMap::new(),
            nomination_tokens_milli: u64::from(NOMINATIONS_BURST) * 1_000,
            refilled_at: None,
        }
    }

    /// Whether `record` should be written now; remembers it if so.
    fn admit(&mut self, record: &EventRecord, now: Timestamp) -> bool {
        let policy = Policy::of(&record.reason);
        let key = DedupeKey {
            kind: record.involved.kind,
            namespace: record.key.namespace.clone(),
            name: record.key.name.clone(),
            uid: record.uid.clone(),
            reason: record.reason.clone(),
            message: policy.by_message.then(|| record.message.clone()),
        };
        if self.seen.get(&key).is_some_and(|expires| *expires > now) {
            return false;
        }
        if policy.rate_limited && !self.take_nomination_token(now) {
            return false;
        }
        let expires = now.checked_add(policy.window).unwrap_or(Timestamp::MAX);
        self.seen.insert(key, expires);
        self.bound(now);
        true
    }

    fn take_nomination_token(&mut self, now: Timestamp) -> bool {
        let capacity = u64::from(NOMINATIONS_BURST) * 1_000;
        if let Some(last) = self.refilled_at {
            let elapsed_ms = u64::try_from(now.duration_since(last).as_millis()).unwrap_or(0);
            let refill = elapsed_ms.saturating_mul(u64::from(NOMINATIONS_PER_SECOND));
            self.nomination_tokens_milli = (self.nomination_tokens_milli + refill).min(capacity);
        }
        self.refilled_at = Some(now);
        if self.nomination_tokens_milli >= 1_000 {
            self.nomination_tokens_milli -= 1_000;
            true
        } else {
            false
        }
    }

    fn bound(&mut self, now: Timestamp) {
        if self.seen.len() <= EVENT_DEDUPE_ENTRIES_MAX {
            return;
        }
        self.seen.retain(|_, expires| *expires > now);
        while self.seen.len() > EVENT_DEDUPE_ENTRIES_MAX {
            let soonest = self
                .seen
                .iter()
                .min_by(|a, b| a.1.cmp(b.1).then_with(|| a.0.cmp(b.0)))
                .map(|(key, _)| key.clone());
            match soonest {
                Some(key) => self.seen.remove(&key),
                None => break,
            };
        }
    }
}

/// Records events through the Kubernetes seam, deduplicated and rate limited (module docs).
#[derive(Clone)]
pub struct Recorder {
    kube: Arc<dyn KubeApi>,
    clock: Arc<dyn Clock>,
    limiter: Arc<Mutex<Limiter>>,
    /// The writer task's queue, once the operator runs as tasks; direct writes before that.
    sink: Arc<Mutex<Option<mpsc::Sender<EventRecord>>>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

impl Recorder {
    pub fn new(kube: Arc<dyn KubeApi>, clock: Arc<dyn Clock>) -> Self {
        Self {
            kube,
            clock,
            limiter: Arc::new(Mutex::new(Limiter::new())),
            sink: Arc::new(Mutex::new(None)),
        }
    }

    fn lock_sink(&self) -> std::sync::MutexGuard<'_, Option<mpsc::Sender<EventRecord>>> {
        self.sink
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// From now on events go through a queue to the returned writer future, which the caller
    /// spawns (and stops with its loops); a later call replaces the writer.
    pub fn start_writer(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (sender, receiver) = mpsc::channel(EVENTS_QUEUED_MAX);
        *self.lock_sink() = Some(sender);
        let kube = self.kube.clone();
        async move {
            use futures::StreamExt;
            let records = futures::stream::unfold(receiver, |mut r| async move {
                r.recv().await.map(|record| (record, r))
            });
            records
                .for_each_concurrent(EVENT_WRITES_PARALLEL_MAX, |record| {
                    let kube = kube.clone();
                    async move {
                        if let Err(err) = kube.record_event(&record).await {
                            tracing::debug!(%err, reason = record.reason, "event not recorded");
                        }
                    }
                })
                .await;
        }
    }

    /// Back to direct writes (the writer task was stopped with the loops).
    pub fn stop_writer(&self) {
        *self.lock_sink() = None;
    }

    /// Records one event about `regarding`, unless it repeats a recent one or is over its rate
    /// limit (module docs). Best effort: a failure is logged, not returned.
    pub async fn publish(
        &self,
        regarding: Reference,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        let message = message.into();
        // Every event is also a debug log line: with events rate-limited and deduplicated on the
        // server, the log is where one object's whole story can be read back (a replayed
        // simulation seed with `KARPENTER_SIM_LOG`, or a controller run at debug level).
        tracing::debug!(
            kind = regarding.kind.kind,
            object = %regarding.key.name,
            reason,
            %message,
            "event"
        );
        let record = EventRecord {
            involved: regarding.kind,
            key: regarding.key,
            uid: regarding.uid,
            type_,
            reason: reason.to_string(),
            message,
        };
        let admitted = self
            .limiter
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .admit(&record, self.clock.now());
        if !admitted {
            return;
        }
        let sink = self.lock_sink().clone();
        if let Some(sink) = sink {
            if let Err(err) = sink.try_send(record) {
                tracing::debug!(%err, reason, "event queue full; event dropped");
            }
            return;
        }
        if let Err(err) = self.kube.record_event(&record).await {
            tracing::debug!(%err, reason, "event not recorded");
        }
    }
}
