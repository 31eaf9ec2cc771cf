//! Drift steps: what a platform team changes under a running fleet (a new AMI release, a
//! NodePool template, weight or requirement, an EC2NodeClass tag or security group), and what
//! drift must then have done: which NodeClaims say `Drifted` and why, which nodes were replaced
//! (launched after the change) and which were kept.
//!
//! "Replaced" compares the live instances with those launched before the last action step
//! ([`SimWorld::launched_before_mark`]): a change step is an action, so the nodes it may drift
//! are exactly those launched before it.

use std::collections::{BTreeMap, BTreeSet};

use cucumber::{given, then, when};
use fakecloud::AmiFamily;
use karpenter_core::seams::kube::{ObjectKey, Patch, ResourceKind};
use karpenter_features::SimWorld;
use karpenter_features::observe::Snapshot;
use serde_json::{Value, json};

use crate::params::Period;

// ---- setup ----

/// `spec.amiSelectorTerms` of an EC2NodeClass in the setup: one alias term.
#[given(expr = "the EC2NodeClass {string} selects AMIs by alias {string}")]
fn ami_alias(w: &mut SimWorld, class: String, alias: String) {
    w.setup_document("EC2NodeClass", &class)["spec"]["amiSelectorTerms"] =
        json!([{"alias": alias}]);
}

// ---- actions ----

/// A release the world has not published (fakecloud starts with `v20250601`).
const NEW_RELEASE: &str = "v20991231";

/// AWS publishes a new AL2023 release: its SSM `recommended` parameters move to the new images.
#[when("a new AL2023 AMI is released")]
async fn release(w: &mut SimWorld) {
    w.world().await;
    w.mark();
    let images = w
        .world()
        .await
        .cloud()
        .publish_ami(AmiFamily::Al2023, NEW_RELEASE);
    if images.is_empty() {
        w.fail("the release published no image");
    }
}

/// `kubectl patch` of a cluster-scoped Karpenter object with a merge patch.
async fn patch(w: &mut SimWorld, kind: ResourceKind, name: &str, patch: Value) {
    let key = ObjectKey::cluster(name);
    if let Err(err) = w.patch_object(&kind, &key, &Patch::Merge(patch)).await {
        w.fail(format!("patching {name}: {err}"));
    }
}

fn key_value(w: &SimWorld, text: &str) -> (String, String) {
    match text.split_once('=') {
        Some((k, v)) => (k.to_string(), v.to_string()),
        None => w.fail(format!("{text:?}: write key=value")),
    }
}

#[when(expr = "the NodePool {string} template gets the label {string}")]
async fn template_label(w: &mut SimWorld, pool: String, label: String) {
    let (k, v) = key_value(w, &label);
    let change = json!({"spec": {"template": {"metadata": {"labels": {k: v}}}}});
    patch(w, ResourceKind::NODE_POOL, &pool, change).await;
}

#[when(expr = "the NodePool {string} weight is set to {int}")]
async fn set_weight(w: &mut SimWorld, pool: String, weight: i64) {
    let change = json!({"spec": {"weight": weight}});
    patch(w, ResourceKind::NODE_POOL, &pool, change).await;
}

#[when(expr = "the EC2NodeClass {string} gets the tag {string}")]
async fn class_tag(w: &mut SimWorld, class: String, tag: String) {
    let (k, v) = key_value(w, &tag);
    let change = json!({"spec": {"tags": {k: v}}});
    patch(w, ResourceKind::EC2_NODE_CLASS, &class, change).await;
}

/// Replaces the NodePool's requirement on `key` with `In` the comma-separated `values`.
#[when(expr = "the NodePool {string} allows only {string} for {string}")]
async fn narrow(w: &mut SimWorld, pool: String, values: String, key: String) {
    let snapshot = w.snapshot().await;
    let Some(current) = snapshot
        .nodepools
        .iter()
        .find(|p| p["metadata"]["name"] == pool.as_str())
    else {
        w.fail(format!("no NodePool {pool}"));
    };
    let values: Vec<&str> = values.split(',').map(str::trim).collect();
    let mut requirements: Vec<Value> = current["spec"]["template"]["spec"]["requirements"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r["key"] != key.as_str())
        .collect();
    requirements.push(json!({"key": key, "operator": "In", "values": values}));
    let change = json!({"spec": {"template": {"spec": {"requirements": requirements}}}});
    patch(w, ResourceKind::NODE_POOL, &pool, change).await;
}

