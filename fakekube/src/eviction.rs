//! The Eviction subresource and PodDisruptionBudgets (`policy/v1`).
//!
//! There is no disruption controller in the simulation, so a budget is evaluated live, under the
//! server's lock, from the pods that exist at the eviction:
//! - *expected* pods: with `maxUnavailable` or a percentage `minAvailable`, the scale
//!   (`spec.replicas`) of the pods' controllers, each counted once, as Kubernetes'
//!   `getExpectedScale` (see [`State::expected_scale`] for pods without a controller object);
//!   with an integer `minAvailable`, the pods matching the budget's selector in its namespace
//!   that have not finished (phase neither `Succeeded` nor `Failed`), including pods being
//!   deleted.
//! - *healthy* pods: expected pods in phase `Running`, not being deleted, and whose `Ready`
//!   condition, if they have one, is `True`.
//! - `minAvailable` / `maxUnavailable`: an integer or a percentage of the expected pods, rounded
//!   up in both cases as Kubernetes does; with neither set nothing is protected.
//! - A healthy pod may go when `healthy - 1 >= desiredHealthy`; an unhealthy one when the budget
//!   is met (`healthy >= desiredHealthy`, the default `IfHealthyBudget` policy) or always with
//!   `unhealthyPodEvictionPolicy: AlwaysAllow`.
//! - Pods that are `Pending`, finished or already being deleted are evicted without a budget check
//!   (Kubernetes' `canIgnorePDB`).
//! - A pod matched by more than one budget cannot be evicted: a 500 (`InternalError`, "This pod
//!   has more than one PodDisruptionBudget, which the eviction subresource does not support."), as
//!   Kubernetes answers since 1.26 (429 before). Callers must recognise it by its message, as
//!   upstream Karpenter does, and treat it as a budget refusal.

use karpenter_core::seams::KubeError;
use karpenter_core::seams::kube::MULTIPLE_BUDGETS_MESSAGE;
use karpenter_core::seams::kube::{DeleteOptions, ObjectKey, ResourceKind, SharedObject};
use serde_json::{Value, json};
use std::sync::Arc;

use crate::selectors::LabelSelector;
use crate::store::{State, is_marked, is_terminal_pod, resource};

/// A budget's numbers at one moment (what the disruption controller would write to its status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Budget {
    pub expected: u64,
    pub healthy: u64,
    pub desired_healthy: u64,
}

impl Budget {
    pub(crate) fn disruptions_allowed(&self) -> u64 {
        self.healthy.saturating_sub(self.desired_healthy)
    }
}

impl State {
    pub(crate) fn evict(
        &mut self,
        key: &ObjectKey,
        options: &DeleteOptions,
    ) -> Result<(), KubeError> {
        let kind = ResourceKind::POD;
        let Some(pod) = self.get(&kind, key)? else {
            return Ok(());
        };
        if let Some(wanted) = &options.precondition_uid
            && pod["metadata"]["uid"].as_str() != Some(wanted.as_str())
        {
            return Err(KubeError::Conflict(format!(
                "pods {}: precondition failed: UID in precondition: {wanted}",
                key.name
            )));
        }
        if !can_ignore_budgets(&pod) {
            self.check_budgets(&pod)?;
        }
        self.delete(&kind, key, options).map(|_| ())
    }

