//! `consolidation-saves`: a consolidation that replaces nodes launches a replacement that costs
//! strictly less per hour than the nodes it replaces together (upstream `computeConsolidation`:
//! every instance type kept for the replacement must cost less than the candidates at its worst
//! launch price, `RemoveInstanceTypeOptionsByPriceAndMinValues`; spot-to-spot adds rules that only
//! narrow the choice further, so the same bound holds).
//!
//! Pairing, from the API server and the cloud only: a candidate is a NodeClaim that shows the
//! `karpenter.sh/disruption-command` annotation (`<reason> <replacements> <id>@<start>`) with
//! reason `Underutilized`, priced when the world first sees that command on it. The command's
//! replacements are the first `<replacements>` NodeClaims (by creation, then name) created at or
//! after its start whose `karpenter.sh/replaces` annotation names only that command's
//! candidates: the command launches them when it starts, before any candidate is deleted
//! (upstream's orchestration queue launches a command's replacements and waits for them before
//! deleting the candidates). Any later claim naming a candidate is not the consolidation's: the
//! provisioner plans capacity for the pods of nodes going away, as upstream's provisioner
//! schedules the pods of deleting nodes, and links its claims to them with the same annotation
//! (seed 35 of the swarm with latency drawn: a candidate of `Underutilized 1` at 16:29, deleted at
//! 18:41 and still draining, whose pods the provisioner packed at 20:09 with 56 new pending pods
//! onto a larger spot node; upstream holds such a claim to no consolidation price). Prices are
//! fakecloud's, for the offering (instance type, zone, capacity type) of the instance each
//! claim's `status.providerID` names, in force when the candidate's command was first seen and
//! when the replacement's instance was first seen (the world changes no price today; a spot price
//! moving between the decision and the launch would need a tolerance). Each replacement is judged
//! alone against the whole set it replaces (consolidation launches one).

use std::collections::{BTreeMap, BTreeSet};

use fakecloud::{FakeCloud, Pool};
use jiff::Timestamp;
use karpenter_core::api::NodeClaim;

use super::budgets::COMMAND_ANNOTATION;
use super::pod_facts::instance_of;
use super::{Check, Invariant, StepView, Violation};

/// The annotation a replacement carries: the claims it replaces, comma-separated.
pub const REPLACES_ANNOTATION: &str = "karpenter.sh/replaces";

/// A candidate as first seen in its command.
#[derive(Debug, Clone)]
struct Candidate {
    /// $/hour of its instance's offering (`None`: it had no instance the cloud knows).
    price: Option<f64>,
    /// The command's id (`<first claim>@<start>`).
    command: String,
}

/// A consolidation command, from its candidates' annotation.
#[derive(Debug, Clone)]
struct Command {
    /// When it started (whole seconds, as the annotation writes it).
    started: Timestamp,
    /// How many replacements it launches.
    replacements: usize,
    /// The claims paired with it as its replacements so far.
    paired: BTreeSet<String>,
}

/// The command a claim's `karpenter.sh/disruption-command` annotation records, if its reason is
/// `Underutilized`: (id, replacements, start).
fn underutilized_command(claim: &NodeClaim) -> Option<(String, usize, Timestamp)> {
    let mut parts = annotation(claim, COMMAND_ANNOTATION)?.split_whitespace();
    if parts.next()? != "Underutilized" {
        return None;
    }
    let replacements = parts.next()?.parse().ok()?;
    let id = parts.next()?;
    let started = id.rsplit_once('@')?.1.parse().ok()?;
    Some((id.to_string(), replacements, started))
}

/// The `consolidation-saves` checker.
#[derive(Debug, Default)]
pub struct ConsolidationSaves {
    candidates: BTreeMap<String, Candidate>,
    commands: BTreeMap<String, Command>,
    /// Claims naming candidates seen so far: paired with their command (to judge once launched)
    /// or found to be no consolidation's.
    sorted: BTreeSet<String>,
    /// Paired replacements not yet judged (their instance not yet seen).
    unjudged: BTreeSet<String>,
}

