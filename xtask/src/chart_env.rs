//! The controller as the chart runs it: `helm template charts/karpenter` (the pinned Helm,
//! default values plus the served cluster's name and queue) and the arguments and environment
//! of the Deployment's controller container, so the end-to-end check and the memory benchmark
//! start `karpenter controller` exactly as a `helm install` would (issue 20: "the e2e-local
//! check can run from the rendered environment").
//!
//! Only what cannot be the same on one machine is replaced afterwards, and the harness notes
//! each replacement: the API server and AWS endpoints (`KUBECONFIG`, `AWS_*`, which IRSA and the
//! service account give a pod) and the two ports (two replicas share a host here).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Helm as the chart check installs it (`scripts/install-helm.sh`, pinned there).
const HELM_DIR: &str = "target/tools/helm-v3.19.0";
/// The release's namespace (`SYSTEM_NAMESPACE` comes from it through a fieldRef).
const NAMESPACE: &str = "kube-system";

/// The rendered controller container.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ChartController {
    /// `args` of the container (the image's entrypoint is the `karpenter` binary).
    pub args: Vec<String>,
    /// Its environment, in the chart's order, fieldRefs to the namespace resolved as the
    /// kubelet would.
    pub env: Vec<(String, String)>,
}

/// Installs the pinned Helm if needed and renders the chart for `cluster` and `queue`.
pub(crate) fn render(root: &Path, cluster: &str, queue: &str) -> Result<ChartController, String> {
    crate::run(
        root,
        "helm install",
        "bash",
        &["scripts/install-helm.sh", HELM_DIR],
    )?;
    let output = Command::new(root.join(HELM_DIR).join("bin/helm"))
        .args(["template", "karpenter", "charts/karpenter", "--namespace"])
        .arg(NAMESPACE)
        .arg("--set")
        .arg(format!("settings.clusterName={cluster}"))
        .arg("--set")
        .arg(format!("settings.interruptionQueue={queue}"))
        .current_dir(root)
        .output()
        .map_err(|e| format!("helm template (could not start helm: {e})"))?;
    if !output.status.success() {
        return Err(format!(
            "helm template ({})",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    controller(&String::from_utf8_lossy(&output.stdout))
}

/// The controller container of the one Deployment in `rendered` (a multi-document YAML).
fn controller(rendered: &str) -> Result<ChartController, String> {
    let mut deployments = Vec::new();
    for document in serde_yaml::Deserializer::from_str(rendered) {
        let value = <Value as serde::Deserialize>::deserialize(document)
            .map_err(|e| format!("helm template (unreadable output: {e})"))?;
        if value["kind"] == "Deployment" {
            deployments.push(value);
        }
    }
    let [deployment] = deployments.as_slice() else {
        return Err(format!(
            "helm template (expected one Deployment, found {})",
            deployments.len()
        ));
    };
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let Some(container) = containers.iter().find(|c| {
        c["args"]
            .as_array()
            .is_some_and(|a| a.first() == Some(&"controller".into()))
    }) else {
        return Err("helm template (no container runs `controller`)".into());
    };
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(String::from))
            .collect()
    };
    let mut env = Vec::new();
    for var in container["env"].as_array().into_iter().flatten() {
        let name = var["name"].as_str().unwrap_or_default().to_string();
        if let Some(value) = var["value"].as_str() {
            env.push((name, value.to_string()));
        } else if var["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace" {
            env.push((name, NAMESPACE.to_string()));
        } else {
            return Err(format!(
                "helm template (env {name} comes from {}: not something a local run can resolve)",
                var["valueFrom"]
            ));
        }
    }
    Ok(ChartController {
        args: strings(&container["args"]),
        env,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const RENDERED: &str = r#"
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: karpenter}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: karpenter}
spec:
  template:
    spec:
      containers:
        - name: controller
          args: [controller]
          env:
            - {name: CLUSTER_NAME, value: demo}
            - name: SYSTEM_NAMESPACE
              valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
"#;

    #[test]
    fn the_controller_container_gives_its_args_and_env_with_the_namespace_resolved() {
        let controller = controller(RENDERED).expect("rendered");
        assert_eq!(controller.args, ["controller"]);
        assert_eq!(
            controller.env,
            [
                ("CLUSTER_NAME".to_string(), "demo".to_string()),
                ("SYSTEM_NAMESPACE".to_string(), NAMESPACE.to_string()),
            ]
        );
    }

    #[test]
    fn an_env_var_from_a_secret_is_an_error_naming_it() {
        let rendered = RENDERED.replace(
            "- {name: CLUSTER_NAME, value: demo}",
            "- name: TOKEN\n              valueFrom: {secretKeyRef: {name: s, key: k}}",
        );
        let error = controller(&rendered).expect_err("a secret cannot be resolved here");
        assert!(error.contains("TOKEN"), "{error}");
    }
}
