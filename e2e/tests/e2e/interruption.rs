//! Interruption: a spot interruption warning sent through the fake cloud's control API makes
//! the controller launch a replacement before the pod is evicted, drain the node, and the
//! interrupted instance ends.

use std::time::Duration;

use karpenter_e2e::{Case, fail, manifests, name};
use serde_json::json;

use crate::{claim_instance, single_claim, until_claim_gone, until_instance_ends};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_interruption_warning_replaces_the_node_before_evicting_its_pod() {
    let Some(case) = Case::start("interruption", true).await else {
        return;
    };
    case.run(Duration::from_secs(270), async {
        let c = &case.name;
        case.apply(&manifests::node_class(c, &case.target.cluster_name))
            .await?;
        let requirements = json!([
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c6a", "m6a"]},
        ]);
        let disruption = json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"});
        case.apply(&manifests::node_pool(c, requirements, disruption, None))
            .await?;
        case.apply(&manifests::deployment(c, "interrupted", 1, "1"))
            .await?;
        let pod = case
            .until_running_on("app=interrupted", 1, c)
            .await?
            .remove(0);
        let claim = single_claim(&case, c).await?;
        let instance = claim_instance(&claim)?;
        let warned = case
            .cloud()?
            .control("/spot-interruptions", &json!({"instanceId": instance}))
            .await?;
        case.note(format!("spot interruption warning: {warned}"));
        if warned["interrupted"] != json!([instance]) {
            return fail(format!("the fake cloud did not warn {instance}: {warned}"));
        }
        // The pod may be evicted only once a replacement NodeClaim exists.
        let pod_name = name(&pod);
        let case = &case;
        case.until("the interrupted pod evicted, after a replacement was launched", || {
            let pod_name = pod_name.clone();
            let claim_name = name(&claim);
            async move {
                let claims = case.node_claims(c).await?;
                let replacement = claims.iter().any(|k| name(k) != claim_name);
                let pod = case.get(&karpenter_e2e::kinds::POD, &pod_name).await?;
                let evicted = pod.is_none_or(|p| !p["metadata"]["deletionTimestamp"].is_null());
                if evicted && !replacement {
                    return fail("the pod was evicted before any replacement NodeClaim existed");
                }
                Ok(evicted.then_some(()))
            }
        })
        .await?;
        until_claim_gone(case, &name(&claim)).await?;
        let after = case.until_running_on("app=interrupted", 1, c).await?;
        if after[0]["spec"]["nodeName"] == claim["status"]["nodeName"] {
            return fail("the pod runs on the interrupted node");
        }
        until_instance_ends(case, &instance).await
    })
    .await;
}
