//! `karpenter_core::plan`: manifests into the scheduling input — workload expansion, daemon
//! overhead, existing nodes, volume topology, namespaces — and errors that name the document and
//! the field.

use std::collections::BTreeMap;

use karpenter_core::api::labels::{CAPACITY_TYPE_LABEL, ZONE_LABEL};
use karpenter_core::api::{Operator, TaintEffect};
use karpenter_core::catalog::Catalog;
use karpenter_core::plan::{Cluster, NAMESPACE_NAME_LABEL, PlanError, Position, documents};
use karpenter_core::resources::{CPU, MEMORY, PODS};
use karpenter_core::scheduling::requirements::{Requirement, Requirements};
use karpenter_core::scheduling::{Options, PodInfo};

const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"#;

fn read(yaml: &str) -> Result<Cluster, Vec<PlanError>> {
    let docs = documents("test.yaml", yaml).expect("test YAML parses");
    Cluster::from_documents(&docs).map_err(|e| e.0)
}

fn cluster(yaml: &str) -> Cluster {
    read(yaml).unwrap_or_else(|e| panic!("input is valid, got {e:?}"))
}

fn errors(yaml: &str) -> Vec<PlanError> {
    match read(yaml) {
        Ok(_) => panic!("input should be rejected"),
        Err(errors) => errors,
    }
}

fn keys(pods: &[PodInfo]) -> Vec<&str> {
    pods.iter().map(|p| p.key.as_str()).collect()
}

fn pod(cluster: &Cluster, key: &str) -> PodInfo {
    cluster
        .pods
        .iter()
        .find(|p| p.key == key)
        .unwrap_or_else(|| panic!("pending pod {key} in {:?}", keys(&cluster.pods)))
        .clone()
}

fn at(document: usize) -> Position {
    Position {
        source: "test.yaml".to_string(),
        document,
        item: None,
    }
}

/// `key In values` as a one-key requirement set.
fn only(key: &str, values: &[&str]) -> Requirements {
    let mut reqs = Requirements::new();
    reqs.add(key, Requirement::any_of(values));
    reqs
}

fn deployment(name: &str, replicas: Option<i64>, cpu: &str) -> String {
    let replicas = replicas.map_or(String::new(), |r| format!("  replicas: {r}\n"));
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
{replicas}  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: [{{name: app, image: app, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"#
    )
}

// ---- workloads ----

#[test]
fn a_deployment_expands_to_its_replicas_named_owner_dash_index_with_the_template_labels() {
    let c = cluster(&deployment("web", Some(3), "250m"));
    assert_eq!(
        keys(&c.pods),
        ["default/web-0", "default/web-1", "default/web-2"]
    );
    for p in &c.pods {
        assert_eq!(p.labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(p.requests.get(CPU), 250);
        assert_eq!(p.requests.get(PODS), 1);
        assert!(!p.daemonset_owned);
    }
}

#[test]
fn a_deployment_without_replicas_runs_one_pod_and_one_with_zero_runs_none() {
    assert_eq!(
        keys(&cluster(&deployment("web", None, "1")).pods),
        ["default/web-0"]
    );
    assert!(cluster(&deployment("web", Some(0), "1")).pods.is_empty());
}

#[test]
fn replicas_take_the_namespace_of_their_owner() {
    let yaml = deployment("api", Some(2), "1").replace(
        "metadata: {name: api}",
        "metadata: {name: api, namespace: shop}",
    );
    let c = cluster(&yaml);
    assert_eq!(keys(&c.pods), ["shop/api-0", "shop/api-1"]);
    assert!(c.pods.iter().all(|p| p.namespace == "shop"));
}

#[test]
fn replicasets_and_statefulsets_expand_to_their_replicas() {
    let c = cluster(
        r#"
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs}
spec:
  replicas: 2
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec: {containers: [{name: app, image: app}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: data}
spec:
  replicas: 3
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: db}]}
"#,
    );
    assert_eq!(
        keys(&c.pods),
        [
            "data/db-0",
            "data/db-1",
            "data/db-2",
            "default/rs-0",
            "default/rs-1"
        ]
    );
}

fn job(spec: &str) -> String {
    format!(
        r#"
apiVersion: batch/v1
kind: Job
metadata: {{name: batch}}
spec:
{spec}
  template:
    spec:
      restartPolicy: Never
      containers: [{{name: work, image: work}}]
"#
    )
}