/// A new security group tagged `Name: <group>` is created and the class selects only it.
#[when(expr = "the EC2NodeClass {string} moves to the new security group {string}")]
async fn new_security_group(w: &mut SimWorld, class: String, group: String) {
    let tags = BTreeMap::from([("Name".to_string(), group.clone())]);
    w.world().await.cloud().add_security_group(&group, tags);
    let change = json!({"spec": {"securityGroupSelectorTerms": [{"tags": {"Name": group}}]}});
    patch(w, ResourceKind::EC2_NODE_CLASS, &class, change).await;
}

// ---- expectations ----

/// The reason of a claim's `Drifted=True` condition, if it has one.
fn drift_reason(claim: &Value) -> Option<String> {
    claim["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Drifted" && c["status"] == "True")
        .map(|c| c["reason"].as_str().unwrap_or_default().to_string())
}

fn live_ids(s: &Snapshot) -> BTreeSet<String> {
    s.instances
        .iter()
        .map(|i| i.instance.instance_id.clone())
        .collect()
}

#[then(expr = "within {period} a NodeClaim is drifted because {string}")]
async fn drifted_because(w: &mut SimWorld, period: Period, reason: String) {
    w.wait_until(period.0, |s| {
        let reasons: Vec<String> = s
            .claims
            .iter()
            .filter_map(|c| drift_reason(&c.raw))
            .collect();
        if reasons.contains(&reason) {
            Ok(())
        } else {
            Err(format!("drift reasons {reasons:?}, none {reason:?}:\n{s}"))
        }
    })
    .await;
}

#[then(expr = "for {period} no NodeClaim is drifted")]
async fn none_drifted(w: &mut SimWorld, period: Period) {
    w.holds_for(period.0, |s| {
        match s
            .claims
            .iter()
            .find_map(|c| drift_reason(&c.raw).map(|r| (&c.name, r)))
        {
            None => Ok(()),
            Some((name, reason)) => Err(format!("{name} drifted because {reason}")),
        }
    })
    .await;
}

/// Every live instance was launched after the last change, and there is at least one.
#[then(expr = "within {period} every node was launched after that change")]
async fn all_replaced(w: &mut SimWorld, period: Period) {
    let before = w.launched_before_mark();
    w.wait_until(period.0, |s| {
        let live = live_ids(s);
        let old: Vec<&String> = live.intersection(&before).collect();
        if live.is_empty() {
            Err(format!("no node runs:\n{s}"))
        } else if old.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} nodes from before the change: {old:?}\n{s}",
                old.len()
            ))
        }
    })
    .await;
}

/// The nodes from before the change that still run are all in `zone` (the others were
/// replaced), and at least one of them still runs (it was kept).
#[then(expr = "within {period} only the nodes outside {string} were replaced")]
async fn replaced_outside(w: &mut SimWorld, period: Period, zone: String) {
    let before = w.launched_before_mark();
    w.wait_until(period.0, |s| {
        let old: Vec<(&str, &str)> = s
            .instances
            .iter()
            .filter(|i| before.contains(&i.instance.instance_id))
            .map(|i| (i.instance.instance_id.as_str(), i.instance.zone.as_str()))
            .collect();
        let outside: Vec<&(&str, &str)> = old.iter().filter(|(_, z)| *z != zone).collect();
        if !outside.is_empty() {
            Err(format!(
                "nodes from before still outside {zone}: {outside:?}\n{s}"
            ))
        } else if old.is_empty() {
            Err(format!(
                "no node from before the change kept in {zone}\n{s}"
            ))
        } else {
            Ok(())
        }
    })
    .await;
}

/// Every live instance runs in exactly the named security group.
#[then(expr = "every node runs in the security group {string}")]
async fn in_group(w: &mut SimWorld, group: String) {
    let snapshot = w.snapshot().await;
    let world = w.world().await;
    let wrong: Vec<(String, Vec<Option<String>>)> = snapshot
        .instances
        .iter()
        .map(|view| {
            let names = view
                .instance
                .security_group_ids
                .iter()
                .map(|g| world.cloud().security_group_name(g))
                .collect::<Vec<_>>();
            (view.instance.instance_id.clone(), names)
        })
        .filter(|(_, names)| *names != [Some(group.clone())])
        .collect();
    if snapshot.instances.is_empty() || !wrong.is_empty() {
        w.fail(format!("nodes not only in {group}: {wrong:?}"));
    }
}
