//! kubectl is the judge: every test starts a server on a free port and runs a real kubectl
//! against it (`KUBECTL`, else the machine's `kubectl.1.33`; skipped, saying so, when none is
//! found), each with a fresh discovery cache. A few checks speak raw HTTP where kubectl has no
//! command (eviction, 410 Gone).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use fakekube::{ApiServer, ApiServerConfig};
use karpenter_core::seams::KubeApi;
use karpenter_core::seams::kube::{EventRecord, EventType, ObjectKey, Patch, ResourceKind};
use serde_json::{Value, json};

const GCLOUD_BIN: &str = "/usr/lib/google-cloud-sdk/bin";

fn kubectl_binary(minor: u32) -> Option<PathBuf> {
    if let Ok(path) = std::env::var("KUBECTL") {
        return Some(PathBuf::from(path));
    }
    let path = Path::new(GCLOUD_BIN).join(format!("kubectl.1.{minor}"));
    path.exists().then_some(path)
}

/// A served ApiServer on its own runtime, with a kubectl and a private cache dir.
struct Cluster {
    api: Arc<ApiServer>,
    runtime: tokio::runtime::Runtime,
    url: String,
    kubectl: PathBuf,
    dir: PathBuf,
    _server: fakekube_serve::Server,
}

impl Cluster {
    /// `None` (and a message) when no kubectl of that minor is found.
    fn start(test: &str, minor: u32) -> Option<Self> {
        let Some(kubectl) = kubectl_binary(minor) else {
            eprintln!(
                "SKIPPED {test}: no kubectl.1.{minor} (set KUBECTL or run scripts/install-helm.sh)"
            );
            return None;
        };
        Self::with_config(test, kubectl, ApiServerConfig::default())
    }

    fn with_config(test: &str, kubectl: PathBuf, config: ApiServerConfig) -> Option<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let api = Arc::new(ApiServer::new(Arc::new(fakecloud_serve::WallClock), config));
        let server = runtime
            .block_on(fakekube_serve::serve(
                api.clone(),
                "127.0.0.1:0".parse().unwrap(),
            ))
            .expect("listens");
        let dir =
            std::env::temp_dir().join(format!("fakekube-serve-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Some(Self {
            api,
            runtime,
            url: server.url(),
            kubectl,
            dir,
            _server: server,
        })
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.kubectl);
        command
            .args(["--server", &self.url, "--cache-dir"])
            .arg(self.dir.join("cache"))
            .args(args)
            .current_dir(&self.dir);
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("kubectl runs")
    }

    /// kubectl's stdout; panics with its stderr when it fails.
    fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl starts")
    }

    fn file(&self, name: &str, text: &str) -> String {
        let path = self.dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }

    fn create(&self, kind: &ResourceKind, object: Value) -> Value {
        self.runtime
            .block_on(self.api.create(kind, object))
            .expect("created")
    }

    fn patch(&self, kind: &ResourceKind, key: &ObjectKey, patch: Value, status: bool) {
        let patch = Patch::Merge(patch);
        let call = async {
            if status {
                self.api.patch_status(kind, key, &patch).await
            } else {
                self.api.patch(kind, key, &patch).await
            }
        };
        self.runtime.block_on(call).expect("patched");
    }

    fn get(&self, kind: &ResourceKind, key: &ObjectKey) -> Option<Value> {
        self.runtime
            .block_on(self.api.get(kind, key))
            .expect("read")
    }

    /// One raw HTTP request: (status code, body).
    fn http(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let addr = self.url.trim_start_matches("http://").to_string();
        let mut stream = TcpStream::connect(&addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let request = format!(
            "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (code, body.to_string())
    }
}

fn node_pool(name: &str) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []}}}
    })
}

const DEPLOYMENT_YAML: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx
        resources:
          requests: {cpu: 500m}
";

fn deployment() -> ResourceKind {
    fakekube_serve::kinds::DEPLOYMENT
}

