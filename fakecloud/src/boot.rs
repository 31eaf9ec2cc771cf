//! The boot model: when a launched instance's kubelet would join the cluster, if ever. The
//! simulation's kubelet stand-in polls [`FakeCloud::ready_to_join`](crate::FakeCloud::ready_to_join)
//! and registers a Node with what [`Boot`] says.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use karpenter_core::catalog::CapacityType;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::registration::Taint;
use crate::rng::between;

/// How long bootstraps take: uniform in `[boot_duration_ms_min, boot_duration_ms_max]`; a
/// `slow_boot_fraction` of instances instead take up to `slow_boot_duration_ms_max`, and a
/// `never_boot_fraction` never join (bad AMI, broken user data, ...).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BootModel {
    pub boot_duration_ms_min: u64,
    pub boot_duration_ms_max: u64,
    pub slow_boot_fraction: f64,
    pub slow_boot_duration_ms_max: u64,
    pub never_boot_fraction: f64,
}

impl Default for BootModel {
    fn default() -> Self {
        Self {
            boot_duration_ms_min: 30_000,
            boot_duration_ms_max: 60_000,
            slow_boot_fraction: 0.0,
            slow_boot_duration_ms_max: 600_000,
            never_boot_fraction: 0.0,
        }
    }
}

impl BootModel {
    /// Draws one bootstrap duration from launch; `None` never boots. Always draws the same number
    /// of values, so one instance's outcome does not shift the next one's.
    pub(crate) fn draw(&self, rng: &mut ChaCha8Rng) -> Option<Duration> {
        let never = rng.r#gen::<f64>() < self.never_boot_fraction;
        let slow = rng.r#gen::<f64>() < self.slow_boot_fraction;
        let normal = between(rng, self.boot_duration_ms_min, self.boot_duration_ms_max);
        let slow_ms = between(
            rng,
            self.boot_duration_ms_max,
            self.slow_boot_duration_ms_max
                .max(self.boot_duration_ms_max),
        );
        if never {
            None
        } else if slow {
            Some(Duration::from_millis(slow_ms))
        } else {
            Some(Duration::from_millis(normal))
        }
    }
}

/// A launched instance as its kubelet would register it.
#[derive(Clone, Debug, PartialEq)]
pub struct Boot {
    pub instance_id: String,
    /// `aws:///ZONE/INSTANCE_ID`, the Node's `spec.providerID`.
    pub provider_id: String,
    /// The Node name on EKS.
    pub private_dns_name: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    pub launch_time: Timestamp,
    /// When the kubelet is ready to register; `None` never (a bootstrap that fails).
    pub ready_at: Option<Timestamp>,
    /// The launch template's user data, decoded if it was base64.
    pub user_data: String,
    /// Labels the kubelet registers with: the well-known ones it sets itself (hostname, instance
    /// type, zone, region, arch, os) plus `--node-labels` from the user data.
    pub labels: BTreeMap<String, String>,
    /// `--register-with-taints` / `registerWithTaints` / Bottlerocket `node-taints`.
    pub taints: Vec<Taint>,
    /// `--max-pods` (or nodeadm's / Bottlerocket's max pods) from the user data, if it set one.
    pub max_pods: Option<u32>,
}
