//! Consolidation: scaling in removes one of the two nodes; an underutilized node is replaced by a
//! cheaper one — but not while a PodDisruptionBudget or `karpenter.sh/do-not-disrupt` forbids
//! moving its pod.

use std::time::Duration;

use karpenter_e2e::{Case, Outcome, fail, kinds, manifests, name};
use serde_json::json;

use crate::{claim_instance, single_claim, until_claim_gone, until_instance_ends};

/// The bound of a guarded replacement: two launches, the 45 s hold and a drain. Measured on this
/// 2-core machine with every case running at once: 208-279 s (pdb 235-252 s).
const GUARDED_BOUND: Duration = Duration::from_secs(420);

/// How long a blocked node must stay untouched: longer than `consolidateAfter` (5 s) plus two
/// disruption polls (10 s each) and the 15 s validation delay.
const HOLD: Duration = Duration::from_secs(45);

fn on_demand(types: &[&str]) -> serde_json::Value {
    json!([
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types},
    ])
}

fn consolidate_quickly() -> serde_json::Value {
    json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5s"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_in_removes_one_node_and_ends_its_instance() {
    let Some(case) = Case::start("scale-in", true).await else {
        return;
    };
    case.run(Duration::from_secs(240), async {
        let c = &case.name;
        case.apply(&manifests::node_class(c, &case.target.cluster_name))
            .await?;
        case.apply(&manifests::node_pool(
            c,
            on_demand(&["c6a.large"]),
            consolidate_quickly(),
            None,
        ))
        .await?;
        // Two 1.2-CPU pods: one per 2-vCPU c6a.large.
        case.apply(&manifests::deployment(c, "scale-in", 2, "1200m"))
            .await?;
        case.until_running_on("app=scale-in", 2, c).await?;
        let claims = case.registered_claims(c).await?;
        if claims.len() != 2 {
            return fail(format!("{} NodeClaims for two 1.2-CPU pods", claims.len()));
        }
        case.patch(
            &kinds::DEPLOYMENT,
            "scale-in",
            json!({"spec": {"replicas": 1}}),
        )
        .await?;
        // Which node goes is the controller's choice: the node the Deployment emptied (emptiness)
        // or, if the other node's pod has gone longer without a change, that node, its pod moved
        // to the emptied one (upstream's consolidateAfter runs from each node's last pod event, so
        // both happen on a real cluster). Either way one node and its instance go.
        let left = case
            .until("one of the two NodeClaims gone", || async {
                let left = case.node_claims(c).await?;
                Ok((left.len() == 1).then_some(left))
            })
            .await?;
        let removed = claims
            .iter()
            .find(|claim| name(claim) != name(&left[0]))
            .cloned()
            .ok_or_else(|| karpenter_e2e::E2eError::Check("no removed NodeClaim".into()))?;
        until_instance_ends(&case, &claim_instance(&removed)?).await?;
        let pods = case.until_running_on("app=scale-in", 1, c).await?;
        if pods[0]["spec"]["nodeName"] != left[0]["status"]["nodeName"] {
            return fail(format!(
                "the pod runs on {}, not on the node left ({})",
                pods[0]["spec"]["nodeName"], left[0]["status"]["nodeName"]
            ));
        }
        Ok(())
    })
    .await;
}

/// What keeps the pod on its node until lifted.
#[derive(Clone, Copy)]
enum Guard {
    Pdb,
    DoNotDisrupt,
}

/// A c6a.2xlarge runs a 6-CPU filler and a small guarded pod; the filler goes, so a c6a.large
/// would do. While `guard` holds, the node must stay (no replacement, no deletion); once
/// lifted, it is replaced by a c6a.large and the guarded pod runs there.
async fn guarded_replacement(case: &Case, guard: Guard) -> Outcome<()> {
    let c = &case.name;
    case.apply(&manifests::node_class(c, &case.target.cluster_name))
        .await?;
    case.apply(&manifests::node_pool(
        c,
        on_demand(&["c6a.large", "c6a.2xlarge"]),
        consolidate_quickly(),
        None,
    ))
    .await?;
    let (filler, guarded) = (format!("{c}-filler"), format!("{c}-guarded"));
    case.apply(&manifests::deployment(c, &filler, 6, "1"))
        .await?;
    case.until_running_on(&format!("app={filler}"), 6, c)
        .await?;
    // Created after the filler runs, so it joins the filler's node.
    case.apply(&manifests::deployment(c, &guarded, 1, "250m"))
        .await?;
    let pod = case
        .until_running_on(&format!("app={guarded}"), 1, c)
        .await?
        .remove(0);
    let big = single_claim(case, c).await?;
    match guard {
        Guard::Pdb => case.apply(&manifests::pdb(c, &guarded, &guarded)).await?,
        Guard::DoNotDisrupt => {
            let annotation =
                json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}});
            case.patch(&kinds::POD, &name(&pod), annotation).await?;
        }
    }
    case.patch(
        &kinds::DEPLOYMENT,
        &filler,
        json!({"spec": {"replicas": 0}}),
    )
    .await?;
    case.until("the filler's pods gone", || async {
        Ok(case
            .pods(&format!("app={filler}"))
            .await?
            .is_empty()
            .then_some(()))
    })
    .await?;
    case.holds(
        "the guarded node is neither replaced nor deleted",
        HOLD,
        || async {
            let claims = case.node_claims(c).await?;
            let untouched = claims.len() == 1
                && name(&claims[0]) == name(&big)
                && claims[0]["metadata"]["deletionTimestamp"].is_null();
            Ok(if untouched {
                Ok(())
            } else {
                Err(format!(
                    "NodeClaims now {:?}",
                    claims
                        .iter()
                        .map(|c| (name(c), c["metadata"]["deletionTimestamp"].clone()))
                        .collect::<Vec<_>>()
                ))
            })
        },
    )
    .await?;
    match guard {
        Guard::Pdb => case.delete(&kinds::PDB, &guarded).await?,
        Guard::DoNotDisrupt => {
            let lift = json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": null}}});
            case.patch(&kinds::POD, &name(&pod), lift).await?;
        }
    }
    until_claim_gone(case, &name(&big)).await?;
    case.until_running_on(&format!("app={guarded}"), 1, c)
        .await?;
    let replacement = single_claim(case, c).await?;
    let instance_type = &replacement["metadata"]["labels"]["node.kubernetes.io/instance-type"];
    if instance_type != "c6a.large" {
        return fail(format!(
            "replaced by a {instance_type}, expected the cheaper c6a.large"
        ));
    }
    until_instance_ends(case, &claim_instance(&big)?).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdb_blocks_consolidation_until_deleted_then_the_node_is_replaced_cheaper() {
    let Some(case) = Case::start("pdb", true).await else {
        return;
    };
    case.run(GUARDED_BOUND, guarded_replacement(&case, Guard::Pdb))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn do_not_disrupt_blocks_consolidation_until_removed_then_the_node_is_replaced_cheaper() {
    let Some(case) = Case::start("do-not-disrupt", true).await else {
        return;
    };
    case.run(
        GUARDED_BOUND,
        guarded_replacement(&case, Guard::DoNotDisrupt),
    )
    .await;
}
