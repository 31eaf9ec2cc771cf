//! The adapter and the RBAC table agree: for every grant, the seam call that needs it sends a
//! request the authorizer sees as exactly that (group, resource, verb), and every request the
//! adapter sends is granted. A new call shape (say an `update` instead of a `patch`) fails here
//! before it fails in a cluster with 403.

use futures::StreamExt;
use karpenter_core::seams::KubeApi;
use karpenter_core::seams::kube::{
    DeleteOptions, EventRecord, EventType, ListOptions, ObjectKey, Patch, ResourceKind,
};
use karpenter_kube::KubeClient;
use karpenter_kube::events::EVENTS_V1;
use karpenter_kube::rbac::{GRANTS, Grant};
use serde_json::json;

use super::{Seen, client, ok, requests};

/// What the Kubernetes authorizer makes of a request: (group, resource[/subresource], verb).
fn authorizer_view(seen: &Seen) -> (String, String, String) {
    let parts: Vec<&str> = seen.path.trim_start_matches('/').split('/').collect();
    let (group, rest) = match parts[0] {
        "api" => ("", &parts[2..]),
        _ => (parts[1], &parts[3..]),
    };
    let rest = if rest.first() == Some(&"namespaces") && rest.len() > 2 {
        &rest[2..]
    } else {
        rest
    };
    let resource = match rest {
        [resource, _name, sub] => format!("{resource}/{sub}"),
        [resource, ..] => resource.to_string(),
        [] => String::new(),
    };
    let named = rest.len() > 1;
    let verb = match seen.method.as_str() {
        "GET" if named => "get",
        "GET" if seen.query.get("watch").is_some_and(|w| w == "true") => "watch",
        "GET" => "list",
        "POST" => "create",
        "PATCH" => "patch",
        "DELETE" => "delete",
        other => other,
    };
    (group.to_string(), resource, verb.to_string())
}

fn kind_of(grant: &Grant) -> ResourceKind {
    match grant.kind {
        "NodePool" => ResourceKind::NODE_POOL,
        "NodeClaim" => ResourceKind::NODE_CLAIM,
        "EC2NodeClass" => ResourceKind::EC2_NODE_CLASS,
        "Node" => ResourceKind::NODE,
        "Pod" | "Eviction" => ResourceKind::POD,
        "Namespace" => ResourceKind::NAMESPACE,
        "PersistentVolumeClaim" => ResourceKind::PERSISTENT_VOLUME_CLAIM,
        "PersistentVolume" => ResourceKind::PERSISTENT_VOLUME,
        "StorageClass" => ResourceKind::STORAGE_CLASS,
        "CSINode" => ResourceKind::CSI_NODE,
        "PodDisruptionBudget" => ResourceKind::POD_DISRUPTION_BUDGET,
        "DaemonSet" => ResourceKind::DAEMON_SET,
        "Service" => ResourceKind::SERVICE,
        "ReplicaSet" => ResourceKind::REPLICA_SET,
        "StatefulSet" => ResourceKind::STATEFUL_SET,
        "ReplicationController" => ResourceKind::REPLICATION_CONTROLLER,
        "VolumeAttachment" => ResourceKind::VOLUME_ATTACHMENT,
        "Event" => EVENTS_V1,
        "Lease" => ResourceKind::LEASE,
        other => panic!("no ResourceKind for the grant's kind {other}: add it here"),
    }
}

/// Makes the seam call that needs `verb` on `grant`'s resource.
async fn call(kube: &KubeClient, grant: &Grant, verb: &str) {
    let kind = kind_of(grant);
    let key = if kind.namespaced {
        ObjectKey::namespaced("ns", grant.resource_names.first().copied().unwrap_or("x"))
    } else {
        ObjectKey::cluster("x")
    };
    let status = grant.resource.ends_with("/status");
    let object = json!({"apiVersion": kind.api_version(), "kind": kind.kind,
                        "metadata": {"name": key.name, "namespace": key.namespace}});
    let patch = Patch::Merge(json!({}));
    // Only the request matters here; the in-test server's answers are not checked.
    let _ = match (grant.resource, verb) {
        ("pods/eviction", "create") => kube.evict(&key, &DeleteOptions::default()).await,
        (_, "create") if grant.kind == "Event" => {
            let event = EventRecord {
                involved: ResourceKind::POD,
                key: key.clone(),
                uid: None,
                type_: EventType::Normal,
                reason: "Nominated".into(),
                message: "m".into(),
            };
            kube.record_event(&event).await
        }
        (_, "create") => kube.create(&kind, object).await.map(drop),
        (_, "patch") if status => kube.patch_status(&kind, &key, &patch).await.map(drop),
        (_, "patch") => kube.patch(&kind, &key, &patch).await.map(drop),
        (_, "get") => kube.get(&kind, &key).await.map(drop),
        (_, "list") => kube.list(&kind, &ListOptions::default()).await.map(drop),
        (_, "watch") => match kube.watch(&kind, &ListOptions::default(), "1").await {
            Ok(stream) => {
                let _ = stream.collect::<Vec<_>>().await;
                Ok(())
            }
            Err(e) => Err(e),
        },
        (_, "delete") => kube
            .delete(&kind, &key, &DeleteOptions::default())
            .await
            .map(drop),
        (resource, verb) => panic!("no seam call for {verb} {resource}: add it here"),
    };
}

#[tokio::test]
async fn every_granted_verb_is_the_request_its_seam_call_sends_and_nothing_more() {
    for grant in GRANTS {
        for verb in grant.verbs {
            let (kube, log) = client(|seen| {
                if seen.method == "GET" && seen.query.contains_key("watch") {
                    (200, String::new())
                } else if seen.method == "GET" && !seen.path.ends_with('s') {
                    ok(json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "x"}}))
                } else if seen.method == "GET" {
                    ok(json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": []}))
                } else {
                    ok(
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Success",
                              "metadata": {}}),
                    )
                }
            });
            call(&kube, grant, verb).await;
            let seen = requests(&log);
            assert_eq!(seen.len(), 1, "{verb} {}: {seen:?}", grant.resource);
            let (group, resource, sent_verb) = authorizer_view(&seen[0]);
            assert_eq!(
                (group.as_str(), resource.as_str(), sent_verb.as_str()),
                (grant.group, grant.resource, *verb),
                "the seam call for {verb} {} sent {} {}",
                grant.resource,
                seen[0].method,
                seen[0].path
            );
        }
    }
}
