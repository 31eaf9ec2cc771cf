//! Instances and their lifecycle: `pending` → `running` → `shutting-down` → `terminated` (or
//! `stopping` → `stopped`), the changes the controller acts on (`stopping`, `stopped`,
//! `shutting-down`, `terminated`) sent to the interruption queue as state-change notifications,
//! capacity, IPs and billing following along. `DescribeInstances` is eventually consistent: a
//! launched instance is invisible for `eventual_consistency_lag_ms`.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use karpenter_core::catalog::CapacityType;
use karpenter_core::seams::ec2::{
    Ec2Error, Filter, Instance, InstanceState, InstanceStatus, StatusCheck,
};

use crate::boot::Boot;
use crate::bootstrap::{JoinError, KubeletView};
use crate::capacity::Pool;
use crate::events;
use crate::filters;
use crate::state::{State, after, after_ms};
use crate::timeline::Due;

/// How long EC2 gives a spot instance between the warning and the reclaim.
pub const SPOT_INTERRUPTION_NOTICE: Duration = Duration::from_secs(120);

/// How long after the Health event a scheduled stop ends (the maintenance window).
const MAINTENANCE_WINDOW: Duration = Duration::from_secs(3600);

#[derive(Clone, Debug)]
pub(crate) struct InstanceRecord {
    pub instance: Instance,
    pub pool: Pool,
    pub zone_id: String,
    /// Until then `DescribeInstances` and `CreateTags` do not see it.
    pub visible_at: Timestamp,
    pub holds_capacity: bool,
    pub holds_ip: bool,
    /// When the kubelet is ready to register (`None`: never).
    pub ready_at: Option<Timestamp>,
    /// Decoded user data of its launch template.
    pub user_data: String,
    /// What its bootstrap made of the user data: the kubelet's view, or why it never joins.
    pub join: Result<KubeletView, JoinError>,
    /// A spot interruption warning was sent (EC2 sends one).
    pub warned: bool,
    /// What `DescribeInstanceStatus` reports (set through the knobs).
    pub status: StatusChecks,
    /// The capacity reservation whose slot it holds (`instance.capacity_reservation_id` is what
    /// EC2 reports; this is the slot to give back).
    pub reservation: Option<String>,
}

/// An instance's status checks and scheduled events, as `DescribeInstanceStatus` reports them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusChecks {
    /// The instance's own reachability check has failed since then.
    pub instance_impaired_since: Option<Timestamp>,
    /// The host's reachability check has failed since then.
    pub system_impaired_since: Option<Timestamp>,
    /// Codes of scheduled events (`instance-reboot`, `system-maintenance`, ...).
    pub events: Vec<String>,
}

/// `DescribeInstanceStatus` filters the fake evaluates.
const STATUS_FILTERS: [&str; 4] = [
    "instance-id",
    "instance-status.status",
    "system-status.status",
    "event.code",
];

/// One reachability check as EC2 reports it.
fn check(impaired_since: Option<Timestamp>) -> StatusCheck {
    StatusCheck {
        name: "reachability".into(),
        status: if impaired_since.is_some() {
            "failed"
        } else {
            "passed"
        }
        .into(),
        impaired_since,
    }
}

impl InstanceRecord {
    pub fn boot(&self, region: &str, arch_and_os: &BTreeMap<String, String>) -> Boot {
        let i = &self.instance;
        let view = self.join.clone().unwrap_or_default();
        let mut labels: BTreeMap<String, String> = arch_and_os.clone();
        for (key, value) in [
            ("kubernetes.io/hostname", i.private_dns_name.clone()),
            ("node.kubernetes.io/instance-type", i.instance_type.clone()),
            ("topology.kubernetes.io/zone", i.zone.clone()),
            ("topology.kubernetes.io/region", region.to_string()),
            ("topology.k8s.aws/zone-id", self.zone_id.clone()),
        ] {
            labels.insert(key.to_string(), value);
        }
        labels.extend(view.labels);
        Boot {
            instance_id: i.instance_id.clone(),
            provider_id: format!("aws:///{}/{}", i.zone, i.instance_id),
            private_dns_name: i.private_dns_name.clone(),
            instance_type: i.instance_type.clone(),
            zone: i.zone.clone(),
            capacity_type: i.capacity_type,
            launch_time: i.launch_time,
            ready_at: self.ready_at,
            user_data: self.user_data.clone(),
            labels,
            taints: view.taints,
            max_pods: view.max_pods,
        }
    }
}

/// EC2's name of a state.
pub(crate) fn state_name(state: InstanceState) -> &'static str {
    match state {
        InstanceState::Pending => "pending",
        InstanceState::Running => "running",
        InstanceState::ShuttingDown => "shutting-down",
        InstanceState::Terminated => "terminated",
        InstanceState::Stopping => "stopping",
        InstanceState::Stopped => "stopped",
    }
}

const DESCRIBE_FILTERS: [&str; 8] = [
    "instance-id",
    "instance-state-name",
    "instance-type",
    "availability-zone",
    "subnet-id",
    "image-id",
    "private-dns-name",
    "instance-lifecycle",
];

