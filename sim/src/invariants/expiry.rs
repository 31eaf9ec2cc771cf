//! `expiration-honoured`: a NodeClaim is deleted once it is older than its `spec.expireAfter`
//! (upstream's expiration controller deletes it then, forcefully: outside budgets and
//! `do-not-disrupt`). A claim not yet being deleted [`EXPIRY_SLACK`] after its expiry is a
//! violation, reported once per claim. `Never`, or a value this checker cannot read, holds a
//! claim to nothing. The duration is read here with `humantime`, not with the controller's
//! parser: a check sharing the code under test would share its mistakes. Checked after every
//! step on the observer's cached NodeClaims.

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::{Check, Invariant, StepView, Violation};

/// How long after its expiry a claim may still be without a deletion: a pass of the
/// controller, a crash and restart (20 s down) or a leader failover (30 s down, then the lease's
/// 15 s), and a failed delete retried at the next pass.
pub const EXPIRY_SLACK: Duration = Duration::from_secs(150);

/// The `expiration-honoured` checker: the claims already reported (by uid).
#[derive(Debug, Default)]
pub struct ExpirationHonoured {
    reported: BTreeSet<String>,
}

/// When a claim created at `created` with `expire_after` must be being deleted (`None`: never).
pub fn deadline(created: Timestamp, expire_after: &str) -> Option<Timestamp> {
    if expire_after == "Never" {
        return None;
    }
    let after = humantime::parse_duration(expire_after).ok()?;
    let after = SignedDuration::try_from(after + EXPIRY_SLACK).ok()?;
    created.checked_add(after).ok()
}

impl Check for ExpirationHonoured {
    fn invariant(&self) -> Invariant {
        Invariant::ExpirationHonoured
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let mut out = Vec::new();
        for claim in step.observed.claims() {
            if claim.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(created) = claim.metadata.creation_timestamp.as_ref().map(|t| t.0) else {
                continue;
            };
            let expire_after = &claim.spec.expire_after;
            let Some(due) = deadline(created, expire_after) else {
                continue;
            };
            let uid = claim.metadata.uid.clone().unwrap_or_default();
            if step.now > due && self.reported.insert(uid) {
                out.push(Violation::at(
                    step.now,
                    format!(
                        "NodeClaim {} (expireAfter {expire_after}, created {created}) not deleted {}s after it expired",
                        claim.metadata.name.as_deref().unwrap_or_default(),
                        EXPIRY_SLACK.as_secs()
                    ),
                ));
            }
        }
        out
    }
}
