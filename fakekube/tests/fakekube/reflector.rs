//! The controller's watch-fed cache (`karpenter_core::state::Reflector`) against the in-memory
//! API server: it lists once, then follows the watch, resumes dropped watches and re-lists when
//! the server says its version is gone.

use fakekube::{ApiOperation, ApiServerConfig, Fake};
use karpenter_core::seams::KubeApi;
use karpenter_core::seams::kube::{DeleteOptions, ObjectKey, Patch, ResourceKind};
use karpenter_core::state::Reflector;
use serde_json::{Value, json};

use super::{api_server, block_on};

fn pod(name: &str) -> Value {
    json!({
        "metadata": {"namespace": "default", "name": name},
        "spec": {"containers": [{"name": "app", "image": "app:1"}]},
    })
}

fn names(reflector: &Reflector<Value>) -> Vec<String> {
    reflector
        .iter()
        .map(|p| {
            p["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[test]
fn a_reflector_follows_creates_updates_and_deletes_without_listing_again() {
    let (_clock, api) = api_server(ApiServerConfig::default());
    let mut pods: Reflector<Value> = Reflector::new(ResourceKind::POD);
    block_on(api.create(&ResourceKind::POD, pod("a"))).expect("create");
    assert!(
        block_on(pods.sync(api.as_ref())).expect("sync"),
        "first sync lists"
    );
    assert_eq!(names(&pods), ["a"]);
    assert!(
        !block_on(pods.sync(api.as_ref())).expect("sync"),
        "nothing new"
    );

    block_on(api.create(&ResourceKind::POD, pod("b"))).expect("create");
    block_on(api.patch(
        &ResourceKind::POD,
        &ObjectKey::namespaced("default", "a"),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
    ))
    .expect("patch");
    block_on(api.delete(
        &ResourceKind::POD,
        &ObjectKey::namespaced("default", "b"),
        &DeleteOptions::default(),
    ))
    .expect("delete");
    api.clear_calls();
    assert!(block_on(pods.sync(api.as_ref())).expect("sync"));
    assert_eq!(names(&pods), ["a"]);
    let a = pods
        .get(&ObjectKey::namespaced("default", "a"))
        .expect("cached");
    assert_eq!(a["metadata"]["labels"]["x"], "y");
    let lists = api
        .calls()
        .iter()
        .filter(|c| c.operation == ApiOperation::List)
        .count();
    assert_eq!(lists, 0, "changes come from the watch, not a list");
}

#[test]
fn a_reflector_resumes_a_dropped_watch_and_relists_after_gone() {
    let (_clock, api) = api_server(ApiServerConfig {
        watch_history_max: 3,
        watch_events_max: 2,
        ..ApiServerConfig::default()
    });
    let mut pods: Reflector<Value> = Reflector::new(ResourceKind::POD);
    block_on(pods.sync(api.as_ref())).expect("sync");
    // Two events fit the watch queue; the third closes the watch (queue full). The history still
    // holds them, so the reflector resumes where it stopped.
    for name in ["a", "b", "c"] {
        block_on(api.create(&ResourceKind::POD, pod(name))).expect("create");
    }
    block_on(pods.sync(api.as_ref())).expect("sync");
    assert_eq!(names(&pods), ["a", "b", "c"]);
    // Far more changes than the history keeps: resuming is impossible (410), so it lists again.
    for i in 0..10 {
        block_on(api.create(&ResourceKind::POD, pod(&format!("d{i}")))).expect("create");
    }
    block_on(pods.sync(api.as_ref())).expect("sync");
    block_on(pods.sync(api.as_ref())).expect("sync");
    assert_eq!(pods.len(), 13);
}