#[test]
fn a_job_runs_parallelism_pods_and_one_by_default() {
    assert_eq!(
        keys(&cluster(&job("  parallelism: 4")).pods),
        [
            "default/batch-0",
            "default/batch-1",
            "default/batch-2",
            "default/batch-3"
        ]
    );
    assert_eq!(
        keys(&cluster(&job("  backoffLimit: 1")).pods),
        ["default/batch-0"]
    );
}

#[test]
fn a_job_never_runs_more_pods_than_completions_and_none_while_suspended() {
    assert_eq!(
        cluster(&job("  parallelism: 5\n  completions: 2"))
            .pods
            .len(),
        2
    );
    assert!(
        cluster(&job("  parallelism: 5\n  suspend: true"))
            .pods
            .is_empty()
    );
}

#[test]
fn pods_already_in_the_input_count_towards_their_workloads_replicas() {
    // A `kubectl get deploy,rs,pods -o yaml` dump: the Deployment wants 3, its ReplicaSet holds
    // one running pod and one pending; only one more replica is missing.
    let mut yaml = deployment("web", Some(3), "1");
    yaml.push_str(
        r#"
---
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web-5d8f7c
  ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, uid: u1, controller: true}]
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: app}]}
---
apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "20"}}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-5d8f7c-aaaaa
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-5d8f7c, uid: u2, controller: true}]
spec:
  nodeName: node-a
  containers: [{name: app, image: app, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: web-5d8f7c-bbbbb
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-5d8f7c, uid: u2, controller: true}]
spec:
  containers: [{name: app, image: app, resources: {requests: {cpu: "1"}}}]
"#,
    );
    let c = cluster(&yaml);
    assert_eq!(
        keys(&c.pods),
        ["default/web-0", "default/web-5d8f7c-bbbbb"],
        "the ReplicaSet is the Deployment's, not a second workload"
    );
    assert_eq!(keys(&c.nodes[0].pods), ["default/web-5d8f7c-aaaaa"]);
}

#[test]
fn a_deployments_pods_are_recognised_by_their_replicaset_name_when_the_replicaset_is_absent() {
    let mut yaml = deployment("web", Some(2), "1");
    yaml.push_str(
        r#"
---
apiVersion: v1
kind: Pod
metadata:
  name: web-7c9d4b-xyz12
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-7c9d4b, uid: u2, controller: true}]
spec:
  containers: [{name: app, image: app}]
"#,
    );
    assert_eq!(
        keys(&cluster(&yaml).pods),
        ["default/web-0", "default/web-7c9d4b-xyz12"]
    );
}

#[test]
fn a_daemonset_becomes_daemon_overhead_and_not_a_pending_pod() {
    let c = cluster(
        r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: logs, namespace: kube-system}
spec:
  selector: {matchLabels: {app: logs}}
  template:
    metadata: {labels: {app: logs}}
    spec:
      tolerations: [{operator: Exists}]
      containers: [{name: agent, image: agent, resources: {requests: {cpu: 100m, memory: 128Mi}}}]
"#,
    );
    assert!(c.pods.is_empty());
    assert_eq!(keys(&c.daemonsets), ["kube-system/logs"]);
    let daemon = &c.daemonsets[0];
    assert!(daemon.daemonset_owned);
    assert_eq!(daemon.requests.get(CPU), 100);
    assert_eq!(daemon.requests.get(MEMORY), 128 << 20);
    assert_eq!(daemon.tolerations.len(), 1);
}

#[test]
fn daemon_overhead_is_added_to_each_planned_node() {
    let mut yaml = POOL.to_string();
    yaml.push_str("\n---\n");
    yaml.push_str(&deployment("web", Some(1), "1"));
    let without = cluster(&yaml).plan(Catalog::builtin_ref(), Options::default());
    yaml.push_str(
        r#"
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: logs}
spec:
  selector: {matchLabels: {app: logs}}
  template:
    metadata: {labels: {app: logs}}
    spec:
      containers: [{name: agent, image: agent, resources: {requests: {cpu: 300m}}}]
"#,
    );
    let with = cluster(&yaml).plan(Catalog::builtin_ref(), Options::default());
    assert_eq!(without.new_claims.len(), 1);
    assert_eq!(with.new_claims.len(), 1);
    assert_eq!(
        with.new_claims[0].requests.get(CPU),
        without.new_claims[0].requests.get(CPU) + 300,
        "claim requests include the daemon"
    );
}

