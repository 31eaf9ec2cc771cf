//! The loops' reports as info log lines: what the controller decided and did to NodeClaims,
//! nodes and instances, one line per change, as upstream logs "created nodeclaim", "launched
//! nodeclaim", "registered nodeclaim", "initialized nodeclaim", "disrupting node(s)" and
//! "deleted nodeclaim". Passes that changed nothing (a claim still waiting, a drain still
//! draining) log at debug only, so a quiet cluster has a quiet log. Failed passes are logged at
//! warn by the loops themselves.

use karpenter_core::disruption::queue::Progress;
use karpenter_core::interruption::Outcome as InterruptionOutcome;
use karpenter_core::nodeclaim::Step;
use karpenter_core::operator::LoopReport;
use karpenter_core::termination::Stage;

/// Logs one report.
pub fn log_report(report: LoopReport) {
    match report {
        LoopReport::Provisioned(outcome) => {
            if !outcome.created.is_empty() {
                tracing::info!(controller = "provisioner", created = ?outcome.created, "created nodeclaims");
            }
            if !outcome.failed_creates.is_empty() {
                tracing::warn!(controller = "provisioner", refused = ?outcome.failed_creates, "creating nodeclaims failed; planned again next pass");
            }
        }
        LoopReport::Lifecycle(claim, Ok(step)) => log_step(&claim, &step),
        LoopReport::Lifecycle(claim, Err(error)) => {
            tracing::warn!(controller = "nodeclaim.lifecycle", nodeclaim = %claim, %error, "nodeclaim lifecycle step failed; retrying");
        }
        LoopReport::Termination(stages) => {
            for (claim, stage) in stages {
                log_stage(&claim, stage);
            }
        }
        LoopReport::Expired(claims) => {
            tracing::info!(controller = "disruption.expiration", nodeclaims = ?claims, "deleted expired nodeclaims");
        }
        LoopReport::Disrupted(outcome) => {
            if let Some((method, nodes, replacements)) = &outcome.started {
                tracing::info!(
                    controller = "disruption",
                    reason = method.as_str(),
                    ?nodes,
                    ?replacements,
                    "disrupting nodes"
                );
            }
            if let Some(reason) = &outcome.rejected {
                tracing::info!(controller = "disruption", %reason, "disruption decision dropped");
            }
            for progress in &outcome.progress {
                log_progress(progress);
            }
        }
        other => log_other(other),
    }
}

/// Interruption, garbage collection, instance health and capacity reservations.
fn log_other(report: LoopReport) {
    match report {
        LoopReport::Interruption(Ok(poll)) => {
            for (message_id, outcome) in &poll.messages {
                // The state changes of instances the controller is already ending (its own
                // terminations) and events about instances it does not own say nothing new.
                match outcome {
                    InterruptionOutcome::Deleted { .. } | InterruptionOutcome::Recorded { .. } => {
                        tracing::info!(controller = "interruption", %message_id, ?outcome, "acted on an interruption message");
                    }
                    _ => tracing::debug!(%message_id, ?outcome, "interruption message"),
                }
            }
        }
        LoopReport::Collected((instances, claims)) if instances + claims > 0 => {
            tracing::info!(
                controller = "nodeclaim.garbagecollection",
                instances_terminated = instances,
                nodeclaims_deleted = claims,
                "garbage collected"
            );
        }
        LoopReport::InstanceHealth(health) if !health.acted.is_empty() => {
            tracing::info!(controller = "instance.health", acted = ?health.acted, "acted on unhealthy instances");
        }
        LoopReport::CapacityReservations(report)
            if !report.expired.is_empty() || !report.relabelled.is_empty() =>
        {
            tracing::info!(controller = "capacityreservation", expired = ?report.expired, relabelled = ?report.relabelled, "capacity reservations changed nodeclaims");
        }
        other => tracing::debug!(report = ?other, "loop report"),
    }
}

/// A lifecycle step: transitions at info, waiting at debug.
fn log_step(claim: &str, step: &Step) {
    let message = match step {
        Step::Launched => "launched nodeclaim",
        Step::Registered => "registered nodeclaim",
        Step::Initialized => "initialized nodeclaim",
        Step::LaunchFailed(error) => {
            tracing::warn!(controller = "nodeclaim.lifecycle", nodeclaim = %claim, %error, "launching nodeclaim failed");
            return;
        }
        Step::DeletedInsufficientCapacity
        | Step::DeletedRegistrationTimeout
        | Step::DeletedLaunchTimeout
        | Step::DeletedNodeClassNotFound
        | Step::DeletedNodeClassNotReady => {
            tracing::info!(controller = "nodeclaim.lifecycle", nodeclaim = %claim, reason = ?step, "deleted nodeclaim");
            return;
        }
        Step::Waiting | Step::Deleting | Step::Ready => {
            tracing::debug!(nodeclaim = %claim, ?step, "nodeclaim lifecycle");
            return;
        }
    };
    tracing::info!(controller = "nodeclaim.lifecycle", nodeclaim = %claim, "{message}");
}

/// A termination stage: the deletions at info, the waiting stages (every pass) at debug.
fn log_stage(claim: &str, stage: Result<Stage, karpenter_core::termination::TerminationError>) {
    match stage {
        Ok(Stage::DeletedNodeClaim) => {
            tracing::info!(controller = "node.termination", nodeclaim = %claim, "node deleted: deleting its nodeclaim");
        }
        Ok(Stage::Terminated) => {
            tracing::info!(controller = "nodeclaim.termination", nodeclaim = %claim, "deleted nodeclaim");
        }
        Ok(stage) => tracing::debug!(nodeclaim = %claim, ?stage, "terminating"),
        Err(error) => {
            tracing::warn!(controller = "nodeclaim.termination", nodeclaim = %claim, %error, "terminating nodeclaim failed; retrying");
        }
    }
}

/// A disruption command's progress: its end at info, waiting at debug.
fn log_progress(progress: &Progress) {
    match progress {
        Progress::Waiting { id } => {
            tracing::debug!(command = %id, "disruption command waiting for its replacements")
        }
        Progress::Terminated { id, claims } => {
            tracing::info!(controller = "disruption", command = %id, nodeclaims = ?claims, "replacements initialized: deleting the disrupted nodeclaims");
        }
        Progress::Abandoned { id, reason } => {
            tracing::info!(controller = "disruption", command = %id, %reason, "disruption command abandoned");
        }
    }
}
