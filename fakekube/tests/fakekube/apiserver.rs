//! The in-memory API server through the `KubeApi` seam, plus its knobs and inspection methods.

use std::sync::Arc;
use std::time::Duration;

use fakekube::{
    ApiFault, ApiFaultRates, ApiOperation, ApiServer, ApiServerConfig, BINDING, Fake,
    PREDEFINED_NAMESPACES,
};
use futures::{FutureExt, StreamExt};
use karpenter_core::seams::kube::{
    DeleteOptions, DeleteOutcome, EventRecord, ListOptions, ObjectKey, Patch, ResourceKind,
    WatchEvent, WatchStream,
};
use karpenter_core::seams::{KubeApi, KubeError, ManualClock};
use serde_json::{Value, json};

use super::{api_server, block_on};

const POD: ResourceKind = ResourceKind::POD;
const NODE: ResourceKind = ResourceKind::NODE;
const PDB: ResourceKind = ResourceKind::POD_DISRUPTION_BUDGET;
const CLAIM: ResourceKind = ResourceKind::NODE_CLAIM;
const NAMESPACE: ResourceKind = ResourceKind::NAMESPACE;

fn server() -> (Arc<ManualClock>, Arc<ApiServer>) {
    api_server(ApiServerConfig::default())
}

fn pod(namespace: &str, name: &str, labels: Value) -> Value {
    json!({
        "metadata": {"namespace": namespace, "name": name, "labels": labels},
        "spec": {"containers": [{"name": "app", "image": "app:1"}]},
    })
}

fn claim(name: &str) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
    })
}

fn key(namespace: &str, name: &str) -> ObjectKey {
    ObjectKey::namespaced(namespace, name)
}

fn rv(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .parse()
        .expect("numeric resourceVersion")
}

fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().expect("name")
}

fn create(server: &ApiServer, kind: &ResourceKind, object: Value) -> Value {
    block_on(server.create(kind, object)).expect("create")
}

/// A pod bound to `node`, Running (and Ready unless `ready` is false), in `namespace`.
fn running_pod(
    server: &ApiServer,
    namespace: &str,
    name: &str,
    labels: Value,
    ready: bool,
) -> Value {
    create(server, &POD, pod(namespace, name, labels));
    let k = key(namespace, name);
    block_on(server.create(&BINDING, binding(namespace, name, "node-1"))).expect("bind");
    let status = if ready { "True" } else { "False" };
    block_on(server.patch_status(
        &POD,
        &k,
        &Patch::Merge(json!({"status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": status}],
        }})),
    ))
    .map(|o| Value::clone(&o))
    .expect("run")
}

/// What kube-scheduler creates to bind a pod.
fn binding(namespace: &str, pod: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"namespace": namespace, "name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
}

fn pdb(namespace: &str, name: &str, selector: Value, spec: Value) -> Value {
    let mut spec = spec;
    spec["selector"] = selector;
    json!({"metadata": {"namespace": namespace, "name": name}, "spec": spec})
}

fn delete(server: &ApiServer, kind: &ResourceKind, key: &ObjectKey) -> DeleteOutcome {
    block_on(server.delete(kind, key, &DeleteOptions::default())).expect("delete")
}

fn names(list: &[impl std::borrow::Borrow<Value>]) -> Vec<String> {
    list.iter()
        .map(|o| {
            let o: &Value = o.borrow();
            let ns = o["metadata"]["namespace"].as_str().unwrap_or("");
            if ns.is_empty() {
                name(o).to_string()
            } else {
                format!("{ns}/{}", name(o))
            }
        })
        .collect()
}

fn list(server: &ApiServer, kind: &ResourceKind, options: ListOptions) -> Vec<Value> {
    block_on(server.list(kind, &options))
        .expect("list")
        .items
        .into_iter()
        .map(std::sync::Arc::unwrap_or_clone)
        .collect()
}

fn labels(selector: &str) -> ListOptions {
    ListOptions {
        label_selector: Some(selector.to_string()),
        ..ListOptions::default()
    }
}

fn fields(selector: &str) -> ListOptions {
    ListOptions {
        field_selector: Some(selector.to_string()),
        ..ListOptions::default()
    }
}

fn watch(server: &ApiServer, kind: &ResourceKind, options: ListOptions, from: &str) -> WatchStream {
    block_on(server.watch(kind, &options, from)).expect("watch")
}

/// What the stream holds now, without waiting; `true` if it has ended.
fn drain(stream: &mut WatchStream) -> (Vec<Result<WatchEvent, KubeError>>, bool) {
    let mut items = Vec::new();
    loop {
        match stream.next().now_or_never() {
            Some(Some(item)) => items.push(item),
            Some(None) => return (items, true),
            None => return (items, false),
        }
    }
}

/// Each event as `Added pods/default/a`, bookmarks as `Bookmark 12`.
fn describe(items: &[Result<WatchEvent, KubeError>]) -> Vec<String> {
    let object = |o: &Value| names(std::slice::from_ref(o)).remove(0);
    items
        .iter()
        .map(|item| match item {
            Ok(WatchEvent::Added(o)) => format!("Added {}", object(o)),
            Ok(WatchEvent::Modified(o)) => format!("Modified {}", object(o)),
            Ok(WatchEvent::Deleted(o)) => format!("Deleted {}", object(o)),
            Ok(WatchEvent::Bookmark { resource_version }) => format!("Bookmark {resource_version}"),
            Err(e) => format!("Err {e}"),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Store and metadata

#[test]
fn a_created_object_gets_uid_resource_version_generation_and_creation_timestamp() {
    let (_, server) = server();
    let before = server.resource_version();
    let created = create(&server, &CLAIM, claim("claim-a"));
    let metadata = &created["metadata"];
    assert_eq!(rv(&created), before + 1);
    assert_eq!(metadata["generation"], json!(1));
    assert_eq!(metadata["creationTimestamp"], json!("2026-01-01T00:00:00Z"));
    assert_eq!(metadata["uid"].as_str().map(str::len), Some(36), "a UUID");
    assert_eq!(created["kind"], json!("NodeClaim"));
    let read = block_on(server.get(&CLAIM, &ObjectKey::cluster("claim-a")))
        .expect("get")
        .expect("found");
    assert_eq!(read, created);
}

#[test]
fn api_version_and_kind_are_filled_in_and_a_mismatch_is_invalid() {
    let (_, server) = server();
    let created = create(&server, &POD, pod("default", "a", json!({})));
    assert_eq!(created["apiVersion"], json!("v1"));
    assert_eq!(created["kind"], json!("Pod"));
    let wrong = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "b"}});
    let err = block_on(server.create(&POD, wrong)).expect_err("kind mismatch");
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
}

#[test]
fn generate_name_appends_a_five_character_suffix_drawn_from_the_seed() {
    let (_, server) = server();
    let created = create(
        &server,
        &CLAIM,
        json!({"metadata": {"generateName": "default-"}, "spec": {}}),
    );
    let name = name(&created);
    let suffix = name.strip_prefix("default-").expect("prefix kept");
    assert_eq!(suffix.len(), 5);
    assert!(
        suffix
            .chars()
            .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
        "Kubernetes' alphabet: {suffix}"
    );
}

