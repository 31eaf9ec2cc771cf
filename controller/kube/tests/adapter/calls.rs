//! Each seam call's request and the mapping of its answers.

use std::num::NonZeroU32;
use std::time::Duration;

use futures::StreamExt;
use karpenter_core::seams::kube::{
    DeleteOptions, DeleteOutcome, EventRecord, EventType, ListOptions, ObjectKey, Patch,
    ResourceKind, WatchEvent,
};
use karpenter_core::seams::{KubeApi, KubeError, Retryable};
use karpenter_kube::ClientLimits;
use serde_json::{Value, json};

use super::{client, client_with, object, ok, requests, status};

#[tokio::test]
async fn get_reads_one_object_and_a_missing_one_is_none() {
    let (kube, log) = client(|seen| match seen.path.as_str() {
        "/api/v1/nodes/node-1" => ok(object("v1", "Node", None, "node-1")),
        _ => status(404, "NotFound", "nodes \"gone\" not found"),
    });
    let node = kube
        .get(&ResourceKind::NODE, &ObjectKey::cluster("node-1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(node["metadata"]["name"], "node-1");
    let missing = kube
        .get(&ResourceKind::NODE, &ObjectKey::cluster("gone"))
        .await
        .unwrap();
    assert_eq!(missing, None);
    let seen = requests(&log);
    assert_eq!(seen[0].method, "GET");
    assert_eq!(seen[1].path, "/api/v1/nodes/gone");
}

#[tokio::test]
async fn list_sends_the_selectors_sorts_the_items_and_names_their_kind() {
    let (kube, log) = client(|_| {
        let mut b = object("v1", "Pod", Some("b"), "p");
        let mut a = object("v1", "Pod", Some("a"), "z");
        // The API server leaves apiVersion and kind out of list items.
        b.as_object_mut().unwrap().remove("kind");
        a.as_object_mut().unwrap().remove("apiVersion");
        ok(json!({"apiVersion": "v1", "kind": "PodList",
                  "metadata": {"resourceVersion": "42"}, "items": [b, a]}))
    });
    let options = ListOptions {
        namespace: None,
        label_selector: Some("app=web".into()),
        field_selector: Some("spec.nodeName=node-1".into()),
    };
    let list = kube.list(&ResourceKind::POD, &options).await.unwrap();
    assert_eq!(list.resource_version, "42");
    let names: Vec<_> = list
        .items
        .iter()
        .map(|i| i["metadata"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert!(
        list.items
            .iter()
            .all(|i| i["kind"] == "Pod" && i["apiVersion"] == "v1")
    );
    let seen = &requests(&log)[0];
    assert_eq!(seen.path, "/api/v1/pods");
    assert_eq!(seen.query["labelSelector"], "app=web");
    assert_eq!(seen.query["fieldSelector"], "spec.nodeName=node-1");
}

#[tokio::test]
async fn create_posts_to_the_collection_and_a_taken_name_is_already_exists() {
    let (kube, log) = client(|seen| {
        if seen.body["metadata"]["name"] == "taken" {
            status(409, "AlreadyExists", "nodeclaims \"taken\" already exists")
        } else {
            ok(seen.body.clone())
        }
    });
    let claim = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                       "metadata": {"name": "default-abc"}, "spec": {}});
    let created = kube
        .create(&ResourceKind::NODE_CLAIM, claim.clone())
        .await
        .unwrap();
    assert_eq!(created["metadata"]["name"], "default-abc");
    let mut taken = claim;
    taken["metadata"]["name"] = json!("taken");
    let err = kube
        .create(&ResourceKind::NODE_CLAIM, taken)
        .await
        .unwrap_err();
    assert!(matches!(err, KubeError::AlreadyExists(_)), "{err:?}");
    assert!(!err.is_retryable());
    let seen = &requests(&log)[0];
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.path, "/apis/karpenter.sh/v1/nodeclaims");
}

#[tokio::test]
async fn a_namespaced_create_without_a_namespace_is_refused_before_any_request() {
    let (kube, log) = client(|_| ok(json!({})));
    let err = kube
        .create(&ResourceKind::POD, object("v1", "Pod", None, "p"))
        .await
        .unwrap_err();
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
    assert!(requests(&log).is_empty());
}

#[tokio::test]
async fn a_merge_patch_is_sent_as_merge_patch_and_a_stale_version_is_a_conflict() {
    let (kube, log) = client(|seen| {
        if seen.body["metadata"]["resourceVersion"] == "1" {
            status(409, "Conflict", "the object has been modified")
        } else {
            ok(object("v1", "Node", None, "node-1"))
        }
    });
    let key = ObjectKey::cluster("node-1");
    let patch = Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}}));
    kube.patch(&ResourceKind::NODE, &key, &patch).await.unwrap();
    let stale = Patch::Merge(json!({"metadata": {"resourceVersion": "1"}}));
    let err = kube
        .patch(&ResourceKind::NODE, &key, &stale)
        .await
        .unwrap_err();
    assert!(matches!(err, KubeError::Conflict(_)), "{err:?}");
    assert!(err.is_retryable());
    let seen = &requests(&log)[0];
    assert_eq!(seen.method, "PATCH");
    assert_eq!(seen.path, "/api/v1/nodes/node-1");
    assert_eq!(seen.content_type, "application/merge-patch+json");
    assert_eq!(seen.body, json!({"metadata": {"labels": {"a": "b"}}}));
}

