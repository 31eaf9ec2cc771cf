//! Our metrics against upstream's table (`docs/metrics.md`): names, types and label sets.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use karpenter_core::metrics::Metrics;

/// One row of the committed table.
#[derive(Debug)]
struct Row {
    name: String,
    type_: String,
    labels: BTreeSet<String>,
    state: String,
}

fn table() -> Vec<Row> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/metrics.md");
    let text = std::fs::read_to_string(&path).expect("docs/metrics.md is committed");
    let start = text
        .find("<!-- table:start -->")
        .expect("table start marker");
    let end = text.find("<!-- table:end -->").expect("table end marker");
    text[start..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            Row {
                name: cells[0].trim_matches('`').to_string(),
                type_: cells[1].to_string(),
                labels: cells[2]
                    .split(',')
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect(),
                state: cells[3].to_string(),
            }
        })
        .collect()
}

/// What the encoding exports: by family name (counters with `_total`), its type and labels.
fn exported() -> BTreeMap<String, (String, BTreeSet<String>)> {
    let metrics = Metrics::new();
    metrics.touch_all();
    let text = metrics.encode();
    let mut families: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, type_) = rest.split_once(' ').expect("name and type");
            let name = if type_ == "counter" {
                format!("{name}_total")
            } else {
                name.to_string()
            };
            families.insert(name, (type_.to_string(), BTreeSet::new()));
        }
    }
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, labels)) = line.split_once('{') else {
            continue;
        };
        let family = families
            .keys()
            .find(|f| {
                series == f.as_str()
                    || ["_bucket", "_sum", "_count", "_created"]
                        .iter()
                        .any(|s| series == format!("{f}{s}"))
            })
            .cloned();
        let Some(family) = family else { continue };
        let labels = labels.split('}').next().unwrap_or_default();
        for pair in labels.split(',').filter(|p| !p.is_empty()) {
            let key = pair.split('=').next().unwrap_or_default().trim();
            if key != "le" {
                families
                    .get_mut(&family)
                    .expect("family")
                    .1
                    .insert(key.to_string());
            }
        }
    }
    families
}

