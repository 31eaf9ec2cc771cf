//! The kube-scheduler stand-in: one test per filter (a pod that fits, a pod that does not), the
//! `PodScheduled` condition, the choice among feasible nodes and the queue order.

use std::sync::Arc;
use std::time::Duration;

use karpenter_core::seams::kube::{ObjectKey, ResourceKind};
use karpenter_core::seams::{Clock, ManualClock};
use karpenter_sim::scheduler::{Backoff, Scheduler, SchedulerConfig, StepReport};
use serde_json::{Value, json};

use fakekube::ApiServer;

use super::fixtures::{Objects, api, node, pod};
use crate::{block_on, start};

struct Cluster {
    kube: Arc<ApiServer>,
    scheduler: Scheduler,
}

fn cluster() -> Cluster {
    let clock = Arc::new(ManualClock::new(start()));
    let kube = api(clock.clone() as Arc<dyn Clock>);
    let scheduler = Scheduler::new(kube.clone(), clock, SchedulerConfig::default());
    Cluster { kube, scheduler }
}

impl Cluster {
    fn with_nodes(nodes: impl IntoIterator<Item = Value>) -> Self {
        let c = cluster();
        for n in nodes {
            c.kube.insert(ResourceKind::NODE, n);
        }
        c
    }

    fn add(&self, object: Value) {
        let kind = if object["kind"] == "Node" {
            ResourceKind::NODE
        } else {
            ResourceKind::POD
        };
        self.kube.insert(kind, object);
    }

    fn step(&self) -> StepReport {
        block_on(self.scheduler.step()).expect("step")
    }

    fn node_of(&self, pod: &str) -> Option<String> {
        self.kube.pod(pod)["spec"]["nodeName"]
            .as_str()
            .map(str::to_string)
    }

