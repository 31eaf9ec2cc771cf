//! Steps of `launch.feature`: the join data the controller is configured with, how long nodes
//! stay NotReady, and what the launch produced — launch templates (user data, metadata options,
//! block devices, names), instance tags, why instances never joined, the managed node
//! group Karpenter must leave alone, and what a deleted EC2NodeClass leaves behind.

use std::collections::BTreeSet;

use cucumber::{given, then, when};
use karpenter_core::api::labels::EC2NODECLASS_TAG;
use karpenter_core::nodeclass::launchtemplate::EKS_CLUSTER_NAME_TAG;
use karpenter_core::nodeclass::termination::WAITING_ON_NODECLAIMS_REASON;
use karpenter_core::seams::ec2::{InstanceState, LaunchTemplateRequest};
use karpenter_core::seams::kube::ResourceKind;
use karpenter_features::SimWorld;
use karpenter_features::observe::Snapshot;
use karpenter_sim::world::NEIGHBOUR_CLUSTER;
use serde_json::Value;

use crate::params::Period;

#[given(expr = "the controller is configured with the API endpoint {string}")]
fn controller_endpoint(w: &mut SimWorld, endpoint: String) {
    w.knobs().controller_cluster_endpoint = Some(endpoint);
}

#[given(expr = "nodes stay NotReady for {period} after registering")]
fn nodes_stay_not_ready(w: &mut SimWorld, period: Period) {
    w.knobs().kubelet_ready_delay_ms = Some(period.0.as_millis() as u64);
}

/// Whether `template` is this cluster's: every world's account also holds a neighbour cluster's
/// Karpenter template ([`NEIGHBOUR_CLUSTER`]), which no step here is about.
fn ours(template: &LaunchTemplateRequest) -> bool {
    template.tags.get(EKS_CLUSTER_NAME_TAG).map(String::as_str) != Some(NEIGHBOUR_CLUSTER)
}

/// This cluster's Karpenter launch templates (named `karpenter.k8s.aws/...`), every one the run
/// has had: the controller deletes a template unused for a minute
/// (`nodeclass::garbagecollection`), which can come before a step looks (with the cloud's
/// latency, pods start later and the look with them), and the templates the launches used are
/// what these steps check. Fails if there are none.
async fn templates(w: &mut SimWorld) -> Vec<LaunchTemplateRequest> {
    let current = w.world().await.cloud().launch_templates();
    let mut all = w.history().launch_templates.clone();
    for template in current {
        all.entry(template.name.clone()).or_insert(template);
    }
    let templates: Vec<LaunchTemplateRequest> = all
        .into_values()
        .filter(|t| t.name.starts_with("karpenter.k8s.aws/") && ours(t))
        .collect();
    if templates.is_empty() {
        w.fail("no launch template was created");
    }
    templates
}

#[then(
    expr = "for {period} no Karpenter node joins and no instance runs unregistered for more than {int} minutes"
)]
async fn never_joins(w: &mut SimWorld, period: Period, minutes: i64) {
    w.holds_for(period.0, move |s: &Snapshot| {
        if let Some(node) = s.nodes.first() {
            return Err(format!("node {} joined", node.name));
        }
        let stale: Vec<&str> = s
            .instances
            .iter()
            .filter(|i| i.instance.state == InstanceState::Running)
            .filter(|i| s.now.duration_since(i.instance.launch_time).as_secs() > minutes * 60)
            .map(|i| i.instance.instance_id.as_str())
            .collect();
        if stale.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "instances running unregistered too long: {stale:?}"
            ))
        }
    })
    .await;
}

#[then("every instance launched says its bootstrap names another cluster")]
async fn bootstrap_names_another_cluster(w: &mut SimWorld) {
    let launched = w.launched();
    if launched.is_empty() {
        w.fail("no instance was launched");
    }
    let cloud = w.world().await.cloud().clone();
    for instance in launched {
        match cloud.join_error(&instance.instance_id) {
            Some(fakecloud::bootstrap::JoinError::WrongCluster(_)) => {}
            other => w.fail(format!(
                "instance {}: want a wrong-cluster join error, got {other:?}",
                instance.instance_id
            )),
        }
    }
}

