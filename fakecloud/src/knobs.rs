//! Behaviour knobs and inspection: what tests and the simulation use besides the seams. Every
//! method first catches up with the clock, so what it changes or shows is as of now. The fault and
//! call-log knobs every fake has (`set_fault_rates`, `script_faults`, `add_fault_window`,
//! `clear_faults`, `calls`, `delayed_total`, ...) are fakekit's [`Fake`](fakekit::Fake) methods.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use karpenter_core::catalog::{CapacityType, Catalog};
use karpenter_core::seams::ec2::{Image, Instance, InstanceState};
use rand::Rng;

use crate::FakeCloud;
use crate::amis::AmiFamily;
use crate::boot::Boot;
use crate::capacity::Pool;
use crate::config::Config;
use crate::cost::{CostReport, PricePoint};
use crate::events::MALFORMED_BODIES;
use crate::instances::InstanceRecord;
use crate::sqs::SentMessage;
use crate::state::{State, after};
use crate::timeline::Due;

/// Counts of what the queue's delivery knobs did (see [`FakeCloud::queue_faults`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueFaults {
    pub duplicated: u64,
    pub reordered: u64,
}

/// Knobs.
impl FakeCloud {
    /// Changes behaviour knobs for the rest of the run (timings, boot model, spot interruption
    /// rate, SQS delivery, fault rates). World-building fields (seed, region, subnets, security
    /// groups, AMI releases, `pool_capacity_default`, `subnet_free_ips_default`,
    /// `call_log_len_max`) only matter at construction and reset.
    pub fn configure(&self, change: impl FnOnce(&mut Config)) {
        change(&mut self.current().config);
    }

    /// Sets a pool's free units now; false if the catalog does not offer the pool.
    pub fn set_pool_capacity(&self, pool: &Pool, units: u32) -> bool {
        self.current().capacity.set(pool, units)
    }

    /// A capacity wave: the pool's free units become `units` at `at`.
    pub fn schedule_pool_capacity(&self, at: Timestamp, pool: &Pool, units: u32) {
        self.current()
            .timeline
            .at(at, Due::Capacity(pool.clone(), units));
    }

    /// A drought: the pool has no capacity from `from` until `until` whatever its free units
    /// (a capacity wave that empties and refills it meanwhile does not end the drought, nor the
    /// drought the wave), as EC2 runs out of one instance type for a while.
    pub fn schedule_drought(&self, pool: &Pool, from: Timestamp, until: Timestamp) {
        let mut state = self.current();
        state.timeline.at(from, Due::Drought(pool.clone(), true));
        state.timeline.at(until, Due::Drought(pool.clone(), false));
    }

    /// Changes a pool's price from now on (spot price history); false if the pool is not offered.
    pub fn set_price(&self, pool: &Pool, price: f64) -> bool {
        let mut state = self.current();
        let now = state.now;
        state.prices.set(pool, now, price)
    }

    /// Publishes a new release of an AMI family (new images, `latest`/`recommended` parameters
    /// moved to them); returns the new image ids.
    pub fn publish_ami(&self, family: AmiFamily, release: &str) -> Vec<String> {
        let mut state = self.current();
        let state = &mut *state;
        let k8s = state.config.kubernetes_version.clone();
        state
            .amis
            .publish(family, release, &k8s, state.now, &mut state.rng.ids)
    }

    /// Deletes the tags `keys` from an instance, as `DeleteTags` by a caller other than the
    /// controller would (a user, a tag-policy clean-up); keys it lacks are ignored, as EC2 does.
    /// False if the instance is unknown.
    pub fn delete_tags(&self, instance_id: &str, keys: &[String]) -> bool {
        let mut state = self.current();
        let Some(record) = state.instances.get_mut(instance_id) else {
            return false;
        };
        for key in keys {
            record.instance.tags.remove(key);
        }
        true
    }

    /// Adds an image (a custom AMI selected by id, name or tags).
    pub fn add_image(&self, image: Image) {
        self.current().amis.add(image);
    }

    /// Marks an image deprecated; false if unknown.
    pub fn deprecate_image(&self, image_id: &str) -> bool {
        self.current().amis.deprecate(image_id)
    }

    /// Creates a security group named `name` with `tags` (what `CreateSecurityGroup` and
    /// `CreateTags` do); returns its id.
    pub fn add_security_group(&self, name: &str, tags: BTreeMap<String, String>) -> String {
        let mut state = self.current();
        let state = &mut *state;
        let group_id = crate::rng::resource_id(&mut state.rng.ids, "sg");
        state.network.security_groups.insert(
            group_id.clone(),
            karpenter_core::seams::ec2::SecurityGroup {
                group_id: group_id.clone(),
                group_name: name.to_string(),
                tags,
            },
        );
        group_id
    }

