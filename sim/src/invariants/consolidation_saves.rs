//! `consolidation-saves`: a consolidation that replaces nodes launches a replacement that costs
//! strictly less per hour than the nodes it replaces together (upstream `computeConsolidation`:
//! every instance type kept for the replacement must cost less than the candidates at its worst
//! launch price, `RemoveInstanceTypeOptionsByPriceAndMinValues`; spot-to-spot adds rules that only
//! narrow the choice further, so the same bound holds).
//!
//! Pairing, from the API server and the cloud only: a candidate is a NodeClaim that shows the
//! `karpenter.sh/disruption-command` annotation with reason `Underutilized`, priced when the
//! world first sees the command; a replacement is a NodeClaim created at or after that moment
//! whose `karpenter.sh/replaces` annotation names only such candidates. Prices are fakecloud's,
//! for the offering (instance type, zone, capacity type) of the instance each claim's
//! `status.providerID` names, in force when the candidate's command was first seen and when the
//! replacement's instance was first seen (the world changes no price today; a spot price moving
//! between the decision and the launch would need a tolerance). Each replacement is judged alone
//! against the whole set it replaces (consolidation launches one).

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
    seen: Timestamp,
    /// $/hour of its instance's offering (`None`: it had no instance the cloud knows).
    price: Option<f64>,
}

/// The `consolidation-saves` checker.
#[derive(Debug, Default)]
pub struct ConsolidationSaves {
    candidates: BTreeMap<String, Candidate>,
    /// Replacements already judged (or found to be no consolidation's).
    judged: BTreeSet<String>,
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
    fn note_candidates(&mut self, step: &StepView<'_>) {
        for claim in step.observed.claims() {
            let underutilized = annotation(claim, COMMAND_ANNOTATION)
                .is_some_and(|c| c.split_whitespace().next() == Some("Underutilized"));
            let name = claim.metadata.name.clone().unwrap_or_default();
            if !underutilized || self.candidates.contains_key(&name) {
                continue;
            }
            let price = price(step.cloud, claim, step.now).map(|(_, p)| p);
            let seen = step.now;
            self.candidates.insert(name, Candidate { seen, price });
        }
    }

    fn judge(&mut self, step: &StepView<'_>, claim: &NodeClaim) -> Option<Violation> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let replaces: BTreeSet<&str> = annotation(claim, REPLACES_ANNOTATION)?
            .split(',')
            .filter(|n| !n.is_empty())
            .collect();
        if self.judged.contains(&name) || replaces.is_empty() {
            return None;
        }
        let (offering, cost) = price(step.cloud, claim, step.now)?;
        self.judged.insert(name.clone());
        let created = claim.metadata.creation_timestamp.as_ref()?.0;
        let mut total = 0.0;
        for replaced in &replaces {
            let candidate = self.candidates.get(*replaced)?;
            if created < candidate.seen {
                return None;
            }
            total += candidate.price?;
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
        let replacements: Vec<&NodeClaim> = step
            .observed
            .claims()
            .filter(|c| annotation(c, REPLACES_ANNOTATION).is_some())
            .collect();
        replacements
            .into_iter()
            .filter_map(|c| self.judge(step, c))
            .collect()
    }
}
