//! Termination: `kubectl delete nodeclaim` and `kubectl delete node` both drain the node (its
//! pods are evicted and run again elsewhere), end its instance and remove both objects.

use std::time::Duration;

use karpenter_e2e::{Case, fail, kinds, manifests, name};
use serde_json::json;

use crate::{claim_instance, claim_of_node, until_claim_gone, until_instance_ends};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_node_claim_or_a_node_drains_it_and_ends_its_instance() {
    let Some(case) = Case::start("termination", true).await else {
        return;
    };
    case.run(Duration::from_secs(270), async {
        let c = &case.name;
        case.apply(&manifests::node_class(c, &case.target.cluster_name))
            .await?;
        let requirements = json!([
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c6a.large"]},
        ]);
        // No consolidation: only the deletions move anything.
        let disruption = json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"});
        case.apply(&manifests::node_pool(c, requirements, disruption, None))
            .await?;
        case.apply(&manifests::deployment(c, "termination", 2, "1200m"))
            .await?;
        let before = case.until_running_on("app=termination", 2, c).await?;
        let claims = case.registered_claims(c).await?;
        let nodes: Vec<String> = before
            .iter()
            .filter_map(|p| p["spec"]["nodeName"].as_str().map(String::from))
            .collect();
        let (Some(by_claim), Some(by_node)) = (
            claim_of_node(&claims, &nodes[0]).cloned(),
            claim_of_node(&claims, &nodes[1]).cloned(),
        ) else {
            return fail(format!(
                "the pods' nodes {nodes:?} are not two NodeClaims' nodes"
            ));
        };
        case.delete(&kinds::NODE_CLAIM, &name(&by_claim)).await?;
        case.delete(&kinds::NODE, &nodes[1]).await?;
        for claim in [&by_claim, &by_node] {
            until_claim_gone(&case, &name(claim)).await?;
            until_instance_ends(&case, &claim_instance(claim)?).await?;
        }
        for node in &nodes {
            if case.get(&kinds::NODE, node).await?.is_some() {
                return fail(format!("node {node} still exists after its NodeClaim went"));
            }
        }
        let after = case.until_running_on("app=termination", 2, c).await?;
        for pod in &after {
            let on = pod["spec"]["nodeName"].as_str().unwrap_or_default();
            if nodes.iter().any(|n| n == on) {
                return fail(format!("pod {} still on deleted node {on}", name(pod)));
            }
        }
        Ok(())
    })
    .await;
}
