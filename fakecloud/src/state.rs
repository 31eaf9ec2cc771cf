//! Everything the fake cloud knows, behind the one mutex of [`FakeCloud`](crate::FakeCloud), and
//! how it catches up with the clock.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use karpenter_core::catalog::Catalog;
use karpenter_core::seams::ec2::{CreateFleetRequest, CreateFleetResponse};

use crate::amis::{AmiFamily, Amis};
use crate::calls::CallLog;
use crate::capacity::Capacity;
use crate::config::Config;
use crate::cost::{Ledger, Prices};
use crate::events::Origin;
use crate::faults::Faults;
use crate::instances::InstanceRecord;
use crate::network::Network;
use crate::rng::{Rngs, uuid};
use crate::sqs::Queue;
use crate::templates::Templates;
use crate::timeline::{Due, Timeline};

pub(crate) struct State {
    pub config: Config,
    pub catalog: Arc<Catalog>,
    /// The time the state has been advanced to.
    pub now: Timestamp,
    pub rng: Rngs,
    pub timeline: Timeline,
    pub network: Network,
    pub amis: Amis,
    pub templates: Templates,
    pub instances: BTreeMap<String, InstanceRecord>,
    /// `CreateFleet` results by client token, for idempotent retries.
    pub fleets: BTreeMap<String, (CreateFleetRequest, CreateFleetResponse)>,
    pub capacity: Capacity,
    pub prices: Prices,
    pub ledger: Ledger,
    pub queue: Queue,
    pub faults: Faults,
    pub calls: CallLog,
    /// Calls an injected latency delayed (what `FakeCloud::delayed_calls` reports).
    pub delayed_calls: u64,
    /// The latency injected into those calls, summed.
    pub delayed_total: std::time::Duration,
    /// Each call's normal latency (`Config::latency`).
    pub latencies: crate::latency::Latencies,
}

impl State {
    /// The world `config` describes, at `now`.
    pub fn new(config: Config, catalog: Arc<Catalog>, now: Timestamp) -> Self {
        let mut rng = Rngs::new(config.seed);
        let network = Network::new(
            &config.subnets,
            &config.security_groups,
            &catalog,
            &config.cluster_name,
            &config.region,
            config.subnet_free_ips_default,
            &mut rng.ids,
        );
        let mut amis = Amis::default();
        for (family, release) in [
            (AmiFamily::Al2023, &config.ami_release_al2023),
            (AmiFamily::Al2, &config.ami_release_al2),
            (AmiFamily::Bottlerocket, &config.ami_release_bottlerocket),
        ] {
            amis.publish(
                family,
                release,
                &config.kubernetes_version,
                now,
                &mut rng.ids,
            );
        }
        Self {
            capacity: Capacity::new(&catalog, config.pool_capacity_default),
            prices: Prices::new(&catalog, now),
            faults: Faults::default(),
            calls: CallLog::new(config.call_log_len_max),
            delayed_calls: 0,
            delayed_total: std::time::Duration::ZERO,
            latencies: crate::latency::Latencies::new(config.seed),
            queue: Queue::new(config.call_log_len_max),
            now,
            rng,
            timeline: Timeline::default(),
            network,
            amis,
            templates: Templates::default(),
            instances: BTreeMap::new(),
            fleets: BTreeMap::new(),
            ledger: Ledger::default(),
            catalog,
            config,
        }
    }

    /// Processes everything due up to `now`, in order; each item sees its own due time as "now",
    /// so events carry the time they happened, not the time someone looked.
    pub fn advance_to(&mut self, now: Timestamp) {
        while let Some((time, due)) = self.timeline.pop_due(now) {
            self.now = self.now.max(time);
            self.handle(time, due);
        }
        self.now = self.now.max(now);
    }

    fn handle(&mut self, time: Timestamp, due: Due) {
        match due {
            Due::Running(id) => self.mark_running(&id, time),
            Due::Terminated(id) => self.finish_termination(&id, time),
            Due::Stopped(id) => self.finish_stop(&id, time),
            Due::SpotInterruption(id) => {
                self.interrupt_spot(&id, time);
            }
            Due::SpotReclaim(id) => self.begin_termination(&id, time),
            Due::RebalanceRecommendation(id) => {
                self.recommend_rebalance(&id, time);
            }
            Due::ScheduledStop(id) => self.begin_stop(&id, time),
            Due::Deliver(body) => self
                .queue
                .enqueue(&body, time, &self.config, &mut self.rng.sqs),
            Due::Capacity(pool, units) => {
                self.capacity.set(&pool, units);
            }
            Due::Forget(id) => {
                self.instances.remove(&id);
            }
        }
    }

    /// Sends an EventBridge event that happened at `time`; SQS has it after the delivery lag.
    pub fn emit(&mut self, time: Timestamp, build: impl FnOnce(&Origin<'_>) -> String) {
        let origin = Origin {
            region: &self.config.region,
            account: &self.config.account_id,
            id: uuid(&mut self.rng.ids),
            time,
        };
        let body = build(&origin);
        let at = after_ms(time, self.config.event_delivery_lag_ms);
        self.timeline.at(at, Due::Deliver(body));
    }
}

/// `time + ms`, saturating.
pub(crate) fn after_ms(time: Timestamp, ms: u64) -> Timestamp {
    after(time, Duration::from_millis(ms))
}

/// `time + by`, saturating.
pub(crate) fn after(time: Timestamp, by: Duration) -> Timestamp {
    let by = SignedDuration::try_from(by).unwrap_or(SignedDuration::MAX);
    time.saturating_add(by).unwrap_or(time)
}
