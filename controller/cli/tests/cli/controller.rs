//! `karpenter controller`: every setting is read from its environment variable, defaults to
//! upstream's value, and a bad value stops the start with the setting's name
//! (`--print-settings` shows what was resolved without connecting to anything); a missing
//! `CLUSTER_NAME` or kube config is a clear non-zero exit.

use std::process::{Command, Output};

use serde_json::{Value, json};

use super::{root, stderr, stdout};

/// Every variable the controller reads, removed from the test's environment so the host's own
/// values cannot leak in.
const VARIABLES: [&str; 23] = [
    "CLUSTER_NAME",
    "CLUSTER_ENDPOINT",
    "CLUSTER_CA_BUNDLE",
    "INTERRUPTION_QUEUE",
    "BATCH_MAX_DURATION",
    "BATCH_IDLE_DURATION",
    "PREFERENCE_POLICY",
    "MIN_VALUES_POLICY",
    "SCHEDULER_CONFIG",
    "ISOLATED_VPC",
    "EKS_CONTROL_PLANE",
    "VM_MEMORY_OVERHEAD_PERCENT",
    "RESERVED_ENIS",
    "FEATURE_GATES",
    "LOG_LEVEL",
    "METRICS_PORT",
    "HEALTH_PROBE_PORT",
    "KUBE_CLIENT_QPS",
    "KUBE_CLIENT_BURST",
    "DISABLE_LEADER_ELECTION",
    "LEADER_ELECTION_NAME",
    "LEADER_ELECTION_NAMESPACE",
    "SYSTEM_NAMESPACE",
];

