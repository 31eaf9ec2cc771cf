//! `--scheduler-config` (upstream's `SchedulerConfiguration`): which documents are accepted and
//! why the others are refused, and the selector kube-scheduler deduces for a pod's default
//! topology spread constraints (its `helper.DefaultSelector`).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use karpenter_core::scheduling::defaults::{ConstraintProblem, DefaultSpreads};
use karpenter_core::scheduling::{
    PodInfo, SchedulerConfigError, SchedulerConfiguration, SelectorSources,
};
use serde_json::{Value, json};

fn parse(raw: &str) -> Result<Option<SchedulerConfiguration>, SchedulerConfigError> {
    SchedulerConfiguration::parse(raw)
}

/// A document with one default constraint, `extra` lines appended to it.
fn one_constraint(fields: &str) -> String {
    format!(
        "podTopologySpread:\n  defaultConstraints:\n    - {}\n",
        fields.replace('\n', "\n      ")
    )
}

fn constraint_problem(raw: &str) -> ConstraintProblem {
    match parse(raw) {
        Err(SchedulerConfigError::Constraint { index: 0, problem }) => problem,
        other => panic!("expected a problem with constraint 0, got {other:?}"),
    }
}

#[test]
fn an_empty_scheduler_config_means_no_defaults() {
    assert_eq!(parse(""), Ok(None));
}

#[test]
fn a_yaml_scheduler_config_with_two_default_constraints_is_accepted() {
    let config = parse(
        "podTopologySpread:
  defaultConstraints:
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: ScheduleAnyway
    - maxSkew: 3
      topologyKey: kubernetes.io/hostname
      whenUnsatisfiable: DoNotSchedule
",
    )
    .expect("valid")
    .expect("configured");
    let constraints = config.default_constraints();
    assert_eq!(constraints.len(), 2);
    assert_eq!(constraints[0].max_skew, 1);
    assert_eq!(constraints[0].topology_key, "topology.kubernetes.io/zone");
    assert_eq!(constraints[0].when_unsatisfiable, "ScheduleAnyway");
    assert_eq!(constraints[1].when_unsatisfiable, "DoNotSchedule");
}

#[test]
fn the_same_scheduler_config_as_json_is_accepted() {
    let config = parse(r#"{"podTopologySpread":{"defaultConstraints":[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway"}]}}"#)
        .expect("valid")
        .expect("configured");
    assert_eq!(config.default_constraints().len(), 1);
}

#[test]
fn an_unknown_field_in_the_scheduler_config_is_refused_at_any_depth() {
    let top = format!(
        "{}notARealField: true\n",
        one_constraint(
            "maxSkew: 1\ntopologyKey: topology.kubernetes.io/zone\nwhenUnsatisfiable: ScheduleAnyway"
        )
    );
    assert!(matches!(parse(&top), Err(SchedulerConfigError::Decode(_))));
    let inner = one_constraint(
        "maxSkew: 1\ntopologyKey: topology.kubernetes.io/zone\nwhenUnsatisfiable: ScheduleAnyway\nmaxSkw: 2",
    );
    let err = parse(&inner).expect_err("a misspelt field");
    assert!(err.to_string().contains("maxSkw"), "{err}");
}

#[test]
fn a_malformed_scheduler_config_is_refused_as_undecodable() {
    let err = parse("podTopologySpread: {").expect_err("malformed");
    assert!(matches!(err, SchedulerConfigError::Decode(_)));
    assert!(
        err.to_string().starts_with("decoding scheduler config, "),
        "{err}"
    );
}

#[test]
fn a_default_constraint_without_a_positive_max_skew_is_refused_naming_the_field() {
    let raw = one_constraint(
        "maxSkew: 0\ntopologyKey: topology.kubernetes.io/zone\nwhenUnsatisfiable: ScheduleAnyway",
    );
    assert_eq!(constraint_problem(&raw), ConstraintProblem::MaxSkew);
    assert_eq!(
        parse(&raw).expect_err("refused").to_string(),
        "validating scheduler config, podTopologySpread.defaultConstraints[0].maxSkew must be greater than 0"
    );
}

#[test]
fn a_default_constraint_without_a_topology_key_is_refused() {
    let raw = one_constraint("maxSkew: 1\nwhenUnsatisfiable: ScheduleAnyway");
    assert_eq!(
        constraint_problem(&raw),
        ConstraintProblem::TopologyKeyMissing
    );
}

#[test]
fn a_default_constraint_whose_topology_key_is_not_a_label_name_is_refused() {
    let raw = one_constraint(
        "maxSkew: 1\ntopologyKey: \"not a valid label name\"\nwhenUnsatisfiable: ScheduleAnyway",
    );
    assert!(matches!(
        constraint_problem(&raw),
        ConstraintProblem::TopologyKeyInvalid { .. }
    ));
}

#[test]
fn a_default_constraint_with_an_unknown_when_unsatisfiable_is_refused() {
    let raw = one_constraint(
        "maxSkew: 1\ntopologyKey: topology.kubernetes.io/zone\nwhenUnsatisfiable: Sometimes",
    );
    assert_eq!(
        constraint_problem(&raw),
        ConstraintProblem::WhenUnsatisfiable("Sometimes".into())
    );
}

#[test]
fn a_default_constraint_with_a_label_selector_is_refused_as_selectors_are_deduced() {
    let raw = one_constraint(
        "maxSkew: 1\ntopologyKey: topology.kubernetes.io/zone\nwhenUnsatisfiable: ScheduleAnyway\nlabelSelector:\n  matchLabels:\n    app: test",
    );
    assert_eq!(constraint_problem(&raw), ConstraintProblem::LabelSelector);
}

#[test]
fn a_default_constraint_with_match_label_keys_is_refused_as_inert() {
    let raw = one_constraint(
        "maxSkew: 1\ntopologyKey: topology.kubernetes.io/zone\nwhenUnsatisfiable: ScheduleAnyway\nmatchLabelKeys:\n  - pod-template-hash",
    );
    assert_eq!(constraint_problem(&raw), ConstraintProblem::MatchLabelKeys);
}

#[test]
fn two_default_constraints_with_the_same_key_and_when_unsatisfiable_are_refused() {
    let raw = "podTopologySpread:
  defaultConstraints:
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: ScheduleAnyway
    - maxSkew: 3
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: ScheduleAnyway
";
    let err = parse(raw).expect_err("duplicate");
    assert!(
        matches!(
            err,
            SchedulerConfigError::Duplicate {
                index: 1,
                of: 0,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "validating scheduler config, podTopologySpread.defaultConstraints[1] is a duplicate of [0], {topology.kubernetes.io/zone, ScheduleAnyway}"
    );
}

#[test]
fn the_same_topology_key_with_another_when_unsatisfiable_is_accepted() {
    let raw = "podTopologySpread:
  defaultConstraints:
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: ScheduleAnyway
    - maxSkew: 3
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: DoNotSchedule
";
    let config = parse(raw).expect("valid").expect("configured");
    assert_eq!(config.default_constraints().len(), 2);
}

// ------------------------------------------------------------------------------------------------
// The deduced selector
// ------------------------------------------------------------------------------------------------

fn zone_default() -> SchedulerConfiguration {
    parse(
        "podTopologySpread:
  defaultConstraints:
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: DoNotSchedule
",
    )
    .expect("valid")
    .expect("configured")
}

fn decode<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("decodes")
}

/// Pod `name` in `default` with `labels`, controlled by `owner` (`apiVersion`, `kind`, `name`).
fn pod(labels: Value, owner: Option<(&str, &str, &str)>) -> Pod {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "i"}]}
    });
    if let Some((api_version, kind, name)) = owner {
        pod["metadata"]["ownerReferences"] = json!([{
            "apiVersion": api_version, "kind": kind, "name": name,
            "uid": format!("uid-{name}"), "controller": true
        }]);
    }
    decode(pod)
}

