//! A cheap necessary condition that spares the solver most hopeless questions.
//!
//! Before asking the solver about a set of candidates, count what their pods would need from a
//! new node in the best case: every pod that fits in no other node's free room (the per-resource
//! maximum of free room over the other initialized nodes, an over-estimate of every node's) must
//! go to the replacement. If some pods must, and no instance type in the catalog that is cheaper
//! (at its cheapest offering) than the candidates together holds them all, neither a delete nor a
//! replacement can work: the answer is known without a solve. Every estimate errs towards
//! "maybe", so a set this rules out the solver would rule out too.

use std::collections::BTreeMap;

use super::view::{ClusterView, NodeFacts};
use crate::api::NodePool;
use crate::catalog::Catalog;
use crate::resources::Resources;
use crate::scheduling::Requirements;

/// Free room on the view's usable nodes, per resource: the two largest amounts and the node of
/// the largest (so one node can be left out).
pub struct Room {
    best: BTreeMap<String, [(i64, usize); 2]>,
    index: BTreeMap<String, usize>,
}

impl Room {
    pub fn new(view: &ClusterView) -> Self {
        let mut best: BTreeMap<String, [(i64, usize); 2]> = BTreeMap::new();
        let mut index = BTreeMap::new();
        for (i, node) in view.nodes.iter().enumerate() {
            index.insert(node.name.clone(), i);
            if node.deleting || !node.initialized {
                continue;
            }
            let mut used = Resources::new();
            for pod in &node.pods {
                used = used.plus(&pod.requests);
            }
            for (name, amount) in node.allocatable.iter() {
                let free = amount - used.get(name);
                let slot = best
                    .entry(name.to_string())
                    .or_insert([(i64::MIN, usize::MAX); 2]);
                if free > slot[0].0 {
                    slot[1] = slot[0];
                    slot[0] = (free, i);
                } else if free > slot[1].0 {
                    slot[1] = (free, i);
                }
            }
        }
        Self { best, index }
    }

    /// The most of `resource` free on one usable node other than `except`.
    fn most(&self, resource: &str, except: Option<usize>) -> i64 {
        match self.best.get(resource) {
            None => 0,
            Some([first, second]) if Some(first.1) == except => second.0.max(0),
            Some([first, _]) => first.0.max(0),
        }
    }

    /// The summed requests of `candidates`' reschedulable pods that fit on no other node.
    pub fn homeless(&self, view: &ClusterView, candidates: &[&NodeFacts]) -> Resources {
        let except = match candidates {
            [one] => self.index.get(&one.node).copied(),
            _ => None,
        };
        let mut out = Resources::new();
        for facts in candidates {
            let Some(node) = self.index.get(&facts.node).map(|&i| &view.nodes[i]) else {
                continue;
            };
            for pod in &node.pods {
                let reschedulable = facts
                    .pods
                    .iter()
                    .any(|p| p.key == pod.key && p.reschedulable);
                let fits = pod
                    .requests
                    .iter()
                    .all(|(name, amount)| amount <= self.most(name, except));
                if reschedulable && !fits {
                    out = out.plus(&pod.requests);
                }
            }
        }
        out
    }
}

/// Whether `pool`'s requirements allow the type's own labels (keys a type does not carry, such as
/// zone and capacity type, are not checked: an over-estimate of what the pool can launch).
fn allowed(pool: &NodePool, it: &crate::catalog::InstanceType) -> bool {
    Requirements::from_api(&pool.spec.template.spec.requirements)
        .iter()
        .all(|(key, req)| it.labels.get(key).is_none_or(|v| req.has(v)))
}

/// Why no delete or replacement can work for pods needing `homeless` from a new node of `pool`
/// when the candidates cost `price`, if none can (see the module docs).
pub fn hopeless(
    homeless: &Resources,
    price: f64,
    catalog: &Catalog,
    pool: &NodePool,
) -> Option<String> {
    if homeless.is_empty() {
        return None;
    }
    let reqs = Requirements::from_api(&pool.spec.template.spec.requirements);
    let zones = reqs.get(crate::api::labels::ZONE_LABEL);
    let capacity_types = reqs.get(crate::api::labels::CAPACITY_TYPE_LABEL);
    let holds = catalog.instance_types.iter().any(|it| {
        homeless.fits_in(&it.allocatable)
            && allowed(pool, it)
            && it
                .offerings
                .iter()
                .filter(|o| o.available)
                .filter(|o| zones.is_none_or(|z| z.has(&o.zone)))
                .filter(|o| capacity_types.is_none_or(|c| c.has(o.capacity_type.label())))
                .any(|o| o.price < price)
    });
    (!holds).then(|| {
        format!(
            "no cheaper replacement: some of its pods fit on no other node, and no instance type cheaper than ${price:.4}/h holds them ({homeless})"
        )
    })
}
