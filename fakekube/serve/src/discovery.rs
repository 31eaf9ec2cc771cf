//! Discovery and OpenAPI: `/version`, the legacy documents (`/api`, `/apis`, `/api/v1`,
//! `/apis/G/V`), aggregated discovery (`apidiscovery.k8s.io` v2 and v2beta1, whichever the
//! client asks for first: kubectl 1.27-1.29 only know v2beta1) and a minimal `/openapi/v3` whose
//! PATCH operations advertise `fieldValidation`, so kubectl's default client-side validation
//! passes (it then sends `fieldValidation=Strict`; see the crate docs for what is checked).

use serde_json::{Value, json};

use crate::kinds::{self, Served};

/// The Kubernetes version reported (the kubectl dispatcher picks `kubectl.1.NN` by its minor).
pub const MINOR: &str = "33";

pub fn version() -> Value {
    json!({
        "major": "1", "minor": MINOR, "gitVersion": format!("v1.{MINOR}.0-fakekube"),
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24", "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// Which aggregated-discovery version the `Accept` header asks for first, if any.
pub fn aggregated_version(accept: &str) -> Option<&'static str> {
    accept
        .split(',')
        .filter(|media| media.contains("as=APIGroupDiscoveryList"))
        .find_map(|media| {
            if media.contains("v=v2beta1") {
                Some("v2beta1")
            } else if media.contains("v=v2") {
                Some("v2")
            } else {
                None
            }
        })
}

/// `/api` (`core`) or `/apis` as an `APIGroupDiscoveryList`.
pub fn aggregated(core: bool, version: &str) -> Value {
    let items: Vec<Value> = kinds::group_versions()
        .into_iter()
        .filter(|(group, _)| group.is_empty() == core)
        .map(|(group, v)| {
            let resources: Vec<Value> = kinds::all()
                .iter()
                .filter(|s| s.kind.group == group && s.kind.version == v)
                .map(aggregated_resource)
                .collect();
            json!({
                "metadata": {"name": group, "creationTimestamp": null},
                "versions": [{"version": v, "freshness": "Current", "resources": resources}]
            })
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}

fn aggregated_resource(served: &Served) -> Value {
    let kind = &served.kind;
    let gvk = |k: &str| json!({"group": kind.group, "version": kind.version, "kind": k});
    let mut subresources = Vec::new();
    if served.status {
        subresources.push(
            json!({"subresource": "status", "responseKind": gvk(kind.kind),
            "verbs": ["get", "patch", "update"]}),
        );
    }
    if served.scale {
        subresources.push(json!({"subresource": "scale",
            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": ["get", "patch", "update"]}));
    }
    if served.eviction {
        subresources.push(json!({"subresource": "eviction",
            "responseKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "verbs": ["create"]}));
    }
    if served.binding {
        subresources.push(json!({"subresource": "binding",
            "responseKind": {"group": "", "version": "v1", "kind": "Binding"},
            "verbs": ["create"]}));
    }
    json!({
        "resource": kind.plural,
        "singularResource": served.singular,
        "scope": if kind.namespaced { "Namespaced" } else { "Cluster" },
        "responseKind": gvk(kind.kind),
        "verbs": kinds::verbs(),
        "shortNames": served.short_names,
        "subresources": subresources,
    })
}

/// `/api` as plain `APIVersions`.
pub fn api_versions() -> Value {
    json!({
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]
    })
}

/// `/apis` as plain `APIGroupList`.
pub fn api_group_list() -> Value {
    let groups: Vec<Value> = kinds::group_versions()
        .into_iter()
        .filter(|(group, _)| !group.is_empty())
        .map(|(group, version)| {
            let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
            json!({"name": group, "versions": [gv.clone()], "preferredVersion": gv})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/G` as an `APIGroup`, if served.
pub fn api_group(group: &str) -> Option<Value> {
    let (_, version) = kinds::group_versions()
        .into_iter()
        .find(|(g, _)| *g == group && !g.is_empty())?;
    let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
    Some(
        json!({"kind": "APIGroup", "apiVersion": "v1", "name": group,
        "versions": [gv.clone()], "preferredVersion": gv}),
    )
}

/// `/api/v1` or `/apis/G/V` as an `APIResourceList`, if served.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for served in kinds::all()
        .iter()
        .filter(|s| s.kind.group == group && s.kind.version == version)
    {
        let kind = &served.kind;
        resources.push(json!({
            "name": kind.plural, "singularName": served.singular, "namespaced": kind.namespaced,
            "kind": kind.kind, "verbs": kinds::verbs(), "shortNames": served.short_names,
        }));
        let mut sub = |name: &str, kind_name: &str, verbs: &[&str]| {
            resources.push(
                json!({"name": format!("{}/{name}", kind.plural), "singularName": "",
                "namespaced": kind.namespaced, "kind": kind_name, "verbs": verbs}),
            );
        };
        if served.status {
            sub("status", kind.kind, &["get", "patch", "update"]);
        }
        if served.scale {
            sub("scale", "Scale", &["get", "patch", "update"]);
        }
        if served.eviction {
            sub("eviction", "Eviction", &["create"]);
        }
        if served.binding {
            sub("binding", "Binding", &["create"]);
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1",
        "groupVersion": group_version, "resources": resources}))
}

/// The `/openapi/v3` root: one document per served group-version.
pub fn openapi_root() -> Value {
    let mut paths = serde_json::Map::new();
    for (group, version) in kinds::group_versions() {
        let path = openapi_path(group, version);
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={group}{version}")}),
        );
    }
    json!({"paths": paths})
}

fn openapi_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/G/V`: the PATCH operation of every kind, with the
/// query parameters kubectl looks for (no schemas: none are validated against).
pub fn openapi_document(path: &str) -> Option<Value> {
    let (group, version) = kinds::group_versions()
        .into_iter()
        .find(|(g, v)| openapi_path(g, v) == path)?;
    let mut paths = serde_json::Map::new();
    let param = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string"}});
    for served in kinds::all()
        .iter()
        .filter(|s| s.kind.group == group && s.kind.version == version)
    {
        let kind = &served.kind;
        let path = if kind.namespaced {
            format!(
                "/{}/namespaces/{{namespace}}/{}/{{name}}",
                openapi_path(group, version),
                kind.plural
            )
        } else {
            format!("/{}/{}/{{name}}", openapi_path(group, version), kind.plural)
        };
        paths.insert(path, json!({"patch": {
            "operationId": format!("patch{}", kind.kind),
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": kind.kind},
            "parameters": [param("dryRun"), param("fieldManager"), param("fieldValidation"), param("force")],
        }}));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{MINOR}.0")},
        "components": {"schemas": {}},
        "paths": paths,
    }))
}