    /// A security group's name (`None` if unknown).
    pub fn security_group_name(&self, group_id: &str) -> Option<String> {
        self.current()
            .network
            .security_groups
            .get(group_id)
            .map(|g| g.group_name.clone())
    }

    /// Sets a subnet's free IPs; false if unknown.
    pub fn set_subnet_free_ips(&self, subnet_id: &str, free_ips: u32) -> bool {
        match self.current().network.subnets.get_mut(subnet_id) {
            Some(record) => {
                record.subnet.available_ip_address_count = free_ips;
                true
            }
            None => false,
        }
    }

    /// Sends a spot interruption warning now; EC2 reclaims the instance
    /// [`SPOT_INTERRUPTION_NOTICE`](crate::SPOT_INTERRUPTION_NOTICE) later. False if `instance_id`
    /// is not a pending or running spot instance, or was already warned.
    pub fn interrupt_spot(&self, instance_id: &str) -> bool {
        let mut state = self.current();
        let now = state.now;
        state.interrupt_spot(instance_id, now)
    }

    /// Interrupts every live spot instance of a pool (EC2 wants the capacity back); returns the
    /// ids warned.
    pub fn interrupt_spot_pool(&self, pool: &Pool) -> Vec<String> {
        let mut state = self.current();
        let now = state.now;
        let ids: Vec<String> = state
            .instances
            .values()
            .filter(|r| &r.pool == pool)
            .map(|r| r.instance.instance_id.clone())
            .collect();
        ids.into_iter()
            .filter(|id| state.interrupt_spot(id, now))
            .collect()
    }

    /// Sends a rebalance recommendation now; false if not a live spot instance.
    pub fn recommend_rebalance(&self, instance_id: &str) -> bool {
        let mut state = self.current();
        let now = state.now;
        state.recommend_rebalance(instance_id, now)
    }

    /// Sends an AWS Health scheduled-change event now and stops the instance `start_in` later;
    /// false if the instance is not pending or running.
    pub fn schedule_maintenance(&self, instance_id: &str, start_in: Duration) -> bool {
        let mut state = self.current();
        let start = after(state.now, start_in);
        state.schedule_maintenance(instance_id, start)
    }

    /// Stops an instance now (as a user or EC2 might), with `stopping`/`stopped` notifications.
    /// False if the instance is not pending or running.
    pub fn stop_instance(&self, instance_id: &str) -> bool {
        let mut state = self.current();
        let now = state.now;
        let live = state.instances.get(instance_id).is_some_and(|r| {
            matches!(
                r.instance.state,
                InstanceState::Pending | InstanceState::Running
            )
        });
        state.begin_stop(instance_id, now);
        live
    }

    /// Fails an instance's reachability check from now on (`system`: the host's check, else the
    /// instance's own), as `DescribeInstanceStatus` then reports it; false if unknown.
    pub fn impair_instance(&self, instance_id: &str, system: bool) -> bool {
        let mut state = self.current();
        let now = state.now;
        state.set_status(instance_id, |s| {
            let since = if system {
                &mut s.system_impaired_since
            } else {
                &mut s.instance_impaired_since
            };
            since.get_or_insert(now);
        })
    }

    /// Lists a scheduled event (`instance-retirement`, `system-reboot`, ...) for an instance in
    /// `DescribeInstanceStatus`; false if unknown. (The AWS Health queue events of
    /// [`schedule_maintenance`](Self::schedule_maintenance) are not mirrored here.)
    pub fn schedule_instance_event(&self, instance_id: &str, code: &str) -> bool {
        self.current()
            .set_status(instance_id, |s| s.events.push(code.to_string()))
    }

    /// Puts a raw body into the queue now (anything: foreign events, garbage). Its message id
    /// comes from a stream of its own, so injecting does not change the ids of the cloud's events.
    pub fn inject_message(&self, body: &str) {
        let mut state = self.current();
        let state = &mut *state;
        state
            .queue
            .enqueue(body, state.now, &state.config, &mut state.rng.injected);
    }

