//! The Helm chart grants the controller's ServiceAccount exactly `karpenter_kube::rbac::GRANTS`.
//!
//! The check on the real chart needs `helm template` output, so it is ignored in a plain
//! `cargo test` and run by the chart check (`cargo xtask chart`, `scripts/chart_check.py`), which
//! renders the chart and passes the file in `KARPENTER_RENDERED_CHART`. The other tests here run
//! the same comparison on small hand-made renderings, so the comparison itself is always tested.

use std::collections::{BTreeMap, BTreeSet};

use karpenter_kube::rbac::{GRANTS, Scope};
use serde::Deserialize;
use serde_json::Value;

/// One permission: where, API group, resource, verb, and the object it is limited to (if any).
type Permission = (String, String, String, String, Option<String>);

fn scope_name(scope: Scope, release_namespace: &str) -> String {
    match scope {
        Scope::Cluster => "cluster".to_string(),
        Scope::ReleaseNamespace => format!("namespace {release_namespace}"),
    }
}

/// The table, one permission per verb and object name.
fn required(release_namespace: &str) -> BTreeSet<Permission> {
    let mut out = BTreeSet::new();
    for grant in GRANTS {
        let names: Vec<Option<String>> = if grant.resource_names.is_empty() {
            vec![None]
        } else {
            grant
                .resource_names
                .iter()
                .map(|n| Some(n.to_string()))
                .collect()
        };
        for verb in grant.verbs {
            for name in &names {
                out.insert((
                    scope_name(grant.scope, release_namespace),
                    grant.group.to_string(),
                    grant.resource.to_string(),
                    verb.to_string(),
                    name.clone(),
                ));
            }
        }
    }
    out
}

fn documents(manifests: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for document in serde_yaml::Deserializer::from_str(manifests) {
        let value = Value::deserialize(document).map_err(|e| format!("not YAML: {e}"))?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().unwrap_or("<not a string>").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Expands a role's rules into permissions in `scope`.
fn expand(rules: &Value, scope: &str, out: &mut BTreeSet<Permission>) {
    for rule in rules.as_array().into_iter().flatten() {
        let names = strings(&rule["resourceNames"]);
        let names: Vec<Option<String>> = if names.is_empty() {
            vec![None]
        } else {
            names.into_iter().map(Some).collect()
        };
        for url in strings(&rule["nonResourceURLs"]) {
            for verb in strings(&rule["verbs"]) {
                out.insert((
                    scope.into(),
                    "nonResourceURL".into(),
                    url.clone(),
                    verb,
                    None,
                ));
            }
        }
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    for name in &names {
                        out.insert((
                            scope.into(),
                            group.clone(),
                            resource.clone(),
                            verb.clone(),
                            name.clone(),
                        ));
                    }
                }
            }
        }
    }
}

