//! The disruption decision engine, pure: a cluster of NodePools, nodes with their claims and
//! pods, and PDBs in; the command a pass would start and every other node's one reason out.

use jiff::Timestamp;
use karpenter_core::catalog::Catalog;
use karpenter_core::disruption::{
    Cluster, ClusterView, Command, Exclusions, Method, Options, decide, engine, plan_all, validate,
};
use serde_json::{Value, json};

use super::support::start;

fn now() -> Timestamp {
    "2026-01-01T01:00:00Z".parse().expect("timestamp")
}

fn catalog() -> &'static Catalog {
    Catalog::builtin_ref()
}

/// A NodePool over on-demand (and `capacity_types`) with `disruption` as given.
fn pool_with(name: &str, capacity_types: &[&str], disruption: Value) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name, "uid": format!("uid-{name}")},
        "spec": {
            "template": {"spec": {
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity_types},
                    {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]}
                ],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
            }},
            "disruption": disruption
        }
    })
}

fn pool(name: &str) -> Value {
    pool_with(
        name,
        &["on-demand"],
        json!({"consolidateAfter": "0s", "consolidationPolicy": "WhenEmptyOrUnderutilized", "budgets": [{"nodes": "100%"}]}),
    )
}

/// A test cluster built up node by node.
#[derive(Default)]
struct Scene {
    cluster: Cluster,
    spot_to_spot: bool,
}

impl Scene {
    fn new(pools: &[Value]) -> Self {
        let mut scene = Scene::default();
        for p in pools {
            scene
                .cluster
                .pools
                .push(serde_json::from_value(p.clone()).expect("pool"));
        }
        scene
    }

    /// An initialized node of `pool` (and its claim) of `instance_type` in us-west-2a.
    fn node(
        &mut self,
        name: &str,
        pool: &str,
        instance_type: &str,
        capacity_type: &str,
    ) -> &mut Self {
        self.node_with(name, pool, instance_type, capacity_type, |_, _| {})
    }

    fn node_with(
        &mut self,
        name: &str,
        pool: &str,
        instance_type: &str,
        capacity_type: &str,
        tweak: impl FnOnce(&mut Value, &mut Value),
    ) -> &mut Self {
        let it = catalog().get(instance_type).expect("instance type");
        let alloc = serde_json::to_value(it.allocatable.to_list()).expect("allocatable");
        let provider = format!("aws:///us-west-2a/i-{name}");
        let mut labels = json!({
            "karpenter.sh/nodepool": pool, "node.kubernetes.io/instance-type": instance_type,
            "topology.kubernetes.io/zone": "us-west-2a", "karpenter.sh/capacity-type": capacity_type,
            "karpenter.sh/initialized": "true", "kubernetes.io/arch": &it.labels["kubernetes.io/arch"], "kubernetes.io/os": "linux",
            "kubernetes.io/hostname": name, "karpenter.k8s.aws/instance-category": &it.labels["karpenter.k8s.aws/instance-category"],
        });
        let mut node = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels.clone(), "creationTimestamp": start().to_string()},
            "spec": {"providerID": provider},
            "status": {"capacity": alloc, "allocatable": alloc,
                       "conditions": [{"type": "Ready", "status": "True"}]}
        });
        labels
            .as_object_mut()
            .expect("labels")
            .remove("kubernetes.io/hostname");
        let mut claim = json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": format!("claim-{name}"), "labels": labels, "creationTimestamp": start().to_string()},
            "spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
            "status": {"nodeName": name, "providerID": provider, "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": start().to_string(), "reason": "Initialized", "message": ""}
            ]}
        });
        tweak(&mut node, &mut claim);
        self.cluster
            .nodes
            .push(serde_json::from_value(node).expect("node"));
        self.cluster
            .claims
            .push(serde_json::from_value(claim).expect("claim"));
        self
    }

    /// A running pod on `node` requesting `cpu` and 512Mi; `tweak` adds what the test is about.
    fn pod_with(
        &mut self,
        name: &str,
        node: &str,
        cpu: &str,
        tweak: impl FnOnce(&mut Value),
    ) -> &mut Self {
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                         "labels": {"app": name}, "creationTimestamp": start().to_string()},
            "spec": {"nodeName": node, "containers": [{"name": "app", "resources": {"requests": {"cpu": cpu, "memory": "512Mi"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        });
        tweak(&mut pod);
        self.cluster
            .pods
            .push(serde_json::from_value(pod).expect("pod"));
        self
    }

    fn pod(&mut self, name: &str, node: &str, cpu: &str) -> &mut Self {
        self.pod_with(name, node, cpu, |_| {})
    }

    fn pdb(&mut self, name: &str, app: &str, max_unavailable: i32) -> &mut Self {
        let pdb = json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": {"app": app}}}
        });
        self.cluster
            .pdbs
            .push(serde_json::from_value(pdb).expect("pdb"));
        self
    }

    fn view_at(&self, at: Timestamp) -> ClusterView {
        ClusterView::from_cluster(at, &self.cluster, catalog())
    }

    fn options(&self) -> Options {
        Options {
            spot_to_spot: self.spot_to_spot,
            ..Options::default()
        }
    }

    fn decide_at(&self, at: Timestamp) -> engine::Decision {
        decide(
            &self.view_at(at),
            catalog(),
            &self.options(),
            Exclusions::default(),
        )
    }

    fn decide(&self) -> engine::Decision {
        self.decide_at(now())
    }

    fn command(&self) -> Command {
        self.decide().command.expect("a command")
    }

    fn reason(&self, node: &str) -> String {
        let decision = self.decide();
        assert!(
            decision.command.is_none(),
            "expected no command, got {:?}",
            decision.command
        );
        decision
            .blocked
            .get(node)
            .cloned()
            .unwrap_or_else(|| panic!("no reason for {node}: {:?}", decision.blocked))
    }
}

