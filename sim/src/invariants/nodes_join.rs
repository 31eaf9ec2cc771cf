//! `nodes-join`: every instance Karpenter launched (tagged `karpenter.sh/nodepool`) that is
//! running either registers a Node or is replaced and terminated: none is left running
//! unregistered for longer than [`JOIN_WINDOW`] after launch. Instances of other owners (a
//! managed node group) are not held to it. Checked after every step.

use std::collections::BTreeSet;
use std::time::Duration;

use karpenter_core::seams::ec2::InstanceState;

use super::{Check, Invariant, StepView, Violation};

/// The registration timeout (15 min), then the claim's deletion, the drain-free termination and
/// EC2's shutdown, plus a step of slack.
pub const JOIN_WINDOW: Duration = Duration::from_secs(15 * 60 + 5 * 60);

/// The `nodes-join` checker. It remembers the instance ids of the registered Nodes as of an
/// observer cache generation: a fleet past its join window otherwise reads every Node every
/// step.
#[derive(Debug, Default)]
pub struct NodesJoin {
    registered: Option<(u64, BTreeSet<String>)>,
}

impl Check for NodesJoin {
    fn invariant(&self) -> Invariant {
        Invariant::NodesJoin
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let overdue: Vec<_> = step
            .observation
            .live
            .iter()
            .filter(|i| i.state == InstanceState::Running)
            .filter(|i| i.tags.contains_key("karpenter.sh/nodepool"))
            .filter(|i| step.now.duration_since(i.launch_time).unsigned_abs() > JOIN_WINDOW)
            .collect();
        if overdue.is_empty() {
            return Vec::new();
        }
        let generation = step.observed.generation();
        if self
            .registered
            .as_ref()
            .is_none_or(|(g, _)| *g != generation)
        {
            let ids = step
                .observed
                .nodes()
                .filter_map(|n| n["spec"]["providerID"].as_str())
                .filter_map(|p| p.rsplit('/').next())
                .map(str::to_string)
                .collect();
            self.registered = Some((generation, ids));
        }
        let registered = self.registered.as_ref().map(|(_, ids)| ids);
        overdue
            .into_iter()
            .filter(|i| registered.is_none_or(|ids| !ids.contains(&i.instance_id)))
            .map(|i| {
                let why = step
                    .cloud
                    .join_error(&i.instance_id)
                    .map_or_else(|| "no reason known".to_string(), |e| e.to_string());
                Violation::at(
                    step.now,
                    format!(
                        "instance {} runs {}s after launch without a Node ({why})",
                        i.instance_id,
                        step.now.duration_since(i.launch_time).as_secs()
                    ),
                )
            })
            .collect()
    }
}