fn controller(env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_karpenter"));
    command.arg("controller").args(args).current_dir(root());
    for variable in VARIABLES {
        command.env_remove(variable);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("karpenter runs")
}

/// The resolved settings with `CLUSTER_NAME=demo` plus `env`.
fn settings(env: &[(&str, &str)]) -> Value {
    let mut all = vec![("CLUSTER_NAME", "demo")];
    all.extend_from_slice(env);
    let output = controller(&all, &["--print-settings"]);
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_str(&stdout(&output)).expect("settings are JSON")
}

/// A bad value exits 2 before anything starts, naming the setting.
fn assert_rejected(variable: &str, value: &str) {
    let output = controller(
        &[("CLUSTER_NAME", "demo"), (variable, value)],
        &["--print-settings"],
    );
    assert_eq!(output.status.code(), Some(2), "{variable}={value} accepted");
    assert!(
        stderr(&output).contains(variable),
        "{variable}={value}: the error does not name the setting: {}",
        stderr(&output)
    );
}

/// One setting: `good` is read as `read`, its absence gives `default`, and `bad` is refused.
fn check(variable: &str, key: &str, good: &str, read: Value, default: Value, bad: &str) {
    assert_eq!(settings(&[])[key], default, "{variable} default");
    assert_eq!(
        settings(&[(variable, good)])[key],
        read,
        "{variable}={good}"
    );
    assert_rejected(variable, bad);
}

#[test]
fn a_controller_without_cluster_name_exits_2_naming_the_setting() {
    let output = controller(&[], &[]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("CLUSTER_NAME"), "{err}");
    assert!(err.contains("required"), "{err}");
    assert_rejected("CLUSTER_NAME", " ");
}

#[test]
fn cluster_name_is_read_from_its_variable_or_its_flag() {
    assert_eq!(settings(&[])["CLUSTER_NAME"], "demo");
    let output = controller(&[], &["--cluster-name", "flagged", "--print-settings"]);
    let value: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(value["CLUSTER_NAME"], "flagged");
}

#[test]
fn cluster_endpoint_must_be_https() {
    check(
        "CLUSTER_ENDPOINT",
        "CLUSTER_ENDPOINT",
        "https://ABC.gr7.us-west-2.eks.amazonaws.com/",
        json!("https://ABC.gr7.us-west-2.eks.amazonaws.com"),
        json!(""),
        "http://insecure",
    );
}

#[test]
fn cluster_ca_bundle_must_be_base64_pem() {
    // base64("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n")
    let pem = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkFBPT0KLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=";
    check(
        "CLUSTER_CA_BUNDLE",
        "CLUSTER_CA_BUNDLE",
        pem,
        json!(pem),
        json!(""),
        "not base64!",
    );
    assert_rejected("CLUSTER_CA_BUNDLE", "aGVsbG8=");
}

#[test]
fn interruption_queue_is_read_and_empty_by_default() {
    assert_eq!(settings(&[])["INTERRUPTION_QUEUE"], "");
    assert_eq!(
        settings(&[("INTERRUPTION_QUEUE", "demo")])["INTERRUPTION_QUEUE"],
        "demo"
    );
}

#[test]
fn batch_max_duration_takes_go_durations() {
    check(
        "BATCH_MAX_DURATION",
        "BATCH_MAX_DURATION_MS",
        "1m30s",
        json!(90_000),
        json!(10_000),
        "10 seconds",
    );
    assert_rejected("BATCH_MAX_DURATION", "0s");
}

#[test]
fn batch_idle_duration_takes_go_durations_up_to_the_max() {
    check(
        "BATCH_IDLE_DURATION",
        "BATCH_IDLE_DURATION_MS",
        "1.5s",
        json!(1_500),
        json!(1_000),
        "-1s",
    );
    assert_rejected("BATCH_IDLE_DURATION", "11s");
}

#[test]
fn preference_policy_is_respect_or_ignore() {
    check(
        "PREFERENCE_POLICY",
        "PREFERENCE_POLICY",
        "Ignore",
        json!("Ignore"),
        json!("Respect"),
        "Sometimes",
    );
}

#[test]
fn min_values_policy_is_strict_or_best_effort() {
    check(
        "MIN_VALUES_POLICY",
        "MIN_VALUES_POLICY",
        "BestEffort",
        json!("BestEffort"),
        json!("Strict"),
        "Lenient",
    );
}

#[test]
fn scheduler_config_takes_default_topology_spreads_as_yaml_or_json_and_refuses_invalid_ones() {
    let yaml = "podTopologySpread:\n  defaultConstraints:\n    - maxSkew: 1\n      topologyKey: topology.kubernetes.io/zone\n      whenUnsatisfiable: DoNotSchedule\n";
    let read = json!({"podTopologySpread": {"defaultConstraints": [{
        "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule"
    }]}});
    check(
        "SCHEDULER_CONFIG",
        "SCHEDULER_CONFIG",
        yaml,
        read.clone(),
        Value::Null,
        "podTopologySpread: {",
    );
    assert_eq!(
        settings(&[("SCHEDULER_CONFIG", &read.to_string())])["SCHEDULER_CONFIG"],
        read
    );
    let output = controller(
        &[],
        &[
            "--cluster-name",
            "demo",
            "--scheduler-config",
            yaml,
            "--print-settings",
        ],
    );
    let value: Value = serde_json::from_str(&stdout(&output)).expect("settings are JSON");
    assert_eq!(value["SCHEDULER_CONFIG"], read);
    // kube-scheduler's own refusals: a labelSelector (deduced per pod), a zero maxSkew.
    assert_rejected(
        "SCHEDULER_CONFIG",
        &yaml.replace(
            "DoNotSchedule\n",
            "DoNotSchedule\n      labelSelector: {matchLabels: {app: web}}\n",
        ),
    );
    assert_rejected(
        "SCHEDULER_CONFIG",
        &yaml.replace("maxSkew: 1", "maxSkew: 0"),
    );
}

#[test]
fn isolated_vpc_takes_go_booleans() {
    check(
        "ISOLATED_VPC",
        "ISOLATED_VPC",
        "true",
        json!(true),
        json!(false),
        "yes",
    );
    assert_eq!(settings(&[("ISOLATED_VPC", "1")])["ISOLATED_VPC"], true);
}

#[test]
fn eks_control_plane_defaults_off_and_on_is_refused_as_unsupported() {
    check(
        "EKS_CONTROL_PLANE",
        "EKS_CONTROL_PLANE",
        "false",
        json!(false),
        json!(false),
        "true",
    );
}

#[test]
fn vm_memory_overhead_percent_is_a_fraction_and_only_the_default_is_supported() {
    check(
        "VM_MEMORY_OVERHEAD_PERCENT",
        "VM_MEMORY_OVERHEAD_PERCENT",
        "0.075",
        json!(0.075),
        json!(0.075),
        "7.5",
    );
    assert_rejected("VM_MEMORY_OVERHEAD_PERCENT", "0.1");
}

#[test]
fn reserved_enis_is_a_count_and_only_the_default_is_supported() {
    check(
        "RESERVED_ENIS",
        "RESERVED_ENIS",
        "0",
        json!(0),
        json!(0),
        "-1",
    );
    assert_rejected("RESERVED_ENIS", "1");
}

#[test]
fn feature_gates_enable_spot_to_spot_and_refuse_what_is_not_implemented() {
    check(
        "FEATURE_GATES",
        "FEATURE_GATES",
        "SpotToSpotConsolidation=true,NodeRepair=false",
        json!({"SpotToSpotConsolidation": true}),
        json!({"SpotToSpotConsolidation": false}),
        "NodeRepair=true",
    );
    assert_rejected("FEATURE_GATES", "Teleport=true");
    assert_rejected("FEATURE_GATES", "SpotToSpotConsolidation");
}

#[test]
fn log_level_is_one_of_upstreams_levels() {
    check(
        "LOG_LEVEL",
        "LOG_LEVEL",
        "debug",
        json!("debug"),
        json!("info"),
        "verbose",
    );
}

#[test]
fn metrics_port_defaults_to_8080() {
    check(
        "METRICS_PORT",
        "METRICS_PORT",
        "9090",
        json!(9090),
        json!(8080),
        "70000",
    );
    assert_rejected("METRICS_PORT", "8081");
}

#[test]
fn health_probe_port_defaults_to_8081() {
    check(
        "HEALTH_PROBE_PORT",
        "HEALTH_PROBE_PORT",
        "9091",
        json!(9091),
        json!(8081),
        "0",
    );
}

#[test]
fn kube_client_qps_defaults_to_200() {
    check(
        "KUBE_CLIENT_QPS",
        "KUBE_CLIENT_QPS",
        "50",
        json!(50),
        json!(200),
        "0",
    );
    assert_rejected("KUBE_CLIENT_QPS", "400");
}

#[test]
fn kube_client_burst_defaults_to_300() {
    check(
        "KUBE_CLIENT_BURST",
        "KUBE_CLIENT_BURST",
        "500",
        json!(500),
        json!(300),
        "lots",
    );
    assert_rejected("KUBE_CLIENT_BURST", "100");
}

#[test]
fn disable_leader_election_takes_go_booleans() {
    check(
        "DISABLE_LEADER_ELECTION",
        "DISABLE_LEADER_ELECTION",
        "True",
        json!(true),
        json!(false),
        "disabled",
    );
}

#[test]
fn leader_election_name_defaults_to_the_lease_the_chart_grants() {
    check(
        "LEADER_ELECTION_NAME",
        "LEADER_ELECTION_NAME",
        "other",
        json!("other"),
        json!("karpenter-leader-election"),
        " ",
    );
}

#[test]
fn the_lease_lives_in_the_leader_election_namespace_else_the_system_namespace() {
    assert_eq!(settings(&[])["LEADER_ELECTION_NAMESPACE"], "kube-system");
    let env = [("SYSTEM_NAMESPACE", "karpenter")];
    assert_eq!(settings(&env)["LEADER_ELECTION_NAMESPACE"], "karpenter");
    assert_eq!(settings(&env)["SYSTEM_NAMESPACE"], "karpenter");
    let env = [
        ("SYSTEM_NAMESPACE", "karpenter"),
        ("LEADER_ELECTION_NAMESPACE", "leases"),
    ];
    assert_eq!(settings(&env)["LEADER_ELECTION_NAMESPACE"], "leases");
    assert_rejected("SYSTEM_NAMESPACE", " ");
}

#[test]
fn a_controller_without_a_kube_config_exits_1_saying_so() {
    let port = (40_000 + std::process::id() % 20_000).to_string();
    let mut command = Command::new(env!("CARGO_BIN_EXE_karpenter"));
    command.arg("controller").current_dir(root());
    for variable in VARIABLES {
        command.env_remove(variable);
    }
    let output = command
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env("HOME", "/nonexistent")
        .env("CLUSTER_NAME", "demo")
        .env("HEALTH_PROBE_PORT", &port)
        .output()
        .expect("karpenter runs");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("kube config"),
        "{}",
        stderr(&output)
    );
    // The log line is JSON with upstream's field names.
    let line = stdout(&output)
        .lines()
        .find(|l| l.contains("controller stopped"))
        .map(str::to_string)
        .expect("the failure is logged");
    let log: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(log["level"], "error");
    assert!(log["time"].is_string() && log["logger"].is_string());
    assert_eq!(log["message"], "controller stopped");
}