fn od_price(instance_type: &str) -> f64 {
    catalog()
        .get(instance_type)
        .and_then(|it| {
            it.offerings
                .iter()
                .find(|o| o.zone == "us-west-2a" && o.capacity_type.label() == "on-demand")
        })
        .map(|o| o.price)
        .expect("price")
}

#[test]
fn an_empty_node_is_deleted_as_empty_with_its_price_saved() {
    let mut scene = Scene::new(&[pool("default")]);
    scene.node("a", "default", "m5.large", "on-demand");
    let command = scene.command();
    assert_eq!(command.method, Method::Empty);
    assert_eq!(command.node_names(), ["a"]);
    assert!(command.replacements.is_empty());
    assert!((command.savings_per_hour - od_price("m5.large")).abs() < 1e-9);
    let labels = command.metric_labels();
    assert_eq!(
        (labels.decision.as_str(), labels.reason.as_str()),
        ("delete", "empty")
    );
    assert_eq!(labels.consolidation_type, "empty");
}

#[test]
fn daemonset_pods_do_not_make_a_node_busy() {
    let mut scene = Scene::new(&[pool("default")]);
    scene.node("a", "default", "m5.large", "on-demand").pod_with("logs", "a", "100m", |p| {
        p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "logs", "uid": "ds"}]);
    });
    assert_eq!(scene.command().method, Method::Empty);
}

