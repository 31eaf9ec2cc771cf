//! Setting up a scenario's world: what `Given` steps collect ([`Setup`]) and building the sim
//! [`World`] from it on first use.

use std::time::Duration;

use fakecloud::Pool;
use karpenter_sim::scenario::{CloudKnobs, Scenario};
use karpenter_sim::world::World;
use serde_json::Value;

use super::SimWorld;
use crate::manifests;

/// The seed of a scenario that does not say `Given the seed N`.
pub const DEFAULT_SEED: u64 = 1;

/// How long a scenario's world may run at most (a guard, not a budget: steps say how long they
/// wait).
const WORLD_DURATION: Duration = Duration::from_secs(24 * 3600);

/// What `Given` steps collected before the world exists.
#[derive(Clone, Debug, Default)]
pub struct Setup {
    /// Cluster objects (NodePools, EC2NodeClasses, Namespaces), applied at start in this order.
    pub documents: Vec<Value>,
    /// Fakecloud and API-server knobs the world is built with.
    pub knobs: CloudKnobs,
    /// Pools whose free capacity is set right after the world is built.
    pub pool_capacity: Vec<(Pool, u32)>,
}

impl SimWorld {
    /// The setup, for a `Given` step to add to. Fails once the world exists: a knob turned after
    /// the fact would silently not apply.
    pub fn setup(&mut self) -> &mut Setup {
        if self.world.is_some() {
            self.fail(
                "setup step after the cluster started: put Given steps before the first When/Then",
            );
        }
        &mut self.setup
    }

    /// Adds cluster objects to the setup. The same object named twice (two NodePools from one
    /// file sharing their EC2NodeClass) is taken once; two different objects with one name fail.
    pub fn add_documents(&mut self, documents: impl IntoIterator<Item = Value>) {
        for document in documents {
            let same = |v: &Value| {
                v["kind"] == document["kind"]
                    && v["metadata"]["name"] == document["metadata"]["name"]
            };
            match self.setup().documents.iter().find(|v| same(v)) {
                Some(existing) if *existing == document => {}
                Some(_) => self.fail(format!(
                    "two different {} objects named {} in the setup",
                    document["kind"], document["metadata"]["name"]
                )),
                None => self.setup.documents.push(document),
            }
        }
    }

    /// The setup's `kind` object named `name`, to change before the world is built (a NodePool's
    /// terminationGracePeriod, say).
    pub fn setup_document(&mut self, kind: &str, name: &str) -> &mut Value {
        let found = self
            .setup()
            .documents
            .iter()
            .position(|d| d["kind"] == kind && d["metadata"]["name"] == name);
        match found {
            Some(index) => &mut self.setup.documents[index],
            None => self.fail(format!("the setup has no {kind} {name}")),
        }
    }

    /// The knobs the world will be built with.
    pub fn knobs(&mut self) -> &mut CloudKnobs {
        &mut self.setup().knobs
    }

    /// Builds the world from the setup if that has not happened yet. Returns why the cluster
    /// refused the setup's manifests, if it did.
    pub async fn start(&mut self) -> Result<(), String> {
        if self.world.is_some() {
            return Ok(());
        }
        if let Some(refused) = &self.refused {
            return Err(refused.clone());
        }
        let mut knobs = self.setup.knobs.clone();
        if knobs.discovery_tag.is_none() {
            knobs.discovery_tag = manifests::discovery_tag(&self.setup.documents);
        }
        let scenario = Scenario {
            name: self.scenario.clone(),
            description: String::new(),
            duration: WORLD_DURATION,
            step: Duration::from_secs(1),
            manifests: manifests::join(&self.setup.documents),
            cloud: knobs,
            workloads: Vec::new(),
            faults: Default::default(),
            settings: Default::default(),
        };
        match World::new(self.seed, scenario).await {
            Ok(world) => {
                for (pool, units) in &self.setup.pool_capacity {
                    world.cloud().set_pool_capacity(pool, *units);
                }
                let parameters = world.cloud().parameters();
                for (family, release) in manifests::pinned_ami_releases(&self.setup.documents) {
                    let published = parameters.keys().any(|k| {
                        k.contains(&format!("-{release}/"))
                            || k.contains(&format!("/{}/", release.trim_start_matches('v')))
                    });
                    if !published {
                        world.cloud().publish_ami(family, &release);
                    }
                }
                self.world = Some(world);
                Ok(())
            }
            Err(err) => {
                self.refused = Some(err.to_string());
                Err(err.to_string())
            }
        }
    }

    /// The world, built on first use; fails the step if the cluster refused the setup.
    pub async fn world(&mut self) -> &mut World {
        if let Err(refused) = self.start().await {
            self.fail(format!("the cluster refused the setup: {refused}"));
        }
        match self.world.as_mut() {
            Some(world) => world,
            None => unreachable!("start() built the world"),
        }
    }

    /// Why the cluster refused the setup (building it first if no step has yet).
    pub async fn refusal(&mut self) -> Option<String> {
        self.start().await.err()
    }
}