#[test]
fn get_prints_the_crds_printer_columns_as_a_table() {
    let Some(c) = Cluster::start("get", 33) else {
        return;
    };
    c.create(&ResourceKind::NODE_POOL, node_pool("default"));
    let out = c.ok(&["get", "nodepools"]);
    let header = out.lines().next().unwrap();
    assert!(
        header.contains("NODECLASS") && header.contains("NODES"),
        "{out}"
    );
    assert!(out.contains("default"), "{out}");
    let wide = c.ok(&["get", "nodepools", "-o", "wide"]);
    assert!(wide.lines().next().unwrap().contains("WEIGHT"), "{wide}");
}

#[test]
fn get_works_with_kubectl_1_27_over_v2beta1_discovery() {
    let Some(c) = Cluster::start("get127", 27) else {
        return;
    };
    c.create(&ResourceKind::NODE_POOL, node_pool("old-client"));
    let out = c.ok(&["get", "nodepools"]);
    assert!(
        out.contains("old-client") && out.contains("NODECLASS"),
        "{out}"
    );
}

#[test]
fn get_of_a_missing_object_is_a_not_found_status() {
    let Some(c) = Cluster::start("notfound", 33) else {
        return;
    };
    let output = c.run(&["get", "nodepool", "nope"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("(NotFound)") && stderr.contains("\"nope\" not found"),
        "{stderr}"
    );
}

#[test]
fn get_o_yaml_shows_the_stored_object() {
    let Some(c) = Cluster::start("yaml", 33) else {
        return;
    };
    c.create(&ResourceKind::NODE_POOL, node_pool("default"));
    let out = c.ok(&["get", "nodepool", "default", "-o", "yaml"]);
    assert!(
        out.contains("kind: NodePool") && out.contains("resourceVersion:"),
        "{out}"
    );
    assert!(
        out.contains("name: default") && out.contains("EC2NodeClass"),
        "{out}"
    );
}

#[test]
fn get_w_prints_objects_created_while_it_watches() {
    let Some(c) = Cluster::start("watch", 33) else {
        return;
    };
    c.create(&ResourceKind::NODE_POOL, node_pool("first"));
    let mut child = c.spawn(&["get", "nodepools", "-w"]);
    std::thread::sleep(Duration::from_secs(2));
    c.create(&ResourceKind::NODE_POOL, node_pool("second"));
    std::thread::sleep(Duration::from_secs(2));
    child.kill().unwrap();
    let output = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(out.contains("first") && out.contains("second"), "{out}");
}

#[test]
fn describe_shows_the_spec_and_the_recorded_events() {
    let Some(c) = Cluster::start("describe", 33) else {
        return;
    };
    let pool = c.create(&ResourceKind::NODE_POOL, node_pool("default"));
    let event = EventRecord {
        involved: ResourceKind::NODE_POOL,
        key: ObjectKey::cluster("default"),
        uid: pool["metadata"]["uid"].as_str().map(String::from),
        type_: EventType::Warning,
        reason: "NoCompatibleInstanceTypes".into(),
        message: "nothing fits".into(),
    };
    c.runtime.block_on(c.api.record_event(&event)).unwrap();
    let out = c.ok(&["describe", "nodepool", "default"]);
    assert!(
        out.contains("Node Class Ref") || out.contains("EC2NodeClass"),
        "{out}"
    );
    assert!(
        out.contains("NoCompatibleInstanceTypes") && out.contains("nothing fits"),
        "{out}"
    );
}

#[test]
fn apply_creates_then_patches_a_deployment_by_strategic_merge() {
    let Some(c) = Cluster::start("apply", 33) else {
        return;
    };
    let file = c.file("web.yaml", DEPLOYMENT_YAML);
    assert!(c.ok(&["apply", "-f", &file]).contains("created"));
    assert!(c.ok(&["apply", "-f", &file]).contains("unchanged"));
    let changed = DEPLOYMENT_YAML
        .replace("replicas: 2", "replicas: 4")
        .replace("image: nginx", "image: nginx:2");
    let file = c.file("web.yaml", &changed);
    assert!(c.ok(&["apply", "-f", &file]).contains("configured"));
    let stored = c
        .get(&deployment(), &ObjectKey::namespaced("default", "web"))
        .unwrap();
    assert_eq!(stored["spec"]["replicas"], 4);
    let containers = stored["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(containers.len(), 1, "{containers:?}");
    assert_eq!(containers[0]["image"], "nginx:2");
}

#[test]
fn apply_server_side_creates_and_updates_a_node_pool() {
    let Some(c) = Cluster::start("ssa", 33) else {
        return;
    };
    let yaml = serde_yaml::to_string(&node_pool("ssa")).unwrap();
    let file = c.file("pool.yaml", &yaml);
    assert!(
        c.ok(&["apply", "--server-side", "-f", &file])
            .contains("serverside-applied")
    );
    let weighted = yaml.replacen("spec:\n", "spec:\n  weight: 7\n", 1);
    let file = c.file("pool.yaml", &weighted);
    c.ok(&["apply", "--server-side", "-f", &file]);
    let stored = c
        .get(&ResourceKind::NODE_POOL, &ObjectKey::cluster("ssa"))
        .unwrap();
    assert_eq!(stored["spec"]["weight"], 7, "{stored}");
}

#[test]
fn delete_waits_until_the_last_finalizer_is_removed() {
    let Some(c) = Cluster::start("delete", 33) else {
        return;
    };
    let mut pool = node_pool("held");
    pool["metadata"]["finalizers"] = json!(["karpenter.sh/termination"]);
    c.create(&ResourceKind::NODE_POOL, pool);
    let child = c.spawn(&["delete", "nodepool", "held", "--timeout=30s"]);
    std::thread::sleep(Duration::from_secs(2));
    let key = ObjectKey::cluster("held");
    let marked = c.get(&ResourceKind::NODE_POOL, &key).expect("still there");
    assert!(
        marked["metadata"]["deletionTimestamp"].is_string(),
        "{marked}"
    );
    c.patch(
        &ResourceKind::NODE_POOL,
        &key,
        json!({"metadata": {"finalizers": null}}),
        false,
    );
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("deleted"));
    assert!(c.get(&ResourceKind::NODE_POOL, &key).is_none());
}

#[test]
fn scale_sets_a_deployments_replicas_through_the_scale_subresource() {
    let Some(c) = Cluster::start("scale", 33) else {
        return;
    };
    let file = c.file("web.yaml", DEPLOYMENT_YAML);
    c.ok(&["apply", "-f", &file]);
    assert!(
        c.ok(&["scale", "deployment/web", "--replicas=0"])
            .contains("scaled")
    );
    let stored = c
        .get(&deployment(), &ObjectKey::namespaced("default", "web"))
        .unwrap();
    assert_eq!(stored["spec"]["replicas"], 0);
}

#[test]
fn wait_for_condition_returns_once_the_status_says_so() {
    let Some(c) = Cluster::start("wait", 33) else {
        return;
    };
    c.create(&ResourceKind::NODE_POOL, node_pool("default"));
    let child = c.spawn(&[
        "wait",
        "--for=condition=Ready",
        "nodepool/default",
        "--timeout=30s",
    ]);
    std::thread::sleep(Duration::from_secs(2));
    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True",
        "reason": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    c.patch(
        &ResourceKind::NODE_POOL,
        &ObjectKey::cluster("default"),
        ready,
        true,
    );
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("condition met"));
}

