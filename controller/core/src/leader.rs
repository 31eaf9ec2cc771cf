//! Leader election over a `coordination.k8s.io/v1` Lease, with client-go's `leaderelection`
//! semantics, so several controller replicas can run and only one acts.
//!
//! - **Acquire**: a candidate takes the lease when it does not exist (create), when it has no
//!   holder (released), or when the holder has not changed it for the lease's
//!   `leaseDurationSeconds` *as observed by this candidate*: like client-go, expiry is measured
//!   from the moment this candidate first saw the current record, never from the `renewTime`
//!   written in it, so clocks of different replicas never have to agree.
//! - **Renew**: the holder rewrites `renewTime` every [`RETRY_PERIOD`]; a holder that has not
//!   renewed successfully for [`RENEW_DEADLINE`] stops leading at once, even if the lease still
//!   names it. Since the deadline (10 s) is shorter than the duration (15 s) and a follower
//!   observes a renewal no earlier than it was written, the old leader has stopped before any
//!   other candidate may take over: two replicas never lead at the same time.
//! - **Writes are guarded**: every update carries the resourceVersion of the read it is based on,
//!   so of two candidates racing for an expired lease exactly one wins (the other gets 409).
//! - **Release**: a leader shutting down clears `holderIdentity` and sets
//!   `leaseDurationSeconds: 1` (client-go's `ReleaseOnCancel`), so a standby takes over at its
//!   next attempt instead of a lease duration later.
//!
//! Time comes from the [`Clock`] seam; the elector has no task of its own: the caller calls
//! [`LeaderElector::step`] from its loop (the simulation each step; production every second or
//! so), which attempts an acquire or renew once every `retry_period`.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use serde_json::{Value, json};

use crate::seams::kube::{ObjectKey, Patch, ResourceKind};
use crate::seams::{Clock, KubeApi, KubeError};

/// How long a lease is valid after its holder last renewed it, as a follower observes it
/// (client-go's and Karpenter's default).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How long a leader keeps leading without a successful renewal (client-go's default).
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// How often a candidate tries to acquire, and a leader to renew (client-go's default).
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);

/// Why leader election cannot proceed, or why one attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The API call failed (409 on a lost race, 5xx, ...); the next attempt retries.
    #[error(transparent)]
    Kube(#[from] KubeError),
    /// The Lease object exists but is not a Lease this elector can read.
    #[error("lease {name} does not decode: {message}")]
    Decode { name: String, message: String },
    /// Timings that would let two replicas lead at once.
    #[error("invalid leader election config: {0}")]
    Config(String),
}

/// Where the lease lives, who this candidate is, and the timings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    /// This replica's identity (client-go: hostname plus a unique suffix, so a restarted pod is
    /// a new candidate).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// The lease `namespace/name` for `identity`, with client-go's default timings.
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: LEASE_DURATION,
            renew_deadline: RENEW_DEADLINE,
            retry_period: RETRY_PERIOD,
        }
    }

    /// client-go's checks: a renew deadline shorter than the lease duration (else a follower could
    /// take over while the leader still leads) and longer than the retry period (else a leader
    /// gets no second try before stepping down).
    fn validate(&self) -> Result<(), LeaderError> {
        if self.identity.is_empty() {
            return Err(LeaderError::Config("identity must not be empty".into()));
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(LeaderError::Config(format!(
                "lease duration {:?} must be longer than the renew deadline {:?}",
                self.lease_duration, self.renew_deadline
            )));
        }
        if self.renew_deadline <= self.retry_period {
            return Err(LeaderError::Config(format!(
                "renew deadline {:?} must be longer than the retry period {:?}",
                self.renew_deadline, self.retry_period
            )));
        }
        if self.lease_duration.as_secs() == 0 || self.lease_duration.as_secs() > i32::MAX as u64 {
            return Err(LeaderError::Config(format!(
                "lease duration {:?} must be whole seconds between 1 and 2^31",
                self.lease_duration
            )));
        }
        Ok(())
    }
}

/// The lease's election fields, as last read or written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRecord {
    /// `None` (or empty in the object): nobody holds it.
    pub holder: Option<String>,
    pub lease_duration_seconds: i64,
    pub acquire_time: Option<Timestamp>,
    pub renew_time: Option<Timestamp>,
    pub transitions: i64,
}