/// Review H2: dashboards built on upstream's names and labels must find ours. The table is the
/// contract: exported rows must match exactly, missing rows must stay unexported (so the table
/// says what is true), and nothing is exported that the table does not name.
#[test]
fn every_exported_metric_has_upstreams_name_and_labels_as_the_committed_table_says() {
    let table = table();
    assert!(table.len() >= 30, "the table parsed: {table:?}");
    let exported = exported();
    let mut problems = Vec::new();
    for row in &table {
        let ours = exported.get(&row.name);
        match (row.state.as_str(), ours) {
            ("exported" | "ours", Some((type_, labels))) => {
                if *type_ != row.type_ {
                    problems.push(format!(
                        "{}: type {type_}, table says {}",
                        row.name, row.type_
                    ));
                }
                if *labels != row.labels {
                    problems.push(format!(
                        "{}: labels {labels:?}, table says {:?}",
                        row.name, row.labels
                    ));
                }
            }
            ("differs", Some((_, labels))) => {
                if *labels != row.labels {
                    problems.push(format!(
                        "{}: labels {labels:?}, table says {:?}",
                        row.name, row.labels
                    ));
                }
            }
            ("missing", Some(_)) => problems.push(format!(
                "{}: exported, but the table says missing",
                row.name
            )),
            ("missing", None) => {}
            (state, None) => {
                problems.push(format!("{}: not exported, table says {state}", row.name))
            }
            (state, Some(_)) => problems.push(format!("{}: unknown state {state}", row.name)),
        }
    }
    let named: BTreeSet<&str> = table.iter().map(|r| r.name.as_str()).collect();
    for name in exported.keys() {
        if !named.contains(name.as_str()) {
            problems.push(format!("{name}: exported but not in docs/metrics.md"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_provisioning_pass_records_created_claims_scheduling_time_and_cluster_state() {
    let metrics = Metrics::new();
    let created = serde_json::json!({"metadata": {"labels": {"karpenter.sh/nodepool": "default"}}});
    metrics.record_created("provisioning", &created);
    let text = metrics.encode();
    assert!(
        text.contains(
            "karpenter_nodeclaims_created_total{reason=\"provisioning\",nodepool=\"default\",min_values_relaxed=\"false\"} 1"
        ),
        "{text}"
    );
}

#[test]
fn node_and_nodepool_gauges_follow_the_cluster_and_drop_a_deleted_node() {
    // The pool's cost is its claim's offering price (upstream's `nodepools_cost_total`).
    use karpenter_core::seams::KubeApi;
    use karpenter_core::seams::kube::{DeleteOptions, ObjectKey, ResourceKind};
    use karpenter_core::state_metrics::StateMetrics;
    use serde_json::json;
    let clock = super::support::clock();
    let cloud = super::support::cloud(&clock);
    let kube = super::api_server::api_server(clock.clone());
    let ctx = std::sync::Arc::new(super::support::context(&kube, &cloud, &clock));
    let mut node = super::support::objects::ready_node("ip-10-0-0-1", "aws:///us-west-2a/i-0a");
    node["metadata"]["labels"] = json!({
        "karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.large",
        "karpenter.sh/capacity-type": "spot", "topology.kubernetes.io/zone": "us-west-2a"
    });
    node["status"]["capacity"] = json!({"cpu": "2", "memory": "8Gi", "pods": "29"});
    use super::api_server::Fixtures;
    kube.apply(&ResourceKind::NODE, node);
    let mut pod = super::support::objects::running_pod("web", "ip-10-0-0-1", |_| {});
    pod["spec"]["containers"][0]["resources"] =
        json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1"}});
    kube.apply(&ResourceKind::POD, pod);
    let mut pool = super::validation::nodepool();
    pool["spec"]["limits"] = json!({"cpu": "100"});
    kube.apply(&ResourceKind::NODE_POOL, pool);
    let mut claim = super::support::objects::nodeclaim("default-a").json();
    for (k, v) in [
        ("node.kubernetes.io/instance-type", "m5.large"),
        ("topology.kubernetes.io/zone", "us-west-2a"),
        ("karpenter.sh/capacity-type", "spot"),
    ] {
        claim["metadata"]["labels"][k] = json!(v);
    }
    kube.apply(&ResourceKind::NODE_CLAIM, claim);
    let price = karpenter_core::catalog::Catalog::builtin()
        .get("m5.large")
        .expect("m5.large")
        .offerings
        .iter()
        .find(|o| o.zone == "us-west-2a" && o.capacity_type.label() == "spot")
        .expect("offering")
        .price;
    let metrics = StateMetrics::new(ctx.clone());
    // The gauges read the caches as the controllers last synced them.
    let sync = || {
        futures::executor::block_on(async { ctx.state.lock().await.sync(ctx.kube.as_ref()).await })
            .expect("sync")
    };
    sync();
    futures::executor::block_on(metrics.reconcile()).expect("pass");
    let text = ctx.metrics.encode();
    let line = |family: &str, resource: &str| {
        text.lines()
            .find(|l| {
                l.starts_with(&format!("karpenter_{family}{{"))
                    && l.contains(&format!("resource_type=\"{resource}\""))
            })
            .map(|l| l.rsplit(' ').next().unwrap().to_string())
    };
    assert_eq!(line("nodes_allocatable", "cpu").as_deref(), Some("2.0"));
    assert_eq!(
        line("nodes_total_pod_requests", "cpu").as_deref(),
        Some("0.5")
    );
    assert_eq!(
        line("nodes_total_pod_limits", "cpu").as_deref(),
        Some("1.0")
    );
    assert_eq!(
        line("cluster_utilization_percent", "cpu").as_deref(),
        Some("25.0")
    );
    assert_eq!(line("nodepools_limit", "cpu").as_deref(), Some("100.0"));
    assert!(
        text.contains(
            "karpenter_cloudprovider_instance_type_cpu_cores{instance_type=\"m5.large\"} 2"
        ),
        "the pass writes the catalog's instance-type gauges too"
    );
    let cost = text
        .lines()
        .find(|l| l.starts_with("karpenter_nodepools_cost_total{nodepool=\"default\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok());
    assert_eq!(cost, Some(price), "the claim's spot price: {text}");
    let allocatable = text
        .lines()
        .find(|l| l.starts_with("karpenter_nodes_allocatable{"))
        .expect("series");
    for label in [
        "node_name=\"ip-10-0-0-1\"",
        "nodepool=\"default\"",
        "instance_type=\"m5.large\"",
        "capacity_type=\"spot\"",
        "zone=\"us-west-2a\"",
        "managed=\"true\"",
    ] {
        assert!(allocatable.contains(label), "{label} in {allocatable}");
    }
    futures::executor::block_on(kube.delete(
        &ResourceKind::NODE,
        &ObjectKey::cluster("ip-10-0-0-1"),
        &DeleteOptions::default(),
    ))
    .expect("delete");
    sync();
    futures::executor::block_on(metrics.reconcile()).expect("pass");
    let text = ctx.metrics.encode();
    assert!(
        !text.contains("node_name=\"ip-10-0-0-1\""),
        "a deleted node's series are removed: {text}"
    );
}

fn pod(
    name: &str,
    created: &str,
    phase: &str,
    conditions: &[(&str, &str)],
    node: Option<&str>,
) -> k8s_openapi::api::core::v1::Pod {
    let conditions: Vec<serde_json::Value> = conditions
        .iter()
        .map(|(type_, at)| serde_json::json!({"type": type_, "status": "True", "lastTransitionTime": at}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": created,
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "u"}]},
        "spec": {"containers": [], "nodeName": node},
        "status": {"phase": phase, "conditions": conditions}
    }))
    .expect("pod")
}

fn at(text: &str) -> jiff::Timestamp {
    text.parse().expect("timestamp")
}

/// Issue 15: upstream's pod metric controller. A pod running before the first pass is not timed;
/// a pending one shows its unbound and unstarted time, then is observed once when bound and
/// Ready; a pod created and started between two passes is still timed; a deleted pod's series go.
#[test]
fn pod_series_time_binding_and_startup_once_and_drop_deleted_pods() {
    use karpenter_core::pod_metrics::{PodSeries, PodTracker, apply_pods, compute_pods};
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n1", "labels": {"karpenter.sh/nodepool": "default",
            "topology.kubernetes.io/zone": "us-west-2a", "karpenter.sh/capacity-type": "spot"}}
    }))
    .expect("node");
    let nodes = BTreeMap::from([("n1".to_string(), &node)]);
    let metrics = Metrics::new();
    let mut tracker = PodTracker::default();
    let old = pod(
        "old",
        "2026-01-01T00:00:00Z",
        "Running",
        &[
            ("PodScheduled", "2026-01-01T00:00:01Z"),
            ("Ready", "2026-01-01T00:00:02Z"),
        ],
        Some("n1"),
    );
    let b = pod("b", "2026-01-01T00:09:55Z", "Pending", &[], None);
    let first = compute_pods(
        &[&old, &b],
        &nodes,
        &mut tracker,
        at("2026-01-01T00:10:00Z"),
    );
    apply_pods(&metrics, &PodSeries::default(), &first);
    assert!(
        first.started.is_empty() && first.bound.is_empty(),
        "{first:?}"
    );
    let b_key = ("b".to_string(), "default".to_string());
    assert_eq!(first.unbound.get(&b_key), Some(&5.0));
    assert_eq!(first.unstarted.get(&b_key), Some(&5.0));
    let text = metrics.encode();
    assert!(
        text.contains("owner=\"/apis/apps/v1/namespaces/default/replicasets/web-1\""),
        "{text}"
    );
    assert!(text.contains("managed=\"true\"") && text.contains("zone=\"us-west-2a\""));

    let b = pod(
        "b",
        "2026-01-01T00:09:55Z",
        "Running",
        &[
            ("PodScheduled", "2026-01-01T00:10:05Z"),
            ("Ready", "2026-01-01T00:10:15Z"),
        ],
        Some("n1"),
    );
    let c = pod(
        "c",
        "2026-01-01T00:10:03Z",
        "Running",
        &[
            ("PodScheduled", "2026-01-01T00:10:04Z"),
            ("Ready", "2026-01-01T00:10:06Z"),
        ],
        Some("n1"),
    );
    let second = compute_pods(
        &[&old, &b, &c],
        &nodes,
        &mut tracker,
        at("2026-01-01T00:10:20Z"),
    );
    apply_pods(&metrics, &first, &second);
    let mut started = second.started.clone();
    started.sort_by(f64::total_cmp);
    assert_eq!(
        started,
        vec![3.0, 20.0],
        "b from creation to Ready, and c though never seen pending"
    );
    let mut bound = second.bound.clone();
    bound.sort_by(f64::total_cmp);
    assert_eq!(bound, vec![1.0, 10.0]);
    assert!(second.unbound.is_empty() && second.unstarted.is_empty());

    let third = compute_pods(
        &[&old, &c],
        &nodes,
        &mut tracker,
        at("2026-01-01T00:10:30Z"),
    );
    apply_pods(&metrics, &second, &third);
    assert!(
        third.started.is_empty() && third.bound.is_empty(),
        "observed once"
    );
    let text = metrics.encode();
    assert!(!text.contains("name=\"b\""), "b's series are gone: {text}");
    assert!(
        text.contains("karpenter_pods_startup_duration_seconds_count 2"),
        "{text}"
    );
}