#[then(expr = "more than {int} instance(s) was/were launched")]
async fn more_than_launched(w: &mut SimWorld, want: usize) {
    let launched = w.launched().len();
    if launched <= want {
        w.fail(format!(
            "{launched} instances launched, want more than {want}"
        ));
    }
}

#[then(expr = "the node group's {int} instances run with the tags EKS gave them")]
async fn node_group_untouched(w: &mut SimWorld, want: usize) {
    let s = w.snapshot().await;
    // The foreign instances are the node group's and the neighbour cluster's one.
    let group: Vec<_> = s
        .foreign_instances
        .iter()
        .filter(|i| karpenter_sim::invariants::is_node_group(i))
        .collect();
    let running: Vec<_> = group
        .iter()
        .filter(|i| i.state == InstanceState::Running)
        .collect();
    if running.len() != want || group.len() != want {
        w.fail(format!(
            "want {want} running node-group instances, have {:?}",
            group
                .iter()
                .map(|i| (&i.instance_id, i.state))
                .collect::<Vec<_>>()
        ));
    }
    for instance in running {
        let karpenter: Vec<&String> = instance
            .tags
            .keys()
            .filter(|k| k.starts_with("karpenter.") || *k == "Name")
            .collect();
        if !karpenter.is_empty() {
            w.fail(format!(
                "node-group instance {} was tagged {karpenter:?}",
                instance.instance_id
            ));
        }
    }
}

#[then("no NodeClaim names a node group instance")]
async fn no_claim_adopts(w: &mut SimWorld) {
    let s = w.snapshot().await;
    let foreign: BTreeSet<&str> = s
        .foreign_instances
        .iter()
        .map(|i| i.instance_id.as_str())
        .collect();
    for claim in &s.claims {
        let provider = claim.raw["status"]["providerID"]
            .as_str()
            .unwrap_or_default();
        if provider
            .rsplit('/')
            .next()
            .is_some_and(|id| foreign.contains(id))
        {
            w.fail(format!("a NodeClaim names {provider}"));
        }
    }
}

#[then("the system pods run on the node group")]
async fn system_pods_on_node_group(w: &mut SimWorld) {
    let s = w.snapshot().await;
    let nodes: BTreeSet<&str> = s.foreign_nodes.iter().map(|n| n.name.as_str()).collect();
    let api = w.world().await.api().clone();
    let pods: Vec<Value> = api
        .objects(&karpenter_core::seams::kube::ResourceKind::POD)
        .into_iter()
        .map(std::sync::Arc::unwrap_or_clone)
        .filter(|p| p["metadata"]["namespace"] == "kube-system")
        .collect();
    if pods.is_empty() {
        w.fail("no system pod exists");
    }
    for pod in pods {
        let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
        if !nodes.contains(node) || pod["status"]["phase"] != "Running" {
            w.fail(format!(
                "system pod {} is {} on {node:?}",
                pod["metadata"]["name"], pod["status"]["phase"]
            ));
        }
    }
}

#[then(expr = "every launch template's user data has {string} before {string}")]
async fn user_data_order(w: &mut SimWorld, first: String, second: String) {
    for t in templates(w).await {
        let (Some(a), Some(b)) = (t.user_data.find(&first), t.user_data.find(&second)) else {
            w.fail(format!(
                "{}: user data lacks {first:?} or {second:?}:\n{}",
                t.name, t.user_data
            ));
        };
        if a > b {
            w.fail(format!("{}: {first:?} comes after {second:?}", t.name));
        }
    }
}

#[then(expr = "every launch template's user data has {string}")]
async fn user_data_has(w: &mut SimWorld, text: String) {
    for t in templates(w).await {
        if !t.user_data.contains(&text) {
            w.fail(format!(
                "{}: user data lacks {text:?}:\n{}",
                t.name, t.user_data
            ));
        }
    }
}

