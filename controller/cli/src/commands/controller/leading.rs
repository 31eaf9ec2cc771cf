//! The leader loop: the controllers run only while this replica holds the Lease
//! (`karpenter_core::leader`, client-go's timings), and the process's shutdown.
//!
//! - Every [`LEADER_STEP_INTERVAL`] the elector attempts an acquire or renew when due.
//! - Becoming leader starts the operator; `/readyz` turns ready once its caches have listed.
//! - Losing the Lease (no renewal within the renew deadline) stops the controllers and exits
//!   non-zero, as upstream does: a restarted process is a fresh candidate, and no state of the
//!   old term lingers.
//! - SIGTERM/Ctrl-C: not ready, the loops drained (no new work; what is under way finishes)
//!   within `SHUTDOWN_DRAIN_MAX`, anything still running then aborted, the Lease
//!   released (a standby takes over at its next attempt, not a lease duration later), exit 0.
//! - A controller loop that ended (a panic) marks `/healthz` failing and exits non-zero.

use std::sync::Arc;
use std::time::Duration;

use karpenter_core::leader::{LeaderElector, LeaseConfig};
use karpenter_core::operator::{Operator, OperatorHandle, SHUTDOWN_DRAIN_MAX};
use karpenter_core::seams::{Clock, KubeApi};
use tokio::signal::unix::{SignalKind, signal};

use super::ControllerError;
use super::http::Health;

/// How often the loop looks at the lease and the loops (the elector itself attempts only every
/// retry period, 2 s).
pub const LEADER_STEP_INTERVAL: Duration = Duration::from_millis(500);

/// Runs until SIGTERM (`Ok`) or until leadership is lost or a loop dies (`Err`).
pub async fn run(
    operator: Operator,
    kube: Arc<dyn KubeApi>,
    clock: Arc<dyn Clock>,
    lease: Option<LeaseConfig>,
    health: Arc<Health>,
) -> Result<(), ControllerError> {
    let mut elector = match lease {
        Some(config) => {
            tracing::info!(lease = %format!("{}/{}", config.namespace, config.name), identity = config.identity, "leader election on");
            Some(
                LeaderElector::new(kube, clock, config)
                    .map_err(|e| ControllerError::Leader(e.to_string()))?,
            )
        }
        None => None,
    };
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|e| ControllerError::Runtime(e.to_string()))?;
    let mut interrupt =
        signal(SignalKind::interrupt()).map_err(|e| ControllerError::Runtime(e.to_string()))?;
    // A standby is ready: it serves probes and waits; the leader becomes ready once synced.
    health.set_ready(true);
    let mut running: Option<OperatorHandle> = None;
    let outcome = loop {
        let leading = match &mut elector {
            None => true,
            Some(elector) => {
                if let Err(error) = elector.step().await {
                    tracing::warn!(%error, "leader election attempt failed");
                }
                elector.is_leader()
            }
        };
        if leading && running.is_none() {
            tracing::info!("leading: starting the controllers");
            running = Some(start_operator(&operator, &health));
        } else if !leading && running.is_some() {
            tracing::error!("lost the leader lease: stopping the controllers");
            break Err(ControllerError::Leader("lost the lease".into()));
        } else if let Some(handle) = running.as_mut() {
            log_reports(handle);
            if handle.is_degraded() {
                health.set_dead();
                break Err(ControllerError::Degraded);
            }
        }
        tokio::select! {
            _ = terminate.recv() => break Ok(()),
            _ = interrupt.recv() => break Ok(()),
            _ = tokio::time::sleep(LEADER_STEP_INTERVAL) => {}
        }
    };
    health.set_ready(false);
    if outcome.is_ok() {
        tracing::info!("shutting down");
    }
    // Only a leader that still holds the Lease drains: one that lost it must stop writing at
    // once, since another replica may already be acting.
    let drain = !matches!(outcome, Err(ControllerError::Leader(_)));
    stop(running, elector, drain).await;
    outcome
}

/// Starts the loops; readiness waits for their caches.
fn start_operator(operator: &Operator, health: &Arc<Health>) -> OperatorHandle {
    health.set_ready(false);
    let mut handle = operator.spawn();
    if let Some(synced) = handle.take_synced() {
        let health = health.clone();
        tokio::spawn(async move {
            synced.await;
            tracing::info!("caches synced: ready");
            health.set_ready(true);
        });
    }
    handle
}

/// What the loops did, as log lines ([`super::report_log`]).
fn log_reports(handle: &mut OperatorHandle) {
    for report in handle.reports() {
        super::report_log::log_report(report);
    }
}

/// Drains the loops within the bound while still renewing the Lease (a drain longer than the
/// lease must not let a standby start beside it; losing the Lease mid-drain aborts the rest),
/// or, with `drain` false, drops them (every task aborted); then gives the Lease up.
async fn stop(running: Option<OperatorHandle>, mut elector: Option<LeaderElector>, drain: bool) {
    if let Some(handle) = running.filter(|_| drain) {
        let mut shutdown = std::pin::pin!(handle.shutdown(SHUTDOWN_DRAIN_MAX));
        let report = loop {
            tokio::select! {
                report = &mut shutdown => break Some(report),
                _ = tokio::time::sleep(LEADER_STEP_INTERVAL) => {}
            }
            if let Some(elector) = elector.as_mut() {
                if let Err(error) = elector.step().await {
                    tracing::warn!(%error, "leader election attempt failed");
                }
                if !elector.is_leader() {
                    tracing::error!("lost the leader lease while draining: aborting the loops");
                    break None;
                }
            }
        };
        match report {
            Some(report) if report.aborted.is_empty() => tracing::info!("controller loops drained"),
            Some(report) => tracing::warn!(
                aborted = ?report.aborted,
                drain_ms = SHUTDOWN_DRAIN_MAX.as_millis() as u64,
                "controller loops still working at the end of the drain were aborted"
            ),
            None => {}
        }
    }
    if let Some(mut elector) = elector {
        match elector.release().await {
            Ok(true) => tracing::info!("released the leader lease"),
            Ok(false) => {}
            Err(error) => tracing::warn!(%error, "releasing the leader lease failed"),
        }
    }
}