    fn scheduled(&self, pod: &str) -> Value {
        self.kube.pod(pod)["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "PodScheduled").cloned())
            .unwrap_or(Value::Null)
    }

    fn message(&self, pod: &str) -> String {
        self.scheduled(pod)["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

fn with(mut object: Value, change: impl FnOnce(&mut Value)) -> Value {
    change(&mut object);
    object
}

fn labelled(mut object: Value, labels: Value) -> Value {
    for (k, v) in labels.as_object().expect("labels").clone() {
        object["metadata"]["labels"][k] = v;
    }
    object
}

fn small(name: &str) -> Value {
    pod(name, "100m", "128Mi")
}

fn bound(name: &str, node: &str, cpu: &str) -> Value {
    with(pod(name, cpu, "128Mi"), |p| {
        p["spec"]["nodeName"] = json!(node)
    })
}

#[test]
fn a_pending_pod_is_bound_to_a_ready_node_and_marked_scheduled() {
    let c = Cluster::with_nodes([node("n1", "a", 2, 8, 110)]);
    c.add(small("web"));
    let report = c.step();
    assert_eq!(report.bound_count(), 1);
    assert_eq!(report.bound[0].node, "n1");
    assert_eq!(report.bound[0].pod, ObjectKey::namespaced("default", "web"));
    assert_eq!(c.node_of("web").as_deref(), Some("n1"));
    assert_eq!(c.scheduled("web")["status"], "True");
    assert_eq!(
        c.step(),
        StepReport::default(),
        "a bound pod is not pending"
    );
}

#[test]
fn a_node_that_is_not_ready_gets_no_pods() {
    let not_ready = with(node("n1", "a", 2, 8, 110), |n| {
        n["status"]["conditions"][0]["status"] = json!("False");
    });
    let c = Cluster::with_nodes([not_ready]);
    c.add(small("web"));
    assert_eq!(c.step().unschedulable_count(), 1);
    assert_eq!(
        c.message("web"),
        "0/1 nodes are available: 1 node(s) were not ready."
    );
    c.add(node("n2", "a", 2, 8, 110));
    c.step();
    assert_eq!(c.node_of("web").as_deref(), Some("n2"));
}

#[test]
fn a_cordoned_node_takes_only_pods_that_tolerate_the_unschedulable_taint() {
    let cordoned = with(node("n1", "a", 2, 8, 110), |n| {
        n["spec"]["unschedulable"] = json!(true);
    });
    let c = Cluster::with_nodes([cordoned]);
    c.add(small("plain"));
    c.add(with(small("tolerant"), |p| {
        p["spec"]["tolerations"] = json!([{
            "key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"
        }]);
    }));
    c.step();
    assert_eq!(c.node_of("plain"), None);
    assert_eq!(
        c.message("plain"),
        "0/1 nodes are available: 1 node(s) were unschedulable."
    );
    assert_eq!(c.node_of("tolerant").as_deref(), Some("n1"));
}

#[test]
fn a_no_schedule_taint_keeps_off_every_pod_without_a_matching_toleration() {
    let tainted = with(node("n1", "a", 8, 32, 110), |n| {
        n["spec"]["taints"] =
            json!([{ "key": "dedicated", "value": "gpu", "effect": "NoSchedule" }]);
    });
    let c = Cluster::with_nodes([tainted]);
    let tolerating = |name: &str, toleration: Value| {
        with(small(name), |p| {
            p["spec"]["tolerations"] = json!([toleration])
        })
    };
    c.add(small("none"));
    c.add(tolerating(
        "wrong-value",
        json!({ "key": "dedicated", "operator": "Equal", "value": "cpu" }),
    ));
    c.add(tolerating(
        "wrong-effect",
        json!({ "key": "dedicated", "operator": "Exists", "effect": "NoExecute" }),
    ));
    c.add(tolerating(
        "wrong-key",
        json!({ "key": "other", "operator": "Exists" }),
    ));
    c.add(tolerating(
        "equal",
        json!({ "key": "dedicated", "value": "gpu", "effect": "NoSchedule" }),
    ));
    c.add(tolerating(
        "exists",
        json!({ "key": "dedicated", "operator": "Exists" }),
    ));
    c.add(tolerating("everything", json!({ "operator": "Exists" })));
    c.step();
    for pod in ["none", "wrong-value", "wrong-effect", "wrong-key"] {
        assert_eq!(c.node_of(pod), None, "{pod}");
        assert_eq!(
            c.message(pod),
            "0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}."
        );
    }
    for pod in ["equal", "exists", "everything"] {
        assert_eq!(c.node_of(pod).as_deref(), Some("n1"), "{pod}");
    }
}

#[test]
fn a_no_execute_taint_keeps_pods_off_but_prefer_no_schedule_does_not() {
    let taint = |name: &str, effect: &str| {
        with(node(name, "a", 2, 8, 110), |n| {
            n["spec"]["taints"] = json!([{ "key": "k", "effect": effect }]);
        })
    };
    let c = Cluster::with_nodes([taint("n-execute", "NoExecute")]);
    c.add(small("web"));
    c.step();
    assert_eq!(c.node_of("web"), None);
    let c = Cluster::with_nodes([taint("n-prefer", "PreferNoSchedule")]);
    c.add(small("web"));
    c.step();
    assert_eq!(c.node_of("web").as_deref(), Some("n-prefer"));
}

#[test]
fn requests_must_fit_in_what_allocatable_leaves_after_the_pods_already_bound() {
    let c = Cluster::with_nodes([node("n1", "a", 2, 8, 110)]);
    c.add(bound("running", "n1", "1500m"));
    c.add(with(bound("finished", "n1", "1500m"), |p| {
        p["status"] = json!({ "phase": "Succeeded" });
    }));
    c.add(pod("too-big", "600m", "128Mi"));
    c.add(pod("too-much-memory", "100m", "9Gi"));
    c.step();
    assert_eq!(c.node_of("too-big"), None);
    assert_eq!(
        c.message("too-big"),
        "0/1 nodes are available: 1 Insufficient cpu."
    );
    assert_eq!(
        c.message("too-much-memory"),
        "0/1 nodes are available: 1 Insufficient memory."
    );
    c.add(pod("fits", "500m", "128Mi"));
    c.step();
    assert_eq!(
        c.node_of("fits").as_deref(),
        Some("n1"),
        "a succeeded pod takes nothing"
    );
}

/// Whether `pod` is bound when it is alone with a node of one core.
fn fits_one_core(pod: Value) -> bool {
    let c = Cluster::with_nodes([node("n1", "a", 1, 8, 110)]);
    let name = pod["metadata"]["name"].as_str().expect("name").to_string();
    c.add(pod);
    c.step();
    c.node_of(&name).is_some()
}

fn init(name: &str, cpu: &str, sidecar: bool) -> Value {
    let mut container = json!({
        "name": name, "image": "init:1", "resources": { "requests": { "cpu": cpu } }
    });
    if sidecar {
        container["restartPolicy"] = json!("Always");
    }
    container
}

#[test]
fn init_containers_count_at_their_peak_sidecars_add_up_and_overhead_is_added() {
    let peak_fits = with(pod("peak-fits", "800m", "1Mi"), |p| {
        p["spec"]["initContainers"] = json!([init("setup", "900m", false)]);
    });
    assert!(fits_one_core(peak_fits));
    let peak_too_big = with(pod("peak-too-big", "200m", "1Mi"), |p| {
        p["spec"]["initContainers"] = json!([init("setup", "1500m", false)]);
    });
    assert!(!fits_one_core(peak_too_big));
    let sidecar = with(pod("sidecar", "500m", "1Mi"), |p| {
        p["spec"]["initContainers"] = json!([init("proxy", "600m", true)]);
    });
    assert!(
        !fits_one_core(sidecar),
        "500m + a 600m sidecar is 1.1 cores"
    );
    let overhead = with(pod("overhead", "800m", "1Mi"), |p| {
        p["spec"]["overhead"] = json!({ "cpu": "250m" });
    });
    assert!(!fits_one_core(overhead));
    let limits_only = with(pod("limits-only", "100m", "1Mi"), |p| {
        p["spec"]["containers"][0]["resources"] = json!({ "limits": { "cpu": "2" } });
    });
    assert!(
        !fits_one_core(limits_only),
        "a limit without a request requests the limit"
    );
}

#[test]
fn the_pods_allocatable_caps_how_many_pods_a_node_takes() {
    let c = Cluster::with_nodes([node("n1", "a", 8, 32, 2)]);
    for name in ["p1", "p2", "p3"] {
        c.add(small(name));
    }
    let report = c.step();
    assert_eq!(report.bound_count(), 2);
    assert_eq!(c.node_of("p3"), None);
    assert_eq!(c.message("p3"), "0/1 nodes are available: 1 Too many pods.");
}

fn affinity(expressions: Value) -> Value {
    json!({ "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{ "matchExpressions": expressions }]
    } } })
}

#[test]
fn node_selector_and_required_node_affinity_pick_the_matching_nodes() {
    let generation = |name: &str, zone: &str, generation: Option<&str>| {
        let n = node(name, zone, 8, 32, 110);
        match generation {
            Some(g) => labelled(n, json!({ "generation": g })),
            None => n,
        }
    };
    let nodes = || {
        [
            generation("n-a", "a", Some("5")),
            generation("n-b", "b", Some("7")),
            generation("n-c", "c", None),
        ]
    };
    let place = |spec: Value| -> Option<String> {
        let c = Cluster::with_nodes(nodes());
        c.add(with(small("p"), |p| {
            for (k, v) in spec.as_object().expect("spec").clone() {
                p["spec"][k] = v;
            }
        }));
        c.step();
        c.node_of("p")
    };
    let by_expression =
        |expression: Value| place(json!({ "affinity": affinity(json!([expression])) }));

    assert_eq!(
        place(json!({ "nodeSelector": { "topology.kubernetes.io/zone": "b" } })).as_deref(),
        Some("n-b")
    );
    assert_eq!(
        by_expression(
            json!({ "key": "topology.kubernetes.io/zone", "operator": "In", "values": ["c"] })
        )
        .as_deref(),
        Some("n-c")
    );
    assert_eq!(
        by_expression(json!({ "key": "generation", "operator": "NotIn", "values": ["5", "7"] }))
            .as_deref(),
        Some("n-c"),
        "NotIn matches a node without the label"
    );
    assert_eq!(
        by_expression(json!({ "key": "generation", "operator": "DoesNotExist" })).as_deref(),
        Some("n-c")
    );
    let exists = by_expression(json!({ "key": "generation", "operator": "Exists" }));
    assert!(
        matches!(exists.as_deref(), Some("n-a" | "n-b")),
        "{exists:?}"
    );
    assert_eq!(
        by_expression(json!({ "key": "generation", "operator": "Gt", "values": ["6"] })).as_deref(),
        Some("n-b")
    );
    assert_eq!(
        by_expression(json!({ "key": "generation", "operator": "Lt", "values": ["6"] })).as_deref(),
        Some("n-a")
    );
    let or_of_terms = json!({ "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            { "matchExpressions": [{ "key": "topology.kubernetes.io/zone", "operator": "In", "values": ["x"] }] },
            { "matchExpressions": [{ "key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"] }] },
        ]
    } } });
    assert_eq!(
        place(json!({ "affinity": or_of_terms })).as_deref(),
        Some("n-b")
    );

    let c = Cluster::with_nodes(nodes());
    c.add(with(small("nowhere"), |p| {
        p["spec"]["affinity"] = affinity(json!([
            { "key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z"] }
        ]));
    }));
    c.step();
    assert_eq!(
        c.message("nowhere"),
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    );
}