#[test]
fn the_same_seed_gives_the_same_names_uids_and_resource_versions_and_another_seed_does_not() {
    let run = |seed: u64| {
        let (_, server) = api_server(ApiServerConfig {
            seed,
            ..ApiServerConfig::default()
        });
        (0..20)
            .map(|_| {
                let created = create(
                    &server,
                    &CLAIM,
                    json!({"metadata": {"generateName": "pool-"}, "spec": {}}),
                );
                (
                    name(&created).to_string(),
                    created["metadata"]["uid"].as_str().unwrap().to_string(),
                    rv(&created),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
}

#[test]
fn creating_a_taken_name_is_already_exists_and_a_missing_name_is_invalid() {
    let (_, server) = server();
    create(&server, &CLAIM, claim("a"));
    let err = block_on(server.create(&CLAIM, claim("a"))).expect_err("taken");
    assert!(matches!(err, KubeError::AlreadyExists(_)), "{err:?}");
    let err = block_on(server.create(&CLAIM, json!({"metadata": {}}))).expect_err("no name");
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
    let err = block_on(server.create(&CLAIM, claim("Not_A_Name"))).expect_err("bad name");
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
}

#[test]
fn a_create_carrying_a_resource_version_is_invalid() {
    let (_, server) = server();
    let mut object = claim("a");
    object["metadata"]["resourceVersion"] = json!("3");
    let err = block_on(server.create(&CLAIM, object)).expect_err("rv on create");
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
}

#[test]
fn status_is_dropped_on_create_except_for_nodes_and_pods_start_pending() {
    let (_, server) = server();
    let mut object = claim("a");
    object["status"] = json!({"providerID": "aws:///i-1"});
    assert!(create(&server, &CLAIM, object).get("status").is_none());
    let mut p = pod("default", "p", json!({}));
    p["status"] = json!({"phase": "Running"});
    assert_eq!(
        create(&server, &POD, p)["status"],
        json!({"phase": "Pending"})
    );
    let node = json!({"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "2"}}});
    assert_eq!(
        create(&server, &NODE, node)["status"]["allocatable"]["cpu"],
        json!("2")
    );
}

#[test]
fn get_of_a_missing_object_is_none_and_writes_to_it_are_not_found() {
    let (_, server) = server();
    let missing = ObjectKey::cluster("nope");
    assert_eq!(block_on(server.get(&CLAIM, &missing)).expect("get"), None);
    let patch = Patch::Merge(json!({"spec": {}}));
    let err = block_on(server.patch(&CLAIM, &missing, &patch)).expect_err("patch");
    assert!(matches!(err, KubeError::NotFound(_)), "{err:?}");
    let err = block_on(server.patch_status(&CLAIM, &missing, &patch)).expect_err("status");
    assert!(matches!(err, KubeError::NotFound(_)), "{err:?}");
    assert_eq!(delete(&server, &CLAIM, &missing), DeleteOutcome::NotFound);
}

#[test]
fn a_key_of_the_wrong_scope_is_invalid() {
    let (_, server) = server();
    let err = block_on(server.get(&POD, &ObjectKey::cluster("p"))).expect_err("namespaced");
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
    let err = block_on(server.get(&NODE, &key("default", "n"))).expect_err("cluster");
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
}

// ---------------------------------------------------------------------------------------------
// Namespaces

#[test]
fn default_and_kube_system_exist_from_the_start_and_cannot_be_deleted() {
    let (_, server) = server();
    let namespaces = names(&server.objects(&NAMESPACE));
    assert_eq!(namespaces, PREDEFINED_NAMESPACES.to_vec());
    let err = block_on(server.delete(
        &NAMESPACE,
        &ObjectKey::cluster("default"),
        &DeleteOptions::default(),
    ))
    .expect_err("protected");
    assert!(matches!(err, KubeError::Forbidden(_)), "{err:?}");
    create(&server, &POD, pod("kube-system", "dns", json!({})));
}

#[test]
fn a_namespaced_object_needs_its_namespace_to_exist() {
    let (_, server) = server();
    let err = block_on(server.create(&POD, pod("team-a", "p", json!({})))).expect_err("no ns");
    assert!(matches!(err, KubeError::NotFound(_)), "{err:?}");
    create(&server, &NAMESPACE, json!({"metadata": {"name": "team-a"}}));
    let created = create(&server, &POD, pod("team-a", "p", json!({})));
    assert_eq!(created["metadata"]["namespace"], json!("team-a"));
    let unspecified = json!({"metadata": {"name": "q"}, "spec": {}});
    assert_eq!(
        create(&server, &POD, unspecified)["metadata"]["namespace"],
        json!("default"),
        "a pod without a namespace goes to default"
    );
}

#[test]
fn no_object_can_be_created_in_a_namespace_being_deleted() {
    let (_, server) = server();
    let mut ns = json!({"metadata": {"name": "team-a", "finalizers": ["example.com/hold"]}});
    ns = create(&server, &NAMESPACE, ns);
    assert!(matches!(
        delete(&server, &NAMESPACE, &ObjectKey::cluster(name(&ns))),
        DeleteOutcome::Marked(_)
    ));
    let err = block_on(server.create(&POD, pod("team-a", "p", json!({})))).expect_err("closed");
    assert!(matches!(err, KubeError::Forbidden(_)), "{err:?}");
}

// ---------------------------------------------------------------------------------------------
// List and selectors

#[test]
fn list_returns_items_by_namespace_then_name_with_the_current_resource_version() {
    let (_, server) = server();
    create(&server, &NAMESPACE, json!({"metadata": {"name": "a-team"}}));
    for (ns, n) in [
        ("default", "b"),
        ("a-team", "z"),
        ("default", "a"),
        ("a-team", "c"),
    ] {
        create(&server, &POD, pod(ns, n, json!({})));
    }
    let all = block_on(server.list(&POD, &ListOptions::default())).expect("list");
    assert_eq!(
        names(&all.items),
        ["a-team/c", "a-team/z", "default/a", "default/b"]
    );
    assert_eq!(all.resource_version, server.resource_version().to_string());
    let in_default = list(
        &server,
        &POD,
        ListOptions {
            namespace: Some("default".into()),
            ..ListOptions::default()
        },
    );
    assert_eq!(names(&in_default), ["default/a", "default/b"]);
}

#[test]
fn label_selectors_filter_by_equality_inequality_existence_and_sets() {
    let (_, server) = server();
    create(
        &server,
        &POD,
        pod("default", "web", json!({"app": "web", "tier": "front"})),
    );
    create(
        &server,
        &POD,
        pod("default", "api", json!({"app": "api", "tier": "back"})),
    );
    create(&server, &POD, pod("default", "bare", json!({})));
    let select = |s: &str| names(&list(&server, &POD, labels(s)));
    assert_eq!(select("app=web"), ["default/web"]);
    assert_eq!(select("app==web"), ["default/web"]);
    assert_eq!(
        select("app!=web"),
        ["default/api", "default/bare"],
        "!= matches unlabelled"
    );
    assert_eq!(select("app"), ["default/api", "default/web"]);
    assert_eq!(select("!app"), ["default/bare"]);
    assert_eq!(select("app,tier!=front"), ["default/api"]);
    assert_eq!(select("app in (web, api),tier=back"), ["default/api"]);
    assert_eq!(select("app notin (web)"), ["default/api", "default/bare"]);
    assert_eq!(select(""), ["default/api", "default/bare", "default/web"]);
}

#[test]
fn field_selectors_filter_pods_by_node_name_and_objects_by_name() {
    let (_, server) = server();
    running_pod(&server, "default", "bound", json!({}), true);
    create(&server, &POD, pod("default", "pending", json!({})));
    assert_eq!(
        names(&list(&server, &POD, fields("spec.nodeName=node-1"))),
        ["default/bound"]
    );
    assert_eq!(
        names(&list(&server, &POD, fields("spec.nodeName="))),
        ["default/pending"],
        "an empty value selects unbound pods"
    );
    assert_eq!(
        names(&list(&server, &POD, fields("metadata.name!=bound"))),
        ["default/pending"]
    );
    assert_eq!(
        names(&list(
            &server,
            &POD,
            fields("status.phase=Running,metadata.name=bound")
        )),
        ["default/bound"]
    );
}

#[test]
fn unsupported_selector_syntax_is_invalid() {
    let (_, server) = server();
    for selector in ["a>1", "a in (b", "a,,b", "a=b c", "=b"] {
        let err = block_on(server.list(&POD, &labels(selector))).expect_err(selector);
        assert!(matches!(err, KubeError::Invalid(_)), "{selector}: {err:?}");
    }
    for selector in [
        "spec.nodeName in (a)",
        "spec.unknownField=a",
        "spec.nodeName",
    ] {
        let err = block_on(server.list(&POD, &fields(selector))).expect_err(selector);
        assert!(matches!(err, KubeError::Invalid(_)), "{selector}: {err:?}");
    }
    let err = block_on(server.list(&CLAIM, &fields("spec.nodeName=a"))).expect_err("not a pod");
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
    let err = block_on(server.watch(&POD, &labels("a>1"), ""))
        .err()
        .expect("watch too");
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
}

// ---------------------------------------------------------------------------------------------
// Patches and optimistic concurrency

#[test]
fn a_write_carrying_a_stale_resource_version_is_a_conflict() {
    let (_, server) = server();
    let created = create(&server, &CLAIM, claim("a"));
    let k = ObjectKey::cluster("a");
    let stale = created["metadata"]["resourceVersion"].clone();
    let first = Patch::Merge(json!({"metadata": {"resourceVersion": stale, "labels": {"x": "1"}}}));
    let updated = block_on(server.patch(&CLAIM, &k, &first)).expect("current version");
    assert_eq!(rv(&updated), rv(&created) + 1);
    let second =
        Patch::Merge(json!({"metadata": {"resourceVersion": stale, "labels": {"x": "2"}}}));
    let err = block_on(server.patch(&CLAIM, &k, &second)).expect_err("stale");
    assert!(matches!(err, KubeError::Conflict(_)), "{err:?}");
    let status = Patch::Merge(json!({"metadata": {"resourceVersion": stale}, "status": {"a": 1}}));
    let err = block_on(server.patch_status(&CLAIM, &k, &status)).expect_err("stale status");
    assert!(matches!(err, KubeError::Conflict(_)), "{err:?}");
    let now = server.object(&CLAIM, &k).expect("still there");
    assert_eq!(now, *updated, "a conflicting write changes nothing");
    let unconditional = Patch::Merge(json!({"metadata": {"labels": {"x": "3"}}}));
    block_on(server.patch(&CLAIM, &k, &unconditional)).expect("no version: no precondition");
}

#[test]
fn a_patch_carrying_another_uid_is_a_conflict() {
    let (_, server) = server();
    create(&server, &CLAIM, claim("a"));
    let patch = Patch::Merge(json!({"metadata": {"uid": "someone-else", "labels": {"x": "1"}}}));
    let err = block_on(server.patch(&CLAIM, &ObjectKey::cluster("a"), &patch)).expect_err("uid");
    assert!(matches!(err, KubeError::Conflict(_)), "{err:?}");
}

#[test]
fn generation_is_bumped_by_spec_changes_only() {
    let (_, server) = server();
    create(&server, &CLAIM, claim("a"));
    let k = ObjectKey::cluster("a");
    let generation = |o: &Value| o["metadata"]["generation"].as_i64().unwrap();
    let labelled = block_on(server.patch(
        &CLAIM,
        &k,
        &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}, "annotations": {"y": "2"}}})),
    ))
    .expect("metadata");
    assert_eq!(generation(&labelled), 1, "metadata-only");
    let status = block_on(server.patch_status(
        &CLAIM,
        &k,
        &Patch::Merge(json!({"status": {"nodeName": "n"}})),
    ))
    .expect("status");
    assert_eq!(generation(&status), 1, "status-only");
    let spec = block_on(server.patch(
        &CLAIM,
        &k,
        &Patch::Merge(json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}})),
    ))
    .expect("spec");
    assert_eq!(generation(&spec), 2, "spec change");
}