impl LeaseRecord {
    fn of(lease: &Lease) -> Self {
        let spec = lease.spec.clone().unwrap_or_default();
        Self {
            holder: spec.holder_identity.filter(|h| !h.is_empty()),
            lease_duration_seconds: i64::from(spec.lease_duration_seconds.unwrap_or(0)),
            acquire_time: spec.acquire_time.map(|t| t.0),
            renew_time: spec.renew_time.map(|t| t.0),
            transitions: i64::from(spec.lease_transitions.unwrap_or(0)),
        }
    }

    fn spec(&self) -> Value {
        json!({
            "holderIdentity": self.holder.clone().unwrap_or_default(),
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": self.acquire_time.map(micro_time),
            "renewTime": self.renew_time.map(micro_time),
            "leaseTransitions": self.transitions,
        })
    }
}

/// `MicroTime`'s wire format: RFC 3339 with microseconds.
fn micro_time(time: Timestamp) -> String {
    time.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// `time` at the lease's precision (microseconds), so a record read back equals the one written.
fn micros(time: Timestamp) -> Timestamp {
    Timestamp::from_microsecond(time.as_microsecond()).unwrap_or(time)
}

/// The record as this candidate last saw it, and since when.
#[derive(Clone, Debug)]
struct Observed {
    record: LeaseRecord,
    resource_version: String,
    /// When this candidate first saw `record` (what expiry is measured from).
    since: Timestamp,
}

/// One candidate of one lease. Keeps only what client-go keeps in memory: the last observed
/// record and when it was observed, and when this candidate last renewed; everything else is in
/// the Lease, so a restarted replica is simply a new candidate.
pub struct LeaderElector {
    kube: Arc<dyn KubeApi>,
    clock: Arc<dyn Clock>,
    config: LeaseConfig,
    observed: Option<Observed>,
    /// The last successful acquire or renew by this candidate.
    renewed_at: Option<Timestamp>,
    /// The last attempt, successful or not (attempts are `retry_period` apart).
    attempted_at: Option<Timestamp>,
}

impl LeaderElector {
    pub fn new(
        kube: Arc<dyn KubeApi>,
        clock: Arc<dyn Clock>,
        config: LeaseConfig,
    ) -> Result<Self, LeaderError> {
        config.validate()?;
        Ok(Self {
            kube,
            clock,
            config,
            observed: None,
            renewed_at: None,
            attempted_at: None,
        })
    }

    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// The holder named by the lease as last observed.
    pub fn observed_holder(&self) -> Option<&str> {
        self.observed.as_ref()?.record.holder.as_deref()
    }

    /// Whether this candidate leads now: the lease as last observed names it, and it renewed the
    /// lease less than `renew_deadline` ago.
    pub fn is_leader(&self) -> bool {
        let now = self.clock.now();
        self.observed_holder() == Some(self.config.identity.as_str())
            && self.renewed_at.is_some_and(|t| {
                now < t
                    .saturating_add(self.config.renew_deadline)
                    .unwrap_or(Timestamp::MAX)
            })
    }

    /// Attempts an acquire or renew if `retry_period` has passed since the last attempt, and says
    /// whether this candidate leads afterwards. `Err` is the attempt's error (a lost race, an
    /// API failure): a leader keeps leading through failed attempts until its renew deadline, so
    /// [`LeaderElector::is_leader`] remains the answer to "may I act now".
    pub async fn step(&mut self) -> Result<bool, LeaderError> {
        let now = self.clock.now();
        let due = self.attempted_at.is_none_or(|t| {
            now >= t
                .saturating_add(self.config.retry_period)
                .unwrap_or(Timestamp::MAX)
        });
        if due {
            self.try_acquire_or_renew().await?;
        }
        Ok(self.is_leader())
    }

    /// One attempt (client-go's `tryAcquireOrRenew`): read the lease, take or renew it if this
    /// candidate may, with a write guarded by the read's resourceVersion. `Ok(true)` when this
    /// candidate holds the lease afterwards; `Ok(false)` when another valid holder has it.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaderError> {
        let now = micros(self.clock.now());
        self.attempted_at = Some(now);
        let key = ObjectKey::namespaced(self.config.namespace.clone(), self.config.name.clone());
        let me = self.config.identity.clone();
        let mut desired = LeaseRecord {
            holder: Some(me.clone()),
            lease_duration_seconds: self.config.lease_duration.as_secs() as i64,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: 0,
        };
        let Some(current) = self.kube.get(&ResourceKind::LEASE, &key).await? else {
            let lease = json!({
                "apiVersion": ResourceKind::LEASE.api_version(),
                "kind": ResourceKind::LEASE.kind,
                "metadata": {"name": self.config.name, "namespace": self.config.namespace},
                "spec": desired.spec(),
            });
            let created = self.kube.create(&ResourceKind::LEASE, lease).await?;
            self.observe_written(desired, &created, now);
            return Ok(true);
        };
        let lease: Lease = serde_json::from_value(current).map_err(|e| LeaderError::Decode {
            name: format!("{}/{}", self.config.namespace, self.config.name),
            message: e.to_string(),
        })?;
        let record = LeaseRecord::of(&lease);
        let resource_version = lease.metadata.resource_version.clone().unwrap_or_default();
        let changed = self.observed.as_ref().is_none_or(|o| o.record != record);
        if changed {
            self.observed = Some(Observed {
                record: record.clone(),
                resource_version: resource_version.clone(),
                since: now,
            });
        } else if let Some(observed) = &mut self.observed {
            observed.resource_version = resource_version.clone();
        }
        let held_by_other = record.holder.as_ref().is_some_and(|h| *h != me);
        if held_by_other && self.valid(&record, now) {
            return Ok(false);
        }
        if record.holder.as_deref() == Some(me.as_str()) {
            desired.acquire_time = record.acquire_time;
            desired.transitions = record.transitions;
        } else {
            desired.transitions = record.transitions.saturating_add(1);
        }
        let patch = json!({
            "metadata": {"resourceVersion": resource_version},
            "spec": desired.spec(),
        });
        let written = self
            .kube
            .patch(&ResourceKind::LEASE, &key, &Patch::Merge(patch))
            .await?;
        self.observe_written(desired, &written, now);
        Ok(true)
    }

    /// Gives the lease up if this candidate holds it (`Ok(true)`), so a standby takes over at its
    /// next attempt. Leadership ends here whether or not the write succeeds.
    pub async fn release(&mut self) -> Result<bool, LeaderError> {
        self.renewed_at = None;
        let Some(observed) = self.observed.clone() else {
            return Ok(false);
        };
        if observed.record.holder.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(false);
        }
        let now = micros(self.clock.now());
        let released = LeaseRecord {
            holder: None,
            lease_duration_seconds: 1,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: observed.record.transitions,
        };
        let key = ObjectKey::namespaced(self.config.namespace.clone(), self.config.name.clone());
        let patch = json!({
            "metadata": {"resourceVersion": observed.resource_version},
            "spec": released.spec(),
        });
        let written = self
            .kube
            .patch(&ResourceKind::LEASE, &key, &Patch::Merge(patch))
            .await?;
        self.observed = Some(Observed {
            record: released,
            resource_version: resource_version_of(&written),
            since: now,
        });
        Ok(true)
    }

    /// Whether `record` is still valid for a candidate that first saw it at `observed.since`.
    fn valid(&self, record: &LeaseRecord, now: Timestamp) -> bool {
        let Some(observed) = &self.observed else {
            return false;
        };
        let duration = Duration::from_secs(record.lease_duration_seconds.max(0).unsigned_abs());
        // Saturating: only a calendar span could make jiff's addition fail.
        now < observed
            .since
            .saturating_add(duration)
            .unwrap_or(Timestamp::MAX)
    }

    fn observe_written(&mut self, record: LeaseRecord, written: &Value, now: Timestamp) {
        self.observed = Some(Observed {
            record,
            resource_version: resource_version_of(written),
            since: now,
        });
        self.renewed_at = Some(now);
    }
}

fn resource_version_of(object: &Value) -> String {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}