#[test]
fn a_daemonset_pod_pinned_by_match_fields_goes_only_to_its_node() {
    let c = Cluster::with_nodes([node("n1", "a", 2, 8, 110), node("n2", "a", 2, 8, 110)]);
    c.add(bound("busy", "n1", "1"));
    c.add(with(small("ds-n2"), |p| {
        p["spec"]["affinity"] = json!({ "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{ "matchFields": [
                { "key": "metadata.name", "operator": "In", "values": ["n2"] }
            ] }]
        } } });
    }));
    c.step();
    assert_eq!(c.node_of("ds-n2").as_deref(), Some("n2"));
}

fn anti_affinity(selector: Value, topology_key: &str) -> Value {
    json!({ "podAntiAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": selector, "topologyKey": topology_key
    }] } })
}

fn pod_affinity(selector: Value, topology_key: &str) -> Value {
    json!({ "podAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": selector, "topologyKey": topology_key
    }] } })
}

#[test]
fn required_anti_affinity_on_hostname_puts_one_pod_per_node() {
    let c = Cluster::with_nodes([
        node("n1", "a", 8, 32, 110),
        node("n2", "a", 8, 32, 110),
        node("n3", "b", 8, 32, 110),
    ]);
    for name in ["web-1", "web-2", "web-3", "web-4"] {
        c.add(with(labelled(small(name), json!({ "app": "web" })), |p| {
            p["spec"]["affinity"] = anti_affinity(
                json!({ "matchLabels": { "app": "web" } }),
                "kubernetes.io/hostname",
            );
        }));
    }
    let report = c.step();
    let mut nodes: Vec<String> = report.bound.iter().map(|b| b.node.clone()).collect();
    nodes.sort();
    assert_eq!(nodes, ["n1", "n2", "n3"]);
    // Symmetric terms: the placed pods' anti-affinity is checked first, as upstream does.
    assert_eq!(
        c.message("web-4"),
        "0/3 nodes are available: 3 node(s) didn't satisfy existing pods anti-affinity rules."
    );
}