// ---- existing nodes ----

const NODE: &str = r#"
apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels: {topology.kubernetes.io/zone: us-west-2a, kubernetes.io/hostname: node-a}
spec:
  taints: [{key: dedicated, value: db, effect: NoSchedule}]
status:
  allocatable: {cpu: 3900m, memory: 15Gi, pods: "58"}
"#;

#[test]
fn an_existing_node_keeps_its_labels_taints_and_allocatable_and_capacity_defaults_to_it() {
    let c = cluster(NODE);
    assert_eq!(c.nodes.len(), 1);
    let node = &c.nodes[0];
    assert_eq!(node.name, "node-a");
    assert_eq!(
        node.labels.get(ZONE_LABEL).map(String::as_str),
        Some("us-west-2a")
    );
    assert_eq!(node.taints.len(), 1);
    assert_eq!(node.taints[0].key, "dedicated");
    assert_eq!(node.taints[0].value.as_deref(), Some("db"));
    assert_eq!(node.taints[0].effect, TaintEffect::NoSchedule);
    assert_eq!(node.allocatable.get(CPU), 3900);
    assert_eq!(node.allocatable.get(MEMORY), 15 << 30);
    assert_eq!(node.allocatable.get(PODS), 58);
    assert_eq!(node.capacity, node.allocatable);
    assert!(node.initialized);
    assert!(!node.deleting);
}

#[test]
fn a_node_with_capacity_keeps_it_apart_from_allocatable() {
    let c = cluster(&NODE.replace(
        "status:\n",
        "status:\n  capacity: {cpu: \"4\", memory: 16Gi, pods: \"58\"}\n",
    ));
    assert_eq!(c.nodes[0].capacity.get(CPU), 4000);
    assert_eq!(c.nodes[0].allocatable.get(CPU), 3900);
}

#[test]
fn pods_bound_to_a_node_are_its_usage_and_not_pending() {
    let mut yaml = NODE.to_string();
    yaml.push_str(
        r#"
---
apiVersion: v1
kind: Pod
metadata: {name: db-1}
spec:
  nodeName: node-a
  tolerations: [{key: dedicated, operator: Exists}]
  containers: [{name: db, image: db, resources: {requests: {cpu: "2"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: done}
spec:
  nodeName: node-a
  containers: [{name: job, image: job, resources: {requests: {cpu: "1"}}}]
status: {phase: Succeeded}
---
apiVersion: v1
kind: Pod
metadata: {name: waiting}
spec:
  containers: [{name: app, image: app}]
"#,
    );
    let c = cluster(&yaml);
    assert_eq!(
        keys(&c.nodes[0].pods),
        ["default/db-1"],
        "finished pods hold nothing"
    );
    assert_eq!(c.nodes[0].pods[0].requests.get(CPU), 2000);
    assert_eq!(keys(&c.pods), ["default/waiting"]);
}

#[test]
fn finished_pods_and_pending_daemonset_pods_are_not_planned_for() {
    let c = cluster(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: finished}
spec: {containers: [{name: job, image: job}]}
status: {phase: Failed}
---
apiVersion: v1
kind: Pod
metadata:
  name: logs-abcde
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: logs, uid: u1, controller: true}]
spec: {containers: [{name: agent, image: agent}]}
---
apiVersion: v1
kind: Pod
metadata: {name: real}
spec: {containers: [{name: app, image: app}]}
"#,
    );
    assert_eq!(keys(&c.pods), ["default/real"]);
    assert!(c.unschedulable.is_empty());
    assert!(
        c.notes.iter().any(|n| n.contains("default/logs-abcde")),
        "{:?}",
        c.notes
    );
}

#[test]
fn a_pod_bound_to_a_node_outside_the_input_is_left_out_with_a_note() {
    let c = cluster(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: elsewhere}
spec:
  nodeName: ghost
  containers: [{name: app, image: app}]
"#,
    );
    assert!(c.pods.is_empty());
    assert!(
        c.notes
            .iter()
            .any(|n| n.contains("default/elsewhere") && n.contains("ghost")),
        "{:?}",
        c.notes
    );
}

