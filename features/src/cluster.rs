//! [`SimWorld`]: the cucumber world over the simulated cluster.
//!
//! `Given` steps collect a [`Setup`] (manifests, cloud knobs, the seed); the first step that
//! needs the cluster builds the sim `World` from it, so the order of `Given`s never matters and
//! a knob can never be turned after the world it shapes exists. From then on, time only moves
//! when a step steps the world: `within 2 minutes ...` steps until the condition holds or the
//! simulated deadline passes, which takes milliseconds of wall time.
//!
//! Every step of the world also runs the scenario's Deployments (a ReplicaSet stand-in) and
//! checks the sim's invariants, failing at once on a violation: whatever a scenario asserts, it
//! also asserts that no instance leaked, no NodePool exceeded its limits, no node is
//! overcommitted and no NodeClaim is stuck.
//!
//! Every failure names the seed and the command that replays the scenario.
//!
//! Where the code is: this file holds the world's state and its failure reports;
//! [`setup`] collects the `Given`s and builds the world from them; [`drive`] steps it (with the
//! scenario's Deployments and DaemonSets) and waits on conditions; [`actions`] is what `When`
//! steps do to it (create, scale, apply, delete, patch, terminate) and which node they single
//! out.

mod actions;
mod drive;
mod setup;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use jiff::Timestamp;
use karpenter_core::seams::Clock;
use karpenter_core::seams::ec2::Instance;
use karpenter_sim::workloads::{DaemonSet, Deployment};
use karpenter_sim::world::{EPOCH, World};

use crate::history::History;
use crate::observe::Snapshot;

pub use setup::{DEFAULT_SEED, Setup};

/// The node an action step singled out ("the node running "web""), as it was then. Later steps
/// say "that node", "its NodeClaim", "its instance", and ask the [`History`] about them after
/// they are gone.
#[derive(Clone, Debug, PartialEq)]
pub struct Subject {
    pub node: String,
    pub claim: String,
    pub instance_id: String,
    /// When the step singled it out (the time of the action that followed).
    pub at: Timestamp,
}

/// The cucumber world: one scenario's simulated cluster, built on first use.
#[derive(cucumber::World)]
#[world(init = Self::new)]
pub struct SimWorld {
    pub seed: u64,
    /// `feature: scenario`, set before the scenario runs (for failure messages).
    pub scenario: String,
    setup: Setup,
    world: Option<World>,
    /// Why the world could not be built (manifests it refused), once a step tried.
    refused: Option<String>,
    /// Deployments created, by name.
    deployments: BTreeMap<String, Deployment>,
    /// DaemonSets created, by name.
    daemonsets: BTreeMap<String, DaemonSet>,
    /// What every step changed, for the steps that ask about order and timing.
    history: History,
    /// The node the last singling-out step chose.
    subject: Option<Subject>,
    /// Every instance ever seen (any state), by id, and the order they were first seen in.
    launched: BTreeMap<String, Instance>,
    launch_order: Vec<String>,
    /// `launch_order.len()` when the last action step ran: what "new nodes" are counted from.
    baseline: usize,
    /// Results of the last `validate` step.
    pub validated: Vec<karpenter_core::manifest::Checked>,
}

impl fmt::Debug for SimWorld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimWorld")
            .field("seed", &self.seed)
            .field("scenario", &self.scenario)
            .field("simulated", &self.elapsed())
            .field("built", &self.world.is_some())
            .finish()
    }
}

impl SimWorld {
    pub fn new() -> Self {
        Self {
            seed: DEFAULT_SEED,
            scenario: String::new(),
            setup: Setup::default(),
            world: None,
            refused: None,
            deployments: BTreeMap::new(),
            daemonsets: BTreeMap::new(),
            history: History::default(),
            subject: None,
            launched: BTreeMap::new(),
            launch_order: Vec::new(),
            baseline: 0,
            validated: Vec::new(),
        }
    }

    /// Fails the step: `message`, then the seed, simulated time, the state of the world and the
    /// command that replays this scenario.
    pub fn fail(&self, message: impl fmt::Display) -> ! {
        let state = self
            .world
            .as_ref()
            .map(|w| format!("\n{}", Snapshot::read(w.api(), w.cloud())))
            .unwrap_or_default();
        let name = self
            .scenario
            .split_once(": ")
            .map_or(self.scenario.as_str(), |(_, s)| s);
        panic!(
            "{message}\n--- seed {} at {}s simulated ({}){state}\n--- replay: cargo test -p karpenter-features --test features -- --name {}",
            self.seed,
            self.elapsed().as_secs(),
            self.scenario,
            shell_quote(&format!("^{}$", regex::escape(name))),
        )
    }

    /// Seed, simulated time, what was launched and the state of the world, in a few lines.
    pub fn summary(&self) -> String {
        let launched: Vec<String> = self
            .launch_order
            .iter()
            .filter_map(|id| self.launched.get(id))
            .map(|i| format!("{}/{}/{}", i.instance_type, i.zone, i.capacity_type.label()))
            .collect();
        let state = self
            .world
            .as_ref()
            .map(|w| Snapshot::read(w.api(), w.cloud()).to_string())
            .unwrap_or_else(|| "(no world was built)".to_string());
        format!(
            "--- {} (seed {}, {}s simulated)\nlaunched: {}\n{state}",
            self.scenario,
            self.seed,
            self.elapsed().as_secs(),
            launched.join(", ")
        )
    }

    /// The simulated clock (the epoch before the world is built).
    pub fn now(&self) -> Timestamp {
        self.world
            .as_ref()
            .map_or_else(|| EPOCH.parse().unwrap_or_default(), |w| w.clock().now())
    }

    /// What the steps so far changed, and when.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// Simulated time since the world was built (zero before).
    pub fn elapsed(&self) -> Duration {
        let start: Timestamp = EPOCH.parse().unwrap_or_default();
        self.world.as_ref().map_or(Duration::ZERO, |w| {
            w.clock().now().duration_since(start).unsigned_abs()
        })
    }

    /// The world, which the caller made sure exists.
    fn built(&self) -> &World {
        match self.world.as_ref() {
            Some(world) => world,
            None => unreachable!("the caller built the world"),
        }
    }
}

impl Default for SimWorld {
    fn default() -> Self {
        Self::new()
    }
}

/// `text` as one single-quoted shell word (a `'` inside becomes `'\''`), for the replay command.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}