    /// Puts one malformed body (chosen by the seed) into the queue now, and returns it.
    pub fn inject_malformed_message(&self) -> String {
        let mut state = self.current();
        let state = &mut *state;
        let body = MALFORMED_BODIES[state.rng.injected.gen_range(0..MALFORMED_BODIES.len())];
        state
            .queue
            .enqueue(body, state.now, &state.config, &mut state.rng.injected);
        body.to_string()
    }

    /// Deletes (false) or recreates (true, empty) the queue: a missing queue fails receives with
    /// `QueueDoesNotExist` and drops events.
    pub fn set_queue_exists(&self, exists: bool) {
        let mut state = self.current();
        if !exists || !state.queue.exists {
            let len_max = state.config.call_log_len_max;
            let dropped = state.queue.dropped;
            state.queue = crate::sqs::Queue::new(len_max);
            state.queue.dropped = dropped;
        }
        state.queue.exists = exists;
    }
}

/// Inspection.
impl FakeCloud {
    /// Every message that entered the queue, in order (events and injected bodies).
    pub fn sent_messages(&self) -> Vec<SentMessage> {
        self.current().queue.sent()
    }

    /// Messages in the queue, visible or in flight.
    pub fn queue_depth(&self) -> usize {
        let mut state = self.current();
        let state = &mut *state;
        state.queue.depth(state.now, &state.config)
    }

    /// Messages lost to a full or missing queue.
    pub fn messages_dropped(&self) -> u64 {
        self.current().queue.dropped
    }

    /// What the queue's delivery knobs did so far: messages delivered again
    /// (`duplicate_delivery_rate`) and receives whose batch was shuffled (`reorder_rate`).
    pub fn queue_faults(&self) -> QueueFaults {
        let state = self.current();
        QueueFaults {
            duplicated: state.queue.duplicated,
            reordered: state.queue.reordered,
        }
    }

    /// Every instance EC2 still knows, ignoring the consistency lag, sorted by id.
    pub fn instances(&self) -> Vec<Instance> {
        self.current()
            .instances
            .values()
            .map(|r| r.instance.clone())
            .collect()
    }

    pub fn instance(&self, instance_id: &str) -> Option<Instance> {
        self.current()
            .instances
            .get(instance_id)
            .map(|r| r.instance.clone())
    }

    /// An instance's state without copying the rest of it (polled for every node every step).
    pub fn instance_state(&self, instance_id: &str) -> Option<InstanceState> {
        self.current()
            .instances
            .get(instance_id)
            .map(|r| r.instance.state)
    }

    pub fn boot(&self, instance_id: &str) -> Option<Boot> {
        let state = self.current();
        let record = state.instances.get(instance_id)?;
        Some(record.boot(&state.config.region, &kubelet_labels(&state, record)))
    }

    /// Every launch template as created (decoded user data as sent), sorted by name.
    pub fn launch_templates(&self) -> Vec<karpenter_core::seams::ec2::LaunchTemplateRequest> {
        self.current().templates.requests()
    }

    /// Every launch template with when it was last used (created, or named by a `CreateFleet`),
    /// sorted by name.
    pub fn launch_template_uses(
        &self,
    ) -> Vec<(karpenter_core::seams::ec2::LaunchTemplate, jiff::Timestamp)> {
        self.current().templates.uses()
    }

    /// Why the instance's bootstrap will never join the cluster (`None`: it joins, or unknown).
    pub fn join_error(&self, instance_id: &str) -> Option<crate::bootstrap::JoinError> {
        let state = self.current();
        state.instances.get(instance_id)?.join.clone().err()
    }

    /// Instances that are running and whose kubelet is ready to register now, sorted by id.
    pub fn ready_to_join(&self) -> Vec<Boot> {
        let state = self.current();
        state
            .instances
            .values()
            .filter(|r| r.instance.state == InstanceState::Running)
            .filter(|r| r.ready_at.is_some_and(|t| t <= state.now))
            .map(|r| r.boot(&state.config.region, &kubelet_labels(&state, r)))
            .collect()
    }

    /// Ids of the instances [`ready_to_join`](Self::ready_to_join) would return, without building
    /// their boot records (cheap enough to poll every step).
    /// How many instances are ready to join, and those of them not in `known`, in id order:
    /// [`Self::ready_to_join_ids`] without copying every id (polled every step).
    pub fn ready_to_join_except(&self, known: &BTreeSet<String>) -> (usize, Vec<String>) {
        let state = self.current();
        let mut count = 0;
        let mut new = Vec::new();
        for r in state.instances.values() {
            if r.instance.state == InstanceState::Running
                && r.ready_at.is_some_and(|t| t <= state.now)
            {
                count += 1;
                if !known.contains(&r.instance.instance_id) {
                    new.push(r.instance.instance_id.clone());
                }
            }
        }
        (count, new)
    }