#[test]
fn a_merge_patch_replaces_lists_and_drops_nulls_while_a_json_patch_edits_in_place() {
    let (_, server) = server();
    let mut object = claim("a");
    object["metadata"]["labels"] = json!({"keep": "1", "drop": "2"});
    object["metadata"]["finalizers"] = json!(["a.io/one", "b.io/two"]);
    create(&server, &CLAIM, object);
    let k = ObjectKey::cluster("a");
    let merged = block_on(server.patch(
        &CLAIM,
        &k,
        &Patch::Merge(json!({"metadata": {"labels": {"drop": null, "new": "3"}, "finalizers": ["c.io/three"]}})),
    ))
    .expect("merge");
    assert_eq!(
        merged["metadata"]["labels"],
        json!({"keep": "1", "new": "3"})
    );
    assert_eq!(
        merged["metadata"]["finalizers"],
        json!(["c.io/three"]),
        "lists are replaced"
    );

    let patched = block_on(server.patch(
        &CLAIM,
        &k,
        &Patch::Json(json!([
            {"op": "add", "path": "/metadata/finalizers/-", "value": "d.io/four"},
            {"op": "remove", "path": "/metadata/labels/keep"},
        ])),
    ))
    .expect("json");
    assert_eq!(
        patched["metadata"]["finalizers"],
        json!(["c.io/three", "d.io/four"])
    );
    assert_eq!(patched["metadata"]["labels"], json!({"new": "3"}));
}

#[test]
fn a_failed_json_patch_test_is_a_conflict_and_applies_no_operation() {
    let (_, server) = server();
    let created = create(&server, &CLAIM, claim("a"));
    let k = ObjectKey::cluster("a");
    let current = created["metadata"]["resourceVersion"].clone();
    let test_and_set = |version: &Value, label: &str| {
        Patch::Json(json!([
            {"op": "add", "path": "/metadata/labels", "value": {"x": label}},
            {"op": "test", "path": "/metadata/resourceVersion", "value": version},
        ]))
    };
    let updated = block_on(server.patch(&CLAIM, &k, &test_and_set(&current, "1"))).expect("set");
    assert_eq!(updated["metadata"]["labels"], json!({"x": "1"}));
    let err = block_on(server.patch(&CLAIM, &k, &test_and_set(&current, "2"))).expect_err("stale");
    assert!(matches!(err, KubeError::Conflict(_)), "{err:?}");
    assert_eq!(
        server.object(&CLAIM, &k),
        Some(Value::clone(&updated)),
        "the add before the test is undone"
    );

    let bad_path = Patch::Json(json!([{"op": "remove", "path": "/spec/missing"}]));
    let err = block_on(server.patch(&CLAIM, &k, &bad_path)).expect_err("bad path");
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
    let malformed = Patch::Json(json!({"op": "add"}));
    let err = block_on(server.patch(&CLAIM, &k, &malformed)).expect_err("not a list");
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
}