    fn check_budgets(&self, pod: &Value) -> Result<(), KubeError> {
        let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        let budgets: Vec<(&Value, LabelSelector)> = self
            .budgets_in(namespace)
            .filter(|(_, selector)| selector.matches(pod))
            .collect();
        let (pdb, selector) = match budgets.as_slice() {
            [] => return Ok(()),
            [one] => one,
            _ => {
                return Err(KubeError::Unavailable(format!(
                    "Internal error occurred: {MULTIPLE_BUDGETS_MESSAGE}"
                )));
            }
        };
        let pdb_name = pdb["metadata"]["name"].as_str().unwrap_or_default();
        let budget = self.budget(pdb, selector, namespace).map_err(|why| {
            KubeError::TooManyRequests(format!(
                "pods {namespace}/{name}: PodDisruptionBudget {pdb_name} cannot be evaluated: \
                 {why}"
            ))
        })?;
        let allowed = if is_healthy(pod) {
            budget.disruptions_allowed() >= 1
        } else {
            pdb["spec"]["unhealthyPodEvictionPolicy"].as_str() == Some("AlwaysAllow")
                || budget.healthy >= budget.desired_healthy
        };
        if allowed {
            Ok(())
        } else {
            Err(KubeError::TooManyRequests(format!(
                "pods {namespace}/{name}: cannot evict pod as it would violate the pod's \
                 disruption budget {pdb_name} (healthy {}, desired {}, expected {})",
                budget.healthy, budget.desired_healthy, budget.expected
            )))
        }
    }