fn annotation<'c>(claim: &'c NodeClaim, key: &str) -> Option<&'c str> {
    claim
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The offering of the instance `claim` records, and its price at `at`.
fn price(cloud: &FakeCloud, claim: &NodeClaim, at: Timestamp) -> Option<(String, f64)> {
    let provider = claim.status.as_ref()?.provider_id.as_deref()?;
    let instance = cloud.instance(instance_of(provider))?;
    let pool = Pool::new(
        &instance.instance_type,
        &instance.zone,
        instance.capacity_type,
    );
    let history = cloud.price_history(&pool);
    let price = history
        .iter()
        .take_while(|p| p.time <= at)
        .last()
        .or(history.first())?
        .price;
    let offering = format!(
        "{} {} {}",
        instance.instance_type,
        instance.zone,
        instance.capacity_type.label()
    );
    Some((offering, price))
}

impl ConsolidationSaves {
    /// Notes each claim seen in a consolidation command for the first time (or in a new one:
    /// a command undone and decided again), priced now.
    fn note_candidates(&mut self, step: &StepView<'_>) {
        for claim in step.observed.claims() {
            let Some((id, replacements, started)) = underutilized_command(claim) else {
                continue;
            };
            let name = claim.metadata.name.clone().unwrap_or_default();
            if self.candidates.get(&name).is_some_and(|c| c.command == id) {
                continue;
            }
            let price = price(step.cloud, claim, step.now).map(|(_, p)| p);
            self.commands.entry(id.clone()).or_insert(Command {
                started,
                replacements,
                paired: BTreeSet::new(),
            });
            self.candidates
                .insert(name, Candidate { price, command: id });
        }
    }

    /// Sorts the claims naming candidates seen for the first time, oldest first: each is one of
    /// its command's replacements while the command has fewer paired than it launches, and it
    /// was created at or after the command's start naming only that command's candidates; any
    /// other is no consolidation's.
    fn pair(&mut self, step: &StepView<'_>) {
        let mut fresh: Vec<(Timestamp, String, BTreeSet<String>)> = step
            .observed
            .claims()
            .filter_map(|claim| {
                let name = claim.metadata.name.clone().unwrap_or_default();
                let created = claim.metadata.creation_timestamp.as_ref()?.0;
                let replaces: BTreeSet<String> = annotation(claim, REPLACES_ANNOTATION)?
                    .split(',')
                    .filter(|n| !n.is_empty())
                    .map(str::to_string)
                    .collect();
                (!self.sorted.contains(&name)).then_some((created, name, replaces))
            })
            .collect();
        fresh.sort();
        for (created, name, replaces) in fresh {
            self.sorted.insert(name.clone());
            // Every claim it names is a candidate, all of one command.
            let ids: Option<BTreeSet<&str>> = replaces
                .iter()
                .map(|r| self.candidates.get(r).map(|c| c.command.as_str()))
                .collect();
            let ids: Vec<&str> = ids.unwrap_or_default().into_iter().collect();
            let [id] = ids.as_slice() else {
                continue;
            };
            let Some(command) = self.commands.get_mut(*id) else {
                continue;
            };
            if created >= command.started && command.paired.len() < command.replacements {
                command.paired.insert(name.clone());
                self.unjudged.insert(name);
            }
        }
    }

    /// Judges a paired replacement once its instance is known.
    fn judge(&mut self, step: &StepView<'_>, claim: &NodeClaim) -> Option<Violation> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let replaces: BTreeSet<&str> = annotation(claim, REPLACES_ANNOTATION)?
            .split(',')
            .filter(|n| !n.is_empty())
            .collect();
        if !self.unjudged.contains(&name) || replaces.is_empty() {
            return None;
        }
        let (offering, cost) = price(step.cloud, claim, step.now)?;
        self.unjudged.remove(&name);
        let mut total = 0.0;
        for replaced in &replaces {
            total += self.candidates.get(*replaced)?.price?;
        }
        (cost >= total).then(|| {
            Violation::at(
                step.now,
                format!(
                    "replacement NodeClaim {name} launched as {offering} at ${cost:.4}/h, not cheaper than the ${total:.4}/h of the nodes it replaces ({})",
                    replaces.into_iter().collect::<Vec<_>>().join(", ")
                ),
            )
        })
    }
}

impl Check for ConsolidationSaves {
    fn invariant(&self) -> Invariant {
        Invariant::ConsolidationSaves
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        self.note_candidates(step);
        self.pair(step);
        if self.unjudged.is_empty() {
            return Vec::new();
        }
        let replacements: Vec<&NodeClaim> = step
            .observed
            .claims()
            .filter(|c| {
                c.metadata
                    .name
                    .as_ref()
                    .is_some_and(|n| self.unjudged.contains(n))
            })
            .collect();
        replacements
            .into_iter()
            .filter_map(|c| self.judge(step, c))
            .collect()
    }
}