#[test]
fn a_cordoned_node_gets_the_unschedulable_taint_and_a_deleted_or_unready_one_is_marked() {
    let c = cluster(
        &NODE
            .replace("spec:\n", "spec:\n  unschedulable: true\n")
            .replace(
                "name: node-a\n",
                "name: node-a\n  deletionTimestamp: \"2026-01-01T00:00:00Z\"\n",
            )
            .replace(
                "status:\n",
                "status:\n  conditions: [{type: Ready, status: \"False\"}]\n",
            ),
    );
    let node = &c.nodes[0];
    assert!(node.taints.iter().any(
        |t| t.key == "node.kubernetes.io/unschedulable" && t.effect == TaintEffect::NoSchedule
    ));
    assert!(node.deleting);
    assert!(!node.initialized);
}

#[test]
fn a_node_without_pods_in_allocatable_assumes_the_kubelet_default_and_says_so() {
    let c = cluster(
        r#"
apiVersion: v1
kind: Node
metadata: {name: bare}
status: {allocatable: {cpu: "2", memory: 4Gi}}
"#,
    );
    assert_eq!(
        c.nodes[0].allocatable.get(PODS),
        karpenter_core::plan::DEFAULT_MAX_PODS
    );
    assert!(
        c.notes.iter().any(|n| n.contains("Node/bare")),
        "{:?}",
        c.notes
    );
}

#[test]
fn pending_pods_go_to_an_existing_node_with_room_before_any_new_claim() {
    let mut yaml = POOL.to_string();
    yaml.push_str(
        r#"
---
apiVersion: v1
kind: Node
metadata: {name: roomy, labels: {topology.kubernetes.io/zone: us-west-2a}}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
---
"#,
    );
    yaml.push_str(&deployment("web", Some(3), "1"));
    let results = cluster(&yaml).plan(Catalog::builtin_ref(), Options::default());
    assert!(results.new_claims.is_empty(), "{:?}", results.new_claims);
    assert_eq!(results.existing_nodes.len(), 1);
    let mut placed = results.existing_nodes[0].pods.clone();
    placed.sort();
    assert_eq!(placed, ["default/web-0", "default/web-1", "default/web-2"]);
}

// ---- volume topology ----

fn pod_with_claims(name: &str, claims: &[&str]) -> String {
    let volumes: Vec<String> = claims
        .iter()
        .map(|c| format!("{{name: {c}, persistentVolumeClaim: {{claimName: {c}}}}}"))
        .collect();
    format!(
        r#"
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers: [{{name: app, image: app}}]
  volumes: [{}]
"#,
        volumes.join(", ")
    )
}

fn bound_claim(claim: &str, volume: &str) -> String {
    format!(
        r#"
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: {claim}}}
spec:
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: 10Gi}}}}
  volumeName: {volume}
"#
    )
}

fn volume(name: &str, terms: &str, extra: &str) -> String {
    format!(
        r#"
---
apiVersion: v1
kind: PersistentVolume
metadata: {{name: {name}}}
spec:
  capacity: {{storage: 10Gi}}
  accessModes: [ReadWriteOnce]
{extra}
  nodeAffinity:
    required:
      nodeSelectorTerms: {terms}
"#
    )
}

#[test]
fn a_bound_volume_pins_the_pod_to_its_node_affinity_terms_as_alternatives() {
    let mut yaml = pod_with_claims("app", &["data"]);
    yaml.push_str(&bound_claim("data", "pv-1"));
    yaml.push_str(&volume(
        "pv-1",
        "[{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-west-2a]}]}, \
         {matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-west-2c]}]}]",
        "",
    ));
    let p = pod(&cluster(&yaml), "default/app");
    assert_eq!(
        p.volume_terms,
        [
            only(ZONE_LABEL, &["us-west-2a"]),
            only(ZONE_LABEL, &["us-west-2c"])
        ]
    );
}

#[test]
fn the_ebs_csi_zone_key_of_a_volume_is_read_as_the_zone_label() {
    let mut yaml = pod_with_claims("app", &["data"]);
    yaml.push_str(&bound_claim("data", "pv-ebs"));
    yaml.push_str(&volume(
        "pv-ebs",
        "[{matchExpressions: [{key: topology.ebs.csi.aws.com/zone, operator: In, values: [us-west-2b]}]}]",
        "",
    ));
    let p = pod(&cluster(&yaml), "default/app");
    assert_eq!(p.volume_terms, [only(ZONE_LABEL, &["us-west-2b"])]);
}