#[tokio::test]
async fn a_json_patch_is_sent_as_json_patch_and_status_goes_to_the_subresource() {
    let (kube, log) = client(|_| ok(object("karpenter.sh/v1", "NodeClaim", None, "c")));
    let key = ObjectKey::cluster("c");
    let ops = json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                     {"op": "remove", "path": "/metadata/finalizers/0"}]);
    kube.patch(&ResourceKind::NODE_CLAIM, &key, &Patch::Json(ops.clone()))
        .await
        .unwrap();
    let status_patch = Patch::Merge(json!({"status": {"providerID": "aws:///z/i-1"}}));
    kube.patch_status(&ResourceKind::NODE_CLAIM, &key, &status_patch)
        .await
        .unwrap();
    let seen = requests(&log);
    assert_eq!(seen[0].content_type, "application/json-patch+json");
    assert_eq!(seen[0].body, ops);
    assert_eq!(seen[1].path, "/apis/karpenter.sh/v1/nodeclaims/c/status");
    assert_eq!(seen[1].content_type, "application/merge-patch+json");
    let not_a_patch = Patch::Json(json!({"op": "add"}));
    let err = kube
        .patch(&ResourceKind::NODE_CLAIM, &key, &not_a_patch)
        .await
        .unwrap_err();
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
}

