//! Drift and expiration: a NodePool template change, or an EC2NodeClass moved to a newly
//! released AMI (published through the fake cloud's control API), replaces the node; a short
//! `expireAfter` replaces it too.

use std::time::Duration;

use karpenter_e2e::{Case, Outcome, fail, kinds, manifests, name};
use serde_json::{Value, json};

use crate::{claim_instance, single_claim, until_claim_gone, until_instance_ends};

fn small_on_demand() -> Value {
    json!([
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c6a.large"]},
    ])
}

/// Consolidation off: only drift or expiration may move the pod.
fn no_consolidation() -> Value {
    json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"})
}

/// Sets up the case's pool (`expire_after`) and one pod; its NodeClaim.
async fn one_node(case: &Case, expire_after: Option<&str>) -> Outcome<Value> {
    let c = &case.name;
    case.apply(&manifests::node_class(c, &case.target.cluster_name))
        .await?;
    case.apply(&manifests::node_pool(
        c,
        small_on_demand(),
        no_consolidation(),
        expire_after,
    ))
    .await?;
    case.apply(&manifests::deployment(c, c, 1, "1")).await?;
    case.until_running_on(&format!("app={c}"), 1, c).await?;
    single_claim(case, c).await
}

/// The bound of a drift replacement: a launch, the pool or class change, a replacement's launch,
/// the drain and the old instance's end. Measured on this 2-core machine with every case running
/// at once: 153-197 s; a CI run once went past 270 s.
const REPLACEMENT_BOUND: Duration = Duration::from_secs(360);

/// Waits until `old` is gone, its instance ended and the pod runs on another NodeClaim's node;
/// that NodeClaim.
async fn replaced(case: &Case, old: &Value) -> Outcome<Value> {
    let c = &case.name;
    until_claim_gone(case, &name(old)).await?;
    let pods = case.until_running_on(&format!("app={c}"), 1, c).await?;
    until_instance_ends(case, &claim_instance(old)?).await?;
    let new = single_claim(case, c).await?;
    if pods[0]["spec"]["nodeName"] != new["status"]["nodeName"] {
        return fail("the pod does not run on the new NodeClaim's node");
    }
    Ok(new)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_pool_template_change_drifts_and_replaces_the_node() {
    let Some(case) = Case::start("drift-nodepool", true).await else {
        return;
    };
    case.run(REPLACEMENT_BOUND, async {
        let old = one_node(&case, None).await?;
        let change = json!({"spec": {"template": {"metadata": {"labels": {"karpenter-e2e.io/revision": "2"}}}}});
        case.patch(&kinds::NODE_POOL, &case.name, change).await?;
        let new = replaced(&case, &old).await?;
        let node = case
            .get(&kinds::NODE, new["status"]["nodeName"].as_str().unwrap_or_default())
            .await?
            .unwrap_or_default();
        if node["metadata"]["labels"]["karpenter-e2e.io/revision"] != "2" {
            return fail("the replacement node lacks the changed template's label");
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newly_released_ami_selected_by_the_node_class_drifts_and_replaces_the_node() {
    let Some(case) = Case::start("drift-ami", true).await else {
        return;
    };
    case.run(REPLACEMENT_BOUND, async {
        let old = one_node(&case, None).await?;
        let released = case
            .cloud()?
            .control(
                "/ami-releases",
                &json!({"family": "al2023", "release": "v20990101"}),
            )
            .await?;
        case.note(format!("published al2023 v20990101: {released}"));
        let images: Vec<Value> = released["imageIds"].as_array().cloned().unwrap_or_default();
        let pin = json!({"spec": {"amiSelectorTerms": [{"alias": "al2023@v20990101"}]}});
        case.patch(&kinds::EC2_NODE_CLASS, &case.name, pin).await?;
        let new = replaced(&case, &old).await?;
        if !images.contains(&new["status"]["imageID"]) {
            return fail(format!(
                "the replacement runs {}, not one of the released {images:?}",
                new["status"]["imageID"]
            ));
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_past_expire_after_is_replaced() {
    let Some(case) = Case::start("expiration", true).await else {
        return;
    };
    case.run(Duration::from_secs(300), async {
        let old = one_node(&case, Some("90s")).await?;
        replaced(&case, &old).await.map(|_| ())
    })
    .await;
}
