//! Driving the world: stepping simulated time (with the scenario's Deployments and DaemonSets
//! kept at their counts and the invariants checked every step), waiting on conditions, and
//! recording what changed.

use std::time::Duration;

use karpenter_core::seams::Clock;
use karpenter_core::seams::kube::ResourceKind;

use super::SimWorld;
use crate::observe::Snapshot;

impl SimWorld {
    /// What the world looks like now.
    pub async fn snapshot(&mut self) -> Snapshot {
        let world = self.world().await;
        Snapshot::read(world.api(), world.cloud())
    }

    /// One pass of every Deployment's ReplicaSet stand-in and every DaemonSet's stand-in, with
    /// the API server's injected faults switched off: faults are for the controller, not for the
    /// scenario's own hands (the world does the same for its built-in workloads).
    pub(super) async fn run_deployments(&mut self) {
        let Some(world) = self.world.as_ref() else {
            return;
        };
        let saved = world.api().suspend_faults();
        let pods = world.api().objects(&ResourceKind::POD);
        let mut result = Ok(());
        for deployment in self.deployments.values_mut() {
            result = deployment
                .reconcile(world.api().as_ref(), &pods)
                .await
                .map(drop);
            if result.is_err() {
                break;
            }
        }
        if result.is_ok() && !self.daemonsets.is_empty() {
            let nodes = world.api().objects(&ResourceKind::NODE);
            for daemonset in self.daemonsets.values_mut() {
                result = daemonset
                    .reconcile(world.api().as_ref(), &pods, &nodes)
                    .await
                    .map(drop);
                if result.is_err() {
                    break;
                }
            }
        }
        world.api().resume_faults(saved);
        if let Err(err) = result {
            self.fail(format!(
                "the ReplicaSet stand-in could not write pods: {err}"
            ));
        }
    }

    /// Remembers every instance the cloud knows, so "launched" counts include instances that
    /// were already replaced.
    pub(super) fn track_instances(&mut self) {
        let Some(world) = self.world.as_ref() else {
            return;
        };
        // The managed node group's instances are not launches (see `Snapshot::foreign_instances`).
        for instance in world.cloud().instances() {
            if karpenter_sim::invariants::is_foreign(&instance) {
                continue;
            }
            if !self.launched.contains_key(&instance.instance_id) {
                self.launch_order.push(instance.instance_id.clone());
                self.launched.insert(instance.instance_id.clone(), instance);
            }
        }
    }

    /// One step of the world: Deployments, then the world's own step (workloads, cloud, kubelet,
    /// scheduler, controller), then the invariants.
    pub async fn step(&mut self) {
        self.world().await;
        self.run_deployments().await;
        let ran_at = self.now();
        let result = match self.world.as_mut() {
            Some(world) => world.step().await,
            None => unreachable!("built above"),
        };
        if let Err(err) = result {
            self.fail(format!("the world could not step: {err}"));
        }
        if let Some(world) = self.world.as_ref() {
            self.history.observe(world.api(), world.cloud(), ran_at);
        }
        self.track_instances();
        let broken: Vec<String> = self
            .world
            .as_ref()
            .map(|w| w.invariants().results())
            .unwrap_or_default()
            .into_iter()
            .filter(|i| !i.held)
            .map(|i| format!("{}: {}", i.name, i.first.unwrap_or_default()))
            .collect();
        if !broken.is_empty() {
            self.fail(format!("invariant broken: {}", broken.join("; ")));
        }
    }

    /// Lets `duration` of simulated time pass.
    pub async fn run_for(&mut self, duration: Duration) {
        self.world().await;
        let until = self.elapsed() + duration;
        while self.elapsed() < until {
            self.step().await;
        }
    }

    /// Steps the world until `check` passes, failing with its last complaint if it has not
    /// within `limit` of simulated time (checked before the first step too).
    pub async fn wait_until(
        &mut self,
        limit: Duration,
        check: impl Fn(&Snapshot) -> Result<(), String>,
    ) -> Snapshot {
        self.world().await;
        let deadline = self.elapsed() + limit;
        loop {
            let snapshot = self.snapshot().await;
            match check(&snapshot) {
                Ok(()) => return snapshot,
                Err(why) if self.elapsed() >= deadline => {
                    self.fail(format!("not within {}s: {why}", limit.as_secs()))
                }
                Err(_) => self.step().await,
            }
        }
    }

    /// Steps the world for `duration`, failing as soon as `check` does not hold.
    pub async fn holds_for(
        &mut self,
        duration: Duration,
        check: impl Fn(&Snapshot) -> Result<(), String>,
    ) {
        self.world().await;
        let start = self.elapsed();
        let until = start + duration;
        loop {
            let snapshot = self.snapshot().await;
            if let Err(why) = check(&snapshot) {
                self.fail(format!(
                    "stopped holding after {}s: {why}",
                    (self.elapsed() - start).as_secs()
                ));
            }
            if self.elapsed() >= until {
                return;
            }
            self.step().await;
        }
    }

    /// Records a scenario's own action at the time it was taken: the next step would attribute
    /// it to the same time, but a `Then` step may ask before any step ran.
    pub(super) fn observe_now(&mut self) {
        if let Some(world) = self.world.as_ref() {
            let now = world.clock().now();
            self.history.observe(world.api(), world.cloud(), now);
        }
    }
}