#[tokio::test]
async fn delete_sends_the_uid_precondition_and_grace_period_and_maps_each_outcome() {
    let (kube, log) = client(|seen| match seen.path.rsplit('/').next().unwrap() {
        "finalized" => {
            let mut node = object("v1", "Node", None, "finalized");
            node["metadata"]["finalizers"] = json!(["karpenter.sh/termination"]);
            node["metadata"]["deletionTimestamp"] = json!("2026-11-23T12:00:00Z");
            ok(node)
        }
        "gone" => status(404, "NotFound", "not found"),
        _ => ok(
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success",
                       "metadata": {}, "code": 200}),
        ),
    });
    let options = DeleteOptions {
        grace_period_seconds: Some(0),
        precondition_uid: Some("uid-1".into()),
    };
    let marked = kube
        .delete(
            &ResourceKind::NODE,
            &ObjectKey::cluster("finalized"),
            &options,
        )
        .await
        .unwrap();
    assert!(matches!(marked, DeleteOutcome::Marked(_)), "{marked:?}");
    let deleted = kube
        .delete(
            &ResourceKind::NODE,
            &ObjectKey::cluster("plain"),
            &DeleteOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(deleted, DeleteOutcome::Deleted);
    let missing = kube
        .delete(
            &ResourceKind::NODE,
            &ObjectKey::cluster("gone"),
            &DeleteOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(missing, DeleteOutcome::NotFound);
    let seen = &requests(&log)[0];
    assert_eq!(seen.method, "DELETE");
    assert_eq!(seen.body["gracePeriodSeconds"], 0);
    assert_eq!(seen.body["preconditions"]["uid"], "uid-1");
}

#[tokio::test]
async fn an_eviction_posts_to_the_subresource_and_a_budget_refusal_is_too_many_requests() {
    let (kube, log) = client(|seen| match seen.path.as_str() {
        "/api/v1/namespaces/web/pods/guarded/eviction" => status(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
        ),
        "/api/v1/namespaces/web/pods/gone/eviction" => status(404, "NotFound", "not found"),
        _ => ok(
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success",
                       "metadata": {}, "code": 201}),
        ),
    });
    let options = DeleteOptions {
        grace_period_seconds: Some(30),
        precondition_uid: None,
    };
    kube.evict(&ObjectKey::namespaced("web", "free"), &options)
        .await
        .unwrap();
    let err = kube
        .evict(&ObjectKey::namespaced("web", "guarded"), &options)
        .await
        .unwrap_err();
    assert!(matches!(err, KubeError::TooManyRequests(_)), "{err:?}");
    kube.evict(&ObjectKey::namespaced("web", "gone"), &options)
        .await
        .unwrap();
    let seen = &requests(&log)[0];
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.body["apiVersion"], "policy/v1");
    assert_eq!(seen.body["kind"], "Eviction");
    assert_eq!(seen.body["metadata"]["name"], "free");
    assert_eq!(seen.body["deleteOptions"]["gracePeriodSeconds"], 30);
}

#[tokio::test]
async fn a_watch_resumes_from_the_version_with_bookmarks_and_an_expired_version_is_gone() {
    let lines = [
        json!({"type": "ADDED", "object": object("v1", "Node", None, "a")}),
        json!({"type": "MODIFIED", "object": object("v1", "Node", None, "a")}),
        json!({"type": "BOOKMARK", "object": {"kind": "Node", "apiVersion": "v1",
               "metadata": {"resourceVersion": "99"}}}),
        json!({"type": "DELETED", "object": object("v1", "Node", None, "a")}),
        json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
               "status": "Failure", "reason": "Expired", "message": "too old resource version",
               "code": 410}}),
    ]
    .iter()
    .map(Value::to_string)
    .collect::<Vec<_>>()
    .join("\n");
    let (kube, log) = client(move |_| (200, format!("{lines}\n")));
    let stream = kube
        .watch(&ResourceKind::NODE, &ListOptions::default(), "12")
        .await
        .unwrap();
    let events: Vec<_> = stream.collect().await;
    assert!(matches!(&events[0], Ok(WatchEvent::Added(o)) if o["metadata"]["name"] == "a"));
    assert!(matches!(&events[1], Ok(WatchEvent::Modified(_))));
    assert_eq!(
        events[2],
        Ok(WatchEvent::Bookmark {
            resource_version: "99".into()
        })
    );
    assert!(matches!(&events[3], Ok(WatchEvent::Deleted(_))));
    assert!(
        matches!(&events[4], Err(KubeError::Gone(_))),
        "{:?}",
        events[4]
    );
    let seen = &requests(&log)[0];
    assert_eq!(seen.path, "/api/v1/nodes");
    assert_eq!(seen.query["watch"], "true");
    assert_eq!(seen.query["resourceVersion"], "12");
    assert_eq!(seen.query["allowWatchBookmarks"], "true");
    assert_eq!(seen.query["timeoutSeconds"], "290");
}

