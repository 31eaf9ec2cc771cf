//! One decision pass: the methods in upstream's order — emptiness, drift, multi-node
//! consolidation, single-node consolidation — and the first command found wins. Every managed
//! node the pass does not disrupt keeps the one reason that stopped it.
//!
//! [`decide`] is what the controller runs each pass; [`plan_all`] runs passes one after another
//! on a view that each command updates (its nodes go away, their pods wait for a home, its
//! replacements are in flight), which is what `karpenter plan --disrupt` prints.

use std::collections::{BTreeMap, BTreeSet};

use super::budgets::Budgets;
use super::candidates::{self, Candidate, Exclusions};
use super::simulate::Simulator;
use super::view::ClusterView;
use super::{
    Command, CommandNode, Method, Options, drift, emptiness, expiration, multinode, singlenode,
};
use crate::catalog::Catalog;
use crate::scheduling::{self, ExistingNode, Input};

/// What one pass decided.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decision {
    pub command: Option<Command>,
    /// Every managed node not in the command, with the one reason it is not (by node name).
    pub blocked: BTreeMap<String, String>,
    /// The methods evaluated, in order, until one found a command (upstream's metrics of
    /// disruption evaluation).
    pub evaluations: Vec<Evaluation>,
}

/// One disruption method's evaluation in a pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    /// Upstream's `reason` label: `empty`, `drifted`, `underutilized`.
    pub reason: &'static str,
    /// Upstream's `consolidation_type` label: `empty`, `multi`, `single`, or empty for drift.
    pub consolidation_type: &'static str,
    /// Nodes the method could disrupt (past the shared candidate checks).
    pub eligible: usize,
    /// How long it took, by the caller's clock (0 with [`decide`]).
    pub seconds: f64,
}

/// A pass in progress: the view, the shared budgets and simulator, and the reasons so far.
pub(crate) struct Pass<'v> {
    pub view: &'v ClusterView,
    pub catalog: &'v Catalog,
    pub options: &'v Options,
    pub budgets: Budgets,
    pub sim: Simulator<'v>,
    /// Free room per resource, for the cheap pre-check before a solve.
    pub room: super::prune::Room,
    /// Nodes past the shared checks, in consolidation order.
    pub eligible: Vec<Candidate<'v>>,
    pub exclusions: Exclusions,
    pub blocked: BTreeMap<String, String>,
}

impl<'v> Pass<'v> {
    pub(crate) fn new(
        view: &'v ClusterView,
        catalog: &'v Catalog,
        options: &'v Options,
        mut exclusions: Exclusions,
    ) -> Self {
        if exclusions.nominated.is_none() {
            exclusions.nominated = Some(nominated(view, catalog, options));
        }
        let mut blocked = BTreeMap::new();
        let mut eligible = Vec::new();
        for facts in view.facts.values() {
            match candidates::check(view, catalog, facts, &exclusions, true) {
                Ok(c) => eligible.push(c),
                Err(reason) => {
                    blocked.insert(facts.node.clone(), reason);
                }
            }
        }
        candidates::sort(&mut eligible);
        Self {
            view,
            catalog,
            options,
            budgets: Budgets::new(view),
            sim: Simulator::new(view, catalog, options.scheduling),
            room: super::prune::Room::new(view),
            eligible,
            exclusions,
            blocked,
        }
    }

    /// Records `reason` for `node` unless it already has one (the first blocker is the one).
    pub(crate) fn block(&mut self, node: &str, reason: String) {
        self.blocked.entry(node.to_string()).or_insert(reason);
    }

    fn finish(mut self, command: Option<Command>) -> Decision {
        let in_command: Vec<&str> = command
            .iter()
            .flat_map(|c| c.nodes.iter().map(|n| n.node.as_str()))
            .collect();
        for facts in self.view.facts.values() {
            if !in_command.contains(&facts.node.as_str()) {
                self.blocked
                    .entry(facts.node.clone())
                    .or_insert_with(|| "not evaluated: this pass started a command first".into());
            }
        }
        self.blocked
            .retain(|node, _| !in_command.contains(&node.as_str()));
        Decision {
            command,
            blocked: self.blocked,
            evaluations: Vec::new(),
        }
    }
}

