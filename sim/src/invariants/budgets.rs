//! `budgets-respected`: a disruption command never starts with more of a NodePool's nodes
//! disrupting than the pool's budgets allow for the command's reason at that moment.
//!
//! Read from the API server alone: a NodeClaim in a command carries the controller's
//! `karpenter.sh/disruption-command` annotation (`<reason> <replacements> <id>`). When a claim
//! first shows it, every claim of its pool in a command counts as disrupting, and that number
//! must not exceed the smallest `nodes` of the budgets active now that apply to the reason
//! (claims whose Node is gone are not counted: they have finished draining, as upstream)
//! (no `reasons`, or the reason listed). A budget with a `schedule` is active from each cron
//! firing (UTC) for its `duration`; `nodes` is a count or a percentage of the pool's nodes
//! (initialized, or already going away), rounded up; a budget that does not parse allows none.
//! Expiration is outside budgets and never carries the annotation.
//!
//! The other way round, a node the controller reports held back by a budget must be held back by
//! one: when a claim's `DisruptionBlocked` condition first shows a message naming a budget
//! (`budget of nodepool P (…) allows A of T nodes to be disrupted for R and U already are`, the
//! controller's explanation, as upstream publishes a blocked event naming the budget), `A` must be
//! what the pool's budgets allow for `R` out of `T` nodes at some second of the last
//! [`REPORT_SLACK`] (the message is written after the pass that decided it, and a window may open
//! or close in between). A controller that blocks outside a scheduled budget's window, or counts
//! a budget tighter than written, fails here; one that allows more fails the command rule.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::Value;

use super::{Check, Invariant, StepView, Violation};

/// The annotation a claim in a disruption command carries.
pub const COMMAND_ANNOTATION: &str = "karpenter.sh/disruption-command";

/// How far back a reported budget block may have been decided (see the module docs).
pub const REPORT_SLACK: Duration = Duration::from_secs(60);

/// The `budgets-respected` checker: the claims already seen in a command, and the last
/// `DisruptionBlocked` message seen on each claim.
#[derive(Debug, Default)]
pub struct BudgetsRespected {
    seen: BTreeSet<String>,
    reported: BTreeMap<String, String>,
}

/// What a `DisruptionBlocked` message says a budget allows: `(pool, allowed, total, reason)`.
fn reported_block(message: &str) -> Option<(&str, u64, u64, &str)> {
    const HEAD: &str = "budget of nodepool ";
    let rest = &message[message.find(HEAD)? + HEAD.len()..];
    let (pool, rest) = rest.split_once(" (")?;
    let (_, rest) = rest.rsplit_once(") allows ")?;
    let (allowed, rest) = rest.split_once(" of ")?;
    let (total, rest) = rest.split_once(" nodes to be disrupted for ")?;
    let (reason, _) = rest.split_once(" and ")?;
    Some((pool, allowed.parse().ok()?, total.parse().ok()?, reason))
}

/// The message of `claim`'s `DisruptionBlocked` condition, if it is true.
fn blocked_message(claim: &Value) -> Option<&str> {
    claim["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "DisruptionBlocked" && c["status"] == "True")?["message"]
        .as_str()
}

/// The reason a claim's command records, if it is in one.
pub(crate) fn command_reason(claim: &Value) -> Option<&str> {
    claim["metadata"]["annotations"][COMMAND_ANNOTATION]
        .as_str()?
        .split_whitespace()
        .next()
}

/// The NodePool named `name`, as the step lists them.
fn pool_named<'s>(step: &'s StepView<'_>, name: &str) -> Option<&'s Value> {
    step.pools()
        .iter()
        .map(|p| &**p)
        .find(|p| p["metadata"]["name"] == name)
}

fn pool_of(claim: &Value) -> &str {
    claim["metadata"]["labels"]["karpenter.sh/nodepool"]
        .as_str()
        .unwrap_or_default()
}

fn initialized(claim: &Value) -> bool {
    claim["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Initialized" && c["status"] == "True")
    })
}

/// Parses `1h30m`-style durations (what the CRD admits for budget durations).
fn duration(text: &str) -> Option<Duration> {
    humantime::parse_duration(text).ok()
}

/// Whether `budget` is active at `now` (`None`: it does not parse).
fn active(budget: &Value, now: Timestamp) -> Option<bool> {
    let (Some(schedule), Some(length)) = (budget["schedule"].as_str(), budget["duration"].as_str())
    else {
        return Some(true);
    };
    let schedule = if schedule == "@midnight" {
        "@daily"
    } else {
        schedule
    };
    let cron = croner::parser::CronParser::new().parse(schedule).ok()?;
    let length = duration(length)?;
    let zoned = now.to_zoned(TimeZone::UTC);
    let Ok(fired) = cron.find_previous_occurrence(&zoned, true) else {
        return Some(false);
    };
    let since = now.duration_since(fired.timestamp());
    Some(!since.is_negative() && since.unsigned_abs() < length)
}