    /// How many instances are ready to join.
    pub fn ready_to_join_count(&self) -> usize {
        self.ready_to_join_except(&BTreeSet::new()).0
    }

    pub fn ready_to_join_ids(&self) -> BTreeSet<String> {
        let state = self.current();
        state
            .instances
            .values()
            .filter(|r| r.instance.state == InstanceState::Running)
            .filter(|r| r.ready_at.is_some_and(|t| t <= state.now))
            .map(|r| r.instance.instance_id.clone())
            .collect()
    }

    /// Free units of a pool (`None` if not offered).
    pub fn pool_capacity(&self, pool: &Pool) -> Option<u32> {
        let state = self.current();
        state
            .capacity
            .offered(pool)
            .then(|| state.capacity.free(pool))
    }

    /// Every pool with its free units (one in a drought: the units it gets back), sorted.
    pub fn pools(&self) -> Vec<(Pool, u32)> {
        self.current().capacity.pools()
    }

    /// A pool's price changes, oldest first (spot price history for spot pools).
    pub fn price_history(&self, pool: &Pool) -> Vec<PricePoint> {
        self.current().prices.history(pool)
    }

    /// The types the fake sells as built (capacity, allocatable, interfaces, offerings), shared,
    /// with each offering at its list price, not today's: what a booting node reads of its own
    /// type. Copying the whole priced catalog on every kubelet tick was 4 % of a swarm seed's
    /// CPU (perf, seeds 1..16).
    pub fn instance_type_specs(&self) -> Arc<Catalog> {
        self.current().catalog.clone()
    }

    /// The catalog with every offering at its current price: what `DescribeInstanceTypes`,
    /// `DescribeInstanceTypeOfferings` and the pricing API would say now.
    pub fn instance_types(&self) -> Catalog {
        let state = self.current();
        let mut catalog = (*state.catalog).clone();
        for it in &mut catalog.instance_types {
            for offering in &mut it.offerings {
                let pool = Pool::new(&it.name, &offering.zone, offering.capacity_type);
                if let Some(price) = state.prices.at(&pool, state.now) {
                    offering.price = price;
                }
            }
        }
        catalog
    }

    /// The name of image `image_id` (`amazon-eks-node-al2023-x86_64-standard-1.33-v20250601`), if
    /// it exists.
    pub fn image_name(&self, image_id: &str) -> Option<String> {
        self.current().amis.name_of(image_id).map(str::to_string)
    }

    /// Public SSM parameters (AMI aliases) and their image ids.
    pub fn parameters(&self) -> BTreeMap<String, String> {
        self.current().amis.parameters()
    }

    /// What the run cost so far.
    pub fn cost_report(&self) -> CostReport {
        let state = self.current();
        state.ledger.report(&state.prices, state.now)
    }

    /// How many instances are in each capacity type and state (a quick summary for reports).
    pub fn instance_counts(&self) -> BTreeMap<(CapacityType, String), usize> {
        let state = self.current();
        let mut counts = BTreeMap::new();
        for r in state.instances.values() {
            *counts
                .entry((
                    r.instance.capacity_type,
                    crate::instances::state_name(r.instance.state).to_string(),
                ))
                .or_insert(0) += 1;
        }
        counts
    }
}

/// `kubernetes.io/arch` and `kubernetes.io/os` of the instance's type (os defaults to linux); on
/// an instance booted from a Windows image, `windows` and the image's
/// `node.kubernetes.io/windows-build`, as a Windows kubelet labels its node from the OS it runs.
fn kubelet_labels(state: &State, record: &InstanceRecord) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([("kubernetes.io/os".to_string(), "linux".to_string())]);
    if let Some(it) = state.catalog.get(&record.pool.instance_type) {
        for key in ["kubernetes.io/arch", "kubernetes.io/os"] {
            if let Some(value) = it.labels.get(key) {
                labels.insert(key.to_string(), value.clone());
            }
        }
    }
    let image = state.amis.name_of(&record.instance.image_id).unwrap_or("");
    if let Some(build) = crate::bootstrap::windows_build(image) {
        labels.insert("kubernetes.io/os".to_string(), "windows".to_string());
        labels.insert(
            "node.kubernetes.io/windows-build".to_string(),
            build.to_string(),
        );
    }
    labels
}
