//! The scheduling simulation behind every decision: "if these nodes went away, where would their
//! pods go?" — the provisioner's own solver over the cluster without the candidates, with the
//! pending pods competing for the same room.
//!
//! A [`Simulator`] copies the view's nodes once per pass and, per question, takes the
//! candidates' pods off their nodes and marks the nodes deleting (nothing lands there), solves,
//! and puts everything back, so thousands of questions share one copy.

use std::collections::{BTreeMap, BTreeSet};

use super::view::{ClusterView, NodeFacts};
use crate::catalog::Catalog;
use crate::scheduling::{self, ExistingNode, Input, PlannedClaim, PodInfo};

/// Where the candidates' pods would go.
#[derive(Clone, Debug, Default)]
pub struct Simulation {
    /// New NodeClaims holding at least one of the candidates' pods.
    pub new_claims: Vec<PlannedClaim>,
}

/// Asks the solver about sets of candidates over one copy of the view's nodes.
pub struct Simulator<'v> {
    view: &'v ClusterView,
    catalog: &'v Catalog,
    options: scheduling::Options,
    nodes: Vec<ExistingNode>,
    index: BTreeMap<String, usize>,
    /// The pools' compatible types, worked out at the first question: every question of a
    /// pass asks about the same pools and catalogs.
    prepared: std::cell::OnceCell<scheduling::PreparedPools>,
}

impl<'v> Simulator<'v> {
    pub fn new(view: &'v ClusterView, catalog: &'v Catalog, options: scheduling::Options) -> Self {
        let nodes = view.nodes.clone();
        let index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        Self {
            view,
            catalog,
            options,
            nodes,
            index,
            prepared: std::cell::OnceCell::new(),
        }
    }

    /// Where the reschedulable pods of `candidates` would go if they went away now. `Err` says
    /// why they could not: a pod fits nowhere, or would land on a node not initialized yet
    /// (capacity that may never come, as upstream refuses).
    pub fn run(&mut self, candidates: &[&NodeFacts]) -> Result<Simulation, String> {
        let mut taken: Vec<(usize, Vec<PodInfo>)> = Vec::new();
        let mut moving: Vec<PodInfo> = Vec::new();
        for facts in candidates {
            let Some(&i) = self.index.get(&facts.node) else {
                continue;
            };
            let reschedulable: BTreeSet<&str> = facts
                .pods
                .iter()
                .filter(|p| p.reschedulable)
                .map(|p| p.key.as_str())
                .collect();
            let pods = std::mem::take(&mut self.nodes[i].pods);
            moving.extend(
                pods.iter()
                    .filter(|p| reschedulable.contains(p.key.as_str()))
                    .cloned(),
            );
            self.nodes[i].deleting = true;
            taken.push((i, pods));
        }
        let result = self.solve(&moving);
        for (i, pods) in taken {
            self.nodes[i].pods = pods;
            self.nodes[i].deleting = self.view.nodes[i].deleting;
        }
        result
    }

    fn solve(&self, moving: &[PodInfo]) -> Result<Simulation, String> {
        if moving.is_empty() {
            return Ok(Simulation::default());
        }
        let mut pods = self.view.pending.clone();
        pods.extend(moving.iter().cloned());
        let input = Input {
            node_pools: &self.view.pools,
            catalog: self.catalog,
            pool_catalogs: &self.view.pool_catalogs,
            nodes: &self.nodes,
            daemonsets: &self.view.daemonsets,
            pods: &pods,
            namespaces: &self.view.namespaces,
            options: self.options,
        };
        let prepared = self.prepared.get_or_init(|| match &self.view.prepared {
            Some(prepared) => prepared.clone(),
            None => scheduling::PreparedPools::new(
                &self.view.pools,
                self.catalog,
                &self.view.pool_catalogs,
            ),
        });
        let results = scheduling::solve_prepared(input, prepared);
        let ours: BTreeSet<&str> = moving.iter().map(|p| p.key.as_str()).collect();
        if let Some(failure) = results
            .unschedulable
            .iter()
            .find(|u| ours.contains(u.pod.as_str()))
        {
            return Err(format!(
                "pod {} would fit nowhere else ({})",
                failure.pod, failure.reason
            ));
        }
        for placement in &results.existing_nodes {
            let Some(&i) = self.index.get(&placement.node) else {
                continue;
            };
            if !self.nodes[i].initialized
                && placement.pods.iter().any(|p| ours.contains(p.as_str()))
            {
                return Err(format!(
                    "its pods would land on {}, which is not initialized yet",
                    placement.node
                ));
            }
        }
        Ok(Simulation {
            new_claims: results
                .new_claims
                .into_iter()
                .filter(|c| c.pods.iter().any(|p| ours.contains(p.as_str())))
                .collect(),
        })
    }
}
