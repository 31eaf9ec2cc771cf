//! Taint and drain: the `karpenter.sh/disrupted:NoSchedule` taint, then eviction in upstream's
//! tiers through the Eviction API (the tier order and backoff themselves are in [`super::drain`]),
//! direct deletes at the terminationGracePeriod deadline, and what the drain waits for.

use super::*;
use drain::PodAction;

impl Termination {
    /// Adds `karpenter.sh/disrupted:NoSchedule` (replacing another taint of that key) and the
    /// exclude-from-load-balancers label, if missing. The patch carries the node's
    /// resourceVersion: a concurrent taint change fails it (retried next step) instead of being
    /// overwritten.
    pub(super) async fn taint(&self, node: &Node) -> Result<(), KubeError> {
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let tainted = taints.iter().any(|t| {
            t.key == DISRUPTED_TAINT_KEY
                && t.effect == "NoSchedule"
                && t.value.as_deref().unwrap_or_default().is_empty()
        });
        let labelled = node
            .labels()
            .contains_key(EXCLUDE_FROM_LOAD_BALANCERS_LABEL);
        if tainted && labelled {
            return Ok(());
        }
        let mut list: Vec<Value> = taints
            .into_iter()
            .filter(|t| t.key != DISRUPTED_TAINT_KEY)
            .map(|t| serde_json::to_value(t).unwrap_or_default())
            .collect();
        list.push(json!({"key": DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}));
        let mut labels = serde_json::Map::new();
        if !labelled {
            labels.insert(
                EXCLUDE_FROM_LOAD_BALANCERS_LABEL.to_string(),
                json!("karpenter"),
            );
        }
        let version = self.version(&ResourceKind::NODE, &node.metadata);
        let written = self
            .ctx
            .kube
            .patch(
                &ResourceKind::NODE,
                &ObjectKey::cluster(node.name_any()),
                &Patch::Merge(json!({
                    "metadata": {"labels": labels, "resourceVersion": version},
                    "spec": {"taints": list},
                })),
            )
            .await;
        self.wrote(&ResourceKind::NODE, &node.name_any(), written)?;
        Ok(())
    }

    /// One drain step of a claim's node.
    pub(super) async fn drain(
        &self,
        claim: &NodeClaim,
        node: &Node,
        pods: &[&Pod],
        deadline: Option<Timestamp>,
        now: Timestamp,
        tally: &mut Tally,
    ) -> Result<DrainPlan, KubeError> {
        let reason = drain_reason(claim);
        self.drain_pods(node, pods, deadline, now, &reason, tally)
            .await
    }

    /// Deletes the pods whose deadline came, evicts the current tier, and returns the plan with
    /// the counts after this step's evictions.
    pub(super) async fn drain_pods(
        &self,
        node: &Node,
        pods: &[&Pod],
        deadline: Option<Timestamp>,
        now: Timestamp,
        reason: &str,
        tally: &mut Tally,
    ) -> Result<DrainPlan, KubeError> {
        let mut plan = drain::plan(pods, now, deadline, &self.backoff());
        let reason = if reason.is_empty() {
            "Forceful Termination"
        } else {
            reason
        };
        for action in &plan.force_delete {
            self.force_delete(action, deadline, reason).await?;
        }
        // Evictions go out side by side (bounded), their results taken in plan order.
        let actions = std::mem::take(&mut plan.evict);
        let mut evictions: Vec<BoxFuture<'_, Evicted>> = Vec::new();
        for action in &actions {
            evictions.push(Box::pin(self.evict(node, action, now, reason)));
        }
        let parallel = self.ctx.options.limits.evictions_parallel_max.max(1);
        let results: Vec<Evicted> = futures::stream::iter(evictions)
            .buffered(parallel)
            .collect()
            .await;
        let mut refused = Vec::new();
        for (action, evicted) in actions.into_iter().zip(results) {
            match evicted {
                Evicted::Yes => plan.terminating += 1,
                Evicted::Gone => {}
                Evicted::Refused => refused.push(action),
            }
        }
        plan.evict = refused;
        // Recounted with this step's refusals (a pod refused again is counted once).
        plan.refused_by_budget = pods
            .iter()
            .filter(|p| {
                drain::is_drainable(p, now)
                    && !drain::is_terminating(p)
                    && !drain::is_do_not_disrupt(p, now)
                    && p.metadata.uid.as_ref().is_some_and(|uid| {
                        self.backoff().get(uid).is_some_and(|b| b.refused_by_budget)
                    })
            })
            .count();
        tally.do_not_disrupt += plan.do_not_disrupt as i64;
        tally.refused_by_budget += plan.refused_by_budget as i64;
        tally.eviction_queue += (plan.evict.len() + plan.backing_off) as i64;
        Ok(plan)
    }

