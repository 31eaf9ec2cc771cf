//! The NodeClaim consistency controller (upstream's `nodeclaim.consistency`): every
//! [`CONSISTENCY_SCAN_PERIOD`] an initialized NodeClaim's Node is compared with what the claim
//! promised. Today's one check is upstream's node shape: for each resource the claim requested,
//! the Node's capacity must be at least [`NODE_SHAPE_MIN_FRACTION`] of the claim's expected
//! capacity (a node far smaller than its instance type means the catalog, the kubelet settings
//! or the AMI are not what the claim assumed, and the scheduling simulation is packing pods onto
//! room that is not there). A failure is a `FailedConsistencyCheck` Warning event and
//! `ConsistentStateFound=False`; a pass without issues sets it `True`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use kube_core::ResourceExt;
use serde_json::json;

use crate::api::conditions::{self, nodeclaim as cond};
use crate::api::{ConditionStatus, NodeClaim};
use crate::context::Context;
use crate::events::{EventType, Reference};
use crate::resources::Resources;
use crate::seams::KubeError;
use crate::seams::kube::{ObjectKey, Patch, ResourceKind};

/// How often one claim is checked (upstream's `scanPeriod`).
pub const CONSISTENCY_SCAN_PERIOD: Duration = Duration::from_secs(10 * 60);
/// How often the controller looks for claims due a check.
pub const CONSISTENCY_INTERVAL: Duration = Duration::from_secs(60);
/// A node with less than this fraction of a requested resource's expected capacity is
/// inconsistent (upstream's 90 %).
pub const NODE_SHAPE_MIN_FRACTION: f64 = 0.90;

/// An amount as a Kubernetes quantity (`1500m` cpu, bytes for memory).
fn show(name: &str, amount: i64) -> String {
    Resources::from_pairs([(name, amount)])
        .to_list()
        .get(name)
        .map(|q| q.0.clone())
        .unwrap_or_default()
}

/// The node-shape issues of `claim` against `node`: one message per requested resource the
/// node has less than 90 % of what the claim expected.
pub fn node_shape_issues(claim: &NodeClaim, node: &Node) -> Vec<String> {
    let requests = claim
        .spec
        .resources
        .as_ref()
        .and_then(|r| Resources::from_list(&r.requests).ok())
        .unwrap_or_default();
    let expected = claim
        .status
        .as_ref()
        .and_then(|s| Resources::from_list(&s.capacity).ok())
        .unwrap_or_default();
    let actual = node
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .map(|c| {
            c.iter()
                .filter_map(|(k, q)| {
                    crate::resources::parse_quantity(k, &q.0)
                        .ok()
                        .map(|v| (k.clone(), v))
                })
                .collect::<BTreeMap<_, _>>()
        })
        .unwrap_or_default();
    let mut issues = Vec::new();
    for (name, requested) in requests.iter() {
        let want = expected.get(name);
        if requested == 0 || want == 0 {
            continue;
        }
        let have = actual.get(name).copied().unwrap_or(0);
        let fraction = have as f64 / want as f64;
        if fraction < NODE_SHAPE_MIN_FRACTION {
            issues.push(format!(
                "expected {} of resource {name}, but found {} ({:.1}% of expected)",
                show(name, want),
                show(name, have),
                fraction * 100.0
            ));
        }
    }
    issues
}

/// Runs the checks; remembers when each claim was last checked.
pub struct Consistency {
    ctx: Arc<Context>,
    /// Claim UID → when it was last checked.
    scanned: Mutex<BTreeMap<String, Timestamp>>,
}