#[tokio::test]
async fn server_errors_are_retryable_and_permission_and_validation_errors_are_not() {
    let (kube, _) = client(|seen| match seen.path.rsplit('/').next().unwrap() {
        "down" => status(503, "ServiceUnavailable", "etcd is down"),
        "secret" => status(403, "Forbidden", "nodes is forbidden"),
        _ => status(422, "Invalid", "spec.taints: Invalid value"),
    });
    let patch = Patch::Merge(json!({}));
    let call = |name: &'static str| {
        let kube = &kube;
        let patch = &patch;
        async move {
            kube.patch(&ResourceKind::NODE, &ObjectKey::cluster(name), patch)
                .await
                .unwrap_err()
        }
    };
    let down = call("down").await;
    assert!(
        matches!(down, KubeError::Unavailable(_)) && down.is_retryable(),
        "{down:?}"
    );
    let secret = call("secret").await;
    assert!(
        matches!(secret, KubeError::Forbidden(_)) && !secret.is_retryable(),
        "{secret:?}"
    );
    let invalid = call("invalid").await;
    assert!(matches!(invalid, KubeError::Invalid(_)), "{invalid:?}");
}

fn event(message: &str) -> EventRecord {
    EventRecord {
        involved: ResourceKind::NODE_CLAIM,
        key: ObjectKey::cluster("default-abc"),
        uid: Some("uid-claim".into()),
        type_: EventType::Warning,
        reason: "InsufficientCapacityError".into(),
        message: message.into(),
    }
}

#[tokio::test]
async fn a_repeated_event_patches_its_series_and_a_different_one_is_a_new_event() {
    let (kube, log) = client(|seen| ok(seen.body.clone()));
    kube.record_event(&event("no capacity")).await.unwrap();
    kube.record_event(&event("no capacity")).await.unwrap();
    kube.record_event(&event("no capacity")).await.unwrap();
    kube.record_event(&event("other")).await.unwrap();
    let seen = requests(&log);
    let shapes: Vec<_> = seen.iter().map(|s| s.method.as_str()).collect();
    assert_eq!(shapes, ["POST", "PATCH", "PATCH", "POST"]);
    let first = &seen[0];
    assert_eq!(
        first.path,
        "/apis/events.k8s.io/v1/namespaces/default/events"
    );
    assert_eq!(first.body["regarding"]["kind"], "NodeClaim");
    assert_eq!(first.body["regarding"]["uid"], "uid-claim");
    assert_eq!(first.body["type"], "Warning");
    assert_eq!(first.body["reportingController"], "karpenter");
    assert_eq!(first.body["reportingInstance"], "test-replica");
    let name = first.body["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("default-abc."), "{name}");
    assert_eq!(
        seen[1].path,
        format!("/apis/events.k8s.io/v1/namespaces/default/events/{name}")
    );
    assert_eq!(seen[1].body["series"]["count"], 2);
    assert_eq!(seen[2].body["series"]["count"], 3);
}

#[tokio::test]
async fn a_repeat_whose_event_expired_creates_it_again() {
    let (kube, log) = client(|seen| {
        if seen.method == "PATCH" {
            status(404, "NotFound", "events not found")
        } else {
            ok(seen.body.clone())
        }
    });
    kube.record_event(&event("x")).await.unwrap();
    kube.record_event(&event("x")).await.unwrap();
    let shapes: Vec<_> = requests(&log).iter().map(|s| s.method.clone()).collect();
    assert_eq!(shapes, ["POST", "PATCH", "POST"]);
}

#[tokio::test]
async fn requests_past_the_burst_wait_for_the_qps_limit() {
    let limits = ClientLimits {
        qps: NonZeroU32::new(20).unwrap(),
        burst: NonZeroU32::new(2).unwrap(),
    };
    let (kube, log) = client_with(|_| ok(object("v1", "Node", None, "n")), limits);
    let started = tokio::time::Instant::now();
    for _ in 0..6 {
        kube.get(&ResourceKind::NODE, &ObjectKey::cluster("n"))
            .await
            .unwrap();
    }
    // Two at once, then one every 50 ms: the last four wait at least 4 x 50 ms less slack.
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(180), "{waited:?}");
    assert_eq!(requests(&log).len(), 6);
}