#[then(expr = "every launch template's user data lacks {string}")]
async fn user_data_lacks(w: &mut SimWorld, text: String) {
    for t in templates(w).await {
        if t.user_data.contains(&text) {
            w.fail(format!("{}: user data has {text:?}", t.name));
        }
    }
}

/// A JSON field of the template's `extra` (as created).
fn extra(w: &SimWorld, t: &LaunchTemplateRequest, field: &str) -> Value {
    let text = t
        .extra
        .get(field)
        .unwrap_or_else(|| w.fail(format!("{}: no {field}", t.name)));
    serde_json::from_str(text).unwrap_or_else(|e| w.fail(format!("{}: {field}: {e}", t.name)))
}

#[then(expr = "every launch template's metadata options have {string} = {string}")]
async fn metadata_option(w: &mut SimWorld, key: String, want: String) {
    for t in templates(w).await {
        let options = extra(w, &t, "metadataOptions");
        let have = match &options[&key] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if have != want {
            w.fail(format!("{}: {key} is {have}, want {want}", t.name));
        }
    }
}

#[then(expr = "every launch template has a root volume {string} of {string}")]
async fn root_volume(w: &mut SimWorld, device: String, size: String) {
    for t in templates(w).await {
        let devices = extra(w, &t, "blockDeviceMappings");
        let found =
            devices.as_array().into_iter().flatten().any(|d| {
                d["deviceName"] == device.as_str() && d["ebs"]["volumeSize"] == size.as_str()
            });
        if !found {
            w.fail(format!("{}: no {device} of {size}: {devices}", t.name));
        }
    }
}

#[then("there are fewer launch templates than nodes")]
async fn templates_shared(w: &mut SimWorld) {
    let count = templates(w).await.len();
    let nodes = w.snapshot().await.nodes.len();
    if count >= nodes {
        w.fail(format!("{count} launch templates for {nodes} nodes"));
    }
}

#[then("every launch template is named by its content")]
async fn named_by_content(w: &mut SimWorld) {
    let templates = templates(w).await;
    let names: BTreeSet<&str> = templates.iter().map(|t| t.name.as_str()).collect();
    for t in &templates {
        let hash = t.name.trim_start_matches("karpenter.k8s.aws/");
        if hash.len() != 32 || !hash.chars().all(|c| c.is_ascii_hexdigit()) {
            w.fail(format!("{} is not named by a content hash", t.name));
        }
    }
    let distinct: BTreeSet<(&str, &str)> = templates
        .iter()
        .map(|t| (t.image_id.as_str(), t.user_data.as_str()))
        .collect();
    if distinct.len() != names.len() {
        w.fail("two launch templates have the same image and user data");
    }
}

#[then(expr = "every Karpenter instance is tagged {string} = {string}")]
async fn instance_tagged(w: &mut SimWorld, key: String, want: String) {
    let s = w.snapshot().await;
    if s.instances.is_empty() {
        w.fail("no instance");
    }
    for i in &s.instances {
        if i.instance.tags.get(&key) != Some(&want) {
            w.fail(format!(
                "{}: {key} is {:?}, want {want}",
                i.instance.instance_id,
                i.instance.tags.get(&key)
            ));
        }
    }
}

#[then(expr = "every Karpenter instance names its NodeClaim in {string}")]
async fn instance_names_claim(w: &mut SimWorld, key: String) {
    let s = w.snapshot().await;
    for i in &s.instances {
        let named = i.instance.tags.get(&key);
        let owner = s.claims.iter().find(|c| {
            c.raw["status"]["providerID"]
                .as_str()
                .is_some_and(|p| p.ends_with(&format!("/{}", i.instance.instance_id)))
        });
        match (named, owner) {
            (Some(name), Some(claim)) if *name == claim.name => {}
            _ => w.fail(format!(
                "{}: {key} is {named:?}, its claim {:?}",
                i.instance.instance_id,
                owner.map(|c| &c.name)
            )),
        }
    }
}