#[test]
fn a_local_volume_loses_its_hostname_term_but_keeps_the_zone() {
    let mut yaml = pod_with_claims("app", &["data"]);
    yaml.push_str(&bound_claim("data", "pv-local"));
    yaml.push_str(&volume(
        "pv-local",
        "[{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [old-node]}, \
         {key: topology.kubernetes.io/zone, operator: In, values: [us-west-2a]}]}]",
        "  local: {path: /mnt/disk}",
    ));
    let p = pod(&cluster(&yaml), "default/app");
    assert_eq!(p.volume_terms, [only(ZONE_LABEL, &["us-west-2a"])]);
}

fn storage_class(name: &str, mode: &str, zones: &[&str], default: bool) -> String {
    let annotations = if default {
        "\n  annotations: {storageclass.kubernetes.io/is-default-class: \"true\"}"
    } else {
        ""
    };
    let topologies = if zones.is_empty() {
        String::new()
    } else {
        format!(
            "allowedTopologies: [{{matchLabelExpressions: [{{key: topology.kubernetes.io/zone, values: [{}]}}]}}]",
            zones.join(", ")
        )
    };
    format!(
        r#"
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: {name}{annotations}
provisioner: ebs.csi.aws.com
volumeBindingMode: {mode}
{topologies}
"#
    )
}

fn unbound_claim(claim: &str, class: Option<&str>) -> String {
    let class = class.map_or(String::new(), |c| format!("\n  storageClassName: \"{c}\""));
    format!(
        r#"
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: {claim}}}
spec:
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: 10Gi}}}}{class}
"#
    )
}

#[test]
fn an_unbound_claim_takes_the_allowed_topologies_of_its_wait_for_first_consumer_class() {
    let mut yaml = pod_with_claims("app", &["data"]);
    yaml.push_str(&unbound_claim("data", Some("gp3")));
    yaml.push_str(&storage_class(
        "gp3",
        "WaitForFirstConsumer",
        &["us-west-2a", "us-west-2b"],
        false,
    ));
    let p = pod(&cluster(&yaml), "default/app");
    assert_eq!(
        p.volume_terms,
        [only(ZONE_LABEL, &["us-west-2a", "us-west-2b"])]
    );
}

#[test]
fn an_unbound_claim_of_an_immediate_class_is_held_to_its_allowed_topologies_too() {
    // The provisioner creates the volume inside the allowed topologies before the pod is placed;
    // which of them is unknown to a dry run, so the pod may go to any of them (upstream does the
    // same whatever the binding mode).
    let mut yaml = pod_with_claims("app", &["data"]);
    yaml.push_str(&unbound_claim("data", Some("io2")));
    yaml.push_str(&storage_class("io2", "Immediate", &["us-west-2c"], false));
    let p = pod(&cluster(&yaml), "default/app");
    assert_eq!(p.volume_terms, [only(ZONE_LABEL, &["us-west-2c"])]);
}

#[test]
fn a_class_without_allowed_topologies_and_an_explicit_empty_class_leave_the_pod_free() {
    let mut yaml = pod_with_claims("app", &["data", "static"]);
    yaml.push_str(&unbound_claim("data", Some("gp3")));
    yaml.push_str(&unbound_claim("static", Some("")));
    yaml.push_str(&storage_class("gp3", "WaitForFirstConsumer", &[], false));
    assert!(pod(&cluster(&yaml), "default/app").volume_terms.is_empty());
}

#[test]
fn a_claim_without_a_class_takes_the_default_storage_class() {
    let mut yaml = pod_with_claims("app", &["data"]);
    yaml.push_str(&unbound_claim("data", None));
    yaml.push_str(&storage_class(
        "other",
        "WaitForFirstConsumer",
        &["us-west-2c"],
        false,
    ));
    yaml.push_str(&storage_class(
        "standard",
        "WaitForFirstConsumer",
        &["us-west-2b"],
        true,
    ));
    let p = pod(&cluster(&yaml), "default/app");
    assert_eq!(p.volume_terms, [only(ZONE_LABEL, &["us-west-2b"])]);
}

#[test]
fn several_volumes_give_the_cross_product_of_their_alternatives_without_contradictions() {
    let mut yaml = pod_with_claims("app", &["a", "b"]);
    yaml.push_str(&bound_claim("a", "pv-a"));
    yaml.push_str(&volume(
        "pv-a",
        "[{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-west-2a, us-west-2b]}]}, \
         {matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-west-2c]}]}]",
        "",
    ));
    yaml.push_str(&unbound_claim("b", Some("fast")));
    yaml.push_str(
        r#"
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: fast}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
  - matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [us-west-2b]}]
  - matchLabelExpressions: [{key: karpenter.sh/capacity-type, values: [on-demand]}]