#[test]
fn a_pods_own_anti_affinity_keeps_it_away_from_the_pods_it_selects() {
    let away_from_db = |name: &str| {
        with(small(name), |p| {
            p["spec"]["affinity"] = anti_affinity(
                json!({ "matchLabels": { "app": "db" } }),
                "kubernetes.io/hostname",
            );
        })
    };
    let c = Cluster::with_nodes([node("n1", "a", 8, 32, 110), node("n2", "a", 8, 32, 110)]);
    c.add(labelled(bound("db", "n1", "4"), json!({ "app": "db" })));
    c.add(away_from_db("client"));
    c.step();
    assert_eq!(c.node_of("client").as_deref(), Some("n2"));

    let c = Cluster::with_nodes([node("n1", "a", 8, 32, 110)]);
    c.add(labelled(bound("db", "n1", "4"), json!({ "app": "db" })));
    c.add(away_from_db("client"));
    c.step();
    assert_eq!(
        c.message("client"),
        "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules."
    );
}

#[test]
fn required_affinity_on_zone_follows_the_pods_it_selects() {
    let c = Cluster::with_nodes([
        node("n-a", "a", 8, 32, 110),
        node("n-b1", "b", 8, 32, 110),
        node("n-b2", "b", 8, 32, 110),
    ]);
    c.add(labelled(bound("db", "n-b1", "4"), json!({ "app": "db" })));
    let near_db = |name: &str| {
        with(small(name), |p| {
            p["spec"]["affinity"] = pod_affinity(
                json!({ "matchLabels": { "app": "db" } }),
                "topology.kubernetes.io/zone",
            );
        })
    };
    c.add(near_db("client"));
    c.add(with(small("lonely"), |p| {
        p["spec"]["affinity"] = pod_affinity(
            json!({ "matchLabels": { "app": "missing" } }),
            "topology.kubernetes.io/zone",
        );
    }));
    c.step();
    assert!(matches!(
        c.node_of("client").as_deref(),
        Some("n-b1" | "n-b2")
    ));
    assert_eq!(
        c.message("lonely"),
        "0/3 nodes are available: 3 node(s) didn't match pod affinity rules."
    );
}

#[test]
fn the_first_pod_of_a_self_affine_group_goes_anywhere_and_the_rest_follow_it() {
    let c = Cluster::with_nodes([node("n-a", "a", 8, 32, 110), node("n-b", "b", 8, 32, 110)]);
    c.add(bound("heavy", "n-b", "6"));
    for name in ["cache-1", "cache-2"] {
        c.add(with(
            labelled(small(name), json!({ "app": "cache" })),
            |p| {
                p["spec"]["affinity"] = pod_affinity(
                    json!({ "matchLabels": { "app": "cache" } }),
                    "topology.kubernetes.io/zone",
                );
            },
        ));
    }
    c.step();
    assert_eq!(
        c.node_of("cache-1").as_deref(),
        Some("n-b"),
        "most allocated"
    );
    assert_eq!(c.node_of("cache-2").as_deref(), Some("n-b"));
}