/// Issue 15 (H2): upstream's AWS instance-type gauges, from the catalog: vCPUs and EC2's memory
/// per type, and per offering whether it can be bought now (an offering in the
/// unavailable-offerings cache cannot) and its price.
#[test]
fn instance_type_gauges_show_the_catalog_and_an_offering_out_of_capacity_as_unavailable() {
    use karpenter_core::catalog::{CapacityType, Catalog, UnavailableOfferings};
    let catalog = Catalog::builtin();
    let unavailable = UnavailableOfferings::new();
    let now = at("2026-01-01T00:00:00Z");
    unavailable.mark(
        "m5.large",
        "us-west-2a",
        CapacityType::Spot,
        now,
        std::time::Duration::from_secs(180),
    );
    let metrics = Metrics::new();
    metrics.record_catalog(&catalog, &unavailable, now);
    let text = metrics.encode();
    let value = |family: &str, labels: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("karpenter_cloudprovider_{family}{{{labels}}}")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
    };
    let m5 = "instance_type=\"m5.large\"";
    assert_eq!(value("instance_type_cpu_cores", m5), Some(2.0), "{text}");
    assert_eq!(
        value("instance_type_memory_bytes", m5),
        Some(8.0 * 1024.0 * 1024.0 * 1024.0)
    );
    let offering = |capacity: &str| {
        format!("instance_type=\"m5.large\",capacity_type=\"{capacity}\",zone=\"us-west-2a\"")
    };
    assert_eq!(
        value("instance_type_offering_available", &offering("spot")),
        Some(0.0)
    );
    assert_eq!(
        value("instance_type_offering_available", &offering("on-demand")),
        Some(1.0)
    );
    let price = catalog
        .get("m5.large")
        .expect("m5.large")
        .offerings
        .iter()
        .find(|o| o.zone == "us-west-2a" && o.capacity_type == CapacityType::OnDemand)
        .expect("offering")
        .price;
    assert_eq!(
        value(
            "instance_type_offering_price_estimate",
            &offering("on-demand")
        ),
        Some(price)
    );
    let types = text
        .lines()
        .filter(|l| l.starts_with("karpenter_cloudprovider_instance_type_cpu_cores{"))
        .count();
    assert_eq!(types, catalog.instance_types.len(), "one series per type");
}

