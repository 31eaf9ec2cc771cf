//! The swarm's workload draw (issue 22): like the faults, part of each seed's world is drawn
//! from the seed, so that the seeds together meet the situations one fixed workload never does.
//! On top of the scenario's own workload, each of these is on or off by the seed's coin (named
//! stream `workload-mix/draw`, drawn in this order, each with its magnitudes whether it is on or
//! not, so one part's draw never shifts another's):
//!
//! | part | what it adds |
//! |---|---|
//! | `guarded` | a Deployment of 3–10 pods (250m–1 cpu) annotated `karpenter.sh/do-not-disrupt: "true"`, from the start: voluntary disruption must leave their nodes alone, and a drain (an interruption) must not evict them |
//! | `budget` | a PodDisruptionBudget over the scenario's first Deployment, of a drawn shape: `maxUnavailable: 1`, `maxUnavailable: 25%`, `minAvailable: 50%` or `minAvailable: 1` |
//! | `scale-down` | the scenario's first Deployment cut to a third of its replicas at 60–90% of the safety phase (at least one minute before its end), so consolidation runs while the faults are on |
//!
//! The draw only adds: a scenario without a Deployment gets only `guarded`.

use std::collections::BTreeMap;
use std::time::Duration;

use fakekit::Streams;
use rand::Rng;
use serde::Serialize;

use crate::scenario::{DeploymentSpec, Scenario, WorkloadEvent};

/// Name of the `guarded` Deployment.
pub const GUARDED: &str = "guarded";

/// Which workload a swarm seed runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WorkloadSelection {
    /// The scenario's workload plus the seed's draw ([`WorkloadMix::draw`]).
    #[default]
    Drawn,
    /// The scenario's workload as written.
    Scenario,
}

/// A `--workload` value that is neither `drawn` nor `scenario`.
#[derive(Debug, thiserror::Error)]
#[error("unknown workload selection {0:?} (drawn or scenario)")]
pub struct UnknownWorkload(String);

impl std::str::FromStr for WorkloadSelection {
    type Err = UnknownWorkload;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "drawn" => Ok(Self::Drawn),
            "scenario" => Ok(Self::Scenario),
            other => Err(UnknownWorkload(other.to_string())),
        }
    }
}

impl std::fmt::Display for WorkloadSelection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Drawn => "drawn",
            Self::Scenario => "scenario",
        })
    }
}

/// One seed's drawn additions (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadMix {
    /// `guarded`: replicas and cpu (millicores).
    pub guarded: Option<(u32, u32)>,
    /// `budget`: the PodDisruptionBudget's spec field and value (`maxUnavailable`, `25%`).
    pub budget: Option<(String, String)>,
    /// `scale-down`: when (since the start of the run).
    #[serde(with = "humantime_serde")]
    pub scale_down: Option<Duration>,
}

impl WorkloadMix {
    /// The draw of `seed` for a safety phase of `safety`.
    pub fn draw(seed: u64, safety: Duration) -> Self {
        let mut rng = Streams::new(seed, "workload-mix").stream("draw");
        let mut mix = Self::default();
        let (on, replicas, cpu) = (
            rng.gen_bool(0.6),
            rng.gen_range(3..=10u32),
            rng.gen_range(1..=4u32) * 250,
        );
        if on {
            mix.guarded = Some((replicas, cpu));
        }
        let (on, shape) = (rng.gen_bool(0.5), rng.gen_range(0..4u8));
        if on {
            let (field, value) = match shape {
                0 => ("maxUnavailable", "1"),
                1 => ("maxUnavailable", "25%"),
                2 => ("minAvailable", "50%"),
                _ => ("minAvailable", "1"),
            };
            mix.budget = Some((field.to_string(), value.to_string()));
        }
        let (on, share) = (rng.gen_bool(0.5), rng.gen_range(0.6..=0.9));
        if on {
            let at = Duration::from_secs((safety.as_secs_f64() * share) as u64);
            let latest = safety.saturating_sub(Duration::from_secs(60));
            mix.scale_down = Some(at.min(latest));
        }
        mix
    }

    /// The names of the parts that are on.
    pub fn names(&self) -> Vec<&'static str> {
        [
            (self.guarded.is_some(), "guarded"),
            (self.budget.is_some(), "budget"),
            (self.scale_down.is_some(), "scale-down"),
        ]
        .into_iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| name)
        .collect()
    }

    /// `scenario` with the mix added.
    pub fn apply(&self, mut scenario: Scenario) -> Scenario {
        let first = scenario.workloads.iter().find_map(|e| e.deployment.clone());
        if let Some((replicas, cpu)) = self.guarded {
            let annotations = BTreeMap::from([(
                karpenter_core::api::labels::DO_NOT_DISRUPT_ANNOTATION.to_string(),
                "true".to_string(),
            )]);
            scenario.workloads.insert(
                0,
                deployment_event(
                    Duration::ZERO,
                    DeploymentSpec {
                        name: GUARDED.to_string(),
                        replicas,
                        cpu: format!("{cpu}m"),
                        memory: "512Mi".to_string(),
                        annotations,
                        node_selector: BTreeMap::new(),
                    },
                ),
            );
        }
        let Some(first) = first else {
            return scenario;
        };
        if let Some((field, value)) = &self.budget {
            let value = match value.parse::<u32>() {
                Ok(n) => n.to_string(),
                Err(_) => format!("{value:?}"),
            };
            scenario.manifests += &format!(
                "\n---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: sim-drawn-{name}, namespace: default}}\nspec:\n  {field}: {value}\n  selector: {{matchLabels: {{app: {name}}}}}\n",
                name = first.name
            );
        }
        if let Some(at) = self.scale_down {
            let in_effect = scenario
                .workloads
                .iter()
                .filter(|e| e.at <= at)
                .filter_map(|e| e.deployment.as_ref())
                .rfind(|d| d.name == first.name)
                .map_or(first.replicas, |d| d.replicas);
            let mut spec = first.clone();
            spec.replicas = in_effect.div_ceil(3);
            let index = scenario.workloads.partition_point(|e| e.at <= at);
            scenario.workloads.insert(index, deployment_event(at, spec));
        }
        scenario
    }
}

fn deployment_event(at: Duration, deployment: DeploymentSpec) -> WorkloadEvent {
    WorkloadEvent {
        at,
        deployment: Some(deployment),
        batch: None,
        statefulset: None,
        apply: None,
    }
}
