//! The objects the tests apply: the user's examples (`examples/seed-*.yaml`, as written but for
//! names and the cluster placeholders) and each case's own NodePool, EC2NodeClass, Deployments
//! and PDBs.

use serde_json::{Value, json};

use crate::{CASE_LABEL, E2eError, NAMESPACE, Outcome};

/// The examples' directory in the workspace.
fn examples_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("e2e lives in the workspace")
        .join("examples")
}

/// The documents of example `file`, made safe to apply beside the other tests:
/// - every object's name gets the prefix `<case>-` (so seed-000's and seed-003's `default`
///   NodePools can run side by side), and NodePools' `nodeClassRef` follows;
/// - every object, and each Deployment's pod template, gets the label [`CASE_LABEL`];
/// - the cluster the example was written for (`demo`, `my-cluster`, `dev-eks-cluster`: the
///   placeholder a user fills in) becomes `cluster`, in the discovery tags and the node role;
/// - a Deployment that selects no nodes gets `karpenter.sh/nodepool: <the example's NodePool>`,
///   so it cannot land on another test's example nodes (the examples' NodePools are untainted).
///
/// Everything else — requirements, taints, limits, disruption, AMI aliases, requests — is as
/// written.
pub fn example(file: &str, case: &str, cluster: &str) -> Outcome<Vec<Value>> {
    let path = examples_dir().join(file);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| E2eError::Manifest(format!("{}: {e}", path.display())))?;
    let mut documents = Vec::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value: Value = serde::Deserialize::deserialize(document)
            .map_err(|e| E2eError::Manifest(format!("{file}: {e}")))?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    let pools: Vec<String> = documents
        .iter()
        .filter(|d| d["kind"] == "NodePool")
        .map(|d| format!("{case}-{}", crate::name(d)))
        .collect();
    for document in &mut documents {
        let renamed = format!("{case}-{}", crate::name(document));
        document["metadata"]["name"] = json!(renamed);
        document["metadata"]["labels"][CASE_LABEL] = json!(case);
        match document["kind"].as_str().unwrap_or_default() {
            "NodePool" => {
                let class = &mut document["spec"]["template"]["spec"]["nodeClassRef"]["name"];
                *class = json!(format!("{case}-{}", class.as_str().unwrap_or_default()));
            }
            "EC2NodeClass" => retarget_class(&mut document["spec"], cluster),
            "Deployment" => {
                let pod = &mut document["spec"]["template"];
                pod["metadata"]["labels"][CASE_LABEL] = json!(case);
                if pod["spec"]["nodeSelector"].is_null() && pools.len() == 1 {
                    pod["spec"]["nodeSelector"] = json!({"karpenter.sh/nodepool": pools[0]});
                }
            }
            _ => {}
        }
    }
    Ok(documents)
}

/// Points an EC2NodeClass written for another cluster at `cluster`: its node role and the
/// `karpenter.sh/discovery` values of its subnet and security group selector terms.
fn retarget_class(spec: &mut Value, cluster: &str) {
    if let Some(role) = spec["role"].as_str()
        && role.starts_with("KarpenterNodeRole-")
    {
        spec["role"] = json!(format!("KarpenterNodeRole-{cluster}"));
    }
    for terms in ["subnetSelectorTerms", "securityGroupSelectorTerms"] {
        for term in spec[terms].as_array_mut().into_iter().flatten() {
            if !term["tags"]["karpenter.sh/discovery"].is_null() {
                term["tags"]["karpenter.sh/discovery"] = json!(cluster);
            }
        }
    }
}

/// The AMI the cases' own EC2NodeClasses pin: the fake cloud's initial al2023 release. Pinned,
/// not `@latest`, so that a test publishing a release (drift, seed-003) cannot drift the other
/// tests' nodes once the controller's cache of the `latest` parameter expires.
pub const CASE_AMI_ALIAS: &str = "al2023@v20250601";

/// A case's EC2NodeClass (`<case>`): [`CASE_AMI_ALIAS`], the cluster's discovered network and
/// role.
pub fn node_class(case: &str, cluster: &str) -> Value {
    json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": case, "labels": {CASE_LABEL: case}},
        "spec": {
            "role": format!("KarpenterNodeRole-{cluster}"),
            "amiSelectorTerms": [{"alias": CASE_AMI_ALIAS}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": cluster}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": cluster}}],
        }
    })
}

/// A case's NodePool (`<case>`, class `<case>`): nodes labelled and tainted with
/// [`CASE_LABEL`]`=<case>`, amd64 Linux, the given extra `requirements` and `disruption`,
/// `expireAfter` (default `Never`).
pub fn node_pool(
    case: &str,
    requirements: Value,
    disruption: Value,
    expire_after: Option<&str>,
) -> Value {
    let mut all = vec![
        json!({"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}),
        json!({"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}),
    ];
    all.extend(requirements.as_array().cloned().unwrap_or_default());
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": case, "labels": {CASE_LABEL: case}},
        "spec": {
            "template": {
                "metadata": {"labels": {CASE_LABEL: case}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": case},
                    "taints": [{"key": CASE_LABEL, "value": case, "effect": "NoSchedule"}],
                    "requirements": all,
                    "expireAfter": expire_after.unwrap_or("Never"),
                }
            },
            "disruption": disruption,
        }
    })
}

/// A case's Deployment `name`: `replicas` pods of `cpu` each, selecting and tolerating the
/// case's nodes, labelled `app=<name>` and [`CASE_LABEL`]`=<case>`.
pub fn deployment(case: &str, name: &str, replicas: u32, cpu: &str) -> Value {
    let labels = json!({"app": name, CASE_LABEL: case});
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {CASE_LABEL: case},
                    "tolerations": [{"key": CASE_LABEL, "operator": "Equal", "value": case, "effect": "NoSchedule"}],
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}],
                }
            }
        }
    })
}

/// A PodDisruptionBudget `name` over `app=<app>` allowing no disruption.
pub fn pdb(case: &str, name: &str, app: &str) -> Value {
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {CASE_LABEL: case}},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}}
    })
}