#[test]
fn eviction_blocked_by_a_pod_disruption_budget_is_a_429_status() {
    let Some(c) = Cluster::start("evict", 33) else {
        return;
    };
    c.create(
        &ResourceKind::POD,
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "labels": {"app": "a"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}}),
    );
    let running = json!({"status": {"phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}]}});
    c.patch(
        &ResourceKind::POD,
        &ObjectKey::namespaced("default", "p"),
        running,
        true,
    );
    c.create(
        &ResourceKind::POD_DISRUPTION_BUDGET,
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "b", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}}}),
    );
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "p", "namespace": "default"}});
    let (code, body) = c.http(
        "POST",
        "/api/v1/namespaces/default/pods/p/eviction",
        &eviction.to_string(),
    );
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (code, status["reason"].as_str()),
        (429, Some("TooManyRequests")),
        "{body}"
    );
    assert_eq!(status["kind"], "Status");
}

#[test]
fn a_binding_posted_to_the_pods_subresource_binds_it_once() {
    let Some(c) = Cluster::start("bind", 33) else {
        return;
    };
    c.create(
        &ResourceKind::POD,
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}),
    );
    let binding = |pod: &str| {
        json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": pod, "namespace": "default"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}})
        .to_string()
    };
    let path = "/api/v1/namespaces/default/pods/p/binding";
    let (code, body) = c.http("POST", path, &binding("other"));
    assert_eq!(code, 400, "the name must be the path's: {body}");
    let (code, body) = c.http("POST", path, &binding("p"));
    assert_eq!(code, 201, "{body}");
    let pod = c
        .get(&ResourceKind::POD, &ObjectKey::namespaced("default", "p"))
        .expect("pod");
    assert_eq!(pod["spec"]["nodeName"], "n1");
    assert_eq!(pod["status"]["conditions"][0]["type"], "PodScheduled");
    let (code, body) = c.http("POST", path, &binding("p"));
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (code, status["reason"].as_str()),
        (409, Some("Conflict")),
        "{body}"
    );
    let out = c.ok(&["get", "pod", "p", "-o", "jsonpath={.spec.nodeName}"]);
    assert_eq!(out, "n1");
}