#[test]
fn patch_ignores_status_and_patch_status_changes_only_status() {
    let (_, server) = server();
    create(&server, &CLAIM, claim("a"));
    let k = ObjectKey::cluster("a");
    let both = json!({"metadata": {"labels": {"x": "1"}}, "spec": {"extra": true}, "status": {"phase": "x"}});
    let main = block_on(server.patch(&CLAIM, &k, &Patch::Merge(both.clone()))).expect("main");
    assert!(main.get("status").is_none(), "status ignored by patch");
    assert_eq!(main["spec"]["extra"], json!(true));
    let status = block_on(server.patch_status(
        &CLAIM,
        &k,
        &Patch::Merge(json!({
            "metadata": {"labels": {"x": "2"}}, "spec": {"extra": false}, "status": {"phase": "y"},
        })),
    ))
    .expect("status");
    assert_eq!(status["status"], json!({"phase": "y"}));
    assert_eq!(
        status["metadata"]["labels"],
        json!({"x": "1"}),
        "metadata ignored"
    );
    assert_eq!(status["spec"]["extra"], json!(true), "spec ignored");
    // Fields a status patch adds or removes outside `status` are ignored too.
    let status = block_on(server.patch_status(
        &CLAIM,
        &k,
        &Patch::Merge(json!({"spec": null, "extraTop": 1, "status": {"phase": "z"}})),
    ))
    .expect("status");
    assert_eq!(status["status"], json!({"phase": "z"}));
    assert_eq!(status["spec"]["extra"], json!(true), "spec kept");
    assert!(
        status.get("extraTop").is_none(),
        "new top-level field dropped"
    );
}

#[test]
fn server_owned_metadata_survives_a_patch_and_identity_cannot_change() {
    let (_, server) = server();
    let created = create(&server, &CLAIM, claim("a"));
    let k = ObjectKey::cluster("a");
    let patched = block_on(server.patch(
        &CLAIM,
        &k,
        &Patch::Merge(json!({"metadata": {"creationTimestamp": "2000-01-01T00:00:00Z", "generation": 9, "labels": {"x": "1"}}})),
    ))
    .expect("patch");
    assert_eq!(
        patched["metadata"]["creationTimestamp"],
        created["metadata"]["creationTimestamp"]
    );
    assert_eq!(patched["metadata"]["generation"], json!(1));
    let rename = Patch::Merge(json!({"metadata": {"name": "b"}}));
    let err = block_on(server.patch(&CLAIM, &k, &rename)).expect_err("rename");
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
}

#[test]
fn a_patch_that_changes_nothing_keeps_the_resource_version() {
    let (_, server) = server();
    let created = create(&server, &CLAIM, claim("a"));
    let same = block_on(server.patch(
        &CLAIM,
        &ObjectKey::cluster("a"),
        &Patch::Merge(json!({"spec": created["spec"].clone(), "status": {"ignored": 1}})),
    ))
    .expect("no-op");
    assert_eq!(*same, created);
    assert_eq!(server.resource_version(), rv(&created));
}

// ---------------------------------------------------------------------------------------------
// Deletion and finalizers

#[test]
fn deleting_an_object_with_finalizers_marks_it_and_removing_the_last_finalizer_deletes_it() {
    let (clock, server) = server();
    let mut object = claim("a");
    object["metadata"]["finalizers"] = json!(["karpenter.sh/termination", "example.com/other"]);
    create(&server, &CLAIM, object);
    let k = ObjectKey::cluster("a");
    clock.advance(Duration::from_secs(90));
    let DeleteOutcome::Marked(marked) = delete(&server, &CLAIM, &k) else {
        panic!("marked");
    };
    assert_eq!(
        marked["metadata"]["deletionTimestamp"],
        json!("2026-01-01T00:01:30Z")
    );
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], json!(0));
    assert_eq!(
        marked["metadata"]["generation"],
        json!(2),
        "marking bumps the generation"
    );
    let again = delete(&server, &CLAIM, &k);
    assert_eq!(
        again,
        DeleteOutcome::Marked(marked.clone()),
        "a second delete changes nothing"
    );

    let one_left = block_on(server.patch(
        &CLAIM,
        &k,
        &Patch::Json(json!([{"op": "remove", "path": "/metadata/finalizers/1"}])),
    ))
    .expect("remove one");
    assert!(server.object(&CLAIM, &k).is_some(), "one finalizer left");
    let last = block_on(server.patch(
        &CLAIM,
        &k,
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    ))
    .expect("remove last");
    assert_eq!(rv(&last), rv(&one_left) + 1);
    assert_eq!(
        server.object(&CLAIM, &k),
        None,
        "gone with its last finalizer"
    );
}

#[test]
fn a_marked_object_accepts_no_new_finalizers() {
    let (_, server) = server();
    let mut object = claim("a");
    object["metadata"]["finalizers"] = json!(["karpenter.sh/termination"]);
    create(&server, &CLAIM, object);
    let k = ObjectKey::cluster("a");
    delete(&server, &CLAIM, &k);
    let add =
        Patch::Merge(json!({"metadata": {"finalizers": ["karpenter.sh/termination", "x.io/new"]}}));
    let err = block_on(server.patch(&CLAIM, &k, &add)).expect_err("new finalizer");
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
}

#[test]
fn a_delete_with_another_uid_as_precondition_is_a_conflict() {
    let (_, server) = server();
    let created = create(&server, &CLAIM, claim("a"));
    let k = ObjectKey::cluster("a");
    let wrong = DeleteOptions {
        precondition_uid: Some("other-uid".into()),
        ..DeleteOptions::default()
    };
    let err = block_on(server.delete(&CLAIM, &k, &wrong)).expect_err("uid mismatch");
    assert!(matches!(err, KubeError::Conflict(_)), "{err:?}");
    let right = DeleteOptions {
        precondition_uid: created["metadata"]["uid"].as_str().map(str::to_string),
        ..DeleteOptions::default()
    };
    assert_eq!(
        block_on(server.delete(&CLAIM, &k, &right)).expect("delete"),
        DeleteOutcome::Deleted
    );
    assert_eq!(
        block_on(server.delete(&CLAIM, &k, &right)).expect("again"),
        DeleteOutcome::NotFound
    );
}

#[test]
fn a_bound_pod_is_marked_with_its_grace_period_until_a_zero_grace_delete_finishes_it() {
    let (_, server) = server();
    running_pod(&server, "default", "p", json!({}), true);
    let k = key("default", "p");
    let options = DeleteOptions {
        grace_period_seconds: Some(45),
        ..DeleteOptions::default()
    };
    let DeleteOutcome::Marked(marked) = block_on(server.delete(&POD, &k, &options)).expect("del")
    else {
        panic!("a bound pod is deleted gracefully");
    };
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], json!(45));
    assert_eq!(
        marked["metadata"]["deletionTimestamp"],
        json!("2026-01-01T00:00:45Z")
    );
    let force = DeleteOptions {
        grace_period_seconds: Some(0),
        ..DeleteOptions::default()
    };
    assert_eq!(
        block_on(server.delete(&POD, &k, &force)).expect("force"),
        DeleteOutcome::Deleted
    );
}

#[test]
fn a_pod_uses_its_termination_grace_period_when_the_delete_gives_none() {
    let (_, server) = server();
    running_pod(&server, "default", "p", json!({}), true);
    let k = key("default", "p");
    block_on(server.patch(
        &POD,
        &k,
        &Patch::Merge(json!({"spec": {"terminationGracePeriodSeconds": 120}})),
    ))
    .expect("grace");
    let DeleteOutcome::Marked(marked) = delete(&server, &POD, &k) else {
        panic!("marked");
    };
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], json!(120));
}

#[test]
fn a_pod_not_bound_to_a_node_is_deleted_at_once() {
    let (_, server) = server();
    create(&server, &POD, pod("default", "pending", json!({})));
    let options = DeleteOptions {
        grace_period_seconds: Some(30),
        ..DeleteOptions::default()
    };
    let outcome = block_on(server.delete(&POD, &key("default", "pending"), &options)).expect("del");
    assert_eq!(outcome, DeleteOutcome::Deleted);
}

