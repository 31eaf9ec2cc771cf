//! The two shapes a controller runs in, with one error and requeue policy.
//!
//! - [`run_singleton`]: a controller that looks at the whole cluster at once (provisioning,
//!   interruption, garbage collection, the NodePool counters, later disruption). It runs a pass
//!   when one of its triggers fires or its timer is due, then waits again. Triggers that fire
//!   during a pass are coalesced into the next one.
//! - [`run_keyed`]: a controller of one object at a time (NodeClaim lifecycle, termination):
//!   keys come from a [`WorkQueue`], at most `workers_max` reconciles run at once, a key is never
//!   reconciled twice at the same time, and each reconcile says when to come back
//!   ([`Requeue`]). A failed reconcile is retried after a per-key exponential backoff
//!   (controller-runtime's default item rate limiter, [`RETRY_BACKOFF_MS_MIN`] doubling to
//!   [`RETRY_BACKOFF_MS_MAX`]) which the failure's own watch events do not cut short.
//!
//! Both are plain futures: the operator spawns them on the current runtime (tokio, or madsim's
//! seeded scheduler in the simulation). Reconciles of one keyed controller are polled by its one
//! task in a `FuturesUnordered`, so a slow call of one key never holds up another; every choice
//! a runner makes (which key next, which timer first) is ordered, so a seed replays.

use std::collections::BTreeMap;
use std::fmt::{Debug, Display};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::FuturesUnordered;

use super::informer::Trigger;
use super::queue::WorkQueue;
use super::stop::Stop;

/// First retry delay after a failed reconcile (controller-runtime's item backoff starts at 5 ms;
/// a second here keeps a failing cloud call from being hammered in a tight loop).
pub const RETRY_BACKOFF_MS_MIN: u64 = 1_000;
/// Longest retry delay after repeated failures (controller-runtime caps at 1000 s; five minutes
/// keeps a recovered dependency from waiting a quarter of an hour).
pub const RETRY_BACKOFF_MS_MAX: u64 = 300_000;

/// When a reconciled key comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requeue {
    /// Only when one of its triggers fires again.
    Never,
    /// After this long at the latest (earlier if a trigger fires).
    After(Duration),
}

/// A controller of one object at a time.
#[async_trait]
pub trait Reconciler: Send + Sync + 'static {
    type Key: Ord + Clone + Debug + Send + Sync + 'static;
    type Error: Display + Send + 'static;

    /// The controller's name, for logs.
    fn name(&self) -> &'static str;

    /// Brings `key`'s object to where it should be; `Err` is retried with backoff.
    async fn reconcile(&self, key: &Self::Key) -> Result<Requeue, Self::Error>;
}

/// A controller of the whole cluster at once.
#[async_trait]
pub trait Singleton: Send + 'static {
    /// The controller's name, for logs.
    fn name(&self) -> &'static str;

    /// One pass. Returns when the next pass is due at the latest (a trigger may come first).
    async fn pass(&mut self) -> Duration;
}

/// The delay before the `failures`-th retry of a key.
pub fn retry_backoff(failures: u32) -> Duration {
    let shift = failures.saturating_sub(1).min(20);
    let ms = RETRY_BACKOFF_MS_MIN.saturating_mul(1 << shift);
    Duration::from_millis(ms.min(RETRY_BACKOFF_MS_MAX))
}

/// Runs `controller` until `stop` fires: a pass, then wait for `trigger` or the pass's own
/// deadline. A pass under way when `stop` fires is finished (its writes are not cut in half);
/// no new one starts.
pub async fn run_singleton<S: Singleton>(mut controller: S, mut trigger: Trigger, mut stop: Stop) {
    while !stop.is_stopping() {
        let next = controller.pass().await;
        tokio::select! {
            biased;
            () = stop.stopped() => {}
            () = trigger.changed() => {}
            () = tokio::time::sleep(next) => {}
        }
    }
}

/// Runs `reconciler` over the keys of `queue` forever, at most `workers_max` at once, until the
/// queue is shut down (then the reconciles in flight finish first).
pub async fn run_keyed<R: Reconciler>(
    reconciler: Arc<R>,
    queue: Arc<WorkQueue<R::Key>>,
    workers_max: usize,
) {
    let workers_max = workers_max.max(1);
    let mut failures: BTreeMap<R::Key, u32> = BTreeMap::new();
    let mut in_flight = FuturesUnordered::new();
    let mut open = true;
    loop {
        let room = open && in_flight.len() < workers_max;
        tokio::select! {
            biased;
            Some((key, result)) = in_flight.next(), if !in_flight.is_empty() => {
                settle(reconciler.name(), &queue, &mut failures, &key, result);
                queue.done(&key);
            }
            next = queue.next(), if room => match next {
                Some(key) => {
                    let reconciler = reconciler.clone();
                    in_flight.push(async move {
                        let result = reconciler.reconcile(&key).await;
                        (key, result)
                    });
                }
                None => open = false,
            },
            else => return,
        }
    }
}

/// Applies one reconcile's result to the queue: a requeue, or a backoff after an error.
fn settle<K: Ord + Clone + Debug, E: Display>(
    name: &'static str,
    queue: &WorkQueue<K>,
    failures: &mut BTreeMap<K, u32>,
    key: &K,
    result: Result<Requeue, E>,
) {
    match result {
        Ok(requeue) => {
            failures.remove(key);
            if let Requeue::After(delay) = requeue {
                queue.add_after(key.clone(), delay);
            }
        }
        Err(err) => {
            let count = failures.entry(key.clone()).or_default();
            *count = count.saturating_add(1);
            let delay = retry_backoff(*count);
            tracing::debug!(controller = name, ?key, %err, ?delay, "reconcile failed; retrying");
            queue.add_rate_limited(key.clone(), delay);
        }
    }
}
