//! Builders the test modules share, so a test reads as the situation it sets up: a clock at the
//! start of 2026, fakecloud on it, and the controllers' [`Context`] over them and the in-memory
//! API server (fakekube; its fixtures are in `api_server`).

pub mod objects;

use std::sync::Arc;

use fakecloud::{Config, FakeCloud};
use karpenter_core::catalog::Catalog;
use karpenter_core::context::{Context, Options};
use karpenter_core::nodeclaim;
use karpenter_core::seams::ManualClock;

use fakekube::ApiServer;

/// The cluster name the controllers tag instances with.
pub const CLUSTER: &str = "sim";

/// When every test's clock starts.
pub fn start() -> jiff::Timestamp {
    "2026-01-01T00:00:00Z".parse().expect("timestamp")
}

/// A manual clock at [`start`].
pub fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(start()))
}

/// fakecloud with the built-in catalog, on `clock`.
pub fn cloud(clock: &Arc<ManualClock>) -> Arc<FakeCloud> {
    Arc::new(FakeCloud::new(
        clock.clone(),
        Catalog::builtin(),
        Config::default(),
    ))
}

/// The join data of fakecloud's default cluster (what its bootstraps accept).
pub fn world_cluster() -> karpenter_core::nodeclass::cluster::ClusterInfo {
    let config = Config::default();
    karpenter_core::nodeclass::cluster::ClusterInfo::new(
        CLUSTER,
        &config.cluster_endpoint,
        &config.cluster_ca_bundle,
        Some(&config.cluster_service_cidr),
        None,
    )
    .expect("fakecloud's default cluster is valid")
}

/// Options naming the cluster [`CLUSTER`].
pub fn options() -> Options {
    Options {
        lifecycle: nodeclaim::Options {
            cluster_name: CLUSTER.into(),
            cluster: Some(world_cluster()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The controllers' context over the fake API server and fakecloud (no interruption queue).
pub fn context(kube: &Arc<ApiServer>, cloud: &Arc<FakeCloud>, clock: &Arc<ManualClock>) -> Context {
    Context::new(
        kube.clone(),
        cloud.clone(),
        clock.clone(),
        Arc::new(Catalog::builtin()),
        options(),
    )
}

/// Runs the NodeClaim lifecycle over every claim once; what it did to claim `name`.
pub fn lifecycle_step(ctx: &Arc<Context>, name: &str) -> nodeclaim::Step {
    let lifecycle = nodeclaim::Lifecycle::new(ctx.clone());
    futures::executor::block_on(lifecycle.reconcile_all())
        .expect("reconcile")
        .into_iter()
        .find(|(n, _)| *n == name)
        .expect("reconciled")
        .1
        .expect("step")
}
