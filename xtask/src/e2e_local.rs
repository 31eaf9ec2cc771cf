//! `cargo xtask e2e-local`: the local end-to-end check. Starts `karpenter-sim serve` (the
//! in-process controller for now; `--no-controller` plus the real `karpenter controller` binary
//! once that exists), then drives it with kubectl as a user would: apply the seed-000 NodePool,
//! EC2NodeClass and its Deployment, wait until the pods run on a Karpenter node, read the
//! NodeClaim, scale to zero, delete the NodePool and check the cloud has no instance left.
//! Bounded in time; stops what it started; prints every log on failure.

// The harness waits on real processes, so its deadlines are wall-clock ones (nothing here feeds
// a seeded decision).
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Longest the whole check may take.
const RUN_SECONDS_MAX: u64 = 300;
/// Longest `serve` may take to answer `/readyz`.
const READY_SECONDS_MAX: u64 = 30;
/// How often conditions are polled.
const POLL_MS: u64 = 1_000;
/// The manifest applied (NodePool, EC2NodeClass for cluster `demo`, Deployment `nginx`).
const MANIFEST: &str = "examples/seed-000-default.yaml";

/// What the check started and where it writes.
struct Harness {
    root: PathBuf,
    dir: PathBuf,
    kubectl: String,
    serve: Option<Child>,
    aws: String,
    deadline: Instant,
    transcript: Vec<String>,
}

/// Runs the check; `Err(step)` names what failed.
pub fn run(root: &Path) -> Result<(), String> {
    let started = Instant::now();
    let status = Command::new("cargo")
        .args([
            "build",
            "--quiet",
            "-p",
            "karpenter-sim",
            "--features",
            "serve",
            "--bin",
            "karpenter-sim",
        ])
        .current_dir(root)
        .status()
        .map_err(|e| format!("e2e-local build (could not start cargo: {e})"))?;
    if !status.success() {
        return Err("e2e-local build".into());
    }
    let Some(kubectl) = find_kubectl() else {
        eprintln!(
            "xtask: e2e-local skipped: no kubectl found (set KUBECTL, or run scripts/install-helm.sh)"
        );
        return Ok(());
    };
    let dir = root.join("target/e2e-local");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("e2e-local ({}: {e})", dir.display()))?;
    let mut harness = Harness {
        root: root.to_path_buf(),
        dir,
        kubectl,
        serve: None,
        aws: String::new(),
        deadline: Instant::now() + Duration::from_secs(RUN_SECONDS_MAX),
        transcript: Vec::new(),
    };
    let result = harness.check();
    harness.stop();
    match &result {
        Ok(()) => eprintln!(
            "xtask: e2e-local passed in {:.0} s",
            started.elapsed().as_secs_f64()
        ),
        Err(step) => harness.print_logs(step),
    }
    result
}

/// `KUBECTL`, else the newest `kubectl.1.NN` next to the gcloud `kubectl`, else the install
/// script's, else `kubectl` on the PATH.
fn find_kubectl() -> Option<String> {
    if let Ok(path) = std::env::var("KUBECTL") {
        return Some(path);
    }
    let candidates = [
        "/usr/lib/google-cloud-sdk/bin/kubectl.1.33",
        "/usr/lib/google-cloud-sdk/bin/kubectl.1.32",
        "target/tools/bin/kubectl",
    ];
    if let Some(found) = candidates.iter().find(|p| Path::new(p).exists()) {
        return Some(found.to_string());
    }
    Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| "kubectl".to_string())
}

impl Harness {
    fn check(&mut self) -> Result<(), String> {
        self.start_serve()?;
        self.kubectl(&["apply", "-f", MANIFEST])?;
        self.kubectl(&[
            "wait",
            "--for=condition=Available",
            "deployment/nginx",
            "--timeout=200s",
        ])?;
        self.pods_on_karpenter_nodes()?;
        let claims = self.json(&["get", "nodeclaims"])?;
        let launched = claims["items"].as_array().map_or(0, Vec::len);
        if launched == 0 {
            return Err("e2e-local: no NodeClaim after the pods ran".into());
        }
        self.note(format!("{launched} NodeClaim(s) launched"));
        self.kubectl(&["scale", "deployment/nginx", "--replicas=0"])?;
        self.until("the Deployment's pods are gone", |h| {
            let pods = h.json(&["get", "pods", "-l", "app=nginx"])?;
            Ok(pods["items"].as_array().is_some_and(Vec::is_empty))
        })?;
        self.kubectl(&["delete", "nodepool", "default", "--timeout=120s"])?;
        self.until("no NodeClaim left", |h| {
            let claims = h.json(&["get", "nodeclaims"])?;
            Ok(claims["items"].as_array().is_some_and(Vec::is_empty))
        })?;
        self.until("no instance left in the cloud", |h| {
            Ok(h.live_instances()? == 0)
        })
    }

