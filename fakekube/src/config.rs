//! Construction-time and run-time settings of the API server.

use std::collections::BTreeMap;

use crate::faults::{ApiFaultRates, ApiOperation};

/// Settings of an [`ApiServer`](crate::ApiServer). Every queue the server keeps has its
/// bound here, so a long simulation has a known memory ceiling.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiServerConfig {
    /// The one seed of every random draw: generated names, uids and fault decisions.
    pub seed: u64,
    /// Changes (of all kinds together, like etcd's compaction window) kept for watches that start
    /// from an older resourceVersion. A watch from a version older than the oldest kept change
    /// gets [`KubeError::Gone`](karpenter_core::seams::KubeError::Gone) and must re-list.
    pub watch_history_max: usize,
    /// Events one watcher may have queued and not yet read. A watcher that falls further behind is
    /// closed, as the API server's watch cache closes slow watchers: its stream ends and the
    /// client re-watches from the last version it saw (or re-lists on 410).
    pub watch_events_max: usize,
    /// How often, in the injected clock's time, an open watch gets a `Bookmark` with the current
    /// resourceVersion (Kubernetes sends them about once a minute). Bookmarks are sent when a call
    /// reaches the server or when the simulation calls
    /// [`ApiServer::advance_to_now`](crate::ApiServer::advance_to_now); the server has
    /// no background task. 0 disables them.
    pub bookmark_interval_ms: u64,
    /// Recorded Events kept for inspection; the oldest go first.
    pub events_max: usize,
    /// Calls kept in the call log; the oldest go first.
    pub call_log_len_max: usize,
    /// Standing fault rates per operation (absent: no faults).
    pub faults: BTreeMap<ApiOperation, ApiFaultRates>,
    /// Run EKS's VPC admission webhook on created pods ([`crate::admission::vpc_admission`]):
    /// Windows pods get their `vpc.amazonaws.com/PrivateIPv4Address`. On for the simulated EKS
    /// cluster; off for a bare API server.
    pub vpc_admission_webhook: bool,
}

impl Default for ApiServerConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            watch_history_max: 20_000,
            watch_events_max: 5_000,
            bookmark_interval_ms: 60_000,
            events_max: 10_000,
            call_log_len_max: 100_000,
            faults: BTreeMap::new(),
            vpc_admission_webhook: false,
        }
    }
}