/// Issue 15 (H2): `karpenter_build_info` is 1 for exactly one build: the core's version until
/// the binary sets its own, with the Rust compiler as `goversion` and Go's architecture names.
#[test]
fn build_info_is_one_series_for_the_build_the_binary_names() {
    use karpenter_core::metrics::BuildInfo;
    let metrics = Metrics::new();
    let text = metrics.encode();
    let version = format!("version=\"{}\"", env!("CARGO_PKG_VERSION"));
    let line = text
        .lines()
        .find(|l| l.starts_with("karpenter_build_info{"))
        .expect("present from the start");
    assert!(line.contains(&version) && line.ends_with(" 1"), "{line}");
    assert!(line.contains("goversion=\"rustc "), "{line}");
    metrics.set_build_info(&BuildInfo::new("1.2.3", "abc123"));
    let text = metrics.encode();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("karpenter_build_info{"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("version=\"1.2.3\"") && lines[0].contains("commit=\"abc123\""),
        "{lines:?}"
    );
    let arch = karpenter_core::metrics::cloudprovider::go_arch(std::env::consts::ARCH);
    assert!(lines[0].contains(&format!("goarch=\"{arch}\"")));
    assert_eq!(
        karpenter_core::metrics::cloudprovider::go_arch("x86_64"),
        "amd64"
    );
    assert_eq!(
        karpenter_core::metrics::cloudprovider::go_arch("aarch64"),
        "arm64"
    );
}

/// The status-condition metrics controller over an in-memory API server: objects go in as
/// fixtures, a pass reads the caches as the controllers would have synced them.
struct StatusWorld {
    clock: std::sync::Arc<karpenter_core::seams::clock::ManualClock>,
    kube: std::sync::Arc<fakekube::ApiServer>,
    ctx: std::sync::Arc<karpenter_core::context::Context>,
    status: karpenter_core::status_metrics::StatusMetrics,
}

impl StatusWorld {
    fn new() -> Self {
        let clock = super::support::clock();
        let cloud = super::support::cloud(&clock);
        let kube = super::api_server::api_server(clock.clone());
        let ctx = std::sync::Arc::new(super::support::context(&kube, &cloud, &clock));
        let status = karpenter_core::status_metrics::StatusMetrics::new(ctx.clone());
        Self {
            clock,
            kube,
            ctx,
            status,
        }
    }

    /// Advances the clock by `seconds`, then syncs the caches and runs one pass.
    fn pass_after(&self, seconds: u64) -> String {
        self.clock.advance(std::time::Duration::from_secs(seconds));
        futures::executor::block_on(async {
            let mut state = self.ctx.state.lock().await;
            state.sync(self.ctx.kube.as_ref()).await.expect("sync");
        });
        futures::executor::block_on(self.status.reconcile());
        self.ctx.metrics.encode()
    }

