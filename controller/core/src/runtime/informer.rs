//! Informers: one task per watched kind that keeps its cache in `crate::state::ClusterState`
//! current (list, then watch), and tells the controllers that something changed.
//!
//! Each task awaits its watch stream (it never polls), applies what arrived to the shared cache
//! under a short lock (every event already delivered in one go), and bumps the kind's generation
//! (a `tokio::sync::watch`), which is what controllers subscribe to. A watch that ends is resumed
//! from the last version seen; a version the server no longer has (410 Gone) is listed afresh,
//! the old objects staying visible until the new list replaces them. Retries wait a bounded,
//! doubling backoff, reset by the next event. Controllers wait for [`Informers::synced`] before
//! their first pass, so nothing ever acts on a cache that has not listed yet (garbage collection
//! on an empty claim cache would terminate every instance).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::context::Context;
use crate::seams::KubeError;
use crate::seams::kube::ResourceKind;
use crate::state::{ClusterState, Reflector};

/// First wait before re-listing or re-watching after a failure (client-go's reflector starts at
/// 800 ms; a dropped watch is resumed sooner here because nothing is lost by resuming).
pub const REWATCH_BACKOFF_MS_MIN: u64 = 100;
/// Longest wait between attempts (client-go's reflector caps its backoff at 30 s).
pub const REWATCH_BACKOFF_MS_MAX: u64 = 30_000;
/// Most events one lock of the cache applies; the rest are applied under the next lock, so a
/// burst never holds the cache from the controllers for long.
pub const APPLY_EVENTS_MAX: usize = 1_000;

/// A doubling backoff between `REWATCH_BACKOFF_MS_MIN` and `REWATCH_BACKOFF_MS_MAX`.
struct Backoff {
    next_ms: u64,
}

impl Backoff {
    fn new() -> Self {
        Self {
            next_ms: REWATCH_BACKOFF_MS_MIN,
        }
    }

    fn reset(&mut self) {
        self.next_ms = REWATCH_BACKOFF_MS_MIN;
    }

