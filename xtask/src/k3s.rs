//! `cargo xtask e2e-k3s`: the end-to-end suite against a real k3s API server in a throwaway
//! container (issue 21, target d), testcontainers-style but through the `docker` CLI, so the
//! workspace gains no container-runtime dependency. The k3s server is the control plane (a real
//! kube-apiserver, kube-scheduler and controller manager); this host runs the node registrar
//! (`karpenter-sim cloud`, the fake cloud and the kubelet of its instances' nodes) and two
//! `karpenter controller` replicas against it, with the leader-election checks of
//! `cargo xtask e2e` around the suite.
//!
//! Skips, saying so, when no Docker engine answers (`docker info` fails), as on machines with
//! the Docker client alone. Not part of `cargo xtask test`.

// The harness waits on real processes: wall-clock deadlines.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

/// The k3s image (override with `K3S_IMAGE`): the Kubernetes minor the CRDs and kubectl target.
const K3S_IMAGE: &str = "rancher/k3s:v1.33.5-k3s1";
/// The container's name (one run at a time; a leftover one is removed first).
const CONTAINER: &str = "karpenter-e2e-k3s";
/// Longest k3s may take to write its kubeconfig and report a Ready node.
const READY_SECONDS_MAX: u64 = 180;

/// Runs the suite against k3s; skips (Ok) without a Docker engine.
pub fn run(root: &Path, suite_args: &[String]) -> Result<(), String> {
    let engine = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output();
    if !engine.as_ref().is_ok_and(|o| o.status.success()) {
        eprintln!(
            "xtask: e2e-k3s skipped: no Docker engine answers (`docker info` failed); it needs \
             one to run {K3S_IMAGE}"
        );
        return Ok(());
    }
    let image = std::env::var("K3S_IMAGE").unwrap_or_else(|_| K3S_IMAGE.to_string());
    let dir = crate::e2e::target_dir(root).join("e2e-k3s");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let kubeconfig = dir.join("k3s.kubeconfig");
    let _ = docker(&["rm", "-f", CONTAINER]);
    docker(&[
        "run",
        "-d",
        "--name",
        CONTAINER,
        "--privileged",
        "-p",
        "127.0.0.1::6443",
        &image,
        "server",
        "--disable=traefik,metrics-server,servicelb",
        "--tls-san",
        "127.0.0.1",
    ])?;
    let result = start_k3s(&kubeconfig)
        .and_then(|()| crate::e2e::run_external(root, &kubeconfig, suite_args).map(|_| ()));
    if result.is_err()
        && let Ok(logs) = docker(&["logs", "--tail", "100", CONTAINER])
    {
        eprintln!("---- k3s (last 100 lines)\n{logs}");
    }
    let _ = docker(&["rm", "-f", CONTAINER]);
    result
}

/// Waits for k3s's kubeconfig, rewrites its server to the published port, and waits for the
/// server's own node to be Ready.
fn start_k3s(kubeconfig: &Path) -> Result<(), String> {
    let port = docker(&["port", CONTAINER, "6443/tcp"])?;
    let port = port
        .lines()
        .next()
        .and_then(|l| l.rsplit(':').next())
        .ok_or("e2e-k3s: docker published no port for 6443")?
        .trim()
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(READY_SECONDS_MAX);
    let text = loop {
        if let Ok(text) = docker(&["exec", CONTAINER, "cat", "/etc/rancher/k3s/k3s.yaml"]) {
            break text;
        }
        if Instant::now() > deadline {
            return Err("e2e-k3s: k3s wrote no kubeconfig in time".into());
        }
        sleep(Duration::from_secs(2));
    };
    let text = text.replace(
        "https://127.0.0.1:6443",
        &format!("https://127.0.0.1:{port}"),
    );
    std::fs::write(kubeconfig, text).map_err(|e| format!("{}: {e}", kubeconfig.display()))?;
    let kubectl = crate::e2e::find_kubectl().ok_or("e2e-k3s: no kubectl found (set KUBECTL)")?;
    loop {
        let ready = Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args([
                "wait",
                "--for=condition=Ready",
                "node",
                "--all",
                "--timeout=10s",
            ])
            .output()
            .is_ok_and(|o| o.status.success());
        if ready {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("e2e-k3s: the k3s node did not get Ready in time".into());
        }
        sleep(Duration::from_secs(2));
    }
}

/// `docker ARGS`: its stdout, or its stderr as the error.
fn docker(args: &[&str]) -> Result<String, String> {
    let output = Command::new("docker")
        .args(args)
        .output()
        .map_err(|e| format!("e2e-k3s (could not start docker: {e})"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "e2e-k3s: docker {}: {}",
            args.first().unwrap_or(&""),
            String::from_utf8_lossy(&output.stderr).trim_end()
        ))
    }
}