    /// The budgets of `namespace` with a usable selector. A null selector selects nothing in
    /// `policy/v1` and an invalid one is skipped, as the eviction handler skips it.
    fn budgets_in<'a>(
        &'a self,
        namespace: &'a str,
    ) -> impl Iterator<Item = (&'a Value, LabelSelector)> + 'a {
        self.scan(&ResourceKind::POD_DISRUPTION_BUDGET, Some(namespace))
            .filter_map(|pdb| {
                LabelSelector::from_label_selector(&pdb["spec"]["selector"])
                    .ok()
                    .flatten()
                    .map(|selector| (&**pdb, selector))
            })
    }

    pub(crate) fn budget(
        &self,
        pdb: &Value,
        selector: &LabelSelector,
        namespace: &str,
    ) -> Result<Budget, String> {
        let pods: Vec<&Value> = self
            .scan(&ResourceKind::POD, Some(namespace))
            .map(|pod| &**pod)
            .filter(|pod| selector.matches(pod) && !is_terminal_pod(pod))
            .collect();
        let spec = &pdb["spec"];
        // Kubernetes' `getExpectedPodCount`: with `maxUnavailable` or a percentage
        // `minAvailable`, the scale of the pods' controllers; with an integer `minAvailable`,
        // the pods themselves.
        let expected = if !spec["maxUnavailable"].is_null() || spec["minAvailable"].is_string() {
            self.expected_scale(&pods, namespace)
        } else {
            pods.len() as u64
        };
        let healthy = pods.iter().filter(|pod| is_healthy(pod)).count() as u64;
        // Kubernetes reads maxUnavailable first; with neither set nothing is protected.
        let desired_healthy = match scaled(&spec["maxUnavailable"], expected, "maxUnavailable")? {
            Some(max_unavailable) => expected.saturating_sub(max_unavailable),
            None => scaled(&spec["minAvailable"], expected, "minAvailable")?.unwrap_or(0),
        };
        Ok(Budget {
            expected,
            healthy,
            desired_healthy,
        })
    }

    /// The expected pods of a budget over `pods`, as Kubernetes' `getExpectedScale`: each
    /// distinct controller (a ReplicaSet, StatefulSet or ReplicationController named by a pod's
    /// controller reference) counts its `spec.replicas` once. So a pod being replaced (evicted,
    /// its successor already created) is not counted twice: the next eviction may go as soon as
    /// the successor is healthy, not only once the evicted pod has finished terminating.
    ///
    /// Deliberately more careful than Kubernetes where it would refuse: a pod with no controller,
    /// or whose controller object does not exist, counts as itself (Kubernetes fails the
    /// budget's sync with "found no controllers", and evictions under it then wait), and a
    /// ReplicaSet's own scale stands in for its Deployment's (equal outside a rollout).
    fn expected_scale(&self, pods: &[&Value], namespace: &str) -> u64 {
        let mut controllers: std::collections::BTreeSet<(&str, &str)> = Default::default();
        let mut expected = 0;
        for pod in pods {
            let owner = pod["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| r["controller"] == true);
            let kind = owner.and_then(|r| match r["kind"].as_str() {
                Some("ReplicaSet") => Some(ResourceKind::REPLICA_SET),
                Some("StatefulSet") => Some(ResourceKind::STATEFUL_SET),
                Some("ReplicationController") => Some(ResourceKind::REPLICATION_CONTROLLER),
                _ => None,
            });
            let name = owner.and_then(|r| r["name"].as_str());
            let scale = kind.zip(name).and_then(|(kind, name)| {
                let key = ObjectKey::namespaced(namespace, name);
                self.lookup(resource(&kind), &key)
                    .map(|o| (kind.kind, name, o["spec"]["replicas"].as_u64().unwrap_or(1)))
            });
            match scale {
                Some((kind, name, replicas)) => {
                    if controllers.insert((kind, name)) {
                        expected += replicas;
                    }
                }
                None => expected += 1,
            }
        }
        expected
    }

    /// Writes every budget's numbers to its status, as Kubernetes' disruption controller does
    /// (only budgets whose status changes get a new resourceVersion); returns how many changed.
    /// Budgets without a usable selector (null or invalid) are left alone.
    pub(crate) fn sync_budget_status(&mut self) -> usize {
        let kind = ResourceKind::POD_DISRUPTION_BUDGET;
        let updates: Vec<(ObjectKey, SharedObject, Value)> = self
            .all(&kind)
            .filter_map(|pdb| {
                let namespace = pdb["metadata"]["namespace"].as_str()?;
                let name = pdb["metadata"]["name"].as_str()?;
                let selector = LabelSelector::from_label_selector(&pdb["spec"]["selector"])
                    .ok()
                    .flatten()?;
                let budget = self.budget(pdb, &selector, namespace).ok()?;
                let mut next = Value::clone(pdb);
                let status = &mut next["status"];
                if !status.is_object() {
                    *status = json!({});
                }
                status["observedGeneration"] = pdb["metadata"]["generation"].clone();
                status["expectedPods"] = json!(budget.expected);
                status["currentHealthy"] = json!(budget.healthy);
                status["desiredHealthy"] = json!(budget.desired_healthy);
                status["disruptionsAllowed"] = json!(budget.disruptions_allowed());
                (next != **pdb).then(|| {
                    (
                        ObjectKey::namespaced(namespace, name),
                        Arc::clone(pdb),
                        next,
                    )
                })
            })
            .collect();
        let changed = updates.len();
        for (key, current, next) in updates {
            self.replace(resource(&kind), &key, &current, next);
        }
        changed
    }
}

/// Pods whose eviction needs no budget check (Kubernetes' `canIgnorePDB`).
fn can_ignore_budgets(pod: &Value) -> bool {
    is_marked(pod)
        || matches!(
            pod["status"]["phase"].as_str(),
            Some("Pending" | "Succeeded" | "Failed")
        )
}

/// Running, not being deleted, and `Ready` unless the pod reports no `Ready` condition at all.
pub(crate) fn is_healthy(pod: &Value) -> bool {
    let ready = pod["status"]["conditions"]
        .as_array()
        .and_then(|conditions| {
            conditions
                .iter()
                .find(|c| c["type"].as_str() == Some("Ready"))
                .map(|c| c["status"].as_str() == Some("True"))
        });
    pod["status"]["phase"].as_str() == Some("Running") && !is_marked(pod) && ready != Some(false)
}

/// An IntOrString of a budget: an integer, or a percentage of `total` rounded up.
fn scaled(value: &Value, total: u64, field: &str) -> Result<Option<u64>, String> {
    match value {
        Value::Null => Ok(None),
        Value::Number(n) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("{field} {n} is not a non-negative integer")),
        Value::String(s) => {
            let percent: u64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("{field} {s:?} is neither an integer nor a percentage"))?;
            Ok(Some((percent * total).div_ceil(100)))
        }
        other => Err(format!("{field} {other} is not an IntOrString")),
    }
}