impl Consistency {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self {
            ctx,
            scanned: Mutex::new(BTreeMap::new()),
        }
    }

    /// Checks every initialized, launched claim not checked within the scan period; returns
    /// the names of the claims found inconsistent.
    pub async fn reconcile(&self) -> Result<Vec<String>, KubeError> {
        let now = self.ctx.now();
        let (mut claims, nodes): (Vec<NodeClaim>, BTreeMap<String, Node>) = {
            let mut state = self.ctx.state.lock().await;
            state.claims.sync(self.ctx.kube.as_ref()).await?;
            state.nodes.sync(self.ctx.kube.as_ref()).await?;
            (
                state.claims.iter().map(|c| (**c).clone()).collect(),
                state
                    .nodes
                    .iter()
                    .map(|n| (n.name_any(), (**n).clone()))
                    .collect(),
            )
        };
        claims.sort_by_key(|c| c.name_any());
        let live: std::collections::BTreeSet<String> = claims
            .iter()
            .filter_map(|c| c.metadata.uid.clone())
            .collect();
        self.scanned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|uid, _| live.contains(uid));
        let mut inconsistent = Vec::new();
        for claim in claims {
            if claim.metadata.deletion_timestamp.is_some() || !self.due(&claim, now) {
                continue;
            }
            let initialized = claim
                .status
                .as_ref()
                .and_then(|s| conditions::get(&s.conditions, cond::INITIALIZED))
                .is_some_and(|c| c.status == ConditionStatus::True);
            let Some(node_name) = claim.status.as_ref().and_then(|s| s.node_name.clone()) else {
                continue;
            };
            if !initialized {
                continue;
            }
            let Some(node) = nodes.get(&node_name) else {
                continue;
            };
            let issues = node_shape_issues(&claim, node);
            for issue in &issues {
                tracing::info!(claim = %claim.name_any(), %issue, "failed consistency check");
                self.ctx
                    .recorder
                    .publish(
                        Reference::claim(&claim),
                        EventType::Warning,
                        "FailedConsistencyCheck",
                        issue.clone(),
                    )
                    .await;
            }
            if !issues.is_empty() {
                inconsistent.push(claim.name_any());
            }
            self.write(&claim, issues.is_empty(), now).await?;
        }
        Ok(inconsistent)
    }

    /// Whether `claim` is due a check at `now` (marking it checked if so).
    fn due(&self, claim: &NodeClaim, now: Timestamp) -> bool {
        let Some(uid) = claim.metadata.uid.clone() else {
            return false;
        };
        let mut scanned = self.scanned.lock().unwrap_or_else(|p| p.into_inner());
        let due = scanned
            .get(&uid)
            .is_none_or(|last| now.duration_since(*last).unsigned_abs() >= CONSISTENCY_SCAN_PERIOD);
        if due {
            scanned.insert(uid, now);
        }
        due
    }

    /// `ConsistentStateFound` as upstream sets it: `True` once without issues (kept), `False`
    /// whenever a check fails. Written only when it changes, conditional on the version read.
    async fn write(
        &self,
        claim: &NodeClaim,
        consistent: bool,
        now: Timestamp,
    ) -> Result<(), KubeError> {
        let mut list = claim.status.clone().unwrap_or_default().conditions;
        let changed = if consistent {
            let already = conditions::get(&list, cond::CONSISTENT_STATE_FOUND)
                .is_some_and(|c| c.status == ConditionStatus::True);
            !already
                && conditions::set(
                    &mut list,
                    cond::CONSISTENT_STATE_FOUND,
                    ConditionStatus::True,
                    cond::CONSISTENT_STATE_FOUND,
                    "",
                    None,
                    now,
                )
        } else {
            conditions::set(
                &mut list,
                cond::CONSISTENT_STATE_FOUND,
                ConditionStatus::False,
                "ConsistencyCheckFailed",
                "Consistency Check Failed",
                None,
                now,
            )
        };
        if !changed {
            return Ok(());
        }
        let patch = json!({
            "metadata": {"resourceVersion": claim.metadata.resource_version},
            "status": {"conditions": list},
        });
        match self
            .ctx
            .kube
            .patch_status(
                &ResourceKind::NODE_CLAIM,
                &ObjectKey::cluster(claim.name_any()),
                &Patch::Merge(patch),
            )
            .await
        {
            Ok(_) | Err(KubeError::NotFound(_)) => Ok(()),
            // A concurrent write: checked again next scan period.
            Err(KubeError::Conflict(_)) => Ok(()),
            Err(err) => Err(err),
        }
    }
}