// ---------------------------------------------------------------------------------------------
// Watches

#[test]
fn a_watch_sees_every_change_after_its_resource_version_in_order() {
    let (_, server) = server();
    create(&server, &CLAIM, claim("before"));
    let from = block_on(server.list(&CLAIM, &ListOptions::default())).expect("list");
    let mut stream = watch(
        &server,
        &CLAIM,
        ListOptions::default(),
        &from.resource_version,
    );
    create(&server, &CLAIM, claim("a"));
    block_on(server.patch(
        &CLAIM,
        &ObjectKey::cluster("a"),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}})),
    ))
    .expect("patch");
    delete(&server, &CLAIM, &ObjectKey::cluster("before"));
    create(&server, &POD, pod("default", "other-kind", json!({})));
    let (items, ended) = drain(&mut stream);
    assert!(!ended);
    assert_eq!(
        describe(&items),
        ["Added a", "Modified a", "Deleted before"]
    );
    let versions: Vec<u64> = items
        .iter()
        .map(|i| match i {
            Ok(WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)) => rv(o),
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");

    // A watch started later from the same version replays the same changes from the history.
    let mut replay = watch(
        &server,
        &CLAIM,
        ListOptions::default(),
        &from.resource_version,
    );
    assert_eq!(describe(&drain(&mut replay).0), describe(&items));
}

#[test]
fn a_watch_from_an_expired_resource_version_is_gone() {
    let (_, server) = api_server(ApiServerConfig {
        watch_history_max: 3,
        ..ApiServerConfig::default()
    });
    let first = create(&server, &CLAIM, claim("a"));
    for i in 0..5 {
        create(&server, &CLAIM, claim(&format!("b{i}")));
    }
    let mut stream = watch(
        &server,
        &CLAIM,
        ListOptions::default(),
        &(rv(&first) - 1).to_string(),
    );
    let (items, ended) = drain(&mut stream);
    assert!(
        matches!(items.as_slice(), [Err(KubeError::Gone(_))]),
        "{items:?}"
    );
    assert!(ended);
    let recent = server.resource_version() - 3;
    let mut stream = watch(&server, &CLAIM, ListOptions::default(), &recent.to_string());
    assert_eq!(
        describe(&drain(&mut stream).0),
        ["Added b2", "Added b3", "Added b4"]
    );
    let err = block_on(server.watch(&CLAIM, &ListOptions::default(), "abc"))
        .err()
        .expect("bad rv");
    assert!(matches!(err, KubeError::Invalid(_)), "{err:?}");
}

#[test]
fn a_watch_from_zero_announces_the_current_objects_first() {
    let (_, server) = server();
    create(&server, &CLAIM, claim("b"));
    create(&server, &CLAIM, claim("a"));
    let mut stream = watch(&server, &CLAIM, ListOptions::default(), "0");
    create(&server, &CLAIM, claim("c"));
    assert_eq!(
        describe(&drain(&mut stream).0),
        ["Added a", "Added b", "Added c"]
    );
}

#[test]
fn a_filtered_watch_reports_objects_entering_and_leaving_its_selector() {
    let (_, server) = server();
    let mut stream = watch(&server, &POD, fields("status.phase=Running"), "0");
    create(&server, &POD, pod("default", "p", json!({})));
    let k = key("default", "p");
    let phase = |phase: &str| Patch::Merge(json!({"status": {"phase": phase}}));
    block_on(server.patch_status(&POD, &k, &phase("Running"))).expect("run");
    block_on(server.patch(
        &POD,
        &k,
        &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
    ))
    .expect("label");
    let moved = block_on(server.patch_status(&POD, &k, &phase("Succeeded"))).expect("finish");
    let (items, _) = drain(&mut stream);
    assert_eq!(
        describe(&items),
        ["Added default/p", "Modified default/p", "Deleted default/p"]
    );
    let Some(Ok(WatchEvent::Deleted(last))) = items.last() else {
        panic!("deleted");
    };
    assert_eq!(
        last["status"]["phase"],
        json!("Running"),
        "the state it was selected in"
    );
    assert_eq!(rv(last), rv(&moved), "at the version that moved it out");
}

#[test]
fn a_binding_sets_the_node_and_pod_scheduled_in_one_write() {
    let (_, server) = server();
    create(&server, &POD, pod("default", "p", json!({})));
    let k = key("default", "p");
    let unschedulable = json!({"status": {"conditions": [{"type": "PodScheduled",
        "status": "False", "reason": "Unschedulable", "message": "0/1 nodes are available",
        "lastTransitionTime": "2025-06-01T00:00:00Z"}]}});
    let before = block_on(server.patch_status(&POD, &k, &Patch::Merge(unschedulable)))
        .expect("unschedulable");
    let mut stream = watch(
        &server,
        &POD,
        ListOptions::default(),
        &rv(&before).to_string(),
    );
    let mut binding = binding("default", "p", "node-1");
    binding["metadata"]["uid"] = before["metadata"]["uid"].clone();
    binding["metadata"]["annotations"] = json!({"scheduled-by": "test"});
    let answer = block_on(server.create(&BINDING, binding)).expect("bind");
    assert_eq!(answer["kind"], "Status");
    assert_eq!(answer["status"], "Success");
    let (items, _) = drain(&mut stream);
    assert_eq!(describe(&items), ["Modified default/p"], "one write");
    let pod = block_on(server.get(&POD, &k)).expect("get").expect("pod");
    assert_eq!(pod["spec"]["nodeName"], "node-1");
    assert_eq!(pod["metadata"]["annotations"]["scheduled-by"], "test");
    let scheduled = &pod["status"]["conditions"][0];
    assert_eq!(scheduled["type"], "PodScheduled");
    assert_eq!(scheduled["status"], "True");
    assert!(scheduled.get("reason").is_none(), "{scheduled}");
    assert_ne!(
        scheduled["lastTransitionTime"], "2025-06-01T00:00:00Z",
        "the status changed"
    );
}

#[test]
fn a_binding_is_refused_for_a_bound_deleting_gated_or_replaced_pod() {
    let (_, server) = server();
    let bind = |name: &str, uid: Option<&Value>| {
        let mut binding = binding("default", name, "node-2");
        if let Some(uid) = uid {
            binding["metadata"]["uid"] = uid.clone();
        }
        block_on(server.create(&BINDING, binding))
    };
    create(&server, &POD, pod("default", "bound", json!({})));
    bind("bound", None).expect("first bind");
    let refused = bind("bound", None).expect_err("bound already");
    assert!(
        matches!(&refused, KubeError::Conflict(m) if m.contains("already assigned to node \"node-2\"")),
        "{refused}"
    );

    let mut deleting = pod("default", "deleting", json!({}));
    deleting["metadata"]["finalizers"] = json!(["test/hold"]);
    create(&server, &POD, deleting);
    block_on(server.delete(&POD, &key("default", "deleting"), &DeleteOptions::default()))
        .expect("delete");
    let refused = bind("deleting", None).expect_err("being deleted");
    assert!(
        matches!(&refused, KubeError::Conflict(m) if m.contains("being deleted")),
        "{refused}"
    );

    let mut gated = pod("default", "gated", json!({}));
    gated["spec"]["schedulingGates"] = json!([{"name": "example.com/wait"}]);
    create(&server, &POD, gated);
    let refused = bind("gated", None).expect_err("gated");
    assert!(
        matches!(&refused, KubeError::Conflict(m) if m.contains("schedulingGates")),
        "{refused}"
    );

    let old = create(&server, &POD, pod("default", "replaced", json!({})));
    delete(&server, &POD, &key("default", "replaced"));
    create(&server, &POD, pod("default", "replaced", json!({})));
    let refused = bind("replaced", Some(&old["metadata"]["uid"])).expect_err("another pod");
    assert!(
        matches!(&refused, KubeError::Conflict(m) if m.contains("UID")),
        "{refused}"
    );

    let refused = bind("missing", None).expect_err("no pod");
    assert!(matches!(refused, KubeError::NotFound(_)), "{refused}");
    let pod = block_on(server.get(&POD, &key("default", "replaced")))
        .expect("get")
        .expect("pod");
    assert!(pod["spec"]["nodeName"].is_null(), "nothing bound: {pod}");
}

