//! How the world turns a [`FaultMix`] into effects: knobs of fakecloud and the API server for the
//! rate-like faults, timers for the discrete ones (storms, waves, malformed messages, crashes,
//! failovers), PodDisruptionBudgets for `pdb-never-allows`; and how it tallies what fired.

use fakekit::Fake;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fakecloud::{FakeCloud, FaultRates, MALFORMED_BODIES, Operation, Pool, QueueFaults};
use karpenter_core::catalog::CapacityType;
use karpenter_core::seams::ec2::InstanceState;
use karpenter_core::seams::kube::{DeleteOptions, ObjectKey, Patch, ResourceKind};
use karpenter_core::seams::{KubeApi, KubeError};
use rand::Rng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde_json::json;

use crate::faults::{self, FaultMix, Purpose, Scheduled, Timer};
use crate::scenario::CloudKnobs;
use fakekube::{ApiFaultRates, ApiServer};
use strum::VariantArray;

/// Name prefix of the budgets `pdb-never-allows` creates (one per Deployment).
pub const NEVER_ALLOWS_PDB_PREFIX: &str = "sim-never-allows-";

/// Largest number of seam calls into its step at which an `anywhere` crash strikes (a busy step
/// makes a few hundred; a crash drawn past the step's last call strikes after the step).
pub const CRASH_CALLS_MAX: u64 = 300;

/// `claim-force-deleted`: a user removes the finalizer of one NodeClaim that recorded an
/// instance and is not being deleted (drawn by `pick` among them, in name order), then deletes
/// it. The API server removes it at once; its instance runs on, owned by nothing. Returns the
/// claim's name and instance id, or `None` when there was no candidate.
pub(crate) async fn force_delete_claim(
    api: &ApiServer,
    pick: u64,
) -> Result<Option<(String, String)>, KubeError> {
    let mut candidates: Vec<(String, String)> = api
        .objects(&ResourceKind::NODE_CLAIM)
        .iter()
        .filter(|c| c["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|c| {
            let name = c["metadata"]["name"].as_str()?;
            let provider = c["status"]["providerID"].as_str()?;
            let instance = provider.rsplit('/').next().unwrap_or_default();
            Some((name.to_string(), instance.to_string()))
        })
        .collect();
    candidates.sort();
    if candidates.is_empty() {
        return Ok(None);
    }
    let (name, instance) = candidates.swap_remove((pick % candidates.len() as u64) as usize);
    let key = ObjectKey::cluster(name.clone());
    let patch = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    api.patch(&ResourceKind::NODE_CLAIM, &key, &patch).await?;
    api.delete(&ResourceKind::NODE_CLAIM, &key, &DeleteOptions::default())
        .await?;
    Ok(Some((name, instance)))
}

/// Whether a tag is Karpenter's own (what `tags-lost` deletes): its `karpenter.sh/` and
/// `karpenter.k8s.aws/` keys. `eks:eks-cluster-name`, `Name` and `kubernetes.io/cluster/*` are
/// tags other tools set and read too, and stay.
pub(crate) fn is_karpenter_tag(key: &str) -> bool {
    key.starts_with("karpenter.sh/") || key.starts_with("karpenter.k8s.aws/")
}

/// `tags-lost`: deletes Karpenter's tags from one live instance of this cluster's Karpenter (one
/// still tagged `karpenter.sh/nodeclaim`, not another owner's), drawn by `pick` among them in id
/// order, as `aws ec2 delete-tags` would. Returns the instance and the keys deleted, or `None`
/// when there was no candidate.
pub(crate) fn strip_tags(cloud: &FakeCloud, pick: u64) -> Option<(String, Vec<String>)> {
    let candidates: Vec<_> = cloud
        .instances()
        .into_iter()
        .filter(is_live_karpenter_instance)
        .collect();
    if candidates.is_empty() {
        return None;
    }
    let instance = &candidates[(pick % candidates.len() as u64) as usize];
    let keys: Vec<String> = instance
        .tags
        .keys()
        .filter(|k| is_karpenter_tag(k))
        .cloned()
        .collect();
    cloud.delete_tags(&instance.instance_id, &keys);
    Some((instance.instance_id.clone(), keys))
}