#[test]
fn a_node_whose_pods_fit_on_another_is_deleted_by_consolidation() {
    let mut scene = Scene::new(&[pool("default")]);
    scene
        .node("big", "default", "m5.2xlarge", "on-demand")
        .pod_with("keeper", "big", "1", |p| {
            p["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "true"});
        })
        .node("small", "default", "m5.large", "on-demand")
        .pod("web", "small", "500m");
    let command = scene.command();
    assert_eq!(command.method, Method::Underutilized);
    assert_eq!(command.node_names(), ["small"]);
    assert!(
        command.replacements.is_empty(),
        "a delete, not a replace: {command:?}"
    );
    let labels = command.metric_labels();
    assert_eq!(
        (
            labels.decision.as_str(),
            labels.reason.as_str(),
            labels.consolidation_type.as_str()
        ),
        ("delete", "underutilized", "single"),
        "upstream's voluntary_disruption_decisions_total labels"
    );
}

#[test]
fn an_oversized_node_is_replaced_by_one_node_cheaper_in_every_offering() {
    let mut scene = Scene::new(&[pool("default")]);
    scene
        .node("big", "default", "m5.4xlarge", "on-demand")
        .pod("web", "big", "500m");
    let command = scene.command();
    assert_eq!(command.method, Method::Underutilized);
    assert_eq!(command.replacements.len(), 1);
    let replacement = &command.replacements[0];
    assert_eq!(replacement.capacity_type, "on-demand");
    let candidate = od_price("m5.4xlarge");
    for name in replacement.planned.instance_types.iter() {
        let it = catalog().get(name).expect("type");
        let dearest = it
            .offerings
            .iter()
            .filter(|o| o.capacity_type.label() == "on-demand")
            .map(|o| o.price)
            .fold(0.0, f64::max);
        assert!(
            dearest < candidate,
            "{name} at {dearest} is not cheaper than {candidate}"
        );
    }
    assert!(command.savings_per_hour > 0.0);
}

#[test]
fn three_half_empty_nodes_become_at_most_one_node() {
    let mut scene = Scene::new(&[pool("default")]);
    for n in ["a", "b", "c"] {
        scene
            .node(n, "default", "m5.xlarge", "on-demand")
            .pod(&format!("web-{n}"), n, "1");
    }
    let command = scene.command();
    assert_eq!(command.method, Method::Underutilized);
    assert!(command.nodes.len() >= 2, "multi-node: {command:?}");
    assert!(command.replacements.len() <= 1);
    assert!(command.savings_per_hour > 0.0);
}

#[test]
fn when_empty_keeps_an_underutilized_node_and_names_the_policy() {
    let mut scene = Scene::new(&[pool_with(
        "default",
        &["on-demand"],
        json!({"consolidateAfter": "0s", "consolidationPolicy": "WhenEmpty"}),
    )]);
    scene
        .node("a", "default", "m5.4xlarge", "on-demand")
        .pod("web", "a", "500m");
    assert!(scene.reason("a").contains("WhenEmpty"));
}

#[test]
fn a_do_not_disrupt_pod_blocks_its_node_by_name() {
    let mut scene = Scene::new(&[pool("default")]);
    scene
        .node("a", "default", "m5.4xlarge", "on-demand")
        .pod_with("db", "a", "500m", |p| {
            p["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "true"});
        });
    let reason = scene.reason("a");
    assert!(
        reason.contains("do-not-disrupt") && reason.contains("default/db"),
        "{reason}"
    );
}

#[test]
fn a_do_not_disrupt_duration_protects_until_it_runs_out() {
    let mut scene = Scene::new(&[pool("default")]);
    scene
        .node("a", "default", "m5.4xlarge", "on-demand")
        .pod_with("db", "a", "500m", |p| {
            p["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "90m"});
        });
    assert!(scene.reason("a").contains("do-not-disrupt"));
    let later: Timestamp = "2026-01-01T01:31:00Z".parse().expect("timestamp");
    assert!(
        scene.decide_at(later).command.is_some(),
        "90 minutes after creation it no longer protects"
    );
}

#[test]
fn a_do_not_disrupt_node_is_left_alone() {
    let mut scene = Scene::new(&[pool("default")]);
    scene.node_with("a", "default", "m5.large", "on-demand", |node, _| {
        node["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "true"});
    });
    let reason = scene.reason("a");
    assert!(
        reason.contains("node has karpenter.sh/do-not-disrupt"),
        "{reason}"
    );
}

#[test]
fn a_pdb_that_allows_no_eviction_blocks_and_is_named() {
    let mut scene = Scene::new(&[pool("default")]);
    scene
        .node("a", "default", "m5.4xlarge", "on-demand")
        .pod("web", "a", "500m")
        .pdb("web-pdb", "web", 0);
    let reason = scene.reason("a");
    assert!(reason.contains("pdb default/web-pdb"), "{reason}");
}

#[test]
fn a_zero_budget_blocks_and_says_budget() {
    let mut scene = Scene::new(&[pool_with(
        "default",
        &["on-demand"],
        json!({"consolidateAfter": "0s", "budgets": [{"nodes": "0"}]}),
    )]);
    scene.node("a", "default", "m5.large", "on-demand");
    let reason = scene.reason("a");
    assert!(
        reason.contains("budget") && reason.contains("default"),
        "{reason}"
    );
}

#[test]
fn a_percentage_budget_rounds_up() {
    let mut scene = Scene::new(&[pool_with(
        "default",
        &["on-demand"],
        json!({"consolidateAfter": "0s", "budgets": [{"nodes": "10%"}]}),
    )]);
    for n in ["a", "b", "c"] {
        scene.node(n, "default", "m5.large", "on-demand");
    }
    // 10% of 3 nodes is 0.3, rounded up: one node per pass.
    assert_eq!(scene.command().nodes.len(), 1);
}

#[test]
fn a_budget_in_its_cron_window_applies_and_outside_it_does_not() {
    let mut scene = Scene::new(&[pool_with(
        "default",
        &["on-demand"],
        json!({"consolidateAfter": "0s", "budgets": [
            {"nodes": "100%"},
            {"nodes": "0", "schedule": "0 1 * * *", "duration": "30m"}
        ]}),
    )]);
    scene.node("a", "default", "m5.large", "on-demand");
    // 01:00 is inside the 01:00-01:30 window.
    assert!(scene.reason("a").contains("budget"));
    let after: Timestamp = "2026-01-01T01:45:00Z".parse().expect("timestamp");
    assert!(scene.decide_at(after).command.is_some());
}

#[test]
fn a_budget_scoped_to_a_reason_leaves_other_reasons_free() {
    let mut scene = Scene::new(&[pool_with(
        "default",
        &["on-demand"],
        json!({"consolidateAfter": "0s", "budgets": [{"nodes": "0", "reasons": ["Underutilized"]}]}),
    )]);
    scene.node("empty", "default", "m5.large", "on-demand");
    scene
        .node("busy", "default", "m5.4xlarge", "on-demand")
        .pod("web", "busy", "500m");
    let (commands, blocked) = plan_all(&scene.view_at(now()), catalog(), &scene.options());
    let found: Vec<(Method, Vec<&str>)> = commands
        .iter()
        .map(|c| (c.method, c.node_names()))
        .collect();
    assert_eq!(found, [(Method::Empty, vec!["empty"])]);
    assert!(blocked["busy"].contains("budget"), "{blocked:?}");
}

#[test]
fn consolidate_after_is_measured_from_the_last_pod_event() {
    let mut scene = Scene::new(&[pool_with(
        "default",
        &["on-demand"],
        json!({"consolidateAfter": "10m"}),
    )]);
    scene.node_with("a", "default", "m5.large", "on-demand", |_, claim| {
        claim["status"]["lastPodEventTime"] = json!("2026-01-01T00:55:00Z");
    });
    assert!(scene.reason("a").contains("consolidateAfter"));
    let later: Timestamp = "2026-01-01T01:06:00Z".parse().expect("timestamp");
    assert!(scene.decide_at(later).command.is_some());
}

#[test]
fn a_spot_node_is_not_replaced_without_the_spot_to_spot_gate() {
    let mut scene = Scene::new(&[pool_with(
        "default",
        &["spot", "on-demand"],
        json!({"consolidateAfter": "0s"}),
    )]);
    scene
        .node("a", "default", "m5.4xlarge", "spot")
        .pod("web", "a", "500m");
    let reason = scene.reason("a");
    assert!(
        reason.contains("cheaper") && reason.contains("SpotToSpotConsolidation"),
        "{reason}"
    );
}

#[test]
fn with_the_gate_a_spot_node_is_replaced_by_the_fifteen_cheapest_spot_types() {
    let mut scene = Scene::new(&[pool_with(
        "default",
        &["spot", "on-demand"],
        json!({"consolidateAfter": "0s"}),
    )]);
    scene.spot_to_spot = true;
    scene
        .node("a", "default", "m5.8xlarge", "spot")
        .pod("web", "a", "500m");
    let command = scene.command();
    let replacement = &command.replacements[0];
    assert_eq!(replacement.capacity_type, "spot");
    assert_eq!(replacement.planned.instance_types.len(), 15);
}

#[test]
fn an_on_demand_node_replaced_where_spot_is_allowed_is_pinned_to_spot() {
    let mut scene = Scene::new(&[pool_with(
        "default",
        &["spot", "on-demand"],
        json!({"consolidateAfter": "0s"}),
    )]);
    scene
        .node("a", "default", "m5.4xlarge", "on-demand")
        .pod("web", "a", "500m");
    assert_eq!(scene.command().replacements[0].capacity_type, "spot");
}

#[test]
fn a_node_pending_pods_would_land_on_is_nominated_and_kept() {
    let mut scene = Scene::new(&[pool("default")]);
    scene.node("a", "default", "m5.large", "on-demand");
    let pending: Value = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "new", "namespace": "default", "uid": "uid-new"},
        "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    });
    scene
        .cluster
        .pods
        .push(serde_json::from_value(pending).expect("pod"));
    assert!(scene.reason("a").contains("nominated"));
}

#[test]
fn a_drifted_node_is_replaced_at_any_price() {
    let mut scene = Scene::new(&[pool("default")]);
    scene.node_with("a", "default", "m5.large", "on-demand", |_, claim| {
        claim["status"]["conditions"].as_array_mut().expect("conditions").push(json!(
            {"type": "Drifted", "status": "True", "lastTransitionTime": start().to_string(), "reason": "AMIDrift", "message": ""}
        ));
    });
    scene.pod("web", "a", "1500m");
    let command = scene.command();
    assert_eq!(command.method, Method::Drifted);
    assert_eq!(command.replacements.len(), 1);
}

#[test]
fn an_expired_node_is_an_expired_command_in_the_dry_run_despite_a_zero_budget() {
    let mut scene = Scene::new(&[pool_with(
        "default",
        &["on-demand"],
        json!({"consolidateAfter": "Never", "budgets": [{"nodes": "0"}]}),
    )]);
    scene.node_with("a", "default", "m5.large", "on-demand", |_, claim| {
        claim["spec"]["expireAfter"] = json!("30m");
    });
    scene.pod("web", "a", "500m");
    let (commands, _) = plan_all(&scene.view_at(now()), catalog(), &scene.options());
    assert_eq!(commands.len(), 1);
    assert_eq!(
        (commands[0].method, commands[0].node_names()),
        (Method::Expired, vec!["a"])
    );
}

#[test]
fn successive_passes_count_earlier_commands_against_budgets() {
    let mut scene = Scene::new(&[pool_with(
        "default",
        &["on-demand"],
        json!({"consolidateAfter": "0s", "budgets": [{"nodes": "2"}]}),
    )]);
    for n in ["a", "b", "c", "d"] {
        scene.node(n, "default", "m5.large", "on-demand");
    }
    let (commands, blocked) = plan_all(&scene.view_at(now()), catalog(), &scene.options());
    let disrupted: usize = commands.iter().map(|c| c.nodes.len()).sum();
    assert_eq!(disrupted, 2);
    assert_eq!(blocked.len(), 2);
    assert!(
        blocked.values().all(|r| r.contains("budget")),
        "{blocked:?}"
    );
}

#[test]
fn every_managed_node_not_in_a_command_gets_one_reason() {
    let mut scene = Scene::new(&[pool("default")]);
    scene
        .node("a", "default", "c6g.large", "on-demand")
        .pod("web", "a", "1500m")
        .node("b", "default", "c6g.large", "on-demand")
        .pod("api", "b", "1500m");
    let (commands, blocked) = plan_all(&scene.view_at(now()), catalog(), &scene.options());
    assert!(commands.is_empty(), "{commands:?}");
    assert_eq!(blocked.keys().collect::<Vec<_>>(), ["a", "b"]);
    assert!(
        blocked.values().all(|r| r.contains("cheaper")),
        "{blocked:?}"
    );
}

#[test]
fn the_re_check_drops_a_command_whose_node_is_no_longer_empty() {
    let mut scene = Scene::new(&[pool("default")]);
    scene.node("a", "default", "m5.large", "on-demand");
    let command = scene.command();
    scene.pod("web", "a", "500m");
    let view = scene.view_at(now());
    let rejected = validate(
        &view,
        catalog(),
        &scene.options(),
        Exclusions::default(),
        &command,
    );
    assert!(rejected.is_err(), "{rejected:?}");
}

#[test]
fn the_re_check_keeps_a_command_the_cluster_still_supports() {
    let mut scene = Scene::new(&[pool("default")]);
    scene
        .node("big", "default", "m5.4xlarge", "on-demand")
        .pod("web", "big", "500m");
    let command = scene.command();
    let view = scene.view_at(now());
    let kept = validate(
        &view,
        catalog(),
        &scene.options(),
        Exclusions::default(),
        &command,
    )
    .expect("still valid");
    assert_eq!(kept.node_names(), command.node_names());
    assert_eq!(kept.replacements.len(), 1);
}

#[test]
fn a_pass_reports_each_method_it_evaluated_with_its_eligible_nodes_until_one_decides() {
    let mut scene = Scene::new(&[pool("default")]);
    for n in ["a", "b", "c"] {
        scene
            .node(n, "default", "m5.xlarge", "on-demand")
            .pod(&format!("web-{n}"), n, "1");
    }
    let ticks = std::cell::Cell::new(0.0);
    let clock = || {
        ticks.set(ticks.get() + 0.5);
        ticks.get()
    };
    let decision = engine::decide_timed(
        &scene.view_at(now()),
        catalog(),
        &scene.options(),
        Exclusions::default(),
        &clock,
    );
    let seen: Vec<(&str, &str, usize)> = decision
        .evaluations
        .iter()
        .map(|e| (e.reason, e.consolidation_type, e.eligible))
        .collect();
    // No node is empty, none drifted; multi-node consolidation finds the command.
    assert_eq!(
        seen,
        [
            ("empty", "empty", 0),
            ("drifted", "", 0),
            ("underutilized", "multi", 3)
        ]
    );
    assert!(decision.evaluations.iter().all(|e| e.seconds == 0.5));
    assert_eq!(
        decision.command.expect("command").method,
        Method::Underutilized
    );
}

/// Three nodes, one per zone, each running one pod of Deployment `web` (its ReplicaSet in the
/// cluster), with `config` as the cluster's `--scheduler-config`.
fn web_across_zones(config: Option<&str>) -> Scene {
    let mut scene = Scene::new(&[pool("default")]);
    scene.cluster.scheduler_config = config.map(|raw| {
        karpenter_core::scheduling::SchedulerConfiguration::parse(raw)
            .expect("valid")
            .expect("configured")
    });
    scene.cluster.replica_sets.push(
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-5d4f8", "namespace": "default", "uid": "rs-web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {}}
        }))
        .expect("replica set"),
    );
    for (n, zone) in [
        ("a", "us-west-2a"),
        ("b", "us-west-2b"),
        ("c", "us-west-2c"),
    ] {
        scene
            .node_with(n, "default", "m5.xlarge", "on-demand", |node, claim| {
                node["metadata"]["labels"]["topology.kubernetes.io/zone"] = json!(zone);
                claim["metadata"]["labels"]["topology.kubernetes.io/zone"] = json!(zone);
            })
            .pod_with(&format!("web-{n}"), n, "1", |pod| {
                pod["metadata"]["labels"] = json!({"app": "web"});
                pod["metadata"]["ownerReferences"] = json!([{
                    "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d4f8",
                    "uid": "rs-web", "controller": true
                }]);
            });
    }
    scene
}