#[test]
fn the_anti_affinity_of_placed_pods_repels_the_pods_it_selects() {
    let c = Cluster::with_nodes([node("n1", "a", 8, 32, 110), node("n2", "a", 8, 32, 110)]);
    c.add(with(bound("quiet", "n1", "4"), |p| {
        p["spec"]["affinity"] = anti_affinity(
            json!({ "matchLabels": { "app": "noisy" } }),
            "kubernetes.io/hostname",
        );
    }));
    c.add(labelled(small("noisy"), json!({ "app": "noisy" })));
    c.add(small("neutral"));
    c.step();
    assert_eq!(c.node_of("noisy").as_deref(), Some("n2"));
    assert_eq!(
        c.node_of("neutral").as_deref(),
        Some("n1"),
        "most allocated"
    );

    let c = Cluster::with_nodes([node("n1", "a", 8, 32, 110)]);
    c.add(with(bound("quiet", "n1", "1"), |p| {
        p["spec"]["affinity"] = anti_affinity(
            json!({ "matchLabels": { "app": "noisy" } }),
            "kubernetes.io/hostname",
        );
    }));
    c.add(labelled(small("noisy"), json!({ "app": "noisy" })));
    c.step();
    assert_eq!(
        c.message("noisy"),
        "0/1 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules."
    );
}

#[test]
fn affinity_terms_see_only_pods_in_the_namespaces_they_name() {
    let place = |term_extra: Value| -> Option<String> {
        let c = Cluster::with_nodes([node("n1", "a", 8, 32, 110)]);
        c.kube.insert(
            ResourceKind::NAMESPACE,
            json!({ "metadata": { "name": "other", "labels": { "team": "x" } } }),
        );
        c.kube.insert(
            ResourceKind::NAMESPACE,
            json!({ "metadata": { "name": "default" } }),
        );
        c.add(with(
            labelled(bound("web", "n1", "1"), json!({ "app": "web" })),
            |p| {
                p["metadata"]["namespace"] = json!("other");
            },
        ));
        c.add(with(small("p"), |p| {
            let mut term = json!({
                "labelSelector": { "matchLabels": { "app": "web" } },
                "topologyKey": "kubernetes.io/hostname",
            });
            for (k, v) in term_extra.as_object().expect("extra").clone() {
                term[k] = v;
            }
            p["spec"]["affinity"] =
                json!({ "podAntiAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": [term] } });
        }));
        c.step();
        c.node_of("p")
    };
    assert_eq!(
        place(json!({})).as_deref(),
        Some("n1"),
        "own namespace only"
    );
    assert_eq!(place(json!({ "namespaces": ["other"] })), None);
    assert_eq!(
        place(json!({ "namespaceSelector": {} })),
        None,
        "all namespaces"
    );
    assert_eq!(
        place(json!({ "namespaceSelector": { "matchLabels": { "team": "x" } } })),
        None
    );
    assert_eq!(
        place(json!({ "namespaceSelector": { "matchLabels": { "team": "y" } } })).as_deref(),
        Some("n1")
    );
}

fn spread(max_skew: i32, key: &str, extra: Value) -> Value {
    let mut constraint = json!({
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": { "matchLabels": { "app": "web" } },
    });
    for (k, v) in extra.as_object().expect("extra").clone() {
        constraint[k] = v;
    }
    constraint
}

fn spread_pod(name: &str, constraint: Value) -> Value {
    with(labelled(small(name), json!({ "app": "web" })), |p| {
        p["spec"]["topologySpreadConstraints"] = json!([constraint]);
    })
}

#[test]
fn topology_spread_keeps_the_zone_skew_within_max_skew() {
    let c = Cluster::with_nodes([node("n-a", "a", 8, 32, 110), node("n-b", "b", 8, 32, 110)]);
    for i in 1..=4 {
        c.add(spread_pod(
            &format!("web-{i}"),
            spread(1, "topology.kubernetes.io/zone", json!({})),
        ));
    }
    let report = c.step();
    assert_eq!(report.bound_count(), 4);
    let on_a = report.bound.iter().filter(|b| b.node == "n-a").count();
    assert_eq!(on_a, 2, "{report:?}");
}

#[test]
fn topology_spread_fails_when_a_domain_would_exceed_the_skew() {
    let c = Cluster::with_nodes([
        node("n-a", "a", 8, 32, 110),
        with(node("n-b", "b", 8, 32, 110), |n| {
            n["spec"]["taints"] = json!([{ "key": "k", "effect": "NoSchedule" }]);
        }),
    ]);
    c.add(spread_pod(
        "web-1",
        spread(1, "topology.kubernetes.io/zone", json!({})),
    ));
    c.add(spread_pod(
        "web-2",
        spread(1, "topology.kubernetes.io/zone", json!({})),
    ));
    c.step();
    assert_eq!(c.node_of("web-1").as_deref(), Some("n-a"));
    assert_eq!(
        c.node_of("web-2"),
        None,
        "zone b counts (taints ignored by default)"
    );
    assert_eq!(
        c.message("web-2"),
        "0/2 nodes are available: 1 node(s) didn't match pod topology spread constraints, \
         1 node(s) had untolerated taint {k: }."
    );
    let honor = spread(
        1,
        "topology.kubernetes.io/zone",
        json!({ "nodeTaintsPolicy": "Honor" }),
    );
    c.add(spread_pod("web-3", honor));
    c.step();
    assert_eq!(
        c.node_of("web-3").as_deref(),
        Some("n-a"),
        "with Honor the tainted zone is not a domain"
    );
}