"#,
    );
    let p = pod(&cluster(&yaml), "default/app");
    // (2a|2b) x 2b = 2b; (2a|2b) x on-demand; 2c x 2b contradicts; 2c x on-demand.
    let mut zone_a_b_on_demand = only(ZONE_LABEL, &["us-west-2a", "us-west-2b"]);
    zone_a_b_on_demand.add(CAPACITY_TYPE_LABEL, Requirement::single("on-demand"));
    let mut zone_c_on_demand = only(ZONE_LABEL, &["us-west-2c"]);
    zone_c_on_demand.add(CAPACITY_TYPE_LABEL, Requirement::single("on-demand"));
    assert_eq!(
        p.volume_terms,
        [
            only(ZONE_LABEL, &["us-west-2b"]),
            zone_a_b_on_demand,
            zone_c_on_demand
        ]
    );
}

#[test]
fn volumes_in_different_zones_make_the_pod_unschedulable() {
    let mut yaml = pod_with_claims("app", &["a", "b"]);
    for (claim, zone) in [("a", "us-west-2a"), ("b", "us-west-2b")] {
        yaml.push_str(&bound_claim(claim, &format!("pv-{claim}")));
        yaml.push_str(&volume(
            &format!("pv-{claim}"),
            &format!(
                "[{{matchExpressions: [{{key: topology.kubernetes.io/zone, operator: In, values: [{zone}]}}]}}]"
            ),
            "",
        ));
    }
    let c = cluster(&yaml);
    assert!(c.pods.is_empty());
    assert_eq!(c.unschedulable.len(), 1);
    assert_eq!(c.unschedulable[0].pod, "default/app");
    assert!(
        c.unschedulable[0].reason.contains("\"a\", \"b\""),
        "{}",
        c.unschedulable[0].reason
    );
}

#[test]
fn a_missing_claim_makes_the_pod_unschedulable_with_the_reason_and_the_plan_reports_it() {
    let mut yaml = POOL.to_string();
    yaml.push_str(&pod_with_claims("orphan", &["nowhere"]));
    let c = cluster(&yaml);
    assert!(c.pods.is_empty());
    assert_eq!(c.unschedulable.len(), 1);
    let reason = &c.unschedulable[0].reason;
    assert!(
        reason.contains("persistentvolumeclaim \"nowhere\" not found"),
        "{reason}"
    );
    let results = c.plan(Catalog::builtin_ref(), Options::default());
    assert!(results.new_claims.is_empty());
    assert_eq!(results.unschedulable, c.unschedulable);
}

#[test]
fn a_claim_whose_volume_or_class_is_missing_makes_the_pod_unschedulable() {
    let mut yaml = pod_with_claims("a", &["bound"]);
    yaml.push_str(&bound_claim("bound", "pv-gone"));
    yaml.push_str(&pod_with_claims("b", &["classy"]));
    yaml.push_str(&unbound_claim("classy", Some("missing-class")));
    let c = cluster(&yaml);
    let reasons: BTreeMap<&str, &str> = c
        .unschedulable
        .iter()
        .map(|u| (u.pod.as_str(), u.reason.as_str()))
        .collect();
    assert!(
        reasons["default/a"].contains("persistentvolume \"pv-gone\""),
        "{reasons:?}"
    );
    assert!(
        reasons["default/b"].contains("storageclass \"missing-class\""),
        "{reasons:?}"
    );
}

#[test]
fn a_statefulset_replica_takes_its_claim_template_until_the_claim_exists() {
    let mut yaml = storage_class("zonal", "WaitForFirstConsumer", &["us-west-2c"], false);
    yaml.push_str(
        r#"
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: db}]}
  volumeClaimTemplates:
    - metadata: {name: data}
      spec:
        storageClassName: zonal
        accessModes: [ReadWriteOnce]
        resources: {requests: {storage: 1Gi}}