    /// Deletes a pod directly at `deadline − its grace period`: past the PDBs and
    /// do-not-disrupt, as upstream does at the terminationGracePeriod.
    async fn force_delete(
        &self,
        action: &PodAction,
        deadline: Option<Timestamp>,
        reason: &str,
    ) -> Result<(), KubeError> {
        let Some((namespace, name)) = action.key.split_once('/') else {
            return Ok(());
        };
        let key = ObjectKey::namespaced(namespace, name);
        let options = DeleteOptions {
            grace_period_seconds: Some(action.grace_seconds),
            precondition_uid: Some(action.uid.clone()),
        };
        match self
            .ctx
            .kube
            .delete(&ResourceKind::POD, &key, &options)
            .await
        {
            Ok(_) | Err(KubeError::NotFound(_)) | Err(KubeError::Conflict(_)) => {}
            Err(err) => return Err(err),
        }
        let terminating = deadline.map(rfc3339).unwrap_or_default();
        let message = format!(
            "Deleting the pod to accommodate the terminationTime {terminating} of the node. The pod was granted {} seconds of grace-period of its {} terminationGracePeriodSeconds. This bypasses the PDB of the pod and the do-not-disrupt annotation.",
            action.grace_seconds, action.own_grace_seconds
        );
        self.ctx
            .recorder
            .publish(
                Reference::pod(key, Some(action.uid.clone())),
                EventType::Normal,
                "Disrupted",
                message,
            )
            .await;
        self.ctx
            .metrics
            .pods_drained
            .get_or_create(&Metrics::reason(reason))
            .inc();
        self.backoff().remove(&action.uid);
        Ok(())
    }

    /// One eviction through the Eviction API. A refusal backs the pod off (a PodDisruptionBudget
    /// refusal is announced on the node the first time).
    async fn evict(
        &self,
        node: &Node,
        action: &PodAction,
        now: Timestamp,
        reason: &str,
    ) -> Evicted {
        let Some((namespace, name)) = action.key.split_once('/') else {
            return Evicted::Gone;
        };
        let key = ObjectKey::namespaced(namespace, name);
        let options = DeleteOptions {
            grace_period_seconds: None,
            precondition_uid: Some(action.uid.clone()),
        };
        let result = self.ctx.kube.evict(&key, &options).await;
        self.ctx
            .metrics
            .eviction_requests
            .get_or_create(&crate::metrics::CodeLabels {
                code: eviction_code(&result).to_string(),
            })
            .inc();
        let err = match result {
            Ok(()) => {
                self.backoff().remove(&action.uid);
                let regarding = Reference::pod(key, Some(action.uid.clone()));
                self.ctx
                    .recorder
                    .publish(
                        regarding,
                        EventType::Normal,
                        "Evicted",
                        format!("Evicted pod: {reason}"),
                    )
                    .await;
                self.ctx
                    .metrics
                    .pods_drained
                    .get_or_create(&ReasonLabels {
                        reason: reason.to_string(),
                    })
                    .inc();
                return Evicted::Yes;
            }
            // 404: already gone; 409: a different pod now has that name.
            Err(KubeError::NotFound(_)) | Err(KubeError::Conflict(_)) => {
                self.backoff().remove(&action.uid);
                return Evicted::Gone;
            }
            Err(err) => err,
        };
        // 429: a budget says not now; 500 "more than one PodDisruptionBudget": no eviction can
        // succeed until the budgets change. Both are budget refusals, as upstream treats them.
        let budget = match &err {
            KubeError::TooManyRequests(_) => true,
            KubeError::Unavailable(m) => m.contains(MULTIPLE_BUDGETS_MESSAGE),
            _ => false,
        };
        let next = EvictionBackoff::after_failure(self.backoff().get(&action.uid), now, budget);
        if next.failures == 1 && budget {
            let message = format!(
                "Failed to drain node, evicting pod {} violates a PDB",
                action.key
            );
            self.ctx
                .recorder
                .publish(
                    Reference::node(node),
                    EventType::Warning,
                    "FailedDraining",
                    message,
                )
                .await;
        }
        self.backoff().insert(action.uid.clone(), next);
        if !budget && !err.is_retryable() {
            tracing::warn!(pod = %action.key, %err, "eviction failed");
        }
        Evicted::Refused
    }

