//! The REST verbs: routing a [`Call`] to discovery or to a served kind, and each verb over
//! fakekube's [`KubeApi`] seam (see the crate docs for what is served).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use fakekube::ApiServer;
use futures::StreamExt;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Bytes, Frame};
use karpenter_core::seams::KubeApi;
use karpenter_core::seams::kube::{
    DeleteOptions, DeleteOutcome, ListOptions, ObjectKey, Patch, WatchEvent,
};
use serde_json::{Value, json};

use crate::Call;
use crate::discovery;
use crate::kinds::{self, Served};
use crate::patch::{merge_diff, strategic_apply, writable};
use crate::status::{self, ApiError};
use crate::table;

/// Longest watch the server holds open when the client sets no `timeoutSeconds` (kubectl's
/// `get -w` sets none and expects the stream to stay open).
pub const WATCH_SECONDS_MAX: u64 = 3600;
/// Optimistic-concurrency retries of a patch computed from the live object (another writer
/// changed it between the read and the write).
const PATCH_ATTEMPTS_MAX: usize = 5;

const JSON: &str = "application/json";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// An answer.
pub enum Reply {
    Json {
        status: u16,
        content_type: String,
        body: Value,
    },
    Text {
        status: u16,
        body: String,
    },
    /// A watch: newline-delimited JSON events, held open.
    Stream {
        content_type: String,
        body: UnsyncBoxBody<Bytes, Infallible>,
    },
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Self {
        Reply::Json {
            status,
            content_type: JSON.into(),
            body,
        }
    }

    pub fn error(error: &ApiError) -> Self {
        Reply::json(error.code, error.to_status())
    }
}

/// Where a resource request points.
struct Target {
    served: &'static Served,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

impl Target {
    fn key(&self) -> Result<ObjectKey, ApiError> {
        let name = self
            .name
            .clone()
            .ok_or_else(|| ApiError::bad_request("a name is required"))?;
        Ok(match (&self.namespace, self.served.kind.namespaced) {
            (Some(ns), true) => ObjectKey::namespaced(ns.clone(), name),
            (None, true) => {
                return Err(ApiError::bad_request(format!(
                    "{} are namespaced: the path needs a namespace",
                    self.served.kind.plural
                )));
            }
            (_, false) => ObjectKey::cluster(name),
        })
    }

    fn not_found(&self) -> ApiError {
        ApiError::not_found(self.served.kind.plural, self.name.as_deref().unwrap_or(""))
    }
}

/// Answers one call.
pub async fn handle(api: &ApiServer, call: &Call) -> Reply {
    match route(api, call).await {
        Ok(reply) => reply,
        Err(error) => Reply::error(&error),
    }
}

async fn route(api: &ApiServer, call: &Call) -> Result<Reply, ApiError> {
    let path = call.path.trim_end_matches('/');
    let aggregated = discovery::aggregated_version(&call.accept);
    let discovery_reply = |core: bool| match aggregated {
        Some(version) => Reply::Json {
            status: 200,
            content_type: format!(
                "application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
            ),
            body: discovery::aggregated(core, version),
        },
        None if core => Reply::json(200, discovery::api_versions()),
        None => Reply::json(200, discovery::api_group_list()),
    };
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let found = |value: Option<Value>| {
        value
            .map(|v| Reply::json(200, v))
            .ok_or_else(|| ApiError::not_found("path", path))
    };
    match segments.as_slice() {
        ["version"] => Ok(Reply::json(200, discovery::version())),
        ["healthz" | "readyz" | "livez"] => Ok(Reply::Text {
            status: 200,
            body: "ok".into(),
        }),
        ["api"] => Ok(discovery_reply(true)),
        ["apis"] => Ok(discovery_reply(false)),
        ["api", version] => found(discovery::resource_list("", version)),
        ["apis", group] => found(discovery::api_group(group)),
        ["apis", group, version] => found(discovery::resource_list(group, version)),
        ["openapi", "v3"] => Ok(Reply::json(200, discovery::openapi_root())),
        ["openapi", "v3", rest @ ..] => found(discovery::openapi_document(&rest.join("/"))),
        ["api", version, rest @ ..] => resource(api, call, "", version, rest).await,
        ["apis", group, version, rest @ ..] => resource(api, call, group, version, rest).await,
        _ => Err(ApiError::not_found("path", path)),
    }
}

async fn resource(
    api: &ApiServer,
    call: &Call,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Reply, ApiError> {
    let (namespace, rest) = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some(ns.to_string()), tail),
        _ => (None, rest),
    };
    let (plural, name, sub) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(name.to_string()), None),
        [plural, name, sub] => (*plural, Some(name.to_string()), Some(sub.to_string())),
        _ => return Err(ApiError::not_found("path", &call.path)),
    };
    if group.is_empty() && plural == "events" {
        return events(api, call, namespace.as_deref());
    }
    let served = kinds::find(group, version, plural)
        .ok_or_else(|| ApiError::not_found("resource", &format!("{group}/{version}/{plural}")))?;
    let target = Target {
        served,
        namespace,
        name,
        sub,
    };
    match (call.method.as_str(), &target.name, target.sub.as_deref()) {
        ("GET", None, _) if is_true(call.query.get("watch")) => watch(api, call, &target).await,
        ("GET", None, _) => list(api, call, &target).await,
        ("POST", None, _) => create(api, call, &target).await,
        ("GET", Some(_), None | Some("status")) => get(api, call, &target).await,
        ("PUT", Some(_), None) => update(api, call, &target, false).await,
        ("PUT", Some(_), Some("status")) if served.status => update(api, call, &target, true).await,
        ("PATCH", Some(_), None) => patch(api, call, &target, false).await,
        ("PATCH", Some(_), Some("status")) if served.status => {
            patch(api, call, &target, true).await
        }
        ("GET" | "PUT" | "PATCH", Some(_), Some("scale")) if served.scale => {
            scale(api, call, &target).await
        }
        ("POST", Some(_), Some("eviction")) if served.eviction => evict(api, call, &target).await,
        ("POST", Some(_), Some("binding")) if served.binding => bind(api, call, &target).await,
        ("DELETE", Some(_), None) => delete(api, call, &target).await,
        (method, _, sub) => Err(ApiError::method_not_allowed(format!(
            "{method} is not served on {}{}",
            served.kind.plural,
            sub.map(|s| format!("/{s}")).unwrap_or_default()
        ))),
    }
}