#[test]
fn a_pod_update_cannot_set_or_change_its_node() {
    let (_, server) = server();
    create(&server, &POD, pod("default", "p", json!({})));
    let k = key("default", "p");
    let set = Patch::Merge(json!({"spec": {"nodeName": "node-1"}}));
    let refused = block_on(server.patch(&POD, &k, &set)).expect_err("set by update");
    assert!(
        matches!(&refused, KubeError::Invalid(m) if m.contains("binding")),
        "{refused}"
    );
    block_on(server.create(&BINDING, binding("default", "p", "node-1"))).expect("bind");
    let unset = Patch::Merge(json!({"spec": {"nodeName": null}}));
    let refused = block_on(server.patch(&POD, &k, &unset)).expect_err("unset by update");
    assert!(matches!(refused, KubeError::Invalid(_)), "{refused}");
}

#[test]
fn an_injected_conflict_rate_never_refuses_a_binding() {
    let (_, server) = server();
    server.set_fault_rates_all(ApiFaultRates::conflicts(1.0));
    create(&server, &POD, pod("default", "p", json!({})));
    block_on(server.create(&BINDING, binding("default", "p", "node-1")))
        .expect("a binding is the server's own retried write");
    let label = Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}}));
    let refused = block_on(server.patch(&POD, &key("default", "p"), &label)).expect_err("a patch");
    assert!(matches!(refused, KubeError::Conflict(_)), "{refused}");
}

#[test]
fn bookmarks_come_once_the_interval_has_passed_on_the_clock() {
    let (clock, server) = api_server(ApiServerConfig {
        bookmark_interval_ms: 60_000,
        ..ApiServerConfig::default()
    });
    let mut stream = watch(&server, &CLAIM, ListOptions::default(), "");
    create(&server, &POD, pod("default", "elsewhere", json!({})));
    clock.advance(Duration::from_secs(59));
    server.advance_to_now();
    assert!(drain(&mut stream).0.is_empty(), "not due yet");
    clock.advance(Duration::from_secs(1));
    server.advance_to_now();
    let version = server.resource_version();
    assert_eq!(
        describe(&drain(&mut stream).0),
        [format!("Bookmark {version}")]
    );
    clock.advance(Duration::from_secs(60));
    create(&server, &CLAIM, claim("a"));
    let (items, _) = drain(&mut stream);
    assert_eq!(
        describe(&items),
        [format!("Bookmark {version}"), "Added a".to_string()],
        "a call delivers the due bookmark before its own change"
    );
}

#[test]
fn a_watcher_that_falls_behind_its_queue_bound_is_closed() {
    let (_, server) = api_server(ApiServerConfig {
        watch_events_max: 2,
        ..ApiServerConfig::default()
    });
    let mut stream = watch(&server, &CLAIM, ListOptions::default(), "");
    assert_eq!(server.open_watches(), 1);
    for n in ["a", "b", "c"] {
        create(&server, &CLAIM, claim(n));
    }
    assert_eq!(server.open_watches(), 0);
    let (items, ended) = drain(&mut stream);
    assert_eq!(describe(&items), ["Added a", "Added b"]);
    assert!(
        ended,
        "the stream ends; the client re-watches from b's version"
    );
}

#[test]
fn a_dropped_watch_stream_is_no_longer_counted() {
    let (_, server) = server();
    let stream = watch(&server, &CLAIM, ListOptions::default(), "");
    assert_eq!(server.open_watches(), 1);
    drop(stream);
    assert_eq!(server.open_watches(), 0);
}

// ---------------------------------------------------------------------------------------------
// Eviction and PodDisruptionBudgets

#[test]
fn eviction_without_a_budget_deletes_the_pod_with_its_grace_period() {
    let (_, server) = server();
    running_pod(&server, "default", "p", json!({"app": "web"}), true);
    let options = DeleteOptions {
        grace_period_seconds: Some(10),
        ..DeleteOptions::default()
    };
    block_on(server.evict(&key("default", "p"), &options)).expect("evict");
    let marked = server
        .object(&POD, &key("default", "p"))
        .expect("terminating");
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], json!(10));
    block_on(server.evict(&key("default", "gone"), &options)).expect("a missing pod is fine");
}

#[test]
fn a_min_available_budget_blocks_the_eviction_that_would_break_it() {
    let (_, server) = server();
    for n in ["a", "b", "c"] {
        running_pod(&server, "default", n, json!({"app": "web"}), true);
    }
    create(
        &server,
        &PDB,
        pdb(
            "default",
            "web",
            json!({"matchLabels": {"app": "web"}}),
            json!({"minAvailable": 2}),
        ),
    );
    block_on(server.evict(&key("default", "a"), &DeleteOptions::default())).expect("3 -> 2 is ok");
    let err = block_on(server.evict(&key("default", "b"), &DeleteOptions::default()))
        .expect_err("2 -> 1 breaks minAvailable 2");
    assert!(matches!(err, KubeError::TooManyRequests(_)), "{err:?}");
    assert!(
        server.object(&POD, &key("default", "b")).expect("b")["metadata"]["deletionTimestamp"]
            .is_null(),
        "a refused eviction leaves the pod alone"
    );
}

#[test]
fn percentage_budgets_round_up_like_kubernetes() {
    // minAvailable 50% of 3 pods rounds up to 2 that must stay: one eviction allowed.
    let (_, server) = server();
    for n in ["a", "b", "c"] {
        running_pod(&server, "default", n, json!({"app": "web"}), true);
    }
    create(
        &server,
        &PDB,
        pdb(
            "default",
            "web",
            json!({"matchLabels": {"app": "web"}}),
            json!({"minAvailable": "50%"}),
        ),
    );
    block_on(server.evict(&key("default", "a"), &DeleteOptions::default())).expect("first");
    let err = block_on(server.evict(&key("default", "b"), &DeleteOptions::default()))
        .expect_err("second");
    assert!(matches!(err, KubeError::TooManyRequests(_)), "{err:?}");

    // maxUnavailable 34% of 3 pods rounds up to 2 that may be down: two evictions allowed.
    let (_, server) = self::server();
    for n in ["a", "b", "c"] {
        running_pod(&server, "default", n, json!({"app": "web"}), true);
    }
    create(
        &server,
        &PDB,
        pdb(
            "default",
            "web",
            json!({"matchLabels": {"app": "web"}}),
            json!({"maxUnavailable": "34%"}),
        ),
    );
    block_on(server.evict(&key("default", "a"), &DeleteOptions::default())).expect("first");
    block_on(server.evict(&key("default", "b"), &DeleteOptions::default())).expect("second");
    let err =
        block_on(server.evict(&key("default", "c"), &DeleteOptions::default())).expect_err("third");
    assert!(matches!(err, KubeError::TooManyRequests(_)), "{err:?}");
}