/// Nodes the provisioner would place pending pods on now: they are about to receive pods, so
/// disrupting them would undo the provisioner's work (upstream's nomination). Only where no
/// live provisioner nominated (see [`Exclusions::nominated`]).
fn nominated(view: &ClusterView, catalog: &Catalog, options: &Options) -> BTreeSet<String> {
    if view.pending.is_empty() {
        return BTreeSet::new();
    }
    let input = Input {
        node_pools: &view.pools,
        catalog,
        pool_catalogs: &view.pool_catalogs,
        nodes: &view.nodes,
        daemonsets: &view.daemonsets,
        pods: &view.pending,
        namespaces: &view.namespaces,
        options: options.scheduling,
    };
    let results = match &view.prepared {
        Some(prepared) => scheduling::solve_prepared(input, prepared),
        None => scheduling::solve(input),
    };
    results.existing_nodes.into_iter().map(|p| p.node).collect()
}

/// One disruption pass over `view`: the first command the methods find, and every other managed
/// node's reason.
pub fn decide(
    view: &ClusterView,
    catalog: &Catalog,
    options: &Options,
    exclusions: Exclusions,
) -> Decision {
    decide_timed(view, catalog, options, exclusions, &|| 0.0)
}

/// [`decide`], timing each method's evaluation with `seconds` (a monotonic clock in seconds).
pub fn decide_timed(
    view: &ClusterView,
    catalog: &Catalog,
    options: &Options,
    exclusions: Exclusions,
    seconds: &dyn Fn() -> f64,
) -> Decision {
    type Find = fn(&mut Pass<'_>) -> Option<Command>;
    let mut pass = Pass::new(view, catalog, options, exclusions);
    let underutilized = pass.eligible.len();
    let empty = pass.eligible.iter().filter(|c| c.facts.is_empty()).count();
    let drifted = view.facts.values().filter(|f| f.drift.is_some()).count();
    let mut methods: Vec<(&'static str, &'static str, usize, Find)> =
        vec![("empty", "empty", empty, emptiness::find)];
    if options.drift {
        methods.push(("drifted", "", drifted, drift::find));
    }
    methods.push(("underutilized", "multi", underutilized, multinode::find));
    methods.push(("underutilized", "single", underutilized, singlenode::find));
    let mut evaluations = Vec::new();
    let mut command = None;
    for (reason, consolidation_type, eligible, find) in methods {
        let start = seconds();
        command = find(&mut pass);
        evaluations.push(Evaluation {
            reason,
            consolidation_type,
            eligible,
            seconds: (seconds() - start).max(0.0),
        });
        if command.is_some() {
            break;
        }
    }
    let mut decision = pass.finish(command);
    decision.evaluations = evaluations;
    decision
}

/// Re-checks a command decided earlier against the cluster now (upstream's 15-second
/// validation): its nodes must still be candidates within budget and the simulation must still
/// come out the same way. Returns the command to start (with fresh replacements) or why not.
pub fn validate(
    view: &ClusterView,
    catalog: &Catalog,
    options: &Options,
    exclusions: Exclusions,
    command: &Command,
) -> Result<Command, String> {
    let mut pass = Pass::new(view, catalog, options, exclusions);
    let nodes: Vec<&str> = command.nodes.iter().map(|n| n.node.as_str()).collect();
    if let Some((node, reason)) = pass
        .blocked
        .iter()
        .find(|(node, _)| nodes.contains(&node.as_str()))
    {
        return Err(format!("{node} {reason}"));
    }
    let chosen: Vec<Candidate<'_>> = pass
        .eligible
        .iter()
        .filter(|c| nodes.contains(&c.facts.node.as_str()))
        .cloned()
        .collect();
    if chosen.len() != nodes.len() {
        return Err("a node of the command is gone".into());
    }
    match command.method {
        Method::Empty => emptiness::revalidate(&mut pass, &chosen),
        Method::Underutilized => {
            multinode::revalidate(&mut pass, &chosen, command.replacements.len())
        }
        Method::Drifted | Method::Expired => Ok(command.clone()),
    }
}

/// Successive passes from `view` as they would run now, each command applied before the next
/// pass (expirations first: they need no decision). Returns the commands in order and the
/// reasons of every managed node in none.
pub fn plan_all(
    view: &ClusterView,
    catalog: &Catalog,
    options: &Options,
) -> (Vec<Command>, BTreeMap<String, String>) {
    let mut view = view.clone();
    let mut commands = expiration::commands(&view, catalog);
    for command in &commands {
        apply(&mut view, command, catalog);
    }
    for _ in 0..=view.facts.len() {
        let decision = decide(&view, catalog, options, Exclusions::default());
        match decision.command {
            Some(command) => {
                apply(&mut view, &command, catalog);
                commands.push(command);
            }
            None => {
                let mut blocked = decision.blocked;
                for c in &commands {
                    for n in &c.nodes {
                        blocked.remove(&n.node);
                    }
                }
                return (commands, blocked);
            }
        }
    }
    (commands, BTreeMap::new())
}

/// `view` after `command` started: its nodes are going away (their pods wait for a home) and its
/// replacements are in flight.
pub fn apply(view: &mut ClusterView, command: &Command, catalog: &Catalog) {
    for CommandNode { node, .. } in &command.nodes {
        let reschedulable: Vec<String> = view.facts.get(node).map_or(Vec::new(), |f| {
            f.pods
                .iter()
                .filter(|p| p.reschedulable)
                .map(|p| p.key.clone())
                .collect()
        });
        if let Some(facts) = view.facts.get_mut(node) {
            facts.disrupting = true;
        }
        if let Some(existing) = view.nodes.iter_mut().find(|n| &n.name == node) {
            existing.deleting = true;
            let (moving, staying) = std::mem::take(&mut existing.pods)
                .into_iter()
                .partition(|p| reschedulable.contains(&p.key));
            existing.pods = staying;
            view.pending.extend::<Vec<_>>(moving);
        }
    }
    view.pending.sort_by(|a, b| a.key.cmp(&b.key));
    view.pending.dedup_by(|a, b| a.key == b.key);
    for (i, replacement) in command.replacements.iter().enumerate() {
        let first = command.nodes.first().map_or("", |n| n.node.as_str());
        view.nodes.push(in_flight(
            &replacement.planned,
            &format!("{first}-replacement-{i}"),
            catalog,
        ));
    }
}

/// A planned claim as in-flight capacity (labels from its single-valued requirements, the
/// smallest allocatable among its types).
fn in_flight(planned: &scheduling::PlannedClaim, name: &str, catalog: &Catalog) -> ExistingNode {
    let mut labels = BTreeMap::new();
    for r in planned.nodeclaim_requirements() {
        if r.operator == crate::api::Operator::In && r.values.len() == 1 {
            labels.insert(r.key.clone(), r.values[0].clone());
        }
    }
    labels.insert(
        crate::api::labels::NODEPOOL_LABEL.to_string(),
        planned.node_pool.clone(),
    );
    let allocatable = planned
        .instance_types
        .iter()
        .filter_map(|t| catalog.get(t))
        .map(|it| it.allocatable.clone())
        .reduce(|a, b| {
            let mut min = a.clone();
            for (name, amount) in a.iter() {
                min.set(name, amount.min(b.get(name)));
            }
            min
        })
        .unwrap_or_default();
    ExistingNode {
        name: name.to_string(),
        labels,
        taints: Vec::new(),
        capacity: allocatable.clone(),
        allocatable,
        pods: Vec::new(),
        initialized: false,
        deleting: false,
        volume_limits: Default::default(),
    }
}