fn is_true(value: Option<&String>) -> bool {
    matches!(value.map(String::as_str), Some("true" | "1"))
}

fn wants_table(call: &Call) -> bool {
    call.accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

fn options(call: &Call, target: &Target) -> ListOptions {
    ListOptions {
        namespace: target.namespace.clone(),
        label_selector: call.query.get("labelSelector").cloned(),
        field_selector: call.query.get("fieldSelector").cloned(),
    }
}

fn table_reply(api: &ApiServer, served: &Served, objects: &[Value], rv: &str) -> Reply {
    Reply::Json {
        status: 200,
        content_type: TABLE.into(),
        body: table::table(served, objects, rv, api.now()),
    }
}

async fn list(api: &ApiServer, call: &Call, target: &Target) -> Result<Reply, ApiError> {
    let kind = &target.served.kind;
    let listed = api.list(kind, &options(call, target)).await?;
    let items: Vec<Value> = listed.items.into_iter().map(Arc::unwrap_or_clone).collect();
    if wants_table(call) {
        return Ok(table_reply(
            api,
            target.served,
            &items,
            &listed.resource_version,
        ));
    }
    Ok(Reply::json(
        200,
        json!({
            "kind": format!("{}List", kind.kind),
            "apiVersion": kind.api_version(),
            "metadata": {"resourceVersion": listed.resource_version},
            "items": items,
        }),
    ))
}

async fn get(api: &ApiServer, call: &Call, target: &Target) -> Result<Reply, ApiError> {
    let object = api
        .get(&target.served.kind, &target.key()?)
        .await?
        .ok_or_else(|| target.not_found())?;
    if wants_table(call) {
        let rv = object["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        return Ok(table_reply(api, target.served, &[object], &rv));
    }
    Ok(Reply::json(200, object))
}

async fn watch(api: &ApiServer, call: &Call, target: &Target) -> Result<Reply, ApiError> {
    let kind = target.served.kind;
    let from = call
        .query
        .get("resourceVersion")
        .cloned()
        .unwrap_or_default();
    let stream = api.watch(&kind, &options(call, target), &from).await?;
    let bookmarks = is_true(call.query.get("allowWatchBookmarks"));
    let as_table = wants_table(call);
    let served = target.served;
    let now = api.now();
    let seconds = call
        .query
        .get("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(WATCH_SECONDS_MAX)
        .min(WATCH_SECONDS_MAX);
    let object = move |object: Arc<Value>| {
        let object = Arc::unwrap_or_clone(object);
        if as_table {
            let rv = object["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            table::table(served, &[object], &rv, now)
        } else {
            object
        }
    };
    let lines = stream
        .take_until(tokio::time::sleep(Duration::from_secs(seconds)))
        .scan(false, move |ended, event| {
            if *ended {
                return futures::future::ready(None);
            }
            let line = match event {
                Ok(WatchEvent::Added(o)) => Some(json!({"type": "ADDED", "object": object(o)})),
                Ok(WatchEvent::Modified(o)) => {
                    Some(json!({"type": "MODIFIED", "object": object(o)}))
                }
                Ok(WatchEvent::Deleted(o)) => Some(json!({"type": "DELETED", "object": object(o)})),
                Ok(WatchEvent::Bookmark { resource_version }) => bookmarks.then(|| {
                    json!({"type": "BOOKMARK", "object": {
                        "kind": kind.kind, "apiVersion": kind.api_version(),
                        "metadata": {"resourceVersion": resource_version}}})
                }),
                Err(error) => {
                    *ended = true;
                    Some(json!({"type": "ERROR", "object": ApiError::from(error).to_status()}))
                }
            };
            futures::future::ready(Some(line))
        })
        .filter_map(futures::future::ready)
        .map(|line| Ok::<_, Infallible>(Frame::data(Bytes::from(format!("{line}\n")))));
    Ok(Reply::Stream {
        content_type: if as_table { TABLE.into() } else { JSON.into() },
        body: BodyExt::boxed_unsync(StreamBody::new(lines)),
    })
}

/// The request body as JSON (YAML for server-side apply; JSON is YAML too).
fn body(call: &Call) -> Result<Value, ApiError> {
    if call.content_type.contains("yaml") {
        serde_yaml::from_slice(&call.body)
            .map_err(|e| ApiError::bad_request(format!("body is not YAML: {e}")))
    } else {
        serde_json::from_slice(&call.body)
            .map_err(|e| ApiError::bad_request(format!("body is not JSON: {e}")))
    }
}

/// Checks the body's apiVersion, kind and namespace against the path, filling them in.
fn fit(target: &Target, mut object: Value) -> Result<Value, ApiError> {
    let kind = &target.served.kind;
    if !object.is_object() {
        return Err(ApiError::bad_request("the body must be an object"));
    }
    for (field, wanted) in [
        ("apiVersion", kind.api_version()),
        ("kind", kind.kind.into()),
    ] {
        match object[field].as_str() {
            None => object[field] = json!(wanted),
            Some(found) if found == wanted => {}
            Some(found) => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({found}) does not match the expected API version ({wanted})"
                )));
            }
        }
    }
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    if kind.namespaced {
        let ns = target.namespace.clone().unwrap_or_else(|| "default".into());
        match object["metadata"]["namespace"].as_str() {
            Some(found) if found != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => object["metadata"]["namespace"] = json!(ns),
        }
    }
    if let Some(name) = &target.name {
        match object["metadata"]["name"].as_str() {
            Some(found) if found != name => {
                return Err(ApiError::bad_request(
                    "the name of the object does not match the name on the URL",
                ));
            }
            _ => object["metadata"]["name"] = json!(name),
        }
    }
    Ok(object)
}