    /// Replaces the claim's conditions: `(type, status, reason, seconds after the start)`.
    fn set_conditions(&self, claim: &str, conditions: &[(&str, &str, &str, i64)]) {
        use karpenter_core::seams::KubeApi;
        use karpenter_core::seams::kube::{ObjectKey, Patch, ResourceKind};
        let list: Vec<serde_json::Value> = conditions
            .iter()
            .map(|(type_, status, reason, at)| {
                let at = super::support::start() + jiff::SignedDuration::from_secs(*at);
                serde_json::json!({"type": type_, "status": status, "reason": reason,
                    "message": "", "lastTransitionTime": at.to_string()})
            })
            .collect();
        let patch = Patch::Merge(serde_json::json!({"status": {"conditions": list}}));
        futures::executor::block_on(self.kube.patch_status(
            &ResourceKind::NODE_CLAIM,
            &ObjectKey::cluster(claim),
            &patch,
        ))
        .expect("status patch");
    }

    fn claim(&self, name: &str) {
        use super::api_server::Fixtures;
        use karpenter_core::seams::kube::ResourceKind;
        let mut claim = super::support::objects::nodeclaim(name).json();
        claim["metadata"]["labels"]["karpenter.k8s.aws/ec2nodeclass"] =
            serde_json::json!("default");
        claim["metadata"]["finalizers"] = serde_json::json!(["karpenter.sh/termination"]);
        self.kube.apply(&ResourceKind::NODE_CLAIM, claim);
    }
}

/// The value of the series that starts with `series` (its name and first labels).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

const CLAIM_LABELS: &str =
    "karpenter_k8s_aws_ec2nodeclass=\"default\",karpenter_sh_nodepool=\"default\"";

/// Issue 15 (H2): operatorpkg's status controller, as upstream registers it for NodeClaims:
/// each condition is a `count` and a `current_status_seconds` series labelled namespace, name,
/// type, status, reason and the claim's NodeClass and NodePool labels, with the deprecated
/// kind-agnostic series beside them; `Ready` and its dependents show `Unknown` since the claim's
/// creation while the claim lacks them. Nodes and NodePools get theirs too.
#[test]
fn an_unchanged_claims_seconds_move_on_each_pass_without_counting_its_transitions_again() {
    let w = StatusWorld::new();
    w.claim("default-a");
    w.set_conditions("default-a", &[("Launched", "True", "Launched", 5)]);
    let seconds = format!(
        "operator_nodeclaim_status_condition_current_status_seconds{{namespace=\"\",name=\"default-a\",type=\"Launched\",status=\"True\",reason=\"Launched\",{CLAIM_LABELS}}}"
    );
    let transitions = format!(
        "operator_nodeclaim_status_condition_transitions_total{{type=\"Launched\",status=\"True\",reason=\"Launched\",{CLAIM_LABELS}}}"
    );
    let first = w.pass_after(30);
    assert_eq!(sample(&first, &seconds), Some(25.0), "{first}");
    // The claim is not written again: the later passes find the version they read.
    let second = w.pass_after(10);
    assert_eq!(sample(&second, &seconds), Some(35.0), "{second}");
    let third = w.pass_after(10);
    assert_eq!(sample(&third, &seconds), Some(45.0), "{third}");
    assert_eq!(
        sample(&third, &transitions),
        Some(1.0),
        "counted once: {third}"
    );
    // A write makes it read again: a new transition time counts one more transition.
    w.set_conditions("default-a", &[("Launched", "True", "Launched", 50)]);
    let fourth = w.pass_after(10);
    assert_eq!(sample(&fourth, &seconds), Some(10.0), "{fourth}");
    assert_eq!(sample(&fourth, &transitions), Some(2.0), "{fourth}");
}