#[test]
fn min_domains_counts_missing_domains_as_empty() {
    let c = Cluster::with_nodes([node("n-a1", "a", 8, 32, 110), node("n-a2", "a", 8, 32, 110)]);
    let constraint = || spread(1, "topology.kubernetes.io/zone", json!({ "minDomains": 2 }));
    c.add(spread_pod("web-1", constraint()));
    c.add(spread_pod("web-2", constraint()));
    c.step();
    assert!(c.node_of("web-1").is_some());
    assert_eq!(c.node_of("web-2"), None);
    assert_eq!(
        c.message("web-2"),
        "0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints."
    );
}

#[test]
fn a_node_without_the_spread_topology_key_is_not_a_candidate() {
    let unlabelled = with(node("n1", "a", 8, 32, 110), |n| {
        n["metadata"]["labels"]
            .as_object_mut()
            .expect("labels")
            .remove("topology.kubernetes.io/zone");
    });
    let c = Cluster::with_nodes([unlabelled]);
    c.add(spread_pod(
        "web",
        spread(1, "topology.kubernetes.io/zone", json!({})),
    ));
    c.step();
    assert_eq!(
        c.message("web"),
        "0/1 nodes are available: 1 node(s) didn't match pod topology spread constraints \
         (missing required label)."
    );
}

fn host_port(name: &str, port: i32, protocol: &str, ip: Option<&str>) -> Value {
    with(small(name), |p| {
        let mut claim = json!({ "containerPort": port, "hostPort": port, "protocol": protocol });
        if let Some(ip) = ip {
            claim["hostIP"] = json!(ip);
        }
        p["spec"]["containers"][0]["ports"] = json!([claim]);
    })
}

#[test]
fn host_ports_conflict_on_the_same_port_and_protocol() {
    let c = Cluster::with_nodes([node("n1", "a", 8, 32, 110)]);
    c.add(with(host_port("first", 8080, "TCP", None), |p| {
        p["spec"]["nodeName"] = json!("n1");
    }));
    c.add(host_port("same-port", 8080, "TCP", None));
    c.add(host_port("specific-ip", 8080, "TCP", Some("10.0.0.1")));
    c.add(host_port("udp", 8080, "UDP", None));
    c.add(host_port("other-port", 8081, "TCP", None));
    c.step();
    assert_eq!(c.node_of("same-port"), None);
    assert_eq!(
        c.message("same-port"),
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports."
    );
    assert_eq!(
        c.node_of("specific-ip"),
        None,
        "the wildcard covers every IP"
    );
    assert_eq!(c.node_of("udp").as_deref(), Some("n1"));
    assert_eq!(c.node_of("other-port").as_deref(), Some("n1"));
}

#[test]
fn a_pod_bound_to_a_zonal_volume_goes_to_the_volumes_zone() {
    let c = Cluster::with_nodes([node("n-a", "a", 8, 32, 110), node("n-b", "b", 8, 32, 110)]);
    c.add(bound("heavy", "n-a", "6"));
    c.kube.insert(
        ResourceKind::PERSISTENT_VOLUME_CLAIM,
        json!({ "metadata": { "name": "data", "namespace": "default" }, "spec": { "volumeName": "pv-1" } }),
    );
    c.kube.insert(
        ResourceKind::PERSISTENT_VOLUME,
        json!({ "metadata": { "name": "pv-1" }, "spec": { "nodeAffinity": { "required": {
            "nodeSelectorTerms": [{ "matchExpressions": [
                { "key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"] }
            ] }]
        } } } }),
    );
    let with_claim = |name: &str, claim: &str| {
        with(small(name), |p| {
            p["spec"]["volumes"] =
                json!([{ "name": "data", "persistentVolumeClaim": { "claimName": claim } }]);
        })
    };
    c.add(with_claim("db", "data"));
    c.add(with_claim("orphan", "missing"));
    c.step();
    assert_eq!(c.node_of("db").as_deref(), Some("n-b"));
    assert_eq!(
        c.message("orphan"),
        "persistentvolumeclaim \"missing\" not found"
    );
}