#[test]
fn a_max_unavailable_budget_counts_unready_pods_as_unavailable() {
    let (_, server) = server();
    running_pod(&server, "default", "ready", json!({"app": "web"}), true);
    running_pod(&server, "default", "unready", json!({"app": "web"}), false);
    create(
        &server,
        &PDB,
        pdb(
            "default",
            "web",
            json!({"matchLabels": {"app": "web"}}),
            json!({"maxUnavailable": 1}),
        ),
    );
    let err = block_on(server.evict(&key("default", "ready"), &DeleteOptions::default()))
        .expect_err("one is already unavailable");
    assert!(matches!(err, KubeError::TooManyRequests(_)), "{err:?}");
    block_on(server.evict(&key("default", "unready"), &DeleteOptions::default()))
        .expect("the budget is met, so the unhealthy pod may go");
}

/// A Running, Ready pod of ReplicaSet `web-abc` (its controller reference).
fn replica(server: &ApiServer, name: &str) {
    running_pod(server, "default", name, json!({"app": "web"}), true);
    block_on(server.patch(
        &POD,
        &key("default", name),
        &Patch::Merge(json!({"metadata": {"ownerReferences": [{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc",
            "uid": "uid-web-abc", "controller": true
        }]}})),
    ))
    .expect("owner");
}

#[test]
fn a_max_unavailable_budget_expects_the_controllers_scale_so_a_terminating_pod_is_not_counted_twice()
 {
    // Kubernetes' getExpectedScale: 2 replicas expected, whatever pods exist. The evicted pod is
    // still terminating (its grace period) when its successor turns Ready; counting it as well
    // (3 expected, 2 desired healthy) would hold the next eviction until it is gone.
    let (_, server) = server();
    create(
        &server,
        &ResourceKind::REPLICA_SET,
        json!({"metadata": {"namespace": "default", "name": "web-abc"},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}}}),
    );
    replica(&server, "web-1");
    replica(&server, "web-2");
    create(
        &server,
        &PDB,
        pdb(
            "default",
            "web",
            json!({"matchLabels": {"app": "web"}}),
            json!({"maxUnavailable": 1}),
        ),
    );
    let graceful = DeleteOptions {
        grace_period_seconds: Some(30),
        ..DeleteOptions::default()
    };
    block_on(server.evict(&key("default", "web-1"), &graceful)).expect("one may go");
    let terminating = server
        .object(&POD, &key("default", "web-1"))
        .expect("still there");
    assert!(!terminating["metadata"]["deletionTimestamp"].is_null());
    let err = block_on(server.evict(&key("default", "web-2"), &graceful))
        .expect_err("no successor yet: one is unavailable");
    assert!(matches!(err, KubeError::TooManyRequests(_)), "{err:?}");
    replica(&server, "web-3");
    block_on(server.evict(&key("default", "web-2"), &graceful))
        .expect("the successor is Ready: 2 of the 2 expected are healthy");
}

#[test]
fn a_pod_under_two_budgets_cannot_be_evicted() {
    let (_, server) = server();
    running_pod(
        &server,
        "default",
        "p",
        json!({"app": "web", "tier": "front"}),
        true,
    );
    create(
        &server,
        &PDB,
        pdb(
            "default",
            "by-app",
            json!({"matchLabels": {"app": "web"}}),
            json!({"maxUnavailable": 5}),
        ),
    );
    create(
        &server,
        &PDB,
        pdb(
            "default",
            "by-tier",
            json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}),
            json!({"maxUnavailable": 5}),
        ),
    );
    let err =
        block_on(server.evict(&key("default", "p"), &DeleteOptions::default())).expect_err("two");
    assert!(
        matches!(err, KubeError::Unavailable(ref m) if m.contains("more than one PodDisruptionBudget")),
        "{err:?}"
    );
}

#[test]
fn budgets_in_other_namespaces_and_pending_pods_do_not_block_evictions() {
    let (_, server) = server();
    create(&server, &NAMESPACE, json!({"metadata": {"name": "other"}}));
    create(
        &server,
        &PDB,
        pdb("other", "all", json!({}), json!({"minAvailable": 100})),
    );
    running_pod(&server, "default", "p", json!({}), true);
    block_on(server.evict(&key("default", "p"), &DeleteOptions::default()))
        .expect("other namespace");
    create(
        &server,
        &PDB,
        pdb("default", "all", json!({}), json!({"minAvailable": 100})),
    );
    create(&server, &POD, pod("default", "pending", json!({})));
    block_on(server.evict(&key("default", "pending"), &DeleteOptions::default())).expect("pending");
}

#[test]
fn sync_pdb_status_writes_what_the_disruption_controller_would() {
    let (_, server) = server();
    for n in ["a", "b", "c"] {
        running_pod(&server, "default", n, json!({"app": "web"}), true);
    }
    create(
        &server,
        &PDB,
        pdb(
            "default",
            "web",
            json!({"matchLabels": {"app": "web"}}),
            json!({"minAvailable": 2}),
        ),
    );
    assert_eq!(server.sync_pdb_status(), 1);
    assert_eq!(server.sync_pdb_status(), 0, "nothing changed");
    let status = &server.object(&PDB, &key("default", "web")).expect("pdb")["status"];
    assert_eq!(
        status,
        &json!({"observedGeneration": 1, "expectedPods": 3, "currentHealthy": 3, "desiredHealthy": 2, "disruptionsAllowed": 1})
    );
}

// ---------------------------------------------------------------------------------------------
// Events, call log, reset

#[test]
fn recorded_events_are_kept_in_a_bounded_list() {
    let (_, server) = api_server(ApiServerConfig {
        events_max: 2,
        ..ApiServerConfig::default()
    });
    for reason in ["Nominated", "Launched", "Registered"] {
        let event = EventRecord {
            involved: CLAIM,
            key: ObjectKey::cluster("a"),
            uid: None,
            type_: karpenter_core::seams::kube::EventType::Normal,
            reason: reason.to_string(),
            message: String::new(),
        };
        block_on(server.record_event(&event)).expect("record");
    }
    let events = server.events();
    let reasons: Vec<&str> = events.iter().map(|e| e.event.reason.as_str()).collect();
    assert_eq!(reasons, ["Launched", "Registered"]);
    assert_eq!(events[1].seq, 3);
}

#[test]
fn the_call_log_records_operation_kind_target_and_outcome() {
    let (_, server) = server();
    create(&server, &POD, pod("default", "p", json!({})));
    block_on(server.get(&POD, &key("default", "missing"))).expect("get");
    let _ = block_on(server.patch(&CLAIM, &ObjectKey::cluster("x"), &Patch::Merge(json!({}))));
    let lines: Vec<String> = server
        .calls()
        .iter()
        .map(|c| {
            format!(
                "{} {} {} {}",
                c.operation,
                c.kind,
                c.target,
                c.outcome.split(' ').next().unwrap()
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            "create pods default/p ok",
            "get pods default/missing ok",
            "patch nodeclaims x err"
        ]
    );
    assert_eq!(server.calls()[1].outcome, "ok none");
}

#[test]
fn reset_returns_to_the_initial_cluster_and_ends_watches() {
    let (_, server) = server();
    let first = create(
        &server,
        &CLAIM,
        json!({"metadata": {"generateName": "a-"}, "spec": {}}),
    );
    let mut stream = watch(&server, &CLAIM, ListOptions::default(), "");
    server.reset();
    assert!(drain(&mut stream).1, "watch ended");
    assert!(server.objects(&CLAIM).is_empty());
    assert!(server.calls().is_empty());
    let again = create(
        &server,
        &CLAIM,
        json!({"metadata": {"generateName": "a-"}, "spec": {}}),
    );
    assert_eq!(again, first, "same names, uids and versions after a reset");
}

#[test]
fn the_server_is_usable_as_a_shared_kube_api_trait_object() {
    let (_, server) = server();
    let api: Arc<dyn KubeApi> = server.clone();
    block_on(api.create(&CLAIM, claim("a"))).expect("create");
    assert_eq!(server.objects(&CLAIM).len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Faults

#[test]
fn scripted_faults_apply_to_the_next_calls_in_order_and_change_nothing() {
    let (_, server) = server();
    create(&server, &CLAIM, claim("a"));
    let k = ObjectKey::cluster("a");
    server.script_faults(
        ApiOperation::Patch,
        [ApiFault::Unavailable, ApiFault::Conflict, ApiFault::Pass],
    );
    let patch = Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}}));
    let before = server.object(&CLAIM, &k);
    let first = block_on(server.patch(&CLAIM, &k, &patch)).expect_err("503");
    assert!(matches!(first, KubeError::Unavailable(_)), "{first:?}");
    let second = block_on(server.patch(&CLAIM, &k, &patch)).expect_err("409");
    assert!(matches!(second, KubeError::Conflict(_)), "{second:?}");
    assert_eq!(
        server.object(&CLAIM, &k),
        before,
        "failed calls change nothing"
    );
    block_on(server.patch(&CLAIM, &k, &patch)).expect("pass");
    block_on(server.patch(&CLAIM, &k, &patch)).expect("script used up");
}

