//! The two deadlines a deleting claim keeps: its terminationGracePeriod deadline (written once,
//! so it survives restarts) and, for an interrupted claim, how long eviction waits for the
//! replacement capacity.

use super::*;

impl Termination {
    /// The claim's termination deadline: `karpenter.sh/nodeclaim-termination-timestamp`, written
    /// on first sight from deletionTimestamp + terminationGracePeriod (so it survives restarts
    /// and users can read it), with a `TerminationGracePeriodExpiring` event.
    pub(super) async fn deadline(
        &self,
        claim: &NodeClaim,
        node: Option<&Node>,
    ) -> Result<Option<Timestamp>, KubeError> {
        if let Some(text) = annotation(claim, TERMINATION_TIMESTAMP_ANNOTATION) {
            match text.parse::<Timestamp>() {
                Ok(t) => return Ok(Some(t)),
                Err(err) => {
                    tracing::warn!(claim = ?claim.metadata.name, %err, "ignoring an unparsable termination timestamp");
                }
            }
        }
        let Some(tgp) = claim.spec.termination_grace_period.as_deref() else {
            return Ok(None);
        };
        let Some(deleted) = claim.metadata.deletion_timestamp.as_ref().map(|t| t.0) else {
            return Ok(None);
        };
        let tgp = match parse_duration(tgp) {
            Ok(d) => d,
            Err(err) => {
                tracing::warn!(claim = ?claim.metadata.name, %err, "ignoring an unparsable terminationGracePeriod");
                return Ok(None);
            }
        };
        // Saturates at the end of time; only a calendar span could fail, and a `Duration` is none.
        let deadline = deleted.saturating_add(tgp).unwrap_or(deleted);
        let text = rfc3339(deadline);
        let written = self
            .ctx
            .kube
            .patch(
                &ResourceKind::NODE_CLAIM,
                &ObjectKey::cluster(claim.name_any()),
                &Patch::Merge(
                    json!({"metadata": {"annotations": {TERMINATION_TIMESTAMP_ANNOTATION: text}}}),
                ),
            )
            .await;
        self.wrote(&ResourceKind::NODE_CLAIM, &claim.name_any(), written)?;
        self.event(
            claim,
            node,
            EventType::Warning,
            "TerminationGracePeriodExpiring",
            format!("All pods will be deleted by {text}"),
        )
        .await;
        Ok(text.parse().ok())
    }

    /// Why eviction of an interrupted claim waits for replacement capacity, if it does: until
    /// the deadline the interruption controller wrote, while the node still has pods a
    /// replacement must hold and either no provisioning pass has planned for them yet or a
    /// claim planned for them is not initialized.
    ///
    /// The hold never outlasts the claim's terminationGracePeriod (`grace_deadline`): it ends
    /// by the deadline less the longest grace period of the node's pods, when the drain's direct
    /// deletes are due, so every pod still gets its graceful shutdown before the deadline, as
    /// upstream (which holds nothing) guarantees. Holding past it was found by the swarm's
    /// `scheduled-maintenance` fault (debug world, seed 618: a scheduled change's hold of 10 min
    /// on a claim with a 5-minute terminationGracePeriod; the claim was gone 606 s after its
    /// deletion, its pods deleted with 1 s of grace).
    ///
    /// A plan whose every replacement claim is being deleted before it initialized (a
    /// replacement's own scheduled change or spot warning, a registration timeout) is lost: the
    /// hold goes on, waiting for a new plan ([`Hold::replan`]; swarm seed 398 of the 1,000-seed
    /// run at 410eb54: the pods were evicted 0.5 s after their replacement was deleted, 4 s
    /// before provisioning planned another).
    pub(super) fn replacement_hold(
        &self,
        claim: &NodeClaim,
        pods: &[&Pod],
        view: &View,
        grace_deadline: Option<Timestamp>,
        now: Timestamp,
    ) -> Option<Hold> {
        if !replacement::is_interrupted(claim) {
            return None;
        }
        let mut deadline = replacement::eviction_deadline(claim)?;
        if let Some(grace_deadline) = grace_deadline {
            let longest = pods
                .iter()
                .map(|p| drain::grace_seconds(p))
                .max()
                .unwrap_or(0);
            let deletes_due = grace_deadline
                .checked_sub(jiff::SignedDuration::from_secs(longest))
                .unwrap_or(grace_deadline);
            deadline = deadline.min(deletes_due);
        }
        if now >= deadline || !pods.iter().any(|p| drain::needs_replacement(p, now)) {
            return None;
        }
        let name = claim.name_any();
        let unplanned = Hold {
            message: format!(
                "waiting for replacement capacity to be planned (evicting by {} at the latest)",
                rfc3339(deadline)
            ),
            replan: false,
        };
        if !replacement::is_replacement_planned(claim) {
            return Some(unplanned);
        }
        let replacements: Vec<&NodeClaim> = view
            .claims
            .iter()
            .map(|c| &**c)
            .filter(|c| replacement::replaces_claim(c, &name))
            .collect();
        if !replacements.is_empty()
            && replacements
                .iter()
                .all(|c| c.metadata.deletion_timestamp.is_some() && !is_initialized(c))
        {
            return Some(Hold {
                replan: true,
                ..unplanned
            });
        }
        let pending: Vec<&str> = replacements
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none() && !is_initialized(c))
            .filter_map(|c| c.metadata.name.as_deref())
            .collect();
        if pending.is_empty() {
            return None;
        }
        Some(Hold {
            message: format!(
                "waiting for replacement NodeClaims {} to initialize (evicting by {} at the latest)",
                pending.join(", "),
                rfc3339(deadline)
            ),
            replan: false,
        })
    }
}

/// Why an interrupted claim's eviction waits ([`Termination::replacement_hold`]).
pub(super) struct Hold {
    /// The claim's `AwaitingReplacement` message.
    pub(super) message: String,
    /// Every claim planned to replace it is being deleted uninitialized: its planned mark is
    /// to be undone so provisioning plans again.
    pub(super) replan: bool,
}
