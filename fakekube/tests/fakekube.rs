//! Tests of the in-memory API server. One test binary; each concern has its own module under
//! `tests/fakekube/` (declared with `#[path]`, since this file is the crate root), and this file
//! holds only module declarations and helpers they share.

use std::sync::Arc;

use fakekube::{ApiServer, ApiServerConfig};
use jiff::Timestamp;
use karpenter_core::seams::ManualClock;

#[path = "fakekube/apiserver.rs"]
mod apiserver;
#[path = "fakekube/reflector.rs"]
mod reflector;

/// The simulated clusters' start time.
pub fn start() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().expect("timestamp")
}

/// Runs a future that never sleeps (no runtime needed; a sleep would panic).
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    futures::executor::block_on(future)
}

/// An API server with `config` on a manual clock at [`start`].
pub fn api_server(config: ApiServerConfig) -> (Arc<ManualClock>, Arc<ApiServer>) {
    let clock = Arc::new(ManualClock::new(start()));
    let server = Arc::new(ApiServer::new(clock.clone(), config));
    (clock, server)
}