#[test]
fn a_pod_that_fits_nowhere_is_marked_unschedulable_once_and_not_rewritten() {
    let c = Cluster::with_nodes([
        node("n1", "a", 1, 8, 110),
        with(node("n2", "a", 8, 32, 110), |n| {
            n["status"]["conditions"][0]["status"] = json!("False");
        }),
    ]);
    c.add(pod("big", "2", "1Gi"));
    let first = c.step();
    assert_eq!(first.unschedulable_count(), 1);
    assert_eq!(first.status_writes, 1);
    let condition = c.scheduled("big");
    assert_eq!(condition["status"], "False");
    assert_eq!(condition["reason"], "Unschedulable");
    assert_eq!(
        condition["message"],
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were not ready."
    );
    c.kube.clear_writes();
    let second = c.step();
    assert_eq!(second.unschedulable_count(), 1);
    assert_eq!(second.status_writes, 0);
    assert!(c.kube.writes().is_empty(), "{:?}", c.kube.writes());

    c.add(node("n3", "b", 4, 16, 110));
    c.step();
    assert_eq!(c.node_of("big").as_deref(), Some("n3"));
    assert_eq!(c.scheduled("big")["status"], "True");
}

#[test]
fn the_most_allocated_feasible_node_wins_and_ties_go_to_the_first_name() {
    let c = Cluster::with_nodes([
        node("n-c", "a", 4, 16, 110),
        node("n-a", "a", 4, 16, 110),
        node("n-b", "a", 4, 16, 110),
    ]);
    c.add(small("first"));
    c.step();
    assert_eq!(c.node_of("first").as_deref(), Some("n-a"));
    c.add(bound("load", "n-c", "3"));
    c.add(small("second"));
    c.step();
    assert_eq!(c.node_of("second").as_deref(), Some("n-c"));
}

#[test]
fn higher_priority_pods_are_placed_first_then_older_ones() {
    let c = Cluster::with_nodes([node("n1", "a", 1, 8, 110)]);
    let created = |p: Value, at: &str| with(p, |p| p["metadata"]["creationTimestamp"] = json!(at));
    c.add(created(pod("a-low", "800m", "1Mi"), "2025-12-31T00:00:00Z"));
    c.add(with(
        created(pod("z-high", "800m", "1Mi"), "2025-12-31T01:00:00Z"),
        |p| {
            p["spec"]["priority"] = json!(100);
        },
    ));
    c.step();
    assert_eq!(c.node_of("z-high").as_deref(), Some("n1"));
    assert_eq!(c.node_of("a-low"), None);

    let c = Cluster::with_nodes([node("n1", "a", 1, 8, 110)]);
    c.add(created(pod("a-new", "800m", "1Mi"), "2025-12-31T01:00:00Z"));
    c.add(created(pod("b-old", "800m", "1Mi"), "2025-12-31T00:00:00Z"));
    c.step();
    assert_eq!(c.node_of("b-old").as_deref(), Some("n1"));
}

#[test]
fn pods_for_another_scheduler_gated_pods_and_deleting_pods_are_left_alone() {
    let c = Cluster::with_nodes([node("n1", "a", 8, 32, 110)]);
    c.add(with(small("other-scheduler"), |p| {
        p["spec"]["schedulerName"] = json!("custom");
    }));
    c.add(with(small("gated"), |p| {
        p["spec"]["schedulingGates"] = json!([{ "name": "example.com/wait" }]);
    }));
    // An unbound pod being deleted stays only while a finalizer holds it.
    c.add(with(small("deleting"), |p| {
        p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        p["metadata"]["finalizers"] = json!(["example.com/hold"]);
    }));
    let report = c.step();
    assert_eq!(report.bound_count(), 0);
    assert_eq!(report.gated, [ObjectKey::namespaced("default", "gated")]);
    assert_eq!(c.scheduled("gated")["reason"], "SchedulingGated");
    assert_eq!(c.scheduled("other-scheduler"), Value::Null);
    assert_eq!(c.scheduled("deleting"), Value::Null);
    assert_eq!(
        c.step().status_writes,
        0,
        "the gated condition is written once"
    );
}

#[test]
fn the_same_cluster_gives_the_same_bindings() {
    let build = || {
        let c = Cluster::with_nodes([
            node("n1", "a", 4, 16, 110),
            node("n2", "b", 4, 16, 110),
            node("n3", "c", 4, 16, 110),
        ]);
        for i in 0..12 {
            c.add(spread_pod(
                &format!("web-{i:02}"),
                spread(1, "topology.kubernetes.io/zone", json!({})),
            ));
            c.add(pod(&format!("batch-{i:02}"), "300m", "256Mi"));
        }
        c
    };
    let first = build().step();
    let second = build().step();
    assert_eq!(first.bound_count(), 24);
    assert_eq!(first, second);
}