async fn create(api: &ApiServer, call: &Call, target: &Target) -> Result<Reply, ApiError> {
    let object = fit(target, body(call)?)?;
    if call.query.get("dryRun").is_some_and(|d| d == "All") {
        return Ok(Reply::json(201, object));
    }
    let created = api.create(&target.served.kind, object).await?;
    Ok(Reply::json(201, created))
}

/// Writes `new` over `live` as a merge patch guarded by `resource_version`.
async fn write(
    api: &ApiServer,
    target: &Target,
    live: &Value,
    new: &Value,
    resource_version: &Value,
    status_only: bool,
) -> Result<Value, ApiError> {
    let kind = &target.served.kind;
    let key = target.key()?;
    let Some(mut diff) = merge_diff(&writable(live, status_only), &writable(new, status_only))
    else {
        return Ok(live.clone());
    };
    if !resource_version.is_null() {
        diff["metadata"]["resourceVersion"] = resource_version.clone();
    }
    let patch = Patch::Merge(diff);
    let written = if status_only {
        api.patch_status(kind, &key, &patch).await?
    } else {
        api.patch(kind, &key, &patch).await?
    };
    let written = Arc::unwrap_or_clone(written);
    Ok(written)
}

async fn update(
    api: &ApiServer,
    call: &Call,
    target: &Target,
    status_only: bool,
) -> Result<Reply, ApiError> {
    let new = fit(target, body(call)?)?;
    let live = api
        .get(&target.served.kind, &target.key()?)
        .await?
        .ok_or_else(|| target.not_found())?;
    let rv = new["metadata"]["resourceVersion"].clone();
    let written = write(api, target, &live, &new, &rv, status_only).await?;
    Ok(Reply::json(200, written))
}