#[test]
fn a_nodeclaims_conditions_appear_as_count_and_current_status_series_with_upstreams_labels() {
    use super::api_server::Fixtures;
    use karpenter_core::seams::kube::ResourceKind;
    let w = StatusWorld::new();
    w.claim("default-a");
    w.set_conditions("default-a", &[("Launched", "True", "Launched", 5)]);
    w.kube
        .apply(&ResourceKind::NODE_POOL, super::validation::nodepool());
    let node = super::support::objects::ready_node("ip-10-0-0-1", "aws:///us-west-2a/i-0a");
    w.kube.apply(&ResourceKind::NODE, node);
    let text = w.pass_after(30);
    let launched =
        "{namespace=\"\",name=\"default-a\",type=\"Launched\",status=\"True\",reason=\"Launched\",";
    assert_eq!(
        sample(
            &text,
            &format!("operator_nodeclaim_status_condition_count{launched}{CLAIM_LABELS}}}")
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            &format!(
                "operator_nodeclaim_status_condition_current_status_seconds{launched}{CLAIM_LABELS}}}"
            )
        ),
        Some(25.0),
        "since its lastTransitionTime"
    );
    assert_eq!(
        sample(
            &text,
            &format!(
                "operator_status_condition_count{launched}group=\"karpenter.sh\",kind=\"NodeClaim\"}}"
            )
        ),
        Some(1.0),
        "the deprecated series: {text}"
    );
    let ready = format!(
        "operator_nodeclaim_status_condition_current_status_seconds{{namespace=\"\",name=\"default-a\",type=\"Ready\",status=\"Unknown\",reason=\"AwaitingReconciliation\",{CLAIM_LABELS}}}"
    );
    assert_eq!(
        sample(&text, &ready),
        Some(30.0),
        "Unknown since creation: {text}"
    );
    assert_eq!(
        sample(
            &text,
            &format!(
                "operator_nodeclaim_status_condition_transitions_total{{type=\"Launched\",status=\"True\",reason=\"Launched\",{CLAIM_LABELS}}}"
            )
        ),
        Some(1.0),
        "a condition first seen True counts, as upstream"
    );
    assert!(
        text.lines().any(|l| l.starts_with("operator_nodepool_status_condition_count{namespace=\"\",name=\"default\",type=\"Ready\"")),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("operator_node_status_condition_count{namespace=\"\",name=\"ip-10-0-0-1\",type=\"Ready\",status=\"True\"")
            && l.contains("karpenter_sh_initialized=")),
        "{text}"
    );
    assert!(
        !text.contains("kind=\"Node\""),
        "upstream emits no deprecated series for Nodes"
    );
}

/// Issue 15 (H2): a condition that goes from Unknown to True between two passes counts one
/// transition (labelled True) and observes how long it was Unknown (labelled Unknown); the
/// Unknown series goes. A flip and back between two passes still counts, once.
#[test]
fn a_condition_flipping_from_unknown_to_true_counts_one_transition_and_observes_its_duration() {
    let w = StatusWorld::new();
    w.claim("default-a");
    w.set_conditions("default-a", &[("Initialized", "Unknown", "NotReady", 0)]);
    let text = w.pass_after(10);
    let transitions = format!(
        "operator_nodeclaim_status_condition_transitions_total{{type=\"Initialized\",status=\"True\",reason=\"Initialized\",{CLAIM_LABELS}}}"
    );
    assert_eq!(
        sample(&text, &transitions),
        None,
        "Unknown first seen is no transition"
    );
    w.set_conditions("default-a", &[("Initialized", "True", "Initialized", 25)]);
    let text = w.pass_after(20);
    assert_eq!(sample(&text, &transitions), Some(1.0), "{text}");
    let timed = format!(
        "operator_nodeclaim_status_condition_transition_seconds_sum{{type=\"Initialized\",status=\"Unknown\",{CLAIM_LABELS}}}"
    );
    assert_eq!(
        sample(&text, &timed),
        Some(25.0),
        "Unknown from 0 s to 25 s: {text}"
    );
    let deprecated = "operator_status_condition_transition_seconds_count{type=\"Initialized\",status=\"Unknown\",group=\"karpenter.sh\",kind=\"NodeClaim\"}";
    assert_eq!(sample(&text, deprecated), Some(1.0), "{text}");
    assert!(
        !text.contains("type=\"Initialized\",status=\"Unknown\",reason=\"NotReady\""),
        "the Unknown gauges are removed: {text}"
    );
    let text = w.pass_after(10);
    assert_eq!(sample(&text, &transitions), Some(1.0), "counted once");
    // False at 45 s and True again at 48 s, both between two passes.
    w.set_conditions("default-a", &[("Initialized", "True", "Initialized", 48)]);
    let text = w.pass_after(10);
    assert_eq!(sample(&text, &transitions), Some(2.0), "{text}");
    let count = timed.replace("_sum{", "_count{");
    assert_eq!(
        sample(&text, &count),
        Some(1.0),
        "the False spell's length is unknown: not observed"
    );
}