/// Pending or running, this cluster's, launched by Karpenter (tagged `karpenter.sh/nodeclaim`).
fn is_live_karpenter_instance(i: &karpenter_core::seams::ec2::Instance) -> bool {
    matches!(i.state, InstanceState::Pending | InstanceState::Running)
        && !crate::invariants::is_foreign(i)
        && i.tags
            .contains_key(karpenter_core::api::labels::NODECLAIM_TAG)
}

/// The ids of [`is_live_karpenter_instance`] instances, in fakecloud's order.
fn karpenter_instances(cloud: &FakeCloud) -> Vec<String> {
    cloud
        .instances()
        .into_iter()
        .filter(is_live_karpenter_instance)
        .map(|i| i.instance_id)
        .collect()
}

/// A spot storm as it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Storm {
    /// Simulated time since the start of the run.
    pub at: Duration,
    pub zone: String,
    /// Instances warned, sorted.
    pub instances: Vec<String>,
}

/// A capacity wave in progress.
#[derive(Clone, Debug)]
struct Wave {
    until: Duration,
    zone: String,
    /// Pools emptied and their free units before.
    pools: Vec<(Pool, u32)>,
}

/// The discrete faults' timers and target streams, and what is in progress.
pub(crate) struct Injector {
    seed: u64,
    pub mix: FaultMix,
    timers: BTreeMap<&'static str, Timer>,
    targets: BTreeMap<&'static str, ChaCha8Rng>,
    waves: Vec<Wave>,
    pub storms: Vec<Storm>,
    /// Budgets created for `pdb-never-allows`, by name.
    budgets: BTreeSet<String>,
    /// Counters of fakecloud last seen (their increase is this step's tally).
    queue: QueueFaults,
    delayed_calls: u64,
    /// AMI releases published so far (each names the next release).
    releases: u32,
}

/// A discrete fault that fires this step, for the world to carry out.
pub(crate) enum Fired {
    /// Crash a controller process at `point` (or at the `calls`-th call of its step).
    Crash {
        point: faults::CrashPoint,
        calls: u64,
        downtime: Duration,
        /// Draw among the running replicas.
        pick: u64,
    },
    /// Kill the leading controller process.
    Failover { downtime: Duration },
    /// Force-delete one NodeClaim (`pick` draws it among the candidates).
    ForceDeleteClaim { pick: u64 },
    /// Karpenter's tags were deleted from `instance` (the invariants are told).
    TagsLost { instance: String },
    /// EC2 scheduled `instance` for a stop at `start` and said so (the invariants are told).
    ScheduledMaintenance {
        instance: String,
        start: jiff::Timestamp,
    },
}