async fn patch(
    api: &ApiServer,
    call: &Call,
    target: &Target,
    status_only: bool,
) -> Result<Reply, ApiError> {
    let kind = &target.served.kind;
    let key = target.key()?;
    let content_type = call
        .content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim();
    if content_type == "application/json-patch+json" {
        let patch = Patch::Json(body(call)?);
        let written = if status_only {
            api.patch_status(kind, &key, &patch).await?
        } else {
            api.patch(kind, &key, &patch).await?
        };
        let written = Arc::unwrap_or_clone(written);
        return Ok(Reply::json(200, written));
    }
    let crd = kind.group.starts_with("karpenter.");
    match content_type {
        "application/merge-patch+json" | "application/apply-patch+yaml" => {}
        "application/strategic-merge-patch+json" if !crd => {}
        other => return Err(ApiError::unsupported_media(other)),
    }
    let patch_body = body(call)?;
    for attempt in 1..=PATCH_ATTEMPTS_MAX {
        let Some(live) = api.get(kind, &key).await? else {
            if content_type == "application/apply-patch+yaml" && !status_only {
                let created = api.create(kind, fit(target, patch_body)?).await?;
                return Ok(Reply::json(201, created));
            }
            return Err(target.not_found());
        };
        let new = if content_type == "application/strategic-merge-patch+json" {
            strategic_apply(&live, &patch_body)
        } else {
            let mut new = live.clone();
            json_patch::merge(&mut new, &strip_identity(&patch_body));
            new
        };
        // The client's own precondition, if it sent one; else the version just read.
        let (rv, own) = match &patch_body["metadata"]["resourceVersion"] {
            Value::Null => (live["metadata"]["resourceVersion"].clone(), false),
            rv => (rv.clone(), true),
        };
        match write(api, target, &live, &new, &rv, status_only).await {
            Err(e) if e.code == 409 && !own && attempt < PATCH_ATTEMPTS_MAX => continue,
            result => return Ok(Reply::json(200, result?)),
        }
    }
    Err(ApiError::new(409, "Conflict", "the object kept changing"))
}

/// A patch body without apiVersion, kind, name and namespace (checked against the path by the
/// create of an apply; never changed by a patch).
fn strip_identity(patch: &Value) -> Value {
    let mut out = patch.clone();
    if let Some(map) = out.as_object_mut() {
        map.remove("apiVersion");
        map.remove("kind");
        if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("name");
            metadata.remove("namespace");
            metadata.remove("managedFields");
        }
    }
    out
}

async fn scale(api: &ApiServer, call: &Call, target: &Target) -> Result<Reply, ApiError> {
    let kind = &target.served.kind;
    let key = target.key()?;
    let mut object = api
        .get(kind, &key)
        .await?
        .ok_or_else(|| target.not_found())?;
    if call.method != "GET" {
        let wanted = body(call)?;
        let replicas = wanted["spec"]["replicas"]
            .as_u64()
            .ok_or_else(|| ApiError::new(422, "Invalid", "spec.replicas must be a count"))?;
        let patch = Patch::Merge(json!({"spec": {"replicas": replicas}}));
        object = Arc::unwrap_or_clone(api.patch(kind, &key, &patch).await?);
    }
    let metadata = &object["metadata"];
    let selector = object["spec"]["selector"]["matchLabels"]
        .as_object()
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    Ok(Reply::json(
        200,
        json!({
            "kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": metadata["name"], "namespace": metadata["namespace"],
                "uid": metadata["uid"], "resourceVersion": metadata["resourceVersion"],
                "creationTimestamp": metadata["creationTimestamp"]},
            "spec": {"replicas": object["spec"]["replicas"].as_u64().unwrap_or(1)},
            "status": {"replicas": object["status"]["replicas"].as_u64().unwrap_or(0),
                "selector": selector},
        }),
    ))
}

fn delete_options(call: &Call) -> Result<DeleteOptions, ApiError> {
    let body = if call.body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&call.body)
            .map_err(|e| ApiError::bad_request(format!("DeleteOptions are not JSON: {e}")))?
    };
    match body["propagationPolicy"].as_str() {
        None | Some("Orphan" | "Background" | "Foreground") => {}
        Some(other) => {
            return Err(ApiError::new(
                422,
                "Invalid",
                format!("propagationPolicy: Unsupported value: {other:?}"),
            ));
        }
    }
    let grace = body["gracePeriodSeconds"].as_i64().or_else(|| {
        call.query
            .get("gracePeriodSeconds")
            .and_then(|s| s.parse().ok())
    });
    Ok(DeleteOptions {
        grace_period_seconds: grace,
        precondition_uid: body["preconditions"]["uid"].as_str().map(String::from),
    })
}

