//! Provisioning: the user's examples `examples/seed-000..003` applied as written (see
//! `karpenter_e2e::manifests::example` for the renaming that lets them run side by side); their
//! pods run on nodes that honour the NodePool (requirements, template labels, taints, zones) and
//! are sized for them.

use std::time::Duration;

use karpenter_e2e::{Case, Outcome, checks, fail, kinds, manifests, name};
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(200);

/// Applies example `file` for `case`, waits until `replicas` pods of `app` run on its NodePool's
/// nodes, and checks every node honours the NodePool and is right-sized; the NodePool's nodes.
async fn provision_example(
    case: &Case,
    file: &str,
    app: &str,
    replicas: usize,
    extra: Option<Value>,
) -> Outcome<Vec<Value>> {
    let documents = manifests::example(file, &case.name, &case.target.cluster_name)?;
    let pool = documents
        .iter()
        .find(|d| d["kind"] == "NodePool")
        .cloned()
        .ok_or_else(|| karpenter_e2e::E2eError::Manifest(format!("{file} has no NodePool")))?;
    let pool_name = name(&pool);
    for document in documents.iter().chain(extra.iter()) {
        case.apply(document).await?;
    }
    let selector = format!("app={app}");
    let pods = case
        .until_running_on(&selector, replicas, &pool_name)
        .await?;
    let nodes = case.nodes(&pool_name).await?;
    for node in &nodes {
        checks::honours_pool(node, &pool).map_err(karpenter_e2e::E2eError::Check)?;
        checks::right_sized(node, &pods).map_err(karpenter_e2e::E2eError::Check)?;
        case.note(format!(
            "node {} ({} {} {}) honours {pool_name} and is right-sized",
            name(node),
            node["metadata"]["labels"]["node.kubernetes.io/instance-type"],
            node["metadata"]["labels"]["karpenter.sh/capacity-type"],
            node["metadata"]["labels"]["topology.kubernetes.io/zone"],
        ));
    }
    if nodes.is_empty() {
        return fail(format!("NodePool {pool_name} has no nodes"));
    }
    Ok(nodes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_000_runs_nginx_on_right_sized_nodes_of_its_node_pool() {
    let Some(case) = Case::start("seed-000", false).await else {
        return;
    };
    case.run(BOUND, async {
        provision_example(&case, "seed-000-default.yaml", "nginx", 10, None)
            .await
            .map(|_| ())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_001_general_launches_only_its_listed_instance_types() {
    let Some(case) = Case::start("seed-001", false).await else {
        return;
    };
    // The example has no workload: three 1-CPU pods that select its NodePool.
    let mut workload = manifests::deployment(&case.name, "general-load", 3, "1");
    workload["spec"]["template"]["spec"]["nodeSelector"] =
        json!({"karpenter.sh/nodepool": format!("{}-general", case.name)});
    workload["spec"]["template"]["spec"]["tolerations"] = json!([]);
    case.run(BOUND, async {
        let nodes = provision_example(
            &case,
            "seed-001-general.yaml",
            "general-load",
            3,
            Some(workload.clone()),
        )
        .await?;
        let allowed = ["m6i.large", "m6i.xlarge", "m7i.large", "c6i.large"];
        for node in &nodes {
            let instance_type = node["metadata"]["labels"]["node.kubernetes.io/instance-type"]
                .as_str()
                .unwrap_or_default();
            if !allowed.contains(&instance_type) {
                return fail(format!("node {} is a {instance_type}", name(node)));
            }
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_002_runs_tolerating_pods_on_tainted_labelled_nodes_in_its_zones() {
    let Some(case) = Case::start("seed-002", false).await else {
        return;
    };
    case.run(BOUND, async {
        let nodes = provision_example(
            &case,
            "seed-002-bottlerocket-and-taints.yaml",
            "myapp",
            3,
            None,
        )
        .await?;
        let pool = format!("{}-team-a", case.name);
        for node in &nodes {
            let zone = node["metadata"]["labels"]["topology.kubernetes.io/zone"]
                .as_str()
                .unwrap_or_default();
            if zone != "us-west-2a" && zone != "us-west-2b" {
                return fail(format!("node {} is in {zone}", name(node)));
            }
        }
        for claim in case.node_claims(&pool).await? {
            if claim["metadata"]["annotations"]["application/name"] != "app-a" {
                return fail(format!(
                    "NodeClaim {} lacks the template annotation application/name: app-a",
                    name(&claim)
                ));
            }
        }
        let class = case
            .get(
                &kinds::EC2_NODE_CLASS,
                &format!("{}-bottlerocket", case.name),
            )
            .await?
            .unwrap_or_default();
        case.note(format!(
            "EC2NodeClass bottlerocket resolved AMIs: {}",
            class["status"]["amis"]
        ));
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_003_runs_inflate_on_spot_nodes_only() {
    let Some(case) = Case::start("seed-003", true).await else {
        return;
    };
    case.run(BOUND, async {
        // The example pins al2023@v20250505, a release the real EKS has and the fake cloud
        // does not publish by default: publish it, as AWS did.
        let released = case
            .cloud()?
            .control(
                "/ami-releases",
                &json!({"family": "al2023", "release": "v20250505"}),
            )
            .await?;
        case.note(format!("published al2023 v20250505: {released}"));
        provision_example(&case, "seed-003-spot-inflate.yaml", "inflate", 10, None)
            .await
            .map(|_| ())
    })
    .await;
}