"#,
    );
    // Replica 1's claim already exists and is bound in us-west-2a.
    yaml.push_str(&bound_claim("data-db-1", "pv-db-1"));
    yaml.push_str(&volume(
        "pv-db-1",
        "[{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-west-2a]}]}]",
        "",
    ));
    let c = cluster(&yaml);
    assert_eq!(
        pod(&c, "default/db-0").volume_terms,
        [only(ZONE_LABEL, &["us-west-2c"])]
    );
    assert_eq!(
        pod(&c, "default/db-1").volume_terms,
        [only(ZONE_LABEL, &["us-west-2a"])]
    );
}

#[test]
fn a_volume_zone_pins_the_planned_node_claim_to_that_zone() {
    let mut yaml = POOL.to_string();
    yaml.push_str(&pod_with_claims("app", &["data"]));
    yaml.push_str(&bound_claim("data", "pv-1"));
    yaml.push_str(&volume(
        "pv-1",
        "[{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-west-2b]}]}]",
        "",
    ));
    let results = cluster(&yaml).plan(Catalog::builtin_ref(), Options::default());
    assert_eq!(results.new_claims.len(), 1, "{results:?}");
    let zone = results.new_claims[0]
        .nodeclaim_requirements()
        .into_iter()
        .find(|r| r.key == ZONE_LABEL)
        .expect("a zone requirement");
    assert_eq!(zone.operator, Operator::In);
    assert_eq!(zone.values, ["us-west-2b"]);
}

// ---- namespaces ----

#[test]
fn namespaces_carry_their_labels_and_the_name_label_the_api_server_adds() {
    let mut yaml = r#"
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {tier: gold}}
---
"#
    .to_string();
    yaml.push_str(&deployment("web", Some(1), "1").replace(
        "metadata: {name: web}",
        "metadata: {name: web, namespace: team-b}",
    ));
    let c = cluster(&yaml);
    assert_eq!(
        c.namespaces["team-a"],
        BTreeMap::from([
            ("tier".to_string(), "gold".to_string()),
            (NAMESPACE_NAME_LABEL.to_string(), "team-a".to_string()),
        ])
    );
    assert_eq!(
        c.namespaces["team-b"],
        BTreeMap::from([(NAMESPACE_NAME_LABEL.to_string(), "team-b".to_string())]),
        "a namespace only used by a pod still has its name label"
    );
}

// ---- Karpenter objects and notes ----

#[test]
fn node_pools_and_node_classes_are_read_and_a_missing_node_class_is_noted_not_fatal() {
    let c = cluster(POOL);
    assert_eq!(c.node_pools.len(), 1);
    assert_eq!(c.node_classes.len(), 1);
    assert!(c.notes.iter().all(|n| !n.contains("nodeClassRef")));

    let pool_only = POOL.split("---").next().expect("the NodePool document");
    let c = cluster(pool_only);
    assert_eq!(c.node_pools.len(), 1);
    assert!(
        c.notes
            .iter()
            .any(|n| n.contains("NodePool/default") && n.contains("EC2NodeClass/default")),
        "{:?}",
        c.notes
    );
}

#[test]
fn the_items_of_a_list_document_are_read_one_by_one() {
    let c = cluster(
        r#"
apiVersion: v1
kind: List
items:
  - {apiVersion: v1, kind: Pod, metadata: {name: a}, spec: {containers: [{name: c, image: c}]}}
  - {apiVersion: v1, kind: Pod, metadata: {name: b}, spec: {containers: [{name: c, image: c}]}}
"#,
    );
    assert_eq!(keys(&c.pods), ["default/a", "default/b"]);
}

#[test]
fn kinds_a_plan_does_not_use_are_skipped_with_a_note() {
    let c = cluster(
        r#"
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{port: 80}]}
"#,
    );
    assert!(c.pods.is_empty());
    assert!(
        c.notes.iter().any(|n| n.contains("Service/web")),
        "{:?}",
        c.notes
    );
}

// ---- errors ----

#[test]
fn a_non_integer_replicas_is_an_error_naming_the_document_and_the_field() {
    let mut yaml = POOL.to_string();
    yaml.push_str("\n---\n");
    yaml.push_str(
        &deployment("web", None, "1")
            .replace("spec:\n  selector", "spec:\n  replicas: three\n  selector"),
    );
    let errors = errors(&yaml);
    assert_eq!(errors.len(), 1, "{errors:?}");
    match &errors[0] {
        PlanError::Field {
            at: position,
            object,
            field,
            message,
        } => {
            assert_eq!(*position, at(3));
            assert_eq!(object.to_string(), "Deployment/default/web");
            assert_eq!(field, "spec.replicas");
            assert!(message.contains("three"), "{message}");
        }
        other => panic!("expected a field error, got {other:?}"),
    }
    let text = errors[0].to_string();
    assert!(
        text.starts_with("test.yaml: document 3: Deployment/default/web: spec.replicas: "),
        "{text}"
    );
}

