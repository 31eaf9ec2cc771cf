//! Everything the fake cloud knows, behind the one mutex of [`FakeCloud`](crate::FakeCloud), and
//! how it catches up with the clock.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fakekit::{Kit, KitSpec};
use jiff::{SignedDuration, Timestamp};
use karpenter_core::catalog::Catalog;
use karpenter_core::seams::ec2::{CreateFleetRequest, CreateFleetResponse};
use strum::VariantArray;

use crate::amis::{AmiFamily, Amis};
use crate::calls::CallRecord;
use crate::capacity::Capacity;
use crate::config::Config;
use crate::cost::{Ledger, Prices};
use crate::events::Origin;
use crate::faults::{Fault, FaultRates, Operation};
use crate::instances::InstanceRecord;
use crate::network::Network;
use crate::rng::{self, Rngs, uuid};
use crate::sqs::Queue;
use crate::templates::Templates;
use crate::timeline::{Due, Timeline};

/// Everything the fake cloud knows (unnameable outside the crate: fakekit's `Fake` lends it back to
/// the crate only).
pub struct State {
    pub(crate) config: Config,
    pub(crate) catalog: Arc<Catalog>,
    /// The time the state has been advanced to.
    pub(crate) now: Timestamp,
    pub(crate) rng: Rngs,
    pub(crate) timeline: Timeline,
    pub(crate) network: Network,
    pub(crate) amis: Amis,
    pub(crate) templates: Templates,
    pub(crate) instances: BTreeMap<String, InstanceRecord>,
    pub(crate) reservations: crate::reservations::Reservations,
    /// `CreateFleet` results by client token, for idempotent retries.
    pub(crate) fleets: BTreeMap<String, (CreateFleetRequest, CreateFleetResponse)>,
    pub(crate) capacity: Capacity,
    pub(crate) prices: Prices,
    pub(crate) ledger: Ledger,
    pub(crate) queue: Queue,
    /// The fault plan, the call log and the latency tally.
    pub(crate) kit: Kit<CloudKit>,
    /// Each call's normal latency (`Config::latency`).
    pub(crate) latencies: crate::latency::Latencies,
}

/// The types of fakecloud's kit: AWS's operations, EC2-style faults, [`CallRecord`]s.
pub struct CloudKit;

impl KitSpec for CloudKit {
    type Operation = Operation;
    type Rates = FaultRates;
    type Fault = Fault;
    type Record = CallRecord;
    const OPERATIONS: &'static [Operation] = Operation::VARIANTS;
}

impl State {
    /// The world `config` describes, at `now`.
    pub fn new(config: Config, catalog: Arc<Catalog>, now: Timestamp) -> Self {
        let streams = rng::streams(config.seed);
        let mut rng = Rngs::new(&streams);
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
        let minor = config
            .kubernetes_version
            .split('.')
            .nth(1)
            .and_then(|m| m.parse::<u32>().ok())
            .unwrap_or(0);
        let windows = [
            AmiFamily::Windows2019,
            AmiFamily::Windows2022,
            AmiFamily::Windows2025,
        ];
        for family in windows
            .into_iter()
            .filter(|f| *f != AmiFamily::Windows2025 || minor >= 35)
        {
            amis.publish(
                family,
                &config.ami_release_windows,
                &config.kubernetes_version,
                now,
                &mut rng.windows_amis,
            );
        }
        Self {
            capacity: Capacity::new(&catalog, config.pool_capacity_default),
            prices: Prices::new(&catalog, now),
            kit: Kit::new(streams, config.call_log_len_max),
            latencies: crate::latency::Latencies::new(config.seed),
            queue: Queue::new(config.call_log_len_max),
            now,
            rng,
            timeline: Timeline::default(),
            network,
            amis,
            templates: Templates::default(),
            instances: BTreeMap::new(),
            reservations: Default::default(),
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
            Due::Drought(pool, dry) => self.capacity.set_dry(&pool, dry),
            Due::Forget(id) => {
                self.instances.remove(&id);
            }
            Due::ReservationEnd(id) => {
                self.end_reservation(&id, "expired", time);
            }
            Due::CapacityBlockReclaim(id) => self.reclaim_capacity_block(&id, time),
        }
    }

    /// Sends an EventBridge event that happened at `time`; SQS has it after the delivery lag.
    pub(crate) fn emit(&mut self, time: Timestamp, build: impl FnOnce(&Origin<'_>) -> String) {
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