fn service(name: &str, namespace: &str, selector: Option<Value>) -> Service {
    let mut spec = json!({"ports": [{"port": 80}]});
    if let Some(selector) = selector {
        spec["selector"] = selector;
    }
    decode(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace}, "spec": spec
    }))
}

fn replica_set(name: &str, selector: Value) -> ReplicaSet {
    decode(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": selector, "template": {}}
    }))
}

fn stateful_set(name: &str, selector: Value) -> StatefulSet {
    decode(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": selector, "serviceName": name, "template": {}}
    }))
}

fn replication_controller(name: &str, selector: Value) -> ReplicationController {
    decode(json!({
        "apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": selector}
    }))
}

fn deduced(sources: SelectorSources<'_>, pod: &Pod) -> Option<LabelSelector> {
    let config = zone_default();
    let mut spreads = DefaultSpreads::new(&config, sources).expect("configured");
    spreads.selector(pod)
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn is_in(key: &str, value: &str) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.into(),
        operator: "In".into(),
        values: Some(vec![value.into()]),
    }
}

#[test]
fn a_replica_sets_pods_are_selected_by_the_replica_sets_selector_not_their_labels() {
    let rs = replica_set(
        "web-abc",
        json!({"matchLabels": {"app": "web", "pod-template-hash": "abc"}}),
    );
    let sources = SelectorSources {
        replica_sets: vec![&rs],
        ..Default::default()
    };
    let pod = pod(
        json!({"app": "web", "pod-template-hash": "abc", "extra": "ignored"}),
        Some(("apps/v1", "ReplicaSet", "web-abc")),
    );
    let selector = deduced(sources, &pod).expect("deduced");
    assert_eq!(selector.match_labels, None);
    assert_eq!(
        selector.match_expressions,
        Some(vec![is_in("app", "web"), is_in("pod-template-hash", "abc")])
    );
}

#[test]
fn a_stateful_sets_pods_are_selected_without_their_per_pod_labels() {
    let ss = stateful_set(
        "db",
        json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}),
    );
    let sources = SelectorSources {
        stateful_sets: vec![&ss],
        ..Default::default()
    };
    let pod = pod(
        json!({"app": "db", "statefulset.kubernetes.io/pod-name": "db-0"}),
        Some(("apps/v1", "StatefulSet", "db")),
    );
    let selector = deduced(sources, &pod).expect("deduced");
    assert_eq!(selector.match_expressions, Some(vec![is_in("app", "db")]));
}