#[test]
fn a_lost_response_applies_the_write_and_reports_unavailable() {
    let (_, server) = server();
    server.script_faults(ApiOperation::Create, [ApiFault::LostResponse]);
    let err = block_on(server.create(&CLAIM, claim("a"))).expect_err("lost");
    assert!(matches!(err, KubeError::Unavailable(_)), "{err:?}");
    assert!(
        server.object(&CLAIM, &ObjectKey::cluster("a")).is_some(),
        "created anyway"
    );
    let err = block_on(server.create(&CLAIM, claim("a"))).expect_err("retry");
    assert!(matches!(err, KubeError::AlreadyExists(_)), "{err:?}");
}

#[test]
fn a_disconnected_watch_ends_after_the_scripted_number_of_events() {
    let (_, server) = server();
    server.script_faults(
        ApiOperation::Watch,
        [ApiFault::Disconnect { after_events: 2 }],
    );
    let mut stream = watch(&server, &CLAIM, ListOptions::default(), "");
    for n in ["a", "b", "c"] {
        create(&server, &CLAIM, claim(n));
    }
    let (items, ended) = drain(&mut stream);
    assert_eq!(describe(&items), ["Added a", "Added b"]);
    assert!(ended);
    server.script_faults(
        ApiOperation::Get,
        [ApiFault::Disconnect { after_events: 0 }],
    );
    let err = block_on(server.get(&CLAIM, &ObjectKey::cluster("a"))).expect_err("reset");
    assert!(matches!(err, KubeError::Unavailable(_)), "{err:?}");
}

/// A run with every kind of random fault; returns the call log as text.
fn faulty_run(seed: u64) -> String {
    let (_, server) = api_server(ApiServerConfig {
        seed,
        ..ApiServerConfig::default()
    });
    server.set_fault_rates_all(ApiFaultRates {
        unavailable_rate: 0.2,
        conflict_rate: 0.2,
        lost_response_rate: 0.1,
        disconnect_rate: 0.5,
        disconnect_after_events_max: 3,
        ..ApiFaultRates::default()
    });
    for i in 0..30 {
        let _ = block_on(server.create(
            &CLAIM,
            json!({"metadata": {"generateName": "c-"}, "spec": {"i": i}}),
        ));
        let _ = block_on(server.list(&CLAIM, &ListOptions::default()));
        if let Some(first) = server.objects(&CLAIM).first() {
            let k = ObjectKey::cluster(name(first));
            let _ = block_on(server.patch(&CLAIM, &k, &Patch::Merge(json!({"spec": {"i": i}}))));
            if i % 5 == 0 {
                let _ = block_on(server.delete(&CLAIM, &k, &DeleteOptions::default()));
            }
        }
        let _ = block_on(server.watch(&CLAIM, &ListOptions::default(), ""));
    }
    server.render_calls()
}

#[test]
fn faults_drawn_from_a_seed_reproduce_exactly() {
    let first = faulty_run(42);
    assert_eq!(first, faulty_run(42));
    assert_ne!(first, faulty_run(43));
    assert!(first.contains("err unavailable"), "{first}");
    assert!(first.contains("err conflict"), "{first}");
}

#[test]
fn conflict_rates_apply_only_to_writes_with_preconditions() {
    let (_, server) = server();
    server.set_fault_rates_all(ApiFaultRates::conflicts(1.0));
    create(&server, &CLAIM, claim("a"));
    block_on(server.get(&CLAIM, &ObjectKey::cluster("a"))).expect("reads do not conflict");
    let err = block_on(server.patch(&CLAIM, &ObjectKey::cluster("a"), &Patch::Merge(json!({}))))
        .expect_err("conflict");
    assert!(matches!(err, KubeError::Conflict(_)), "{err:?}");
    server.clear_faults();
    block_on(server.patch(&CLAIM, &ObjectKey::cluster("a"), &Patch::Merge(json!({}))))
        .expect("cleared");
}

/// Injected latency sleeps on `tokio::time`: on tokio's paused clock it auto-advances, and the
/// call completes after exactly the scripted delay. (Under madsim the simulation drives time.)
#[cfg(not(madsim))]
#[tokio::test(start_paused = true)]
async fn injected_latency_sleeps_on_tokio_time() {
    let (_, server) = server();
    server.script_faults(ApiOperation::Get, [ApiFault::LatencyMs(1_500)]);
    let started = tokio::time::Instant::now();
    server
        .get(&CLAIM, &ObjectKey::cluster("a"))
        .await
        .expect("get");
    assert_eq!(started.elapsed(), Duration::from_millis(1_500));
    let started = tokio::time::Instant::now();
    server
        .get(&CLAIM, &ObjectKey::cluster("a"))
        .await
        .expect("get");
    assert_eq!(started.elapsed(), Duration::ZERO);
}

#[test]
fn eks_vpc_admission_gives_a_windows_pod_one_private_address_and_leaves_others_alone() {
    let (_, eks) = api_server(ApiServerConfig {
        vpc_admission_webhook: true,
        ..ApiServerConfig::default()
    });
    let mut windows = pod("default", "iis", json!({}));
    windows["spec"]["nodeSelector"] = json!({"kubernetes.io/os": "windows"});
    windows["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "100m"}});
    let created = create(&eks, &POD, windows);
    let resources = &created["spec"]["containers"][0]["resources"];
    assert_eq!(
        resources["requests"]["vpc.amazonaws.com/PrivateIPv4Address"],
        "1"
    );
    assert_eq!(resources["requests"]["cpu"], "100m", "other requests kept");
    assert_eq!(
        resources["limits"]["vpc.amazonaws.com/PrivateIPv4Address"],
        "1"
    );
    let linux = create(&eks, &POD, pod("default", "web", json!({})));
    assert!(
        linux["spec"]["containers"][0]["resources"].is_null(),
        "a pod not selecting Windows is untouched: {linux}"
    );
    let (_, bare) = server();
    let mut windows = pod("default", "iis", json!({}));
    windows["spec"]["nodeSelector"] = json!({"kubernetes.io/os": "windows"});
    let created = create(&bare, &POD, windows);
    assert!(
        created["spec"]["containers"][0]["resources"].is_null(),
        "no webhook on a bare API server"
    );
}