#[test]
fn a_replica_that_fit_nowhere_does_not_condemn_its_twin_once_a_bind_changed_the_cluster() {
    // Queue order is by name here (no creation times): the first replica finds no db pod, the db
    // pod binds, and the second replica, the same pod in all but name, must be judged afresh.
    let near_db = |name: &str| {
        with(labelled(small(name), json!({ "app": "client" })), |p| {
            p["spec"]["affinity"] = pod_affinity(
                json!({ "matchLabels": { "app": "db" } }),
                "kubernetes.io/hostname",
            );
        })
    };
    let c = Cluster::with_nodes([node("n1", "a", 8, 32, 110)]);
    c.add(near_db("a-client"));
    c.add(labelled(small("b-db"), json!({ "app": "db" })));
    c.add(near_db("c-client"));
    c.add(near_db("d-client"));
    let report = c.step();
    assert_eq!(c.node_of("a-client"), None);
    assert_eq!(
        c.message("a-client"),
        "0/1 nodes are available: 1 node(s) didn't match pod affinity rules."
    );
    assert_eq!(c.node_of("b-db").as_deref(), Some("n1"));
    assert_eq!(c.node_of("c-client").as_deref(), Some("n1"));
    assert_eq!(c.node_of("d-client").as_deref(), Some("n1"));
    assert_eq!(report.bound_count(), 3);
}

#[test]
fn replicas_that_fit_nowhere_all_carry_the_message_the_first_one_was_given() {
    let c = Cluster::with_nodes([node("n1", "a", 2, 8, 110), node("n2", "b", 2, 8, 110)]);
    c.add(bound("running", "n1", "1500m"));
    for name in ["big-1", "big-2", "big-3"] {
        c.add(labelled(pod(name, "3", "128Mi"), json!({ "app": "big" })));
    }
    c.add(labelled(
        pod("other", "3", "128Mi"),
        json!({ "app": "other" }),
    ));
    let report = c.step();
    assert_eq!(report.unschedulable_count(), 4);
    for name in ["big-1", "big-2", "big-3", "other"] {
        assert_eq!(
            c.message(name),
            "0/2 nodes are available: 2 Insufficient cpu.",
            "{name}"
        );
    }
}

#[test]
fn with_kube_schedulers_backoff_a_pod_that_failed_is_not_tried_again_until_its_backoff_ends() {
    let clock = Arc::new(ManualClock::new(start()));
    let kube = api(clock.clone() as Arc<dyn Clock>);
    let config = SchedulerConfig {
        backoff: Some(Backoff::KUBE_SCHEDULER),
        ..SchedulerConfig::default()
    };
    let scheduler = Scheduler::new(kube.clone(), clock.clone(), config);
    let step = || block_on(scheduler.step()).expect("step");
    kube.insert(ResourceKind::NODE, node("n1", "a", 1, 8, 110));
    kube.insert(ResourceKind::POD, pod("big", "2", "128Mi"));
    assert_eq!(step().unschedulable_count(), 1, "the first attempt");

    // A node that fits arrives at once, but the pod sits out its first second of backoff.
    kube.insert(ResourceKind::NODE, node("n2", "a", 4, 8, 110));
    assert_eq!(step(), StepReport::default(), "in backoff: not attempted");
    clock.advance(Duration::from_millis(999));
    assert_eq!(step(), StepReport::default(), "still in backoff");
    clock.advance(Duration::from_millis(1));
    assert_eq!(
        step().bound_count(),
        1,
        "tried again once the backoff ended"
    );
    assert_eq!(kube.pod("big")["spec"]["nodeName"].as_str(), Some("n2"));
}

#[test]
fn kube_schedulers_backoff_doubles_from_one_second_to_at_most_ten() {
    let clock = Arc::new(ManualClock::new(start()));
    let kube = api(clock.clone() as Arc<dyn Clock>);
    let config = SchedulerConfig {
        backoff: Some(Backoff::KUBE_SCHEDULER),
        ..SchedulerConfig::default()
    };
    let scheduler = Scheduler::new(kube.clone(), clock.clone(), config);
    let attempts = |scheduler: &Scheduler| {
        block_on(scheduler.step())
            .expect("step")
            .unschedulable_count()
    };
    kube.insert(ResourceKind::NODE, node("n1", "a", 1, 8, 110));
    kube.insert(ResourceKind::POD, pod("big", "2", "128Mi"));
    let mut tried_at = Vec::new();
    for second in 0..40u64 {
        if attempts(&scheduler) > 0 {
            tried_at.push(second);
        }
        clock.advance(Duration::from_secs(1));
    }
    assert_eq!(tried_at, [0, 1, 3, 7, 15, 25, 35]);
}