impl State {
    fn visible(&self, record: &InstanceRecord) -> bool {
        self.now >= record.visible_at
    }

    pub fn describe_instances(
        &self,
        ids: &[String],
        filters: &[Filter],
    ) -> Result<Vec<Instance>, Ec2Error> {
        filters::check(filters, &DESCRIBE_FILTERS)?;
        Ok(self
            .instances
            .values()
            .filter(|r| self.visible(r))
            .filter(|r| ids.is_empty() || ids.contains(&r.instance.instance_id))
            .filter(|r| {
                let i = &r.instance;
                filters::matches(filters, &i.tags, |name| match name {
                    "instance-id" => vec![i.instance_id.clone()],
                    "instance-state-name" => vec![state_name(i.state).to_string()],
                    "instance-type" => vec![i.instance_type.clone()],
                    "availability-zone" => vec![i.zone.clone()],
                    "subnet-id" => vec![i.subnet_id.clone()],
                    "image-id" => vec![i.image_id.clone()],
                    "private-dns-name" => vec![i.private_dns_name.clone()],
                    "instance-lifecycle" => match i.capacity_type {
                        CapacityType::Spot => vec!["spot".into()],
                        _ => Vec::new(),
                    },
                    _ => Vec::new(),
                })
            })
            .map(|r| r.instance.clone())
            .collect())
    }

