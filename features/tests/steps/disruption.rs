//! Disruption steps: NodePools with a consolidation policy, `consolidateAfter`, budgets and
//! `expireAfter`; what a user does to a running cluster (annotate a node, restart the
//! controller); and what disruption must have done — or left alone, and said why.
//!
//! "Disrupted as X" is read from the `DisruptionLaunching` events the controller records on the
//! NodeClaims of each command it starts; "kept because" from the `DisruptionBlocked` events it
//! records on nodes it leaves alone.

use std::time::Duration;

use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use karpenter_core::seams::kube::{ObjectKey, Patch, ResourceKind};
use karpenter_features::SimWorld;
use karpenter_features::manifests;
use karpenter_features::observe::Snapshot;
use serde_json::{Value, json};

use crate::params::Period;

// ---- setup ----

/// A NodePool over amd64 c/m/r instances of one capacity type with the given consolidation
/// policy and `consolidateAfter`, a budget of 100% (tightened by the budget steps), and the
/// `default` EC2NodeClass of `seed-000-default.yaml`.
#[given(
    regex = r#"^an? (spot|on-demand) NodePool "([^"]+)" that consolidates (WhenEmpty|WhenEmptyOrUnderutilized) after "([^"]+)"$"#
)]
fn consolidating_pool(
    w: &mut SimWorld,
    capacity: String,
    name: String,
    policy: String,
    after: String,
) {
    let documents =
        manifests::file_documents("seed-000-default.yaml").unwrap_or_else(|e| w.fail(e));
    let class = manifests::find(&documents, "EC2NodeClass", "default")
        .unwrap_or_else(|e| w.fail(e))
        .value
        .clone();
    let pool = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {
            "template": {"spec": {
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity]},
                    {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
                    {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]}
                ],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
            }},
            "disruption": {"consolidationPolicy": policy, "consolidateAfter": after, "budgets": [{"nodes": "100%"}]}
        }
    });
    w.add_documents([pool, class]);
}

/// `spec.disruption.budgets` of a NodePool in the setup, as a YAML list.
#[given(expr = "the NodePool {string} has the disruption budgets:")]
fn budgets(w: &mut SimWorld, pool: String, step: &Step) {
    let text = step.docstring.clone().unwrap_or_default();
    let budgets: Value = serde_yaml::from_str(&text)
        .unwrap_or_else(|e| w.fail(format!("budgets are a YAML list: {e}")));
    w.setup_document("NodePool", &pool)["spec"]["disruption"]["budgets"] = budgets;
}

/// `spec.template.spec.expireAfter` of a NodePool in the setup.
#[given(expr = "the NodePool {string} expires nodes after {string}")]
fn expire_after(w: &mut SimWorld, pool: String, after: String) {
    w.setup_document("NodePool", &pool)["spec"]["template"]["spec"]["expireAfter"] = json!(after);
}

// ---- actions ----

/// `kubectl annotate node` of the node the Deployment's pods run on.
#[when(expr = "the node running {string} is annotated {string}")]
async fn annotate_node(w: &mut SimWorld, name: String, annotation: String) {
    let Some((key, value)) = annotation.split_once('=') else {
        w.fail(format!("annotation {annotation:?}: write key=value"));
    };
    let subject = w.single_out(&name).await;
    let patch = Patch::Merge(json!({"metadata": {"annotations": {key: value}}}));
    if let Err(err) = w
        .patch_object(
            &ResourceKind::NODE,
            &ObjectKey::cluster(&subject.node),
            &patch,
        )
        .await
    {
        w.fail(format!("annotating node {}: {err}", subject.node));
    }
}

/// The controller process is killed and comes back 10 seconds later with empty memory.
#[when("the controller restarts")]
async fn restart(w: &mut SimWorld) {
    if w.world()
        .await
        .crash_controller(Duration::from_secs(10))
        .is_none()
    {
        w.fail("no controller process was running to restart");
    }
}

// ---- expectations ----

fn live_nodes(s: &Snapshot) -> usize {
    s.nodes.iter().filter(|n| !n.deleting).count()
}

fn launched_as(s: &Snapshot, method: &str) -> bool {
    s.events_with_reason("DisruptionLaunching")
        .any(|e| e.event.message.contains(method))
}

#[then(expr = "within {period} the cluster has {int} node(s)")]
async fn node_count(w: &mut SimWorld, period: Period, count: usize) {
    w.wait_until(period.0, |s| match live_nodes(s) {
        n if n == count => Ok(()),
        n => Err(format!("{n} nodes, not {count}:\n{s}")),
    })
    .await;
}

#[then(expr = "within {period} the cluster has at most {int} node(s)")]
async fn node_count_at_most(w: &mut SimWorld, period: Period, count: usize) {
    w.wait_until(period.0, |s| match live_nodes(s) {
        n if n <= count => Ok(()),
        n => Err(format!("{n} nodes, more than {count}:\n{s}")),
    })
    .await;
}