/// Issue 15 (H2): a deleted claim's series go with it; while it terminates its time since the
/// deletion is a gauge, and once gone that time is observed.
#[test]
fn a_deleted_claims_series_are_gone_and_its_termination_is_timed() {
    use karpenter_core::seams::KubeApi;
    use karpenter_core::seams::kube::{DeleteOptions, ObjectKey, Patch, ResourceKind};
    let w = StatusWorld::new();
    w.claim("default-a");
    w.set_conditions("default-a", &[("Launched", "True", "Launched", 0)]);
    let text = w.pass_after(10);
    assert!(text.contains("name=\"default-a\""), "{text}");
    let key = ObjectKey::cluster("default-a");
    futures::executor::block_on(w.kube.delete(
        &ResourceKind::NODE_CLAIM,
        &key,
        &DeleteOptions::default(),
    ))
    .expect("delete");
    let text = w.pass_after(15);
    let terminating = format!(
        "operator_nodeclaim_termination_current_time_seconds{{namespace=\"\",name=\"default-a\",{CLAIM_LABELS}}}"
    );
    assert_eq!(sample(&text, &terminating), Some(15.0), "{text}");
    let finalizers = Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
    futures::executor::block_on(w.kube.patch(&ResourceKind::NODE_CLAIM, &key, &finalizers))
        .expect("finalizer removed");
    let text = w.pass_after(10);
    assert!(
        !text.lines().any(|l| l.contains("name=\"default-a\"")),
        "every series of the claim is gone: {text}"
    );
    let took = format!("operator_nodeclaim_termination_duration_seconds_sum{{{CLAIM_LABELS}}}");
    assert_eq!(sample(&text, &took), Some(25.0), "{text}");
    assert_eq!(
        sample(
            &text,
            "operator_termination_duration_seconds_count{group=\"karpenter.sh\",kind=\"NodeClaim\"}"
        ),
        Some(1.0),
        "{text}"
    );
}

/// Issue 13 (the pass keeps handles on its series): a condition whose reason changes, and a node
/// whose labels change, move their series to the new label sets; the old ones are gone, and the
/// unchanged ones keep counting time.
#[test]
fn a_changed_reason_or_object_label_moves_the_series_and_leaves_no_stale_one() {
    use super::api_server::Fixtures;
    use karpenter_core::seams::KubeApi;
    use karpenter_core::seams::kube::{ObjectKey, Patch, ResourceKind};
    let w = StatusWorld::new();
    w.claim("default-a");
    w.set_conditions(
        "default-a",
        &[
            ("Launched", "True", "Launched", 0),
            ("Registered", "False", "NotFound", 0),
        ],
    );
    let node = super::support::objects::ready_node("ip-10-0-0-1", "aws:///us-west-2a/i-0a");
    w.kube.apply(&ResourceKind::NODE, node);
    let text = w.pass_after(10);
    let registered = |reason: &str| {
        format!(
            "operator_nodeclaim_status_condition_count{{namespace=\"\",name=\"default-a\",type=\"Registered\",status=\"False\",reason=\"{reason}\",{CLAIM_LABELS}}}"
        )
    };
    assert_eq!(sample(&text, &registered("NotFound")), Some(1.0), "{text}");
    let node_ready = |initialized: &str| {
        format!(
            "operator_node_status_condition_count{{namespace=\"\",name=\"ip-10-0-0-1\",type=\"Ready\",status=\"True\",reason=\"\",karpenter_k8s_aws_ec2nodeclass=\"\",karpenter_sh_nodepool=\"\",karpenter_sh_initialized=\"{initialized}\"}}"
        )
    };
    assert_eq!(sample(&text, &node_ready("")), Some(1.0), "{text}");
    w.set_conditions(
        "default-a",
        &[
            ("Launched", "True", "Launched", 0),
            ("Registered", "False", "Timeout", 0),
        ],
    );
    let labels = Patch::Merge(
        serde_json::json!({"metadata": {"labels": {"karpenter.sh/initialized": "true"}}}),
    );
    futures::executor::block_on(w.kube.patch(
        &ResourceKind::NODE,
        &ObjectKey::cluster("ip-10-0-0-1"),
        &labels,
    ))
    .expect("label patch");
    let text = w.pass_after(10);
    assert_eq!(sample(&text, &registered("NotFound")), None, "{text}");
    assert_eq!(sample(&text, &registered("Timeout")), Some(1.0), "{text}");
    assert_eq!(sample(&text, &node_ready("")), None, "{text}");
    assert_eq!(sample(&text, &node_ready("true")), Some(1.0), "{text}");
    let launched = format!(
        "operator_nodeclaim_status_condition_current_status_seconds{{namespace=\"\",name=\"default-a\",type=\"Launched\",status=\"True\",reason=\"Launched\",{CLAIM_LABELS}}}"
    );
    assert_eq!(sample(&text, &launched), Some(20.0), "{text}");
    let deprecated = "operator_status_condition_count{namespace=\"\",name=\"default-a\",type=\"Registered\",status=\"False\",reason=\"NotFound\"";
    assert!(!text.contains(deprecated), "{text}");
}