/// The nodes `budget` allows out of `total` (`None`: it does not parse).
fn allowed(budget: &Value, total: u64) -> Option<u64> {
    let nodes = budget["nodes"].as_str().unwrap_or("10%");
    match nodes.strip_suffix('%') {
        Some(p) => Some((total * p.parse::<u64>().ok()?.min(100)).div_ceil(100)),
        None => nodes.parse().ok(),
    }
}

/// The most nodes of `pool` that may be disrupting for `reason` at `now`.
fn limit(pool: &Value, reason: &str, total: u64, now: Timestamp) -> u64 {
    let default = serde_json::json!([{"nodes": "10%"}]);
    let budgets = pool["spec"]["disruption"]["budgets"]
        .as_array()
        .unwrap_or_else(|| default.as_array().expect("a list"));
    let mut out = u64::MAX;
    for budget in budgets {
        let applies = budget["reasons"]
            .as_array()
            .is_none_or(|r| r.is_empty() || r.iter().any(|r| r == reason));
        if !applies {
            continue;
        }
        match active(budget, now).zip(allowed(budget, total)) {
            None => return 0,
            Some((false, _)) => {}
            Some((true, n)) => out = out.min(n),
        }
    }
    out
}

impl Check for BudgetsRespected {
    fn invariant(&self) -> Invariant {
        Invariant::BudgetsRespected
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let claims = step.claims();
        let fresh: Vec<&Value> = claims
            .iter()
            .map(|c| &**c)
            .filter(|c| command_reason(c).is_some())
            .filter(|c| {
                !self
                    .seen
                    .contains(c["metadata"]["name"].as_str().unwrap_or_default())
            })
            .collect();
        if fresh.is_empty() {
            // No command started: only the reported blocks to judge (and no Node to read).
            return self.check_reported_blocks(step);
        }
        let nodes: BTreeSet<&str> = step
            .nodes()
            .iter()
            .filter_map(|n| n["spec"]["providerID"].as_str())
            .collect();
        let mut out = Vec::new();
        for claim in &fresh {
            let pool_name = pool_of(claim);
            let Some(pool) = pool_named(step, pool_name) else {
                continue;
            };
            // Claims whose Node still exists: one whose Node is gone has finished draining
            // (its instance is terminating) and holds no slot, as upstream counts only
            // initialized StateNodes, which need their Node (swarm seed 916: a drift command
            // started as the previous one's Node went, its claim still waiting on EC2).
            let members: Vec<&Value> = claims
                .iter()
                .map(|c| &**c)
                .filter(|c| pool_of(c) == pool_name)
                .filter(|c| {
                    c["status"]["providerID"]
                        .as_str()
                        .is_some_and(|p| nodes.contains(p))
                })
                .collect();
            let disrupting = members
                .iter()
                .filter(|c| command_reason(c).is_some())
                .count() as u64;
            let total = members
                .iter()
                .filter(|c| {
                    initialized(c)
                        || c["metadata"]["deletionTimestamp"].is_string()
                        || command_reason(c).is_some()
                })
                .count() as u64;
            let reason = command_reason(claim).unwrap_or_default();
            let most = limit(pool, reason, total, step.now);
            if disrupting > most {
                out.push(Violation::at(
                    step.now,
                    format!(
                        "NodePool {pool_name}: {disrupting} of {total} nodes disrupting when a {reason} command started on {}, its budgets allow {most}",
                        claim["metadata"]["name"].as_str().unwrap_or_default()
                    ),
                ));
            }
        }
        out.extend(self.check_reported_blocks(step));
        for claim in fresh {
            self.seen.insert(
                claim["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
        out
    }
}

impl BudgetsRespected {
    /// The reported-block rule (module docs): each claim's `DisruptionBlocked` message, when it
    /// first shows, against the budgets active in the last [`REPORT_SLACK`].
    fn check_reported_blocks(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let claims = step.claims();
        let names: BTreeSet<&str> = claims
            .iter()
            .filter_map(|c| c["metadata"]["name"].as_str())
            .collect();
        self.reported
            .retain(|name, _| names.contains(name.as_str()));
        let mut out = Vec::new();
        for claim in claims.iter().map(|c| &**c) {
            let name = claim["metadata"]["name"].as_str().unwrap_or_default();
            let Some(message) = blocked_message(claim) else {
                continue;
            };
            if self.reported.get(name).is_some_and(|m| m == message) {
                continue;
            }
            self.reported.insert(name.to_string(), message.to_string());
            let Some((pool_name, allowed, total, reason)) = reported_block(message) else {
                continue;
            };
            let Some(pool) = pool_named(step, pool_name) else {
                continue;
            };
            let justified = (0..=REPORT_SLACK.as_secs()).any(|back| {
                step.now
                    .checked_sub(jiff::SignedDuration::from_secs(back as i64))
                    .is_ok_and(|at| limit(pool, reason, total, at) == allowed)
            });
            if !justified {
                out.push(Violation::at(
                    step.now,
                    format!(
                        "NodePool {pool_name}: the controller reports claim {name} held back by a budget that allows {allowed} of {total} nodes for {reason}, but its budgets allow {} now",
                        limit(pool, reason, total, step.now)
                    ),
                ));
            }
        }
        out
    }
}