#[test]
fn a_watch_from_an_expired_version_ends_with_a_410_error_event() {
    let Some(kubectl) = kubectl_binary(33) else {
        return;
    };
    let config = ApiServerConfig {
        watch_history_max: 2,
        ..ApiServerConfig::default()
    };
    let c = Cluster::with_config("gone", kubectl, config).unwrap();
    for name in ["a", "b", "c", "d", "e"] {
        c.create(&ResourceKind::NODE_POOL, node_pool(name));
    }
    let (code, body) = c.http(
        "GET",
        "/apis/karpenter.sh/v1/nodepools?watch=true&resourceVersion=1",
        "",
    );
    assert_eq!(code, 200);
    let event: Value = serde_json::from_str(body.lines().next().unwrap()).unwrap();
    assert_eq!(event["type"], "ERROR", "{body}");
    assert_eq!(event["object"]["code"], 410, "{body}");
}

const SELECTOR_SOURCES_YAML: &str = "apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector:
    app: web
  ports:
    - port: 80
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  replicas: 3
  serviceName: db
  selector:
    matchLabels:
      app: db
  template:
    metadata:
      labels:
        app: db
    spec:
      containers:
        - name: db
          image: postgres
";

#[test]
fn services_and_stateful_sets_apply_list_and_scale_as_a_real_server_serves_them() {
    let Some(c) = Cluster::start("selectors", 33) else {
        return;
    };
    let file = c.file("sources.yaml", SELECTOR_SOURCES_YAML);
    let applied = c.ok(&["apply", "-f", &file]);
    assert!(applied.contains("service/web created"), "{applied}");
    assert!(applied.contains("statefulset.apps/db created"), "{applied}");
    let listed = c.ok(&["get", "svc,sts,rs,rc"]);
    assert!(listed.contains("web") && listed.contains("db"), "{listed}");
    assert!(
        c.ok(&["scale", "statefulset/db", "--replicas=1"])
            .contains("scaled")
    );
    let stored = c
        .get(
            &ResourceKind::STATEFUL_SET,
            &ObjectKey::namespaced("default", "db"),
        )
        .unwrap();
    assert_eq!(stored["spec"]["replicas"], 1);
}