    /// `DescribeInstanceStatus` without `IncludeAllInstances`: running, visible instances that
    /// match `filters`, by id. A filter the fake does not evaluate is refused.
    pub fn describe_instance_status(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<InstanceStatus>, Ec2Error> {
        filters::check(filters, &STATUS_FILTERS)?;
        let summary =
            |since: Option<Timestamp>| if since.is_some() { "impaired" } else { "ok" }.to_string();
        Ok(self
            .instances
            .values()
            .filter(|r| self.visible(r) && r.instance.state == InstanceState::Running)
            .filter(|r| {
                filters::matches(filters, &BTreeMap::new(), |name| match name {
                    "instance-id" => vec![r.instance.instance_id.clone()],
                    "instance-status.status" => vec![summary(r.status.instance_impaired_since)],
                    "system-status.status" => vec![summary(r.status.system_impaired_since)],
                    "event.code" => r.status.events.clone(),
                    _ => Vec::new(),
                })
            })
            .map(|r| InstanceStatus {
                instance_id: r.instance.instance_id.clone(),
                instance_checks: vec![check(r.status.instance_impaired_since)],
                system_checks: vec![check(r.status.system_impaired_since)],
                events: r.status.events.clone(),
            })
            .collect())
    }

    /// Changes what `DescribeInstanceStatus` reports for a live instance; false if unknown.
    pub fn set_status(&mut self, id: &str, change: impl FnOnce(&mut StatusChecks)) -> bool {
        match self.instances.get_mut(id) {
            Some(record) => {
                change(&mut record.status);
                true
            }
            None => false,
        }
    }

    /// Idempotent: unknown ids are skipped, instances already going away stay as they are.
    /// Returns the known ids, now shutting down or terminated.
    pub fn terminate_instances(&mut self, ids: &[String]) -> Vec<String> {
        let mut ids: Vec<String> = ids
            .iter()
            .filter(|id| self.instances.contains_key(*id))
            .cloned()
            .collect();
        ids.sort();
        ids.dedup();
        let now = self.now;
        for id in &ids {
            self.begin_termination(id, now);
        }
        ids
    }

    /// All or nothing, like EC2: one unknown (or not yet visible) id fails the call.
    pub fn create_tags(
        &mut self,
        resource_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), Ec2Error> {
        if let Some(key) = tags.keys().find(|k| k.starts_with("aws:")) {
            return Err(Ec2Error::InvalidRequest {
                code: "InvalidParameterValue".into(),
                message: format!("Tag keys starting with 'aws:' are reserved: {key}"),
            });
        }
        for id in resource_ids {
            let known = match self.instances.get(id) {
                Some(record) => self.visible(record),
                None => {
                    self.network.subnets.contains_key(id)
                        || self.network.security_groups.contains_key(id)
                        || self.amis.exists(id)
                }
            };
            if !known {
                let code = if id.starts_with("i-") {
                    "InvalidInstanceID.NotFound"
                } else {
                    "InvalidID"
                };
                return Err(Ec2Error::NotFound {
                    code: code.into(),
                    message: format!("The ID '{id}' does not exist"),
                });
            }
        }
        for id in resource_ids {
            if let Some(record) = self.instances.get_mut(id) {
                record.instance.tags.extend(tags.clone());
            } else if let Some(subnet) = self.network.subnets.get_mut(id) {
                subnet.subnet.tags.extend(tags.clone());
            } else if let Some(group) = self.network.security_groups.get_mut(id) {
                group.tags.extend(tags.clone());
            }
        }
        Ok(())
    }

    pub fn mark_running(&mut self, id: &str, time: Timestamp) {
        let Some(record) = self.instances.get_mut(id) else {
            return;
        };
        if record.instance.state != InstanceState::Pending {
            return;
        }
        record.instance.state = InstanceState::Running;
        let pool = record.pool.clone();
        self.ledger.start(id, pool, time);
    }

    /// Starts shutting down (from any live state); a no-op when already going away.
    pub fn begin_termination(&mut self, id: &str, time: Timestamp) {
        let Some(record) = self.instances.get_mut(id) else {
            return;
        };
        if matches!(
            record.instance.state,
            InstanceState::ShuttingDown | InstanceState::Terminated
        ) {
            return;
        }
        record.instance.state = InstanceState::ShuttingDown;
        self.ledger.stop(id, time);
        self.emit(time, |o| events::state_change(o, id, "shutting-down"));
        let at = after_ms(time, self.config.shutting_down_duration_ms);
        self.timeline.at(at, Due::Terminated(id.to_string()));
    }

    pub fn finish_termination(&mut self, id: &str, time: Timestamp) {
        let Some(record) = self.instances.get_mut(id) else {
            return;
        };
        if record.instance.state != InstanceState::ShuttingDown {
            return;
        }
        record.instance.state = InstanceState::Terminated;
        let pool = record.pool.clone();
        let subnet = record.instance.subnet_id.clone();
        let (capacity, ip) = (record.holds_capacity, record.holds_ip);
        record.holds_capacity = false;
        record.holds_ip = false;
        if capacity {
            self.capacity.give_back(&pool);
        }
        if let Some(reservation) = self
            .instances
            .get_mut(id)
            .and_then(|r| r.reservation.take())
        {
            self.reservations.give_back(&reservation);
        }
        if ip {
            self.network.give_back_ip(&subnet);
        }
        self.emit(time, |o| events::state_change(o, id, "terminated"));
        let at = after(
            time,
            Duration::from_secs(self.config.terminated_retention_s),
        );
        self.timeline.at(at, Due::Forget(id.to_string()));
    }

    /// Starts stopping a pending or running instance; false otherwise.
    pub fn begin_stop(&mut self, id: &str, time: Timestamp) {
        let Some(record) = self.instances.get_mut(id) else {
            return;
        };
        if !matches!(
            record.instance.state,
            InstanceState::Pending | InstanceState::Running
        ) {
            return;
        }
        record.instance.state = InstanceState::Stopping;
        self.ledger.stop(id, time);
        self.emit(time, |o| events::state_change(o, id, "stopping"));
        let at = after_ms(time, self.config.stopping_duration_ms);
        self.timeline.at(at, Due::Stopped(id.to_string()));
    }

    /// A stopped instance leaves its host (capacity returns) but keeps its IP.
    pub fn finish_stop(&mut self, id: &str, time: Timestamp) {
        let Some(record) = self.instances.get_mut(id) else {
            return;
        };
        if record.instance.state != InstanceState::Stopping {
            return;
        }
        record.instance.state = InstanceState::Stopped;
        let pool = record.pool.clone();
        if std::mem::take(&mut record.holds_capacity) {
            self.capacity.give_back(&pool);
        }
        self.emit(time, |o| events::state_change(o, id, "stopped"));
    }

    /// Sends the two-minute warning and schedules the reclaim; false if `id` is not a live spot
    /// instance or was already warned.
    pub fn interrupt_spot(&mut self, id: &str, time: Timestamp) -> bool {
        let Some(record) = self.instances.get_mut(id) else {
            return false;
        };
        let live = matches!(
            record.instance.state,
            InstanceState::Pending | InstanceState::Running
        );
        if record.instance.capacity_type != CapacityType::Spot || !live || record.warned {
            return false;
        }
        record.warned = true;
        self.emit(time, |o| events::spot_interruption_warning(o, id));
        self.timeline.at(
            after(time, SPOT_INTERRUPTION_NOTICE),
            Due::SpotReclaim(id.to_string()),
        );
        true
    }

    /// False if `id` is not a live spot instance.
    pub fn recommend_rebalance(&mut self, id: &str, time: Timestamp) -> bool {
        let Some(record) = self.instances.get(id) else {
            return false;
        };
        let live = matches!(
            record.instance.state,
            InstanceState::Pending | InstanceState::Running
        );
        if record.instance.capacity_type != CapacityType::Spot || !live {
            return false;
        }
        self.emit(time, |o| events::rebalance_recommendation(o, id));
        true
    }

    /// Sends a Health scheduled-stop event now and stops the instance at `start`; false if the
    /// instance is not live.
    pub fn schedule_maintenance(&mut self, id: &str, start: Timestamp) -> bool {
        let Some(record) = self.instances.get(id) else {
            return false;
        };
        if !matches!(
            record.instance.state,
            InstanceState::Pending | InstanceState::Running
        ) {
            return false;
        }
        let now = self.now;
        let end = after(start, MAINTENANCE_WINDOW);
        self.emit(now, |o| events::scheduled_change(o, id, start, end));
        self.timeline.at(start, Due::ScheduledStop(id.to_string()));
        true
    }
}