    async fn wait(&mut self) {
        let ms = self.next_ms;
        self.next_ms = (ms * 2).min(REWATCH_BACKOFF_MS_MAX);
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

/// Wakes a controller when any of the kinds it watches changes.
#[derive(Clone, Debug)]
pub struct Trigger {
    receivers: Vec<watch::Receiver<u64>>,
}

impl Trigger {
    /// A trigger that never fires (a controller driven by its timer alone).
    pub fn never() -> Self {
        Self {
            receivers: Vec::new(),
        }
    }

    /// Returns once any watched kind changed since the last return (at once if one already has).
    /// Never returns once every informer has stopped.
    pub async fn changed(&mut self) {
        loop {
            let mut fired = false;
            for receiver in &mut self.receivers {
                if receiver.has_changed().unwrap_or(false) {
                    fired = true;
                    receiver.borrow_and_update();
                }
            }
            if fired {
                return;
            }
            self.receivers.retain(|r| r.has_changed().is_ok());
            if self.receivers.is_empty() {
                return std::future::pending().await;
            }
            let waits = self
                .receivers
                .iter_mut()
                .map(|r| Box::pin(r.changed()))
                .collect::<Vec<_>>();
            // `changed` marks what it saw as seen: a successful wait is the change itself.
            let (result, _, _) = futures::future::select_all(waits).await;
            if result.is_ok() {
                for receiver in &mut self.receivers {
                    receiver.borrow_and_update();
                }
                return;
            }
        }
    }
}

/// The informer tasks of one operator and the generations they publish.
pub struct Informers {
    generations: BTreeMap<ResourceKind, watch::Receiver<u64>>,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Informers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informers")
            .field(
                "kinds",
                &self.generations.keys().map(|k| k.kind).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Informers {
    /// Starts one informer per cache of `ctx.state` on the current runtime. The caches are
    /// handed over (their `sync` does nothing from now on).
    pub fn start(ctx: &Arc<Context>) -> Self {
        let mut informers = Self {
            generations: BTreeMap::new(),
            tasks: Vec::new(),
        };
        informers.add(ctx, ResourceKind::NODE_POOL, |s| &mut s.pools);
        informers.add(ctx, ResourceKind::EC2_NODE_CLASS, |s| &mut s.node_classes);
        informers.add(ctx, ResourceKind::NODE, |s| &mut s.nodes);
        informers.add(ctx, ResourceKind::NODE_CLAIM, |s| &mut s.claims);
        informers.add(ctx, ResourceKind::POD, |s| &mut s.pods);
        informers.add(ctx, ResourceKind::DAEMON_SET, |s| &mut s.daemonsets);
        informers.add(ctx, ResourceKind::NAMESPACE, |s| &mut s.namespaces);
        // Upstream starts these informers on first use, and only default spreads use them.
        if ctx
            .options
            .scheduler_config()
            .is_some_and(|c| c.has_default_constraints())
        {
            informers.add(ctx, ResourceKind::SERVICE, |s| {
                &mut s.selector_sources.services
            });
            informers.add(ctx, ResourceKind::REPLICA_SET, |s| {
                &mut s.selector_sources.replica_sets
            });
            informers.add(ctx, ResourceKind::STATEFUL_SET, |s| {
                &mut s.selector_sources.stateful_sets
            });
            informers.add(ctx, ResourceKind::REPLICATION_CONTROLLER, |s| {
                &mut s.selector_sources.replication_controllers
            });
        }
        informers
    }

    /// Starts the informer of `kind`, the cache `select` picks.
    fn add<T>(
        &mut self,
        ctx: &Arc<Context>,
        kind: ResourceKind,
        select: fn(&mut ClusterState) -> &mut Reflector<T>,
    ) where
        T: DeserializeOwned + Send + Sync + 'static,
    {
        let (sender, receiver) = watch::channel(0u64);
        self.generations.insert(kind, receiver);
        self.tasks
            .push(tokio::spawn(inform(ctx.clone(), select, sender)));
    }

    /// A trigger firing when any of `kinds` changes.
    pub fn trigger(&self, kinds: &[ResourceKind]) -> Trigger {
        Trigger {
            receivers: kinds
                .iter()
                .filter_map(|k| self.generations.get(k).cloned())
                .collect(),
        }
    }

    /// Returns once every cache has listed (controllers' first pass waits for it).
    pub async fn synced(&self) {
        for receiver in self.generations.values() {
            let mut receiver = receiver.clone();
            let _ = receiver.wait_for(|generation| *generation > 0).await;
        }
    }

    /// A future resolving once every cache has listed, owning what it needs.
    pub fn synced_owned(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let receivers: Vec<_> = self.generations.values().cloned().collect();
        async move {
            for mut receiver in receivers {
                let _ = receiver.wait_for(|generation| *generation > 0).await;
            }
        }
    }

    /// The informer tasks, for the operator to stop with the rest.
    pub fn into_tasks(self) -> Vec<JoinHandle<()>> {
        self.tasks
    }
}

/// One kind's informer: list when the cache has no version, watch from it, apply, repeat.
async fn inform<T>(
    ctx: Arc<Context>,
    select: fn(&mut ClusterState) -> &mut Reflector<T>,
    generation: watch::Sender<u64>,
) where
    T: DeserializeOwned + Send + Sync + 'static,
{
    let mut backoff = Backoff::new();
    let bump = || generation.send_modify(|g| *g += 1);
    select(&mut *ctx.state.lock().await).drive();
    loop {
        let (kind, options, version) = {
            let mut state = ctx.state.lock().await;
            let reflector = select(&mut state);
            let version = reflector.resource_version().map(str::to_string);
            (reflector.kind(), reflector.options().clone(), version)
        };
        let version = match version {
            Some(version) => version,
            None => match ctx.kube.list(&kind, &options).await {
                Ok(list) => {
                    let version = list.resource_version.clone();
                    select(&mut *ctx.state.lock().await).replace(list);
                    bump();
                    version
                }
                Err(err) => {
                    tracing::warn!(kind = kind.kind, %err, "listing failed; retrying");
                    backoff.wait().await;
                    continue;
                }
            },
        };
        let mut stream = match ctx.kube.watch(&kind, &options, &version).await {
            Ok(stream) => stream,
            Err(err) => {
                if matches!(err, KubeError::Gone(_)) {
                    select(&mut *ctx.state.lock().await).forget_version();
                } else {
                    tracing::warn!(kind = kind.kind, %err, "watching failed; retrying");
                }
                backoff.wait().await;
                continue;
            }
        };
        while let Some(first) = stream.next().await {
            let mut changed = false;
            let mut ended = false;
            {
                let mut state = ctx.state.lock().await;
                let reflector = select(&mut state);
                let mut next = Some(first);
                let mut applied = 0;
                while let Some(item) = next.take() {
                    match item {
                        Ok(event) => changed |= reflector.apply(event),
                        Err(KubeError::Gone(_)) => {
                            reflector.forget_version();
                            ended = true;
                            break;
                        }
                        Err(err) => {
                            tracing::warn!(kind = kind.kind, %err, "watch failed; resuming");
                            ended = true;
                            break;
                        }
                    }
                    applied += 1;
                    if applied < APPLY_EVENTS_MAX {
                        // Everything already delivered goes in under this lock.
                        next = stream.next().now_or_never().flatten();
                    }
                }
            }
            if changed {
                bump();
            }
            if ended {
                break;
            }
            backoff.reset();
        }
        backoff.wait().await;
    }
}