    fn start_serve(&mut self) -> Result<(), String> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("e2e-local (no free port: {e})"))?
            .port();
        let out = std::fs::File::create(self.dir.join("serve.out")).map_err(|e| e.to_string())?;
        let err = std::fs::File::create(self.dir.join("serve.err")).map_err(|e| e.to_string())?;
        let child = Command::new(self.root.join("target/debug/karpenter-sim"))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .arg("--kubeconfig")
            .arg(self.dir.join("kubeconfig"))
            .current_dir(&self.root)
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("e2e-local (could not start karpenter-sim serve: {e})"))?;
        self.serve = Some(child);
        let ready_by = Instant::now() + Duration::from_secs(READY_SECONDS_MAX);
        while http(&format!("127.0.0.1:{port}"), "GET", "/readyz", "").is_none_or(|b| b != "ok") {
            if Instant::now() > ready_by {
                return Err("e2e-local: serve did not get ready".into());
            }
            sleep(Duration::from_millis(200));
        }
        let stdout = std::fs::read_to_string(self.dir.join("serve.out")).unwrap_or_default();
        self.aws = stdout
            .lines()
            .find_map(|l| l.strip_prefix("AWS_ENDPOINT_URL=http://"))
            .ok_or("e2e-local: serve printed no AWS_ENDPOINT_URL")?
            .to_string();
        self.note(format!(
            "serve ready on 127.0.0.1:{port}, AWS endpoint {}",
            self.aws
        ));
        Ok(())
    }

    /// Runs kubectl with the served kubeconfig and a private cache; its output, or the step.
    fn kubectl(&mut self, args: &[&str]) -> Result<String, String> {
        let output = Command::new(&self.kubectl)
            .arg("--kubeconfig")
            .arg(self.dir.join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.join("kube-cache"))
            .args(args)
            .current_dir(&self.root)
            .output()
            .map_err(|e| format!("e2e-local (could not start {}: {e})", self.kubectl))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        if !args.contains(&"json") {
            self.note(format!("$ kubectl {}\n{}", args.join(" "), text.trim_end()));
        }
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(format!("e2e-local: kubectl {}", args.join(" ")))
        }
    }

    fn json(&mut self, args: &[&str]) -> Result<serde_json::Value, String> {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let text = self.kubectl(&all)?;
        serde_json::from_str(&text).map_err(|e| format!("e2e-local: kubectl output: {e}"))
    }

    fn pods_on_karpenter_nodes(&mut self) -> Result<(), String> {
        let pods = self.json(&["get", "pods", "-l", "app=nginx"])?;
        let nodes = self.json(&["get", "nodes", "-l", "karpenter.sh/nodepool=default"])?;
        let karpenter_nodes: Vec<&str> = nodes["items"]
            .as_array()
            .map(|n| {
                n.iter()
                    .filter_map(|n| n["metadata"]["name"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        let pods = pods["items"].as_array().cloned().unwrap_or_default();
        let on_karpenter = pods
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .filter(|p| {
                p["spec"]["nodeName"]
                    .as_str()
                    .is_some_and(|n| karpenter_nodes.contains(&n))
            })
            .count();
        self.note(format!(
            "{on_karpenter}/{} pods Running on {} Karpenter node(s)",
            pods.len(),
            karpenter_nodes.len()
        ));
        if pods.is_empty() || on_karpenter != pods.len() {
            return Err("e2e-local: pods Running on Karpenter nodes".into());
        }
        Ok(())
    }

    /// Instances pending or running, from the AWS endpoint's DescribeInstances.
    fn live_instances(&mut self) -> Result<usize, String> {
        let body = "Action=DescribeInstances&Version=2016-11-15";
        let xml = http(&self.aws, "POST", "/", body).ok_or("e2e-local: DescribeInstances")?;
        Ok(xml.matches("<name>running</name>").count()
            + xml.matches("<name>pending</name>").count())
    }

    /// Polls `done` until it holds, within the run's deadline.
    fn until(
        &mut self,
        what: &str,
        mut done: impl FnMut(&mut Self) -> Result<bool, String>,
    ) -> Result<(), String> {
        let start = Instant::now();
        loop {
            if done(self)? {
                self.note(format!(
                    "{what} after {:.0} s",
                    start.elapsed().as_secs_f64()
                ));
                return Ok(());
            }
            if Instant::now() > self.deadline {
                return Err(format!("e2e-local: timed out waiting until {what}"));
            }
            sleep(Duration::from_millis(POLL_MS));
        }
    }

    fn note(&mut self, line: String) {
        eprintln!("e2e-local: {line}");
        self.transcript.push(line);
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.serve.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn print_logs(&self, step: &str) {
        eprintln!("xtask: {step}; logs of what e2e-local started:");
        for name in ["serve.out", "serve.err"] {
            let text = std::fs::read_to_string(self.dir.join(name)).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(200).collect();
            eprintln!("---- {name} (last {} lines)", tail.len());
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

/// A one-shot HTTP/1.0 request; the body of a 2xx answer.
fn http(addr: &str, method: &str, path: &str, body: &str) -> Option<String> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    let ok = head.split_whitespace().nth(1)?.starts_with('2');
    ok.then(|| body.to_string())
}
