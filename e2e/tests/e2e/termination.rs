//! Termination: `kubectl delete nodeclaim` and `kubectl delete node` both drain the node (its
//! pods are evicted and run again elsewhere), end its instance and remove both objects; the
//! drain evicts critical pods only after the ordinary ones are gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use karpenter_e2e::{Case, fail, kinds, manifests, name};
use serde_json::{Value, json};

use crate::{claim_instance, claim_of_node, single_claim, until_claim_gone, until_instance_ends};

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

/// Deleting a NodeClaim drains in upstream's order: its ordinary pod is evicted first, and its
/// `system-cluster-critical` pod only once the ordinary one is gone (both have a 5 s grace
/// period, so the one-second polls see each terminating).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_evicts_critical_pods_only_after_the_ordinary_ones_are_gone() {
    let Some(case) = Case::start("drain-order", true).await else {
        return;
    };
    case.run(Duration::from_secs(240), async {
        let c = &case.name;
        case.apply(&manifests::node_class(c, &case.target.cluster_name))
            .await?;
        let requirements = json!([
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c6a.large"]},
        ]);
        let disruption = json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"});
        let mut pool = manifests::node_pool(c, requirements, disruption, None);
        // One node: both pods share it, and the evicted pods cannot get a second one.
        pool["spec"]["limits"] = json!({"cpu": "2"});
        case.apply(&pool).await?;
        let mut critical = manifests::deployment(c, "drain-critical", 1, "300m");
        critical["spec"]["template"]["spec"]["priorityClassName"] =
            json!("system-cluster-critical");
        case.apply(&manifests::deployment(c, "drain-ordinary", 1, "300m"))
            .await?;
        case.apply(&critical).await?;
        let ordinary = case.until_running_on("app=drain-ordinary", 1, c).await?;
        let critical = case.until_running_on("app=drain-critical", 1, c).await?;
        let (ordinary, critical) = (name(&ordinary[0]), name(&critical[0]));
        let claim = single_claim(&case, c).await?;
        case.delete(&kinds::NODE_CLAIM, &name(&claim)).await?;
        let saw_ordinary_terminating = AtomicBool::new(false);
        let seen = &saw_ordinary_terminating;
        let case = &case;
        case.until("both pods evicted, the critical one last", || {
            let (ordinary, critical) = (ordinary.clone(), critical.clone());
            async move {
                let first = case.get(&kinds::POD, &ordinary).await?;
                let last = case.get(&kinds::POD, &critical).await?;
                let terminating =
                    |pod: &Option<Value>| pod.as_ref().is_none_or(|p| !p["metadata"]["deletionTimestamp"].is_null());
                if first.is_some() && terminating(&first) {
                    seen.store(true, Ordering::Relaxed);
                }
                if first.is_some() && terminating(&last) {
                    return fail(format!(
                        "critical pod {critical} was evicted while ordinary pod {ordinary} was still on the node"
                    ));
                }
                if last.is_none() && !seen.load(Ordering::Relaxed) {
                    return fail("the ordinary pod was never seen terminating before both were gone");
                }
                Ok(last.is_none().then_some(()))
            }
        })
        .await?;
        until_claim_gone(case, &name(&claim)).await
    })
    .await;
}