    /// Records a drain that is not done: `Drained=Unknown` with `Draining` or, when only pods
    /// eviction cannot move are left, `DisruptionBlocked`; a `FailedDraining` (and
    /// `DisruptionBlocked`) event when that changes.
    pub(super) async fn drain_waiting(
        &self,
        claim: &NodeClaim,
        node: &Node,
        conds: &mut Vec<Condition>,
        plan: &DrainPlan,
        deadline: Option<Timestamp>,
    ) -> Result<Stage, TerminationError> {
        let blocked = plan.do_not_disrupt + plan.refused_by_budget;
        let only_blocked = plan.terminating == 0 && blocked > 0 && blocked >= plan.waiting;
        let bound = match deadline {
            Some(d) => format!(
                "; they are deleted before the terminationGracePeriod ends at {}",
                rfc3339(d)
            ),
            None => "; no terminationGracePeriod is set, so the node waits until they can go"
                .to_string(),
        };
        if only_blocked {
            let message = format!(
                "{} pods are waiting to be evicted: {} with karpenter.sh/do-not-disrupt, {} refused by a PodDisruptionBudget{bound}",
                plan.waiting, plan.do_not_disrupt, plan.refused_by_budget
            );
            self.set_condition(
                claim,
                Some(node),
                conds,
                (
                    cond::DRAINED,
                    ConditionStatus::Unknown,
                    "DisruptionBlocked",
                    &message,
                ),
                Some((EventType::Warning, "DisruptionBlocked")),
            )
            .await?;
            return Ok(Stage::DrainBlocked {
                waiting: plan.waiting,
            });
        }
        let message = format!("{} pods are waiting to be evicted", plan.waiting);
        let changed = self
            .set_condition(
                claim,
                Some(node),
                conds,
                (
                    cond::DRAINED,
                    ConditionStatus::Unknown,
                    "Draining",
                    &message,
                ),
                None,
            )
            .await?;
        if changed {
            self.ctx
                .recorder
                .publish(
                    Reference::node(node),
                    EventType::Warning,
                    "FailedDraining",
                    format!("Failed to drain node, {message}"),
                )
                .await;
        }
        Ok(Stage::Draining {
            waiting: plan.waiting,
        })
    }
}

/// The `reason` of `karpenter_pods_drained_total` for a claim's pods: its disruption reason
/// (upstream), else its interruption kind, else upstream's `Forceful Termination`.
fn drain_reason(claim: &NodeClaim) -> String {
    if let Some(c) = claim
        .status
        .as_ref()
        .and_then(|s| conditions::get(&s.conditions, cond::DISRUPTION_REASON))
        .filter(|c| c.status == ConditionStatus::True)
    {
        return c.reason.clone();
    }
    annotation(claim, INTERRUPTION_ANNOTATION)
        .map(str::to_string)
        .unwrap_or_default()
}

/// What one eviction did.
enum Evicted {
    /// Accepted: the pod is terminating.
    Yes,
    /// The pod is gone (or another pod has its name): nothing to wait for.
    Gone,
    /// Refused (a PodDisruptionBudget, an error): retried after a backoff.
    Refused,
}

/// The HTTP code of an eviction's answer, for `karpenter_pods_eviction_requests_total`.
fn eviction_code(result: &Result<(), KubeError>) -> &'static str {
    match result {
        Ok(()) => "200",
        Err(KubeError::NotFound(_)) => "404",
        Err(KubeError::Conflict(_)) => "409",
        Err(KubeError::TooManyRequests(_)) => "429",
        Err(KubeError::Forbidden(_)) => "403",
        Err(KubeError::Invalid(_)) => "422",
        Err(_) => "500",
    }
}