#[then(expr = "within {period} a node is disrupted as {string}")]
async fn disrupted_as(w: &mut SimWorld, period: Period, method: String) {
    w.wait_until(period.0, |s| {
        if launched_as(s, &method) {
            Ok(())
        } else {
            let seen: Vec<&str> = s
                .events_with_reason("DisruptionLaunching")
                .map(|e| e.event.message.as_str())
                .collect();
            Err(format!("no command as {method}; commands so far: {seen:?}"))
        }
    })
    .await;
}

#[then(expr = "no node was disrupted as {string}")]
async fn never_disrupted_as(w: &mut SimWorld, method: String) {
    let s = w.snapshot().await;
    if launched_as(&s, &method) {
        w.fail(format!("a command as {method} was started"));
    }
}

#[then(expr = "for {period} no node is disrupted")]
async fn nothing_disrupted(w: &mut SimWorld, period: Period) {
    w.holds_for(period.0, |s| {
        match s.events_with_reason("DisruptionLaunching").next() {
            Some(e) => Err(format!("a command started: {}", e.event.message)),
            None => Ok(()),
        }
    })
    .await;
}

/// Every node the Deployment's pods run on carries a `DisruptionBlocked` event whose message
/// contains `text`.
#[then(expr = "within {period} the node running {string} is kept because {string}")]
async fn kept_because(w: &mut SimWorld, period: Period, name: String, text: String) {
    w.wait_until(period.0, |s| {
        let nodes = s.nodes_of(&name);
        if nodes.is_empty() {
            return Err(format!("no node runs {name}"));
        }
        for node in nodes {
            let said: Vec<&str> = s
                .events_with_reason("DisruptionBlocked")
                .filter(|e| e.event.involved.kind == "Node" && e.event.key.name == node.name)
                .map(|e| e.event.message.as_str())
                .collect();
            if !said.iter().any(|m| m.contains(&text)) {
                return Err(format!(
                    "{} is not kept because {text:?}; it says {said:?}",
                    node.name
                ));
            }
        }
        Ok(())
    })
    .await;
}

#[then(expr = "within {period} no node is tainted {string}")]
async fn untainted(w: &mut SimWorld, period: Period, taint: String) {
    let key = taint.split(':').next().unwrap_or_default().to_string();
    w.wait_until(period.0, |s| {
        match s
            .nodes
            .iter()
            .find(|n| n.taints.iter().any(|(k, _, _)| *k == key))
        {
            Some(n) => Err(format!("{} is tainted {key}", n.name)),
            None => Ok(()),
        }
    })
    .await;
}

#[then(expr = "within {period} the nodes cost less than {float} dollars per hour")]
async fn cheaper(w: &mut SimWorld, period: Period, dollars: f64) {
    w.wait_until(period.0, |s| match s.hourly_cost() {
        cost if cost < dollars => Ok(()),
        cost => Err(format!("the nodes cost {cost:.4} dollars per hour:\n{s}")),
    })
    .await;
}

/// Waits for the cluster to shrink to `count` nodes, failing if at any step more than `most` of
/// the NodePool's nodes were going away (tainted by a command or their NodeClaim deleting).
#[then(expr = "within {period} the cluster has {int} node(s) while at most {int} go away at once")]
async fn shrink_within_budget(w: &mut SimWorld, period: Period, count: usize, most: usize) {
    let deadline = w.elapsed() + period.0;
    loop {
        let s = w.snapshot().await;
        let going = s
            .claims
            .iter()
            .filter(|c| {
                c.deleting
                    || c.raw["metadata"]["annotations"]["karpenter.sh/disruption-command"]
                        .is_string()
            })
            .count();
        if going > most {
            w.fail(format!(
                "{going} nodes were going away at once, more than {most}:\n{s}"
            ));
        }
        if live_nodes(&s) == count && going == 0 {
            return;
        }
        if w.elapsed() >= deadline {
            w.fail(format!(
                "not within {}s: {} nodes:\n{s}",
                period.0.as_secs(),
                live_nodes(&s)
            ));
        }
        w.step().await;
    }
}

#[then(expr = "within {period} a NodeClaim had a(n) {string} event saying {string}")]
async fn claim_event_within(w: &mut SimWorld, period: Period, reason: String, text: String) {
    w.wait_until(period.0, |s| {
        let said: Vec<&str> = s
            .events_with_reason(&reason)
            .filter(|e| e.event.involved.kind == "NodeClaim")
            .map(|e| e.event.message.as_str())
            .collect();
        if said.iter().any(|m| m.contains(&text)) {
            Ok(())
        } else {
            Err(format!(
                "no {reason} event on a NodeClaim says {text:?}; they say {said:?}"
            ))
        }
    })
    .await;
}
