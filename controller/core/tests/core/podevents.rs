//! The pod-events controller (`status.lastPodEventTime`): what it writes, and that an event is
//! not lost when its write fails.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use fakekube::{ApiServer, ApiServerConfig};
use karpenter_core::context::Context;
use karpenter_core::disruption::PodEvents;
use karpenter_core::seams::kube::{ObjectKey, Patch, ResourceKind};
use karpenter_core::seams::layered::{KubeCall, KubeLayer, KubeReply, Layered};
use karpenter_core::seams::{KubeApi, KubeError};
use serde_json::json;

use super::support::{self, objects};

/// Fails every status write while `failing` is set (an API server answering 503).
struct FailStatusWrites {
    failing: AtomicBool,
}

#[async_trait]
impl KubeLayer for FailStatusWrites {
    async fn call(&self, call: KubeCall<'_>, next: &dyn KubeApi) -> KubeReply {
        if matches!(call, KubeCall::PatchStatus { .. }) && self.failing.load(Ordering::Relaxed) {
            return call.fail(KubeError::Unavailable("injected 503".into()));
        }
        call.send(next).await
    }
}

fn last_pod_event(api: &ApiServer) -> Option<String> {
    let claim = api.object(&ResourceKind::NODE_CLAIM, &ObjectKey::cluster("c1"))?;
    claim["status"]["lastPodEventTime"]
        .as_str()
        .map(str::to_string)
}

#[test]
fn a_pod_event_whose_write_failed_is_written_on_the_next_pass() {
    let clock = support::clock();
    let api = Arc::new(ApiServer::new(clock.clone(), ApiServerConfig::default()));
    let faults = Arc::new(FailStatusWrites {
        failing: AtomicBool::new(false),
    });
    let server: Arc<dyn KubeApi> = api.clone();
    let kube: Arc<dyn KubeApi> = Arc::new(Layered::new(faults.clone(), server));
    let ctx = Context::new(
        kube.clone(),
        support::cloud(&clock),
        clock.clone(),
        Arc::new(karpenter_core::catalog::Catalog::builtin()),
        support::options(),
    );
    let events = PodEvents::new(Arc::new(ctx));
    futures::executor::block_on(async {
        let claim = objects::nodeclaim("c1").json();
        api.create(&ResourceKind::NODE_CLAIM, claim)
            .await
            .expect("claim");
        let status = Patch::Merge(json!({"status": {"nodeName": "n1"}}));
        let key = ObjectKey::cluster("c1");
        api.patch_status(&ResourceKind::NODE_CLAIM, &key, &status)
            .await
            .expect("status");
        let pod = objects::running_pod("p1", "n1", |_| {});
        api.create(&ResourceKind::POD, pod).await.expect("pod");
        events.pass().await.expect("the first pass takes stock");

        clock.advance(Duration::from_secs(30));
        let pod = ObjectKey::namespaced("default", "p1");
        api.delete(&ResourceKind::POD, &pod, &Default::default())
            .await
            .expect("delete");
        faults.failing.store(true, Ordering::Relaxed);
        assert!(events.pass().await.is_err(), "the write fails");
        assert_eq!(last_pod_event(&api), None);

        clock.advance(Duration::from_secs(1));
        faults.failing.store(false, Ordering::Relaxed);
        events.pass().await.expect("the next pass");
    });
    assert_eq!(
        last_pod_event(&api).as_deref(),
        Some("2026-01-01T00:00:31Z"),
        "the pod's removal is stamped by the next pass, not lost"
    );
}