#[test]
fn consolidation_keeps_a_deployment_spread_across_zones_under_a_default_zone_constraint() {
    // Without the default, the three half-empty nodes merge into at most one.
    let merged = web_across_zones(None).command();
    assert!(merged.nodes.len() >= 2, "multi-node: {merged:?}");
    let config = "podTopologySpread:
  defaultConstraints:
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: DoNotSchedule
";
    // With it, moving a pod to another zone's node breaks the spread: each node is at most
    // replaced within its own zone.
    let decision = web_across_zones(Some(config)).decide();
    if let Some(command) = &decision.command {
        assert_eq!(command.nodes.len(), 1, "{command:?}");
        assert_eq!(command.replacements.len(), 1, "{command:?}");
    }
}

/// A Windows Server 2022 EC2NodeClass `windows` and its NodePool `windows`.
fn windows_scene() -> Scene {
    let mut pool = pool("windows");
    pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] = json!("windows");
    let mut scene = Scene::new(&[pool]);
    scene.cluster.node_classes.push(
        serde_json::from_value(json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "windows"},
            "spec": {
                "role": "KarpenterNodeRole-demo",
                "amiSelectorTerms": [{"alias": "windows2022@latest"}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]
            }
        }))
        .expect("class"),
    );
    scene
}

#[test]
fn an_oversized_windows_node_is_replaced_by_a_cheaper_windows_node_its_class_launches() {
    let mut scene = windows_scene();
    scene
        .node_with(
            "win",
            "windows",
            "m5.4xlarge",
            "on-demand",
            |node, claim| {
                for object in [node, claim] {
                    let labels = &mut object["metadata"]["labels"];
                    labels["kubernetes.io/os"] = json!("windows");
                    labels["node.kubernetes.io/windows-build"] = json!("10.0.20348");
                }
            },
        )
        .pod_with("iis", "win", "500m", |pod| {
            pod["spec"]["nodeSelector"] = json!({"kubernetes.io/os": "windows"});
        });
    // The replacement is planned from the types as the Windows class launches them: without
    // them no type is `kubernetes.io/os=windows` and the pod would fit nowhere.
    let command = scene.command();
    assert_eq!(command.method, Method::Underutilized, "{command:?}");
    assert_eq!(command.replacements.len(), 1, "{command:?}");
    let planned = &command.replacements[0].planned;
    assert!(
        planned.instance_types.iter().all(|name| {
            let it = catalog().get(name).expect("type");
            it.labels["kubernetes.io/arch"] == "amd64"
        }),
        "Windows AMIs are amd64 only: {planned:?}"
    );
    assert!(command.savings_per_hour > 0.0);
}