#[test]
fn a_replication_controllers_selector_overwrites_a_services_label() {
    let svc = service(
        "legacy",
        "default",
        Some(json!({"app": "legacy", "tier": "web"})),
    );
    let rc = replication_controller("legacy", json!({"app": "legacy", "tier": "api"}));
    let sources = SelectorSources {
        services: vec![&svc],
        replication_controllers: vec![&rc],
        ..Default::default()
    };
    let pod = pod(
        json!({"app": "legacy", "tier": "web"}),
        Some(("v1", "ReplicationController", "legacy")),
    );
    let selector = deduced(sources, &pod).expect("deduced");
    assert_eq!(
        selector.match_labels,
        Some(labels(&[("app", "legacy"), ("tier", "api")]))
    );
    assert_eq!(selector.match_expressions, None);
}

#[test]
fn the_selectors_of_every_service_selecting_the_pod_are_merged_and_others_ignored() {
    let frontend = service("frontend", "default", Some(json!({"app": "web"})));
    let tier = service("tier", "default", Some(json!({"tier": "fe"})));
    let other = service("other", "default", Some(json!({"app": "other"})));
    let elsewhere = service(
        "elsewhere",
        "prod",
        Some(json!({"app": "web", "zone": "x"})),
    );
    let headless = service("headless", "default", None);
    let sources = SelectorSources {
        services: vec![&frontend, &tier, &other, &elsewhere, &headless],
        ..Default::default()
    };
    let pod = pod(json!({"app": "web", "tier": "fe"}), None);
    let selector = deduced(sources, &pod).expect("deduced");
    assert_eq!(
        selector.match_labels,
        Some(labels(&[("app", "web"), ("tier", "fe")]))
    );
}

#[test]
fn a_service_selector_and_a_replica_sets_selector_combine() {
    let svc = service("web", "default", Some(json!({"app": "web"})));
    let rs = replica_set(
        "web-abc",
        json!({"matchLabels": {"pod-template-hash": "abc"}}),
    );
    let sources = SelectorSources {
        services: vec![&svc],
        replica_sets: vec![&rs],
        ..Default::default()
    };
    let pod = pod(
        json!({"app": "web", "pod-template-hash": "abc"}),
        Some(("apps/v1", "ReplicaSet", "web-abc")),
    );
    let selector = deduced(sources, &pod).expect("deduced");
    assert_eq!(selector.match_labels, Some(labels(&[("app", "web")])));
    assert_eq!(
        selector.match_expressions,
        Some(vec![is_in("pod-template-hash", "abc")])
    );
}

#[test]
fn no_selector_is_deduced_for_a_job_a_vanished_owner_or_a_service_with_an_empty_selector() {
    let everything = service("all", "default", Some(json!({})));
    let sources = || SelectorSources {
        services: vec![&everything],
        ..Default::default()
    };
    let job = pod(
        json!({"app": "batch"}),
        Some(("batch/v1", "Job", "nightly")),
    );
    assert_eq!(deduced(sources(), &job), None);
    let orphan = pod(
        json!({"app": "web"}),
        Some(("apps/v1", "ReplicaSet", "gone")),
    );
    assert_eq!(deduced(sources(), &orphan), None);
}

#[test]
fn default_constraints_replace_nothing_on_a_pod_that_declares_its_own() {
    let rs = replica_set("web-abc", json!({"matchLabels": {"app": "web"}}));
    let config = zone_default();
    let mut spreads = DefaultSpreads::new(
        &config,
        SelectorSources {
            replica_sets: vec![&rs],
            ..Default::default()
        },
    )
    .expect("configured");
    let plain = pod(
        json!({"app": "web"}),
        Some(("apps/v1", "ReplicaSet", "web-abc")),
    );
    let mut info = PodInfo::from_pod(&plain, Vec::new()).expect("pod");
    spreads.apply(&mut info, &plain);
    assert_eq!(info.spread.len(), 1);
    assert_eq!(info.spread[0].topology_key, "topology.kubernetes.io/zone");
    assert_eq!(info.spread[0].max_skew, 1);

    let mut own: Value = serde_json::to_value(&plain).expect("encodes");
    own["spec"]["topologySpreadConstraints"] = json!([{
        "maxSkew": 3, "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "web"}}
    }]);
    let own: Pod = decode(own);
    let mut info = PodInfo::from_pod(&own, Vec::new()).expect("pod");
    spreads.apply(&mut info, &own);
    assert_eq!(info.spread.len(), 1);
    assert_eq!(info.spread[0].topology_key, "kubernetes.io/hostname");
}

#[test]
fn a_scheduler_config_without_default_constraints_applies_nothing() {
    let config = parse("podTopologySpread: {}\n")
        .expect("valid")
        .expect("configured");
    assert!(DefaultSpreads::new(&config, SelectorSources::default()).is_none());
}