/// Issue 15: upstream's alpha `pods_provisioning_*` series. A pod the provisioner saw but has not
/// decided on shows its undecided time; once a pass placed it, its unbound and unstarted times
/// run from that placement; its bound and startup durations are observed once, from it; and its
/// scheduling times are forgotten once it runs.
#[test]
fn provisioning_series_time_a_pod_from_the_provisioners_first_placement() {
    use karpenter_core::pod_metrics::{
        PodSchedulingTimes, ProvisioningSeries, ProvisioningTracker, apply_provisioning,
        compute_provisioning,
    };
    let times = PodSchedulingTimes::default();
    let mut tracker = ProvisioningTracker::default();
    let metrics = Metrics::new();
    let key = ("p".to_string(), "default".to_string());
    let pending = pod("p", "2026-01-01T00:00:00Z", "Pending", &[], None);
    times.ack("default/p", at("2026-01-01T00:00:02Z"));
    let first = compute_provisioning(
        &[&pending],
        &times,
        &mut tracker,
        at("2026-01-01T00:00:05Z"),
    );
    assert_eq!(first.undecided.get(&key), Some(&3.0), "{first:?}");
    assert!(
        first.unbound.is_empty() && first.unstarted.is_empty(),
        "not placed yet"
    );
    apply_provisioning(&metrics, &ProvisioningSeries::default(), &first);

    times.decided("default/p", at("2026-01-01T00:00:10Z"), true);
    let second = compute_provisioning(
        &[&pending],
        &times,
        &mut tracker,
        at("2026-01-01T00:00:30Z"),
    );
    assert!(second.undecided.is_empty(), "decided: {second:?}");
    assert_eq!(second.unbound.get(&key), Some(&20.0));
    assert_eq!(second.unstarted.get(&key), Some(&20.0));
    apply_provisioning(&metrics, &first, &second);
    let text = metrics.encode();
    assert!(
        text.contains(
            "karpenter_pods_provisioning_unbound_time_seconds{name=\"p\",namespace=\"default\"} 20"
        ),
        "{text}"
    );
    assert!(
        !text.contains("pods_provisioning_scheduling_undecided_time_seconds{"),
        "{text}"
    );

    let running = pod(
        "p",
        "2026-01-01T00:00:00Z",
        "Running",
        &[
            ("PodScheduled", "2026-01-01T00:00:40Z"),
            ("Ready", "2026-01-01T00:01:00Z"),
        ],
        Some("n1"),
    );
    let third = compute_provisioning(
        &[&running],
        &times,
        &mut tracker,
        at("2026-01-01T00:01:05Z"),
    );
    assert_eq!(third.bound, vec![30.0], "placement to PodScheduled");
    assert_eq!(third.started, vec![50.0], "placement to Ready");
    assert!(third.unbound.is_empty() && third.unstarted.is_empty());
    assert_eq!(
        times.get("default/p"),
        Default::default(),
        "forgotten once it runs"
    );
    apply_provisioning(&metrics, &second, &third);
    let fourth = compute_provisioning(
        &[&running],
        &times,
        &mut tracker,
        at("2026-01-01T00:01:15Z"),
    );
    assert!(
        fourth.started.is_empty() && fourth.bound.is_empty(),
        "observed once"
    );
    let text = metrics.encode();
    assert!(
        text.contains("karpenter_pods_provisioning_startup_duration_seconds_count 1"),
        "{text}"
    );
    assert!(
        !text.contains("pods_provisioning_unbound_time_seconds{"),
        "{text}"
    );
}

#[test]
fn a_node_series_shares_its_node_labels_and_lists_resource_type_in_name_order() {
    use karpenter_core::metrics::NodeLabels;
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::registry::Registry;
    use std::sync::Arc;

    let node: Arc<[(String, String)]> = [("arch", "amd64"), ("node_name", "n1"), ("zone", "a")]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into();
    let family = Family::<NodeLabels, Gauge>::default();
    for resource in ["cpu", "memory"] {
        let labels = NodeLabels {
            node: node.clone(),
            resource_type: Some(resource.to_string()),
        };
        family.get_or_create(&labels).set(1);
    }
    family
        .get_or_create(&NodeLabels {
            node: node.clone(),
            resource_type: None,
        })
        .set(2);
    assert_eq!(
        Arc::strong_count(&node),
        4,
        "the registry holds the node's labels once, shared by its series"
    );
    let mut registry = Registry::default();
    registry.register("nodes", "help", family);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    for line in [
        r#"nodes{arch="amd64",node_name="n1",resource_type="cpu",zone="a"} 1"#,
        r#"nodes{arch="amd64",node_name="n1",resource_type="memory",zone="a"} 1"#,
        r#"nodes{arch="amd64",node_name="n1",zone="a"} 2"#,
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
}