#[test]
fn negative_replicas_and_parallelism_are_errors_naming_the_field() {
    let fields: Vec<String> = errors(&format!(
        "{}\n---\n{}",
        deployment("web", Some(-1), "1"),
        job("  parallelism: -2")
    ))
    .into_iter()
    .map(|e| match e {
        PlanError::Field { field, .. } => field,
        other => panic!("expected a field error, got {other:?}"),
    })
    .collect();
    assert_eq!(fields, ["spec.replicas", "spec.parallelism"]);
}

#[test]
fn an_invalid_karpenter_object_is_an_error_with_its_violations() {
    let errors = errors(&POOL.replace("values: [on-demand]", "values: [cheap]"));
    assert_eq!(errors.len(), 1, "{errors:?}");
    match &errors[0] {
        PlanError::Invalid {
            at: position,
            object,
            violations,
        } => {
            assert_eq!(*position, at(1));
            assert_eq!(object.to_string(), "NodePool/default");
            assert!(
                violations
                    .0
                    .iter()
                    .any(|v| v.path.starts_with("spec.template.spec.requirements[2]")),
                "{violations}"
            );
        }
        other => panic!("expected an invalid object, got {other:?}"),
    }
}

#[test]
fn a_malformed_resource_quantity_names_the_container_field_of_the_template() {
    let errors = errors(&deployment("web", Some(1), "lots"));
    match &errors[..] {
        [PlanError::Field { field, .. }] => assert_eq!(
            field,
            "spec.template.spec.containers[0].resources.requests.cpu"
        ),
        other => panic!("expected one field error, got {other:?}"),
    }
}

#[test]
fn every_error_of_the_input_is_reported_not_just_the_first() {
    let yaml = format!(
        "{}\n---\n{}\n---\n{}",
        deployment("a", Some(1), "bad"),
        deployment("b", Some(1), "1").replace("replicas: 1", "replicas: one"),
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n"
    );
    let documents: Vec<usize> = errors(&yaml)
        .iter()
        .map(|e| e.position().document)
        .collect();
    assert_eq!(documents, [1, 2, 3]);
}

#[test]
fn a_node_without_allocatable_or_capacity_is_an_error() {
    let errors = errors("apiVersion: v1\nkind: Node\nmetadata: {name: n}\n");
    match &errors[..] {
        [PlanError::Field { field, .. }] => assert_eq!(field, "status.allocatable"),
        other => panic!("expected one field error, got {other:?}"),
    }
}

#[test]
fn the_same_object_twice_is_an_error_pointing_at_both() {
    let errors = errors(&format!(
        "{}\n---\n{}",
        deployment("web", Some(1), "1"),
        deployment("web", Some(2), "1")
    ));
    match &errors[..] {
        [
            PlanError::Duplicate {
                at: second, first, ..
            },
        ] => {
            assert_eq!(*first, at(1));
            assert_eq!(*second, at(2));
        }
        other => panic!("expected one duplicate error, got {other:?}"),
    }
}

#[test]
fn a_known_kind_at_an_api_version_no_longer_served_is_an_error_not_a_skip() {
    let errors = errors(
        &deployment("web", Some(1), "1")
            .replace("apiVersion: apps/v1", "apiVersion: extensions/v1beta1"),
    );
    match &errors[..] {
        [PlanError::Field { field, message, .. }] => {
            assert_eq!(field, "apiVersion");
            assert!(message.contains("apps/v1"), "{message}");
        }
        other => panic!("expected one field error, got {other:?}"),
    }
}

#[test]
fn an_error_inside_a_list_names_the_item() {
    let errors = errors(
        r#"
apiVersion: v1
kind: List
items:
  - {apiVersion: v1, kind: Pod, metadata: {name: a}, spec: {containers: [{name: c, image: c}]}}
  - {apiVersion: v1, kind: Pod, metadata: {name: b}, spec: {containers: "not a list"}}
"#,
    );
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].position().item, Some(1));
    assert!(
        errors[0]
            .to_string()
            .starts_with("test.yaml: document 1, items[1]: Pod/default/b: spec.containers"),
        "{}",
        errors[0]
    );
}