#[then(expr = "the EC2NodeClass {string} has {string} = {string} saying {string}")]
async fn class_condition(
    w: &mut SimWorld,
    class: String,
    type_: String,
    status: String,
    says: String,
) {
    let api = w.world().await.api().clone();
    let found = api
        .objects(&karpenter_core::seams::kube::ResourceKind::EC2_NODE_CLASS)
        .into_iter()
        .find(|c| c["metadata"]["name"] == class.as_str());
    let Some(found) = found else {
        w.fail(format!("no EC2NodeClass {class}"));
    };
    let condition = found["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_.as_str())
        .cloned()
        .unwrap_or(Value::Null);
    let message = condition["message"].as_str().unwrap_or_default();
    if condition["status"] != status.as_str() || !message.contains(&says) {
        w.fail(format!(
            "EC2NodeClass {class}: want {type_}={status} saying {says:?}, got {condition}"
        ));
    }
}

// ---- an EC2NodeClass's deletion ----

/// `kubectl delete ec2nodeclass NAME`.
#[when(expr = "the EC2NodeClass {string} is deleted")]
async fn delete_class(w: &mut SimWorld, class: String) {
    let key = karpenter_core::seams::kube::ObjectKey::cluster(&class);
    if let Err(err) = w.delete_object(&ResourceKind::EC2_NODE_CLASS, &key).await {
        w.fail(format!("deleting EC2NodeClass {class}: {err}"));
    }
}

/// What is left of a class: the object (if it is still there), and the launch templates and
/// instance profiles tagged with its name.
async fn class_remains(w: &mut SimWorld, class: &str) -> (Option<Value>, usize, usize) {
    let world = w.world().await;
    let object = world
        .api()
        .objects(&ResourceKind::EC2_NODE_CLASS)
        .into_iter()
        .find(|c| c["metadata"]["name"] == class)
        .map(std::sync::Arc::unwrap_or_clone);
    let tagged = |tags: &std::collections::BTreeMap<String, String>| {
        tags.get(EC2NODECLASS_TAG).map(String::as_str) == Some(class)
    };
    let templates = world
        .cloud()
        .launch_templates()
        .iter()
        .filter(|t| ours(t) && tagged(&t.tags))
        .count();
    let profiles = world
        .cloud()
        .iam()
        .map(|iam| iam.profiles().iter().filter(|p| tagged(&p.tags)).count())
        .unwrap_or(0);
    (object, templates, profiles)
}

/// The launch templates are not checked here: unused ones go after a minute whether or not the
/// class is deleted (`nodeclass::garbagecollection`).
#[then(
    expr = "within {period} the EC2NodeClass {string} waits for its NodeClaims, keeping its instance profile"
)]
async fn class_waits(w: &mut SimWorld, period: Period, class: String) {
    w.wait_until(period.0, |s| {
        let waiting = s
            .events_with_reason(WAITING_ON_NODECLAIMS_REASON)
            .any(|e| e.event.involved.kind == "EC2NodeClass" && e.event.key.name == class);
        if waiting {
            Ok(())
        } else {
            Err(format!(
                "no {WAITING_ON_NODECLAIMS_REASON} event on EC2NodeClass {class}"
            ))
        }
    })
    .await;
    match class_remains(w, &class).await {
        (Some(object), _, profiles) if profiles > 0 => {
            if object["metadata"]["deletionTimestamp"].is_null() {
                w.fail(format!("EC2NodeClass {class} is not being deleted"));
            }
        }
        left => w.fail(format!("EC2NodeClass {class} kept too little: {left:?}")),
    }
}

#[then(
    expr = "within {period} the EC2NodeClass {string} is gone with its launch templates and instance profile"
)]
async fn class_gone(w: &mut SimWorld, period: Period, class: String) {
    let deadline = w.elapsed() + period.0;
    loop {
        let left = class_remains(w, &class).await;
        if matches!(left, (None, 0, 0)) {
            return;
        }
        if w.elapsed() >= deadline {
            w.fail(format!(
                "not within {}s: EC2NodeClass {class} left {left:?}",
                period.0.as_secs()
            ));
        }
        w.step().await;
    }
}