async fn delete(api: &ApiServer, call: &Call, target: &Target) -> Result<Reply, ApiError> {
    let kind = &target.served.kind;
    let key = target.key()?;
    let options = delete_options(call)?;
    let before = api.get(kind, &key).await?;
    match api.delete(kind, &key, &options).await? {
        DeleteOutcome::Deleted => Ok(Reply::json(200, before.unwrap_or(Value::Null))),
        DeleteOutcome::Marked(object) => Ok(Reply::json(200, object)),
        DeleteOutcome::NotFound => Err(target.not_found()),
    }
}

async fn evict(api: &ApiServer, call: &Call, target: &Target) -> Result<Reply, ApiError> {
    let key = target.key()?;
    let eviction: Value = if call.body.is_empty() {
        json!({})
    } else {
        body(call)?
    };
    let options = &eviction["deleteOptions"];
    let options = DeleteOptions {
        grace_period_seconds: options["gracePeriodSeconds"].as_i64(),
        precondition_uid: options["preconditions"]["uid"].as_str().map(String::from),
    };
    if api.get(&target.served.kind, &key).await?.is_none() {
        return Err(target.not_found());
    }
    api.evict(&key, &options).await?;
    Ok(Reply::json(201, status::success(201)))
}

/// `pods/{name}/binding`: the Binding names the pod of the path (Kubernetes answers 400 when the
/// names differ); fakekube applies it (see `fakekube::BINDING`).
async fn bind(api: &ApiServer, call: &Call, target: &Target) -> Result<Reply, ApiError> {
    let key = target.key()?;
    let mut binding = body(call)?;
    if !binding.is_object() {
        return Err(ApiError::bad_request("a Binding must be a JSON object"));
    }
    match binding["metadata"]["name"].as_str() {
        None | Some("") => binding["metadata"]["name"] = json!(key.name),
        Some(name) if name == key.name => {}
        Some(_) => {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Binding object",
            ));
        }
    }
    binding["metadata"]["namespace"] = json!(key.namespace);
    api.create(&fakekube::BINDING, binding).await?;
    Ok(Reply::json(201, status::success(201)))
}

/// `v1` Events, from fakekube's recorded events (it keeps them outside the object store).
fn events(api: &ApiServer, call: &Call, namespace: Option<&str>) -> Result<Reply, ApiError> {
    if call.method != "GET" || is_true(call.query.get("watch")) {
        return Err(ApiError::method_not_allowed(
            "events can only be listed (they are recorded by the controller)",
        ));
    }
    let fields: Vec<(String, String)> = call
        .query
        .get("fieldSelector")
        .map(|s| {
            s.split(',')
                .filter_map(|term| term.split_once('='))
                .map(|(k, v)| (k.trim().replace('.', "/"), v.trim().to_string()))
                .collect()
        })
        .unwrap_or_default();
    let items: Vec<Value> = api
        .events()
        .into_iter()
        .map(|recorded| {
            let e = &recorded.event;
            let at = recorded.time.to_string();
            let ns = e.key.namespace.clone().unwrap_or_else(|| "default".into());
            json!({
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": format!("{}.{:x}", e.key.name, recorded.seq),
                    "namespace": ns, "resourceVersion": recorded.seq.to_string(),
                    "creationTimestamp": at},
                "involvedObject": {"apiVersion": e.involved.api_version(), "kind": e.involved.kind,
                    "name": e.key.name, "namespace": e.key.namespace.clone().unwrap_or_default(),
                    "uid": e.uid.clone().unwrap_or_default()},
                "reason": e.reason, "message": e.message, "type": e.type_.as_str(), "count": 1,
                "firstTimestamp": at, "lastTimestamp": at,
                "source": {"component": "karpenter"}, "reportingComponent": "karpenter",
            })
        })
        .filter(|event| namespace.is_none_or(|ns| event["metadata"]["namespace"] == ns))
        .filter(|event| {
            fields.iter().all(|(path, wanted)| {
                let found = event
                    .pointer(&format!("/{path}"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                found == wanted
            })
        })
        .collect();
    Ok(Reply::json(
        200,
        json!({"kind": "EventList", "apiVersion": "v1",
            "metadata": {"resourceVersion": api.resource_version().to_string()}, "items": items}),
    ))
}
