//! The RBAC table (`karpenter_kube::rbac::GRANTS`) is well formed and covers every kind the core
//! controllers call the `KubeApi` seam for.
//!
//! The coverage check reads the core's sources: a controller that starts calling the seam for a
//! new kind (say `ResourceKind::STORAGE_CLASS`) fails it until the table, and so the chart, grant
//! something on that kind. Verbs are checked against the rendered chart by `chart_rbac.rs`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use karpenter_core::seams::kube::ResourceKind;
use karpenter_kube::rbac::{GRANTS, Scope};

/// Verbs the Kubernetes authorizer knows for resource requests.
const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The seam's kind constants by name. A constant missing here fails the coverage test with the
/// name to add (and a table row to write).
fn kind_by_name(name: &str) -> Option<ResourceKind> {
    Some(match name {
        "NODE_POOL" => ResourceKind::NODE_POOL,
        "NODE_CLAIM" => ResourceKind::NODE_CLAIM,
        "EC2_NODE_CLASS" => ResourceKind::EC2_NODE_CLASS,
        "NODE" => ResourceKind::NODE,
        "POD" => ResourceKind::POD,
        "DAEMON_SET" => ResourceKind::DAEMON_SET,
        "SERVICE" => ResourceKind::SERVICE,
        "REPLICA_SET" => ResourceKind::REPLICA_SET,
        "STATEFUL_SET" => ResourceKind::STATEFUL_SET,
        "REPLICATION_CONTROLLER" => ResourceKind::REPLICATION_CONTROLLER,
        "POD_DISRUPTION_BUDGET" => ResourceKind::POD_DISRUPTION_BUDGET,
        "PERSISTENT_VOLUME_CLAIM" => ResourceKind::PERSISTENT_VOLUME_CLAIM,
        "PERSISTENT_VOLUME" => ResourceKind::PERSISTENT_VOLUME,
        "STORAGE_CLASS" => ResourceKind::STORAGE_CLASS,
        "CSI_NODE" => ResourceKind::CSI_NODE,
        "VOLUME_ATTACHMENT" => ResourceKind::VOLUME_ATTACHMENT,
        "NAMESPACE" => ResourceKind::NAMESPACE,
        "EVENT" => ResourceKind::EVENT,
        "LEASE" => ResourceKind::LEASE,
        _ => return None,
    })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("core sources are readable") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `ResourceKind::NAME` constants the core's controllers name, outside the seam's own module and
/// outside test modules (everything from a file's first `#[cfg(test)]` on).
fn kinds_named_by_core() -> BTreeSet<String> {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/src");
    let mut files = Vec::new();
    rust_files(&core, &mut files);
    let mut names = BTreeSet::new();
    for file in files.iter().filter(|f| !f.ends_with("seams/kube.rs")) {
        let text = std::fs::read_to_string(file).expect("core source is readable");
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (at, _) in code.match_indices("ResourceKind::") {
            let name: String = code[at + "ResourceKind::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if !name.is_empty() {
                names.insert(name);
            }
        }
    }
    names
}

#[test]
fn every_kind_the_core_calls_the_seam_for_has_a_grant() {
    let names = kinds_named_by_core();
    assert!(
        names.contains("NODE_CLAIM") && names.contains("LEASE"),
        "the source scan found too little ({names:?}): has the core moved?"
    );
    let mut missing = Vec::new();
    for name in &names {
        let Some(kind) = kind_by_name(name) else {
            missing.push(format!(
                "ResourceKind::{name} is not known to this test: add it to kind_by_name"
            ));
            continue;
        };
        let granted = GRANTS
            .iter()
            .any(|g| g.group == kind.group && g.resource == kind.plural);
        if !granted {
            missing.push(format!(
                "ResourceKind::{name} ({}/{}) has no row in controller/core/src/rbac.rs",
                kind.group, kind.plural
            ));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// `(kind constant, seam method)` of every call the core's controllers write with the kind
/// spelled out (`kube.patch_status(&ResourceKind::EC2_NODE_CLASS, ...)`, across line breaks),
/// outside test modules. Calls through a variable kind are not seen.
fn calls_named_by_core() -> BTreeSet<(String, String)> {
    const METHODS: [&str; 8] = [
        "get",
        "list",
        "watch",
        "create",
        "patch",
        "patch_status",
        "delete",
        "evict",
    ];
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/src");
    let mut files = Vec::new();
    rust_files(&core, &mut files);
    let mut calls = BTreeSet::new();
    for file in files.iter().filter(|f| !f.ends_with("seams/kube.rs")) {
        let text = std::fs::read_to_string(file).expect("core source is readable");
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for method in METHODS {
            let call = format!(".{method}(");
            for (at, _) in code.match_indices(&call) {
                let rest = code[at + call.len()..].trim_start();
                let Some(kind) = rest.strip_prefix("&ResourceKind::") else {
                    continue;
                };
                let name: String = kind
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                calls.insert((name, method.to_string()));
            }
        }
    }
    calls
}

/// The RBAC verb and resource a seam call needs.
fn rbac_of(kind: &ResourceKind, method: &str) -> (String, &'static str) {
    match method {
        "patch_status" => (format!("{}/status", kind.plural), "patch"),
        "evict" => (format!("{}/eviction", kind.plural), "create"),
        "get" => (kind.plural.to_string(), "get"),
        "list" => (kind.plural.to_string(), "list"),
        "watch" => (kind.plural.to_string(), "watch"),
        "create" => (kind.plural.to_string(), "create"),
        "delete" => (kind.plural.to_string(), "delete"),
        _ => (kind.plural.to_string(), "patch"),
    }
}

#[test]
fn every_seam_call_the_core_spells_out_is_granted_its_verb() {
    // A call the chart does not grant is a 403 on a real cluster (and a stand-in that does not
    // check RBAC never shows it): until this test, the EC2NodeClass status controller's patches
    // and three `get`s were refused by the chart's own roles.
    let calls = calls_named_by_core();
    assert!(
        calls.contains(&("NODE_CLAIM".to_string(), "patch_status".to_string())),
        "the call scan found too little ({calls:?}): has the core moved?"
    );
    let mut refused = Vec::new();
    for (name, method) in &calls {
        let Some(kind) = kind_by_name(name) else {
            refused.push(format!("ResourceKind::{name}: add it to kind_by_name"));
            continue;
        };
        let (resource, verb) = rbac_of(&kind, method);
        let granted = GRANTS
            .iter()
            .any(|g| g.group == kind.group && g.resource == resource && g.verbs.contains(&verb));
        if !granted {
            refused.push(format!(
                "{method}(&ResourceKind::{name}) needs {verb} on {}/{resource}: add it to \
                 controller/core/src/rbac.rs and the chart",
                kind.group
            ));
        }
    }
    assert!(refused.is_empty(), "{}", refused.join("\n"));
}

#[test]
fn every_grant_uses_known_sorted_verbs_and_says_who_needs_it() {
    for grant in GRANTS {
        let what = format!("{}/{}", grant.group, grant.resource);
        assert!(!grant.verbs.is_empty(), "{what}: no verbs");
        assert!(
            grant.verbs.iter().all(|v| VERBS.contains(v)),
            "{what}: unknown verb in {:?}",
            grant.verbs
        );
        assert!(
            grant.verbs.windows(2).all(|w| w[0] < w[1]),
            "{what}: verbs not sorted or repeated: {:?}",
            grant.verbs
        );
        assert!(!grant.used_by.is_empty(), "{what}: say which calls need it");
        assert!(
            !grant.resource.contains('*') && !grant.group.contains('*'),
            "{what}: no wildcards"
        );
    }
}

#[test]
fn no_two_grants_give_the_same_verb_on_the_same_objects() {
    let mut seen = BTreeSet::new();
    for grant in GRANTS {
        for verb in grant.verbs {
            let key = (
                grant.scope,
                grant.group,
                grant.resource,
                *verb,
                grant.resource_names,
            );
            assert!(seen.insert(key), "granted twice: {key:?}");
        }
    }
}

#[test]
fn only_the_leader_election_lease_is_namespaced() {
    for grant in GRANTS {
        assert_eq!(
            grant.scope == Scope::ReleaseNamespace,
            grant.resource == "leases",
            "{}/{}: leader election is the only namespaced need",
            grant.group,
            grant.resource
        );
    }
}
