//! `consolidate-after-honoured`: no node is put in a consolidation command (reason `Empty` or
//! `Underutilized`) before its NodePool's `consolidateAfter` has passed since the node's last pod
//! event, less [`CONSOLIDATE_AFTER_SLACK`].
//!
//! A pod event is what upstream's pod-events controller stamps on the NodeClaim
//! (`status.lastPodEventTime`): a pod bound to the node, or one on it going terminating or
//! terminal (a pod that disappears between two looks counts as well); DaemonSet and mirror pods do
//! not count. The world sees the events itself, on the observer's cache of pods, not through the
//! controller's stamp: an event first seen in a step is dated at the previous look (the earliest
//! it can have happened). A command is dated at the step its claim first shows the
//! `karpenter.sh/disruption-command` annotation (the latest it can have started), and only the
//! events seen in earlier steps count against it (the command's own evictions come after).
//!
//! Slack, [`CONSOLIDATE_AFTER_SLACK`]: upstream writes `lastPodEventTime` at most once per 10 s
//! (`dedupeTimeout`), so it may be up to 10 s older than the last event; and an event is dated at
//! the previous look, up to one idle step (10 s) early. Upstream's fallback when a node had no pod
//! event (its initialization time) is not checked.
//!
//! Events no controller process watched are not counted: those seen in a look whose window
//! held a step in which no process acted (a crash's downtime, a leader's lease running out) or
//! in which a process acted for the first time (a start, a restart, a new leader). A new process's
//! first pass only takes stock of the pods, as upstream's pod-events controller, which acts on pod
//! updates only (bound, terminating, terminal), never hears of what changed before it led; the
//! node's last event is then the one before (if any).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use super::budgets::COMMAND_ANNOTATION;
use super::pod_facts::{is_daemon, is_deleting, is_mirror, is_terminal, plus};
use super::{Check, Invariant, StepView, Violation};

/// How much sooner than `consolidateAfter` after the last seen pod event a command may start:
/// upstream's 10 s de-duplication of `lastPodEventTime` plus one idle step of the world.
pub const CONSOLIDATE_AFTER_SLACK: Duration = Duration::from_secs(20);

/// A pod as last seen: its node, and whether it was already leaving (terminating or terminal).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    node: String,
    leaving: bool,
}

/// The `consolidate-after-honoured` checker.
#[derive(Debug, Default)]
pub struct ConsolidateAfter {
    /// Bound pods by uid, as of the last look.
    pods: BTreeMap<String, Seen>,
    /// The earliest time each node's last seen pod event can have happened.
    last_event: BTreeMap<String, Timestamp>,
    /// Commands already judged: (claim, annotation value).
    judged: BTreeSet<(String, String)>,
    /// When the checker last looked, and at which cache generation.
    last_look: Option<(Timestamp, u64)>,
    /// A step since the last look had no process acting, or a process acting for the first time.
    unwatched: bool,
}

fn parse_after(text: &str) -> Option<Duration> {
    humantime::parse_duration(text).ok()
}

impl ConsolidateAfter {
    /// Commands seen for the first time, judged against the events of earlier steps.
    fn judge_commands(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let mut out = Vec::new();
        for claim in step.observed.claims() {
            let Some(command) = claim
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(COMMAND_ANNOTATION))
            else {
                continue;
            };
            let reason = command.split_whitespace().next().unwrap_or_default();
            if !matches!(reason, "Empty" | "Underutilized") {
                continue;
            }
            let name = claim.metadata.name.clone().unwrap_or_default();
            if !self.judged.insert((name.clone(), command.clone())) {
                continue;
            }
            let Some(node) = claim.status.as_ref().and_then(|s| s.node_name.as_deref()) else {
                continue;
            };
            let Some(&event) = self.last_event.get(node) else {
                continue;
            };
            let pool = claim
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("karpenter.sh/nodepool"));
            let Some(after) = step
                .observed
                .pools()
                .find(|p| p.metadata.name.as_ref() == pool)
                .and_then(|p| parse_after(&p.spec.disruption.consolidate_after))
            else {
                continue;
            };
            let earliest = plus(event, after.saturating_sub(CONSOLIDATE_AFTER_SLACK));
            if step.now < earliest {
                out.push(Violation::at(
                    step.now,
                    format!(
                        "node {node} (NodeClaim {name}) put in a {reason} command {}s after its last pod event (at {event} or later); consolidateAfter {}s, slack {}s",
                        step.now.duration_since(event).as_secs(),
                        after.as_secs(),
                        CONSOLIDATE_AFTER_SLACK.as_secs()
                    ),
                ));
            }
        }
        out
    }

    /// Pod events since the last look, each dated at the last look (not recorded when no process
    /// watched them, `unwatched`).
    fn watch_pods(&mut self, step: &StepView<'_>, since: Timestamp, unwatched: bool) {
        let mut now: BTreeMap<String, Seen> = BTreeMap::new();
        for pod in step.observed.pods() {
            let Some(node) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) else {
                continue;
            };
            if is_daemon(pod) || is_mirror(pod) {
                continue;
            }
            let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
            now.insert(
                uid.to_string(),
                Seen {
                    node: node.to_string(),
                    leaving: is_deleting(pod) || is_terminal(pod),
                },
            );
        }
        let mut touched: BTreeSet<&str> = BTreeSet::new();
        for (uid, seen) in &now {
            match self.pods.get(uid) {
                Some(before) if before == seen => {}
                Some(before) if before.node == seen.node && before.leaving => {}
                _ => {
                    touched.insert(&seen.node);
                }
            }
        }
        for (uid, before) in &self.pods {
            if !now.contains_key(uid) && !before.leaving {
                touched.insert(&before.node);
            }
        }
        for node in touched.into_iter().filter(|_| !unwatched) {
            self.last_event.insert(node.to_string(), since);
        }
        self.pods = now;
    }

    /// Forgets nodes that are gone.
    fn forget_gone(&mut self, step: &StepView<'_>) {
        let live: BTreeSet<&str> = step
            .observed
            .nodes()
            .filter_map(|n: &Value| n["metadata"]["name"].as_str())
            .collect();
        self.last_event.retain(|n, _| live.contains(n.as_str()));
    }
}

impl Check for ConsolidateAfter {
    fn invariant(&self) -> Invariant {
        Invariant::ConsolidateAfterHonoured
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let generation = step.observed.generation();
        let (since, looked) = self.last_look.unwrap_or((step.now, u64::MAX));
        let mut out = Vec::new();
        self.unwatched |= step.leaders == 0 || step.fresh_leader;
        if looked != generation {
            out = self.judge_commands(step);
            let unwatched = std::mem::take(&mut self.unwatched);
            self.watch_pods(step, since, unwatched);
            self.forget_gone(step);
        }
        self.last_look = Some((step.now, generation));
        out
    }
}