/// What the rendered manifests grant the chart's ServiceAccount, and its namespace.
fn granted(manifests: &str) -> Result<(BTreeSet<Permission>, String), String> {
    let documents = documents(manifests)?;
    let accounts: Vec<&Value> = documents
        .iter()
        .filter(|d| d["kind"] == "ServiceAccount")
        .collect();
    let [account] = accounts.as_slice() else {
        return Err(format!(
            "expected one ServiceAccount, found {}",
            accounts.len()
        ));
    };
    let name = account["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = account["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default();
    // Roles by (kind, namespace or "", name).
    let roles: BTreeMap<(String, String, String), &Value> = documents
        .iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
        .map(|d| {
            let key = (
                d["kind"].as_str().unwrap_or_default().to_string(),
                d["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                d["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
            (key, &d["rules"])
        })
        .collect();
    let mut out = BTreeSet::new();
    for binding in documents
        .iter()
        .filter(|d| d["kind"] == "ClusterRoleBinding" || d["kind"] == "RoleBinding")
    {
        let binds_us = binding["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| {
                s["kind"] == "ServiceAccount" && s["name"] == name && s["namespace"] == namespace
            });
        if !binds_us {
            continue;
        }
        let cluster_wide = binding["kind"] == "ClusterRoleBinding";
        let binding_namespace = binding["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default();
        let role_kind = binding["roleRef"]["kind"].as_str().unwrap_or_default();
        let role_namespace = if role_kind == "Role" {
            binding_namespace
        } else {
            ""
        };
        let role_name = binding["roleRef"]["name"].as_str().unwrap_or_default();
        let key = (
            role_kind.to_string(),
            role_namespace.to_string(),
            role_name.to_string(),
        );
        let Some(rules) = roles.get(&key) else {
            return Err(format!(
                "{} {} refers to {role_kind} {role_name}, which the chart does not render",
                binding["kind"].as_str().unwrap_or_default(),
                binding["metadata"]["name"].as_str().unwrap_or_default()
            ));
        };
        let scope = if cluster_wide {
            "cluster".to_string()
        } else {
            format!("namespace {binding_namespace}")
        };
        expand(rules, &scope, &mut out);
    }
    Ok((out, namespace.to_string()))
}

/// Lines describing every difference between the rendering and the table; empty when equal.
fn differences(manifests: &str) -> Vec<String> {
    let (granted, namespace) = match granted(manifests) {
        Ok(found) => found,
        Err(err) => return vec![err],
    };
    let required = required(&namespace);
    let show = |p: &Permission| {
        let name =
            p.4.as_deref()
                .map(|n| format!(" (only {n})"))
                .unwrap_or_default();
        let group = if p.1.is_empty() { "core" } else { &p.1 };
        format!("{}: {} {group}/{}{name}", p.0, p.3, p.2)
    };
    let extra = granted
        .difference(&required)
        .map(|p| format!("granted but not in the table: {}", show(p)));
    let missing = required
        .difference(&granted)
        .map(|p| format!("in the table but not granted: {}", show(p)));
    extra.chain(missing).collect()
}

#[test]
#[ignore = "needs a rendered chart: `cargo xtask chart` renders it and runs this test"]
fn the_rendered_chart_grants_exactly_the_table() {
    let path = std::env::var("KARPENTER_RENDERED_CHART")
        .expect("KARPENTER_RENDERED_CHART names the output of `helm template`");
    let manifests = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let differences = differences(&manifests);
    assert!(
        differences.is_empty(),
        "the chart's RBAC differs from controller/core/src/rbac.rs:\n{}",
        differences.join("\n")
    );
}

// ---- the comparison on hand-made renderings ----

const ACCOUNT: &str = "
kind: ServiceAccount
metadata: {name: karpenter, namespace: kube-system}
";

/// A rendering that grants the table as it is, one rule per grant.
fn rendering_of_the_table() -> String {
    let rules = |scope: Scope| {
        GRANTS
            .iter()
            .filter(|g| g.scope == scope)
            .map(|g| {
                serde_json::json!({
                    "apiGroups": [g.group], "resources": [g.resource], "verbs": g.verbs,
                    "resourceNames": g.resource_names,
                })
            })
            .collect::<Vec<_>>()
    };
    let cluster = serde_json::json!({
        "kind": "ClusterRole", "metadata": {"name": "karpenter"}, "rules": rules(Scope::Cluster),
    });
    let namespaced = serde_json::json!({
        "kind": "Role", "metadata": {"name": "karpenter", "namespace": "kube-system"},
        "rules": rules(Scope::ReleaseNamespace),
    });
    format!(
        "{ACCOUNT}---\n{cluster}\n---\n{namespaced}\n---\n{}\n---\n{}\n",
        binding("ClusterRoleBinding", "ClusterRole", None),
        binding("RoleBinding", "Role", Some("kube-system")),
    )
}

fn binding(kind: &str, role: &str, namespace: Option<&str>) -> String {
    serde_json::json!({
        "kind": kind,
        "metadata": {"name": "karpenter", "namespace": namespace},
        "roleRef": {"kind": role, "name": "karpenter"},
        "subjects": [{"kind": "ServiceAccount", "name": "karpenter", "namespace": "kube-system"}],
    })
    .to_string()
}

#[test]
fn a_rendering_of_the_table_itself_has_no_differences() {
    assert_eq!(differences(&rendering_of_the_table()), Vec::<String>::new());
}

#[test]
fn an_extra_verb_is_reported() {
    let extra = format!(
        "{}---\n{}\n---\n{}\n",
        rendering_of_the_table(),
        serde_json::json!({"kind": "ClusterRole", "metadata": {"name": "more"},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["update"]}]}),
        binding_to("more"),
    );
    assert_eq!(
        differences(&extra),
        ["granted but not in the table: cluster: update core/nodes"]
    );
}

fn binding_to(role: &str) -> String {
    serde_json::json!({
        "kind": "ClusterRoleBinding", "metadata": {"name": role},
        "roleRef": {"kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": "karpenter", "namespace": "kube-system"}],
    })
    .to_string()
}

#[test]
fn a_wildcard_is_reported_rather_than_taken_to_cover_the_table() {
    let wildcard = format!(
        "{}---\n{}\n---\n{}\n",
        rendering_of_the_table(),
        serde_json::json!({"kind": "ClusterRole", "metadata": {"name": "all"},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
        binding_to("all"),
    );
    assert_eq!(
        differences(&wildcard),
        ["granted but not in the table: cluster: * */*"]
    );
}

#[test]
fn a_missing_grant_is_reported() {
    let without_role_binding = rendering_of_the_table()
        .split("---\n")
        .filter(|d| !d.contains("\"RoleBinding\""))
        .collect::<Vec<_>>()
        .join("---\n");
    let differences = differences(&without_role_binding);
    assert!(!differences.is_empty());
    assert!(
        differences.iter().all(|d| d
            .starts_with("in the table but not granted: namespace kube-system: ")
            && d.contains("coordination.k8s.io/leases")),
        "{differences:?}"
    );
}

#[test]
fn a_lease_grant_without_its_name_is_broader_than_the_table() {
    let unnamed = rendering_of_the_table().replace(
        r#""resourceNames":["karpenter-leader-election"]"#,
        r#""resourceNames":[]"#,
    );
    let differences = differences(&unnamed);
    assert!(
        differences.contains(
            &"granted but not in the table: namespace kube-system: patch coordination.k8s.io/leases"
                .to_string()
        ),
        "{differences:?}"
    );
}

#[test]
fn roles_bound_to_other_subjects_do_not_count() {
    let admin = format!(
        "{}---\n{}\n",
        rendering_of_the_table(),
        serde_json::json!({"kind": "ClusterRole", "metadata": {"name": "karpenter-admin"},
            "rules": [{"apiGroups": ["karpenter.sh"], "resources": ["nodepools"], "verbs": ["create"]}]}),
    );
    assert_eq!(differences(&admin), Vec::<String>::new());
}

#[test]
fn a_binding_to_a_role_the_chart_does_not_render_is_an_error() {
    let dangling = format!("{}---\n{}\n", rendering_of_the_table(), binding_to("gone"));
    assert_eq!(
        differences(&dangling),
        ["ClusterRoleBinding gone refers to ClusterRole gone, which the chart does not render"]
    );
}
