//! How a scenario's [`CloudKnobs`] shape the world's fakecloud and API server: the knobs fakecloud
//! is built with ([`CloudKnobs::cloud_config`]: they are part of what [`FakeCloud::reset`]
//! returns to), then the standing fault rates and exhausted offerings set on the built components
//! ([`CloudKnobs::apply`]). A knob left unset leaves the component's default untouched, so a
//! scenario without knobs runs exactly the components as built.

use fakecloud::{Config as CloudConfig, FakeCloud, FaultRates, Pool};
use fakekit::Fake;
use fakekube::{ApiFaultRates, ApiServer};
use karpenter_core::catalog::CapacityType;

use super::CLUSTER;
use crate::scenario::{CloudKnobs, LatencyKnob};

impl CloudKnobs {
    /// Fakecloud's configuration for a world of `seed`: cluster name (or the discovery tag),
    /// pool capacity, boot model fractions and DescribeInstances lag.
    pub fn cloud_config(&self, seed: u64) -> CloudConfig {
        let mut config = CloudConfig {
            seed,
            cluster_name: CLUSTER.into(),
            ..CloudConfig::default()
        };
        if let Some(tag) = &self.discovery_tag {
            config.cluster_name = tag.clone();
            config.cluster_join_name = Some(CLUSTER.into());
        }
        if let Some(units) = self.pool_capacity {
            config.pool_capacity_default = units;
        }
        if let Some(f) = self.never_boot_fraction {
            config.boot.never_boot_fraction = f;
        }
        if let Some(f) = self.slow_boot_fraction {
            config.boot.slow_boot_fraction = f;
        }
        if let Some(ms) = self.eventual_consistency_lag_ms {
            config.eventual_consistency_lag_ms = ms;
        }
        config.latency = match self.latency {
            LatencyKnob::Drawn => fakecloud::LatencyProfile::drawn(seed),
            LatencyKnob::Realistic => fakecloud::LatencyProfile::realistic(),
            LatencyKnob::None => fakecloud::LatencyProfile::none(),
        };
        config
    }

    /// Creates the extra security groups, sets the standing EC2 fault rates, empties the
    /// exhausted offerings' pools and schedules the droughts on `cloud`, and sets the API server's fault rates and its
    /// normal latency for a world of `seed` on `api`. (Called once, on the freshly built
    /// components.)
    pub fn apply(&self, seed: u64, cloud: &FakeCloud, api: &ApiServer) {
        let throttle = self.ec2_throttle_rate.unwrap_or(0.0);
        let unavailable = self.ec2_unavailable_rate.unwrap_or(0.0);
        if throttle > 0.0 || unavailable > 0.0 {
            cloud.set_fault_rates_all(FaultRates {
                throttle_rate: throttle,
                unavailable_rate: unavailable,
                ..FaultRates::default()
            });
        }
        for name in &self.extra_security_groups {
            let tags = std::collections::BTreeMap::from([("Name".to_string(), name.clone())]);
            cloud.add_security_group(name, tags);
        }
        for (instance_type, zone, capacity_type) in &self.exhausted {
            let ct = CapacityType::from_label(capacity_type).unwrap_or(CapacityType::OnDemand);
            cloud.set_pool_capacity(&Pool::new(instance_type, zone, ct), 0);
        }
        let now = cloud.now();
        let at = |d: std::time::Duration| now.saturating_add(d).unwrap_or(now);
        for d in &self.droughts {
            let ct = CapacityType::from_label(&d.capacity_type).unwrap_or(CapacityType::OnDemand);
            let pool = Pool::new(&d.instance_type, &d.zone, ct);
            cloud.schedule_drought(&pool, at(d.from), at(d.from + d.duration));
        }
        let rates = self.api_rates(seed);
        if rates != ApiFaultRates::default() {
            api.set_fault_rates_all(rates);
        }
    }

    /// The API server's standing rates for a world of `seed`: the scenario's 5xx and conflict
    /// rates, and its normal latency. (fakekube has no normal latency of its own, as fakecloud
    /// has: the latency of its rates serves, and like them it is off while the world's harness
    /// and observer call, which are not the controller.)
    pub fn api_rates(&self, seed: u64) -> ApiFaultRates {
        let (latency_ms_min, latency_ms_max) = self.latency.api_server_ms(seed).unwrap_or((0, 0));
        ApiFaultRates {
            unavailable_rate: self.api_unavailable_rate.unwrap_or(0.0),
            conflict_rate: self.api_conflict_rate.unwrap_or(0.0),
            latency_ms_min,
            latency_ms_max,
            ..ApiFaultRates::default()
        }
    }
}