impl Injector {
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            mix: FaultMix::default(),
            timers: BTreeMap::new(),
            targets: BTreeMap::new(),
            waves: Vec::new(),
            storms: Vec::new(),
            budgets: BTreeSet::new(),
            queue: QueueFaults::default(),
            delayed_calls: 0,
            releases: 0,
        }
    }

    /// Turns `mix` on at `elapsed` (replacing the previous one): knobs now, timers from now, the
    /// budgets created or removed. A fault whose settings did not change keeps its timer.
    pub async fn set(
        &mut self,
        mix: FaultMix,
        elapsed: Duration,
        base: &CloudKnobs,
        deployments: &[String],
        cloud: &FakeCloud,
        api: &ApiServer,
    ) -> Result<(), KubeError> {
        let old = std::mem::replace(&mut self.mix, mix);
        let mix = self.mix.clone();
        self.restart_timers(&old, elapsed);
        if mix.capacity_wave.is_none() {
            self.end_waves(Duration::MAX, cloud);
        }
        // Budgets: one per Deployment named (or every Deployment).
        let wanted: BTreeSet<String> = match &mix.pdb_never_allows {
            None => BTreeSet::new(),
            Some(spec) => match &spec.deployment {
                Some(name) => BTreeSet::from([name.clone()]),
                None => deployments.iter().cloned().collect(),
            },
        }
        .into_iter()
        .map(|d| format!("{NEVER_ALLOWS_PDB_PREFIX}{d}"))
        .collect();
        for name in self.budgets.difference(&wanted) {
            api.delete(
                &ResourceKind::POD_DISRUPTION_BUDGET,
                &ObjectKey::namespaced("default", name.clone()),
                &DeleteOptions::default(),
            )
            .await?;
        }
        for name in wanted.difference(&self.budgets) {
            let app = name.trim_start_matches(NEVER_ALLOWS_PDB_PREFIX);
            let pdb = json!({
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}},
            });
            match api.create(&ResourceKind::POD_DISRUPTION_BUDGET, pdb).await {
                Ok(_) | Err(KubeError::AlreadyExists(_)) => {}
                Err(err) => return Err(err),
            }
        }
        self.budgets = wanted;
        // Last: the API server's rates apply to calls after this one.
        self.apply_knobs(&self.mix, base, cloud, api);
        Ok(())
    }

    /// The discrete faults' timers for the mix just set: a fault turned off loses its timer, one
    /// turned on or changed (from `old`) gets a new one from `elapsed`, one unchanged keeps its.
    fn restart_timers(&mut self, old: &FaultMix, elapsed: Duration) {
        let mix = self.mix.clone();
        let schedules = [
            (
                faults::SPOT_STORM,
                mix.spot_storm.as_ref().map(|f| f.schedule()),
                old.spot_storm != mix.spot_storm,
            ),
            (
                faults::CAPACITY_WAVE,
                mix.capacity_wave.as_ref().map(|f| f.schedule()),
                old.capacity_wave != mix.capacity_wave,
            ),
            (
                faults::SQS_MALFORMED,
                mix.sqs_malformed.as_ref().map(|f| f.schedule()),
                old.sqs_malformed != mix.sqs_malformed,
            ),
            (
                faults::CONTROLLER_CRASH,
                mix.controller_crash.as_ref().map(|f| f.schedule()),
                old.controller_crash != mix.controller_crash,
            ),
            (
                faults::LEADER_FAILOVER,
                mix.leader_failover.as_ref().map(|f| f.schedule()),
                old.leader_failover != mix.leader_failover,
            ),
            (
                faults::AMI_RELEASE,
                mix.ami_release.as_ref().map(|f| f.schedule()),
                old.ami_release != mix.ami_release,
            ),
            (
                faults::CLAIM_FORCE_DELETED,
                mix.claim_force_deleted.as_ref().map(|f| f.schedule()),
                old.claim_force_deleted != mix.claim_force_deleted,
            ),
            (
                faults::TAGS_LOST,
                mix.tags_lost.as_ref().map(|f| f.schedule()),
                old.tags_lost != mix.tags_lost,
            ),
            (
                faults::SCHEDULED_MAINTENANCE,
                mix.scheduled_maintenance.as_ref().map(|f| f.schedule()),
                old.scheduled_maintenance != mix.scheduled_maintenance,
            ),
        ];
        for (name, schedule, changed) in schedules {
            match schedule {
                None => {
                    self.timers.remove(name);
                }
                Some(schedule) if changed || !self.timers.contains_key(name) => {
                    let rng = faults::stream(self.seed, name, Purpose::Schedule);
                    self.timers
                        .insert(name, Timer::new(&schedule, rng, elapsed));
                    self.targets
                        .entry(name)
                        .or_insert_with(|| faults::stream(self.seed, name, Purpose::Target));
                }
                Some(_) => {}
            }
        }
    }

    /// The rate-like faults: each knob is the mix's value if the fault is on, else the
    /// scenario's own knob, else the component's default. Nothing is touched when neither the
    /// mix nor the scenario sets anything, so a world without faults is exactly as built.
    fn apply_knobs(&self, mix: &FaultMix, base: &CloudKnobs, cloud: &FakeCloud, api: &ApiServer) {
        let defaults = fakecloud::Config::default();
        let base_ec2 = FaultRates {
            throttle_rate: base.ec2_throttle_rate.unwrap_or(0.0),
            unavailable_rate: base.ec2_unavailable_rate.unwrap_or(0.0),
            ..FaultRates::default()
        };
        let mut ec2 = base_ec2;
        if let Some(r) = &mix.ec2_throttle {
            ec2.throttle_rate = r.rate;
        }
        if let Some(r) = &mix.ec2_5xx {
            ec2.unavailable_rate = r.rate;
        }
        if let Some(l) = &mix.ec2_latency {
            ec2.latency_ms_min = l.latency_ms_min;
            ec2.latency_ms_max = l.latency_ms_max;
        }
        cloud.configure(|c| {
            c.faults.clear();
            for &operation in Operation::VARIANTS {
                // The mix's EC2 faults are for EC2; the queue keeps the scenario's.
                let sqs = matches!(
                    operation,
                    Operation::ReceiveMessage | Operation::DeleteMessage
                );
                let mut rates = if sqs { base_ec2 } else { ec2 };
                // A lost answer is a launch's fault: the instance runs, the caller sees an error.
                if operation == Operation::CreateFleet
                    && let Some(r) = &mix.ec2_lost_response
                {
                    rates.lost_response_rate = r.rate;
                }
                if rates != FaultRates::default() {
                    c.faults.insert(operation, rates);
                }
            }
            c.boot.slow_boot_fraction = mix
                .slow_boot
                .map(|f| f.fraction)
                .or(base.slow_boot_fraction)
                .unwrap_or(defaults.boot.slow_boot_fraction);
            c.boot.never_boot_fraction = mix
                .never_boot
                .map(|f| f.fraction)
                .or(base.never_boot_fraction)
                .unwrap_or(defaults.boot.never_boot_fraction);
            c.eventual_consistency_lag_ms = mix
                .ec2_consistency_lag
                .map(|l| l.lag.as_millis() as u64)
                .or(base.eventual_consistency_lag_ms)
                .unwrap_or(defaults.eventual_consistency_lag_ms);
            c.duplicate_delivery_rate = mix.sqs_duplicate.map_or(0.0, |r| r.rate);
            c.reorder_rate = mix.sqs_reorder.map_or(0.0, |r| r.rate);
        });
        let mut rates = base.api_rates(self.seed);
        if let Some(r) = &mix.api_5xx {
            rates.unavailable_rate = r.rate;
        }
        if let Some(r) = &mix.api_conflict {
            rates.conflict_rate = r.rate;
        }
        if let Some(w) = &mix.api_watch_drop {
            rates.disconnect_rate = w.rate;
            rates.disconnect_after_events_max = w.after_events_max;
        }
        if rates == ApiFaultRates::default() {
            api.configure(|c| c.faults.clear());
        } else {
            api.set_fault_rates_all(rates);
        }
    }

    /// When the next discrete fault is due or a wave ends (the world does not step past it).
    pub fn next_due(&self) -> Option<Duration> {
        self.timers
            .values()
            .filter_map(Timer::next)
            .chain(self.waves.iter().map(|w| w.until))
            .min()
    }

    /// Fires what is due at `elapsed`: storms, waves (and ends those that are over), malformed
    /// messages; crashes and failovers are returned for the world to carry out. Each firing is
    /// tallied in `tally` and described in `lines`.
    pub fn fire(
        &mut self,
        elapsed: Duration,
        cloud: &FakeCloud,
        tally: &mut BTreeMap<String, u64>,
        lines: &mut Vec<String>,
    ) -> Vec<Fired> {
        let t = elapsed.as_secs();
        for wave in self.end_waves(elapsed, cloud) {
            lines.push(format!(
                "t={t} fault={} zone={} restored={}",
                faults::CAPACITY_WAVE,
                wave.zone,
                wave.pools.len()
            ));
        }
        let mut fired = Vec::new();
        let names: Vec<&'static str> = self.timers.keys().copied().collect();
        for name in names {
            let due = self.timers.get_mut(name).is_some_and(|t| t.due(elapsed));
            if !due {
                continue;
            }
            let mix = self.mix.clone();
            match name {
                faults::SPOT_STORM => {
                    if let Some(spec) = &mix.spot_storm
                        && let Some(storm) = self.storm(spec, elapsed, cloud)
                    {
                        lines.push(format!(
                            "t={t} fault={name} zone={} warned={} [{}]",
                            storm.zone,
                            storm.instances.len(),
                            storm.instances.join(",")
                        ));
                        count(tally, name, 1);
                        self.storms.push(storm);
                    }
                }
                faults::CAPACITY_WAVE => {
                    if let Some(spec) = &mix.capacity_wave
                        && let Some(wave) = self.wave(spec, elapsed, cloud)
                    {
                        lines.push(format!(
                            "t={t} fault={name} zone={} emptied={} until={}",
                            wave.zone,
                            wave.pools.len(),
                            wave.until.as_secs()
                        ));
                        count(tally, name, 1);
                        self.waves.push(wave);
                    }
                }
                faults::SQS_MALFORMED => {
                    let rng = self.target(name);
                    let body = MALFORMED_BODIES[rng.gen_range(0..MALFORMED_BODIES.len())];
                    cloud.inject_message(body);
                    lines.push(format!("t={t} fault={name} body={body:?}"));
                    count(tally, name, 1);
                }
                faults::CONTROLLER_CRASH => {
                    if let Some(spec) = &mix.controller_crash {
                        let rng = self.target(name);
                        let calls = rng.gen_range(1..=CRASH_CALLS_MAX);
                        let pick = rng.r#gen::<u64>();
                        fired.push(Fired::Crash {
                            point: spec.point,
                            calls,
                            downtime: spec.downtime,
                            pick,
                        });
                    }
                }
                faults::LEADER_FAILOVER => {
                    if let Some(spec) = &mix.leader_failover {
                        fired.push(Fired::Failover {
                            downtime: spec.downtime,
                        });
                    }
                }
                faults::CLAIM_FORCE_DELETED => {
                    let pick = self.target(name).r#gen::<u64>();
                    fired.push(Fired::ForceDeleteClaim { pick });
                }
                faults::TAGS_LOST => fired.extend(self.lose_tags(t, cloud, tally, lines)),
                faults::SCHEDULED_MAINTENANCE => {
                    if let Some(spec) = &mix.scheduled_maintenance {
                        fired.extend(self.schedule_maintenance(spec, t, cloud, tally, lines));
                    }
                }
                faults::AMI_RELEASE => self.publish_release(&mix, t, cloud, tally, lines),
                _ => {}
            }
        }
        fired
    }

    /// `tags-lost` fired at `t` (seconds): strips one instance drawn by the fault's target stream
    /// ([`strip_tags`]), logged and tallied; the firing for the world to tell the invariants.
    fn lose_tags(
        &mut self,
        t: u64,
        cloud: &FakeCloud,
        tally: &mut BTreeMap<String, u64>,
        lines: &mut Vec<String>,
    ) -> Option<Fired> {
        let name = faults::TAGS_LOST;
        let pick = self.target(name).r#gen::<u64>();
        let (instance, removed) = strip_tags(cloud, pick)?;
        lines.push(format!(
            "t={t} fault={name} instance={instance} removed=[{}]",
            removed.join(",")
        ));
        count(tally, name, 1);
        Some(Fired::TagsLost { instance })
    }

    /// `scheduled-maintenance` fired at `t` (seconds): schedules a stop of one live Karpenter
    /// instance drawn by the fault's target stream (in fakecloud's order, as `tags-lost`), logged
    /// and tallied; the firing for the world to tell the invariants.
    fn schedule_maintenance(
        &mut self,
        spec: &faults::ScheduledMaintenance,
        t: u64,
        cloud: &FakeCloud,
        tally: &mut BTreeMap<String, u64>,
        lines: &mut Vec<String>,
    ) -> Option<Fired> {
        let name = faults::SCHEDULED_MAINTENANCE;
        let pick = self.target(name).r#gen::<u64>();
        let candidates = karpenter_instances(cloud);
        let instance = candidates
            .get(usize::try_from(pick % candidates.len().max(1) as u64).unwrap_or(0))?
            .clone();
        if !cloud.schedule_maintenance(&instance, spec.notice) {
            return None;
        }
        let start = cloud
            .now()
            .checked_add(spec.notice)
            .unwrap_or_else(|_| cloud.now());
        lines.push(format!(
            "t={t} fault={name} instance={instance} stop-in={}s",
            spec.notice.as_secs()
        ));
        count(tally, name, 1);
        Some(Fired::ScheduledMaintenance { instance, start })
    }

    /// `ami-release` fired at `t` (seconds): publishes the mix's next release, logged and tallied.
    fn publish_release(
        &mut self,
        mix: &FaultMix,
        t: u64,
        cloud: &FakeCloud,
        tally: &mut BTreeMap<String, u64>,
        lines: &mut Vec<String>,
    ) {
        let Some(spec) = &mix.ami_release else {
            return;
        };
        let (release, images) = self.release(spec, cloud);
        lines.push(format!(
            "t={t} fault={} family={} release={release} images={}",
            faults::AMI_RELEASE,
            spec.family,
            images.len()
        ));
        count(tally, faults::AMI_RELEASE, 1);
    }

    /// Publishes the next release of `spec.family`: named after the simulated date plus one day
    /// per release so far (AL2023/AL2 `vYYYYMMDD`), or the next minor version (Bottlerocket).
    fn release(&mut self, spec: &faults::AmiRelease, cloud: &FakeCloud) -> (String, Vec<String>) {
        self.releases += 1;
        let (family, release) = match spec.family.as_str() {
            "bottlerocket" => (
                fakecloud::AmiFamily::Bottlerocket,
                format!("1.{}.0", 40 + self.releases),
            ),
            family => {
                let day = cloud
                    .now()
                    .checked_add(jiff::SignedDuration::from_hours(
                        24 * i64::from(self.releases),
                    ))
                    .unwrap_or_else(|_| cloud.now());
                let date = day.strftime("%Y%m%d").to_string();
                let family = if family == "al2" {
                    fakecloud::AmiFamily::Al2
                } else {
                    fakecloud::AmiFamily::Al2023
                };
                (family, format!("v{date}"))
            }
        };
        let images = cloud.publish_ami(family, &release);
        (release, images)
    }

    fn target(&mut self, name: &'static str) -> &mut ChaCha8Rng {
        let seed = self.seed;
        self.targets
            .entry(name)
            .or_insert_with(|| faults::stream(seed, name, Purpose::Target))
    }

    /// Warns a share of the live spot instances of one zone.
    fn storm(
        &mut self,
        spec: &faults::SpotStorm,
        elapsed: Duration,
        cloud: &FakeCloud,
    ) -> Option<Storm> {
        let mut by_zone: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for instance in cloud.instances() {
            let live = matches!(
                instance.state,
                InstanceState::Pending | InstanceState::Running
            );
            let type_ok = spec
                .instance_type
                .as_ref()
                .is_none_or(|t| *t == instance.instance_type);
            if live && instance.capacity_type == CapacityType::Spot && type_ok {
                by_zone
                    .entry(instance.zone.clone())
                    .or_default()
                    .push(instance.instance_id.clone());
            }
        }
        let rng = self.target(faults::SPOT_STORM);
        // Always the same draws, whatever the cluster holds.
        let zone_draw = rng.r#gen::<u64>();
        let mut shuffle_rng =
            faults::stream(rng.r#gen::<u64>(), faults::SPOT_STORM, Purpose::Target);
        let zone = match &spec.zone {
            Some(zone) => zone.clone(),
            None => {
                let zones: Vec<&String> = by_zone.keys().collect();
                if zones.is_empty() {
                    return None;
                }
                zones[(zone_draw % zones.len() as u64) as usize].clone()
            }
        };
        let mut candidates = by_zone.remove(&zone)?;
        let n = ((spec.share * candidates.len() as f64).ceil() as usize).clamp(1, candidates.len());
        candidates.shuffle(&mut shuffle_rng);
        let mut chosen: Vec<String> = candidates.into_iter().take(n).collect();
        chosen.sort();
        // EC2 signals elevated risk with a rebalance recommendation, which can arrive together
        // with the interruption warning: the queue gets both (and `sqs-reorder` can swap them).
        let warned: Vec<String> = chosen
            .into_iter()
            .filter(|id| {
                cloud.recommend_rebalance(id);
                cloud.interrupt_spot(id)
            })
            .collect();
        (!warned.is_empty()).then_some(Storm {
            at: elapsed,
            zone,
            instances: warned,
        })
    }

    /// Empties every pool of one zone (of the capacity types asked for).
    fn wave(
        &mut self,
        spec: &faults::CapacityWave,
        elapsed: Duration,
        cloud: &FakeCloud,
    ) -> Option<Wave> {
        let pools = cloud.pools();
        let live: BTreeSet<String> = cloud
            .instances()
            .into_iter()
            .filter(|i| matches!(i.state, InstanceState::Pending | InstanceState::Running))
            .map(|i| i.zone)
            .collect();
        let all: BTreeSet<String> = pools.iter().map(|(p, _)| p.zone.clone()).collect();
        let rng = self.target(faults::CAPACITY_WAVE);
        let zone_draw = rng.r#gen::<u64>();
        let zone = match &spec.zone {
            Some(zone) => zone.clone(),
            None => {
                let zones: Vec<&String> = if live.is_empty() {
                    all.iter().collect()
                } else {
                    live.iter().collect()
                };
                if zones.is_empty() {
                    return None;
                }
                zones[(zone_draw % zones.len() as u64) as usize].clone()
            }
        };
        let types: Vec<CapacityType> = match spec.capacity_type.as_deref() {
            Some(label) => CapacityType::from_label(label).into_iter().collect(),
            None => vec![CapacityType::Spot, CapacityType::OnDemand],
        };
        // A pool a wave still holds empty has 0 free units now: what it gets back is what it
        // had before that wave (else the later wave's end would leave it empty for good).
        let held: BTreeMap<&Pool, u32> = self
            .waves
            .iter()
            .flat_map(|w| w.pools.iter().map(|(p, u)| (p, *u)))
            .collect();
        let emptied: Vec<(Pool, u32)> = pools
            .iter()
            .filter(|(p, _)| p.zone == zone && types.contains(&p.capacity_type))
            .map(|(p, units)| (p.clone(), held.get(p).copied().unwrap_or(*units)))
            .collect();
        if emptied.is_empty() {
            return None;
        }
        for (pool, _) in &emptied {
            cloud.set_pool_capacity(pool, 0);
        }
        Some(Wave {
            until: elapsed + spec.duration,
            zone,
            pools: emptied,
        })
    }

    /// Gives waves that are over (all of them with `Duration::MAX`) their capacity back: each
    /// pool the units it had before the first wave that emptied it, once no wave holds it.
    fn end_waves(&mut self, elapsed: Duration, cloud: &FakeCloud) -> Vec<Wave> {
        let (over, going): (Vec<Wave>, Vec<Wave>) = std::mem::take(&mut self.waves)
            .into_iter()
            .partition(|w| w.until <= elapsed);
        self.waves = going;
        // A pool a wave still going holds stays empty until that one ends.
        let held: BTreeSet<&Pool> = self
            .waves
            .iter()
            .flat_map(|w| w.pools.iter().map(|(p, _)| p))
            .collect();
        for wave in &over {
            for (pool, units) in &wave.pools {
                if !held.contains(pool) {
                    cloud.set_pool_capacity(pool, *units);
                }
            }
        }
        over
    }

    /// Ends every wave now (faults cleared): capacity comes back at once.
    pub fn restore_all(&mut self, cloud: &FakeCloud) -> usize {
        self.end_waves(Duration::MAX, cloud).len()
    }

    /// Tallies what fakecloud's counters say happened since the last call.
    pub fn tally_cloud(&mut self, cloud: &FakeCloud, tally: &mut BTreeMap<String, u64>) {
        let queue = cloud.queue_faults();
        count(
            tally,
            faults::SQS_DUPLICATE,
            queue.duplicated.saturating_sub(self.queue.duplicated),
        );
        count(
            tally,
            faults::SQS_REORDER,
            queue.reordered.saturating_sub(self.queue.reordered),
        );
        self.queue = queue;
        let delayed = cloud.delayed_calls();
        count(
            tally,
            faults::EC2_LATENCY,
            delayed.saturating_sub(self.delayed_calls),
        );
        self.delayed_calls = delayed;
    }
}

/// Adds `n` to a tally (no entry for 0, so the report lists only faults that fired).
pub(crate) fn count(tally: &mut BTreeMap<String, u64>, name: &str, n: u64) {
    if n > 0 {
        *tally.entry(name.to_string()).or_insert(0) += n;
    }
}
