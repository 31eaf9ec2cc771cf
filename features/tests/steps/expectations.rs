//! `Then` steps: what must be true of pods, nodes, NodeClaims, NodePools, instances, events and
//! cost. `within {period} ...` steps the world until it holds (failing at the deadline with the
//! last reason); `for {period} ...` steps the world and fails as soon as it stops holding; the
//! rest look at the world as it is now.
//!
//! A statement about "every node" fails when there are no nodes: a scenario whose capacity never
//! came must not pass by having nothing to check.

use std::collections::{BTreeMap, BTreeSet};

use cucumber::then;
use fakekube::RecordedEvent;
use karpenter_core::catalog::CapacityType;
use karpenter_features::SimWorld;
use karpenter_features::observe::{NodeView, Snapshot};
use karpenter_features::offerings::{Offering, cheapest_node_for};

use crate::params::{Capacity, Period, list};

// ---- pods ----

#[then(expr = "within {period} all {int} pods are Running")]
async fn all_pods_running(w: &mut SimWorld, period: Period, want: usize) {
    w.wait_until(period.0, move |s| {
        let live: Vec<_> = s.live_pods().collect();
        let running = live.iter().filter(|p| p.running()).count();
        if live.len() == want && running == want {
            Ok(())
        } else {
            Err(format!(
                "{running} of {} pods running, want all {want}",
                live.len()
            ))
        }
    })
    .await;
}

#[then(expr = "within {period} all pods of {string} are Running")]
async fn deployment_running(w: &mut SimWorld, period: Period, name: String) {
    let want = w.deployment(&name).replicas;
    w.wait_until(period.0, move |s| {
        let running = s.pods_of(&name).filter(|p| p.running()).count();
        let live = s.pods_of(&name).count();
        if running == want && live == want {
            Ok(())
        } else {
            Err(format!(
                "{running} of {live} pods of {name} running, want {want}"
            ))
        }
    })
    .await;
}

/// Every pod of the Deployment stays unscheduled (no node) for the whole period.
#[then(expr = "for {period} the pods of {string} stay Pending")]
async fn stay_pending(w: &mut SimWorld, period: Period, name: String) {
    let want = w.deployment(&name).replicas;
    w.holds_for(period.0, move |s| {
        let pods: Vec<_> = s.pods_of(&name).collect();
        if pods.len() != want {
            return Err(format!("{} pods of {name}, want {want}", pods.len()));
        }
        match pods
            .iter()
            .find(|p| p.node.is_some() || p.phase != "Pending")
        {
            Some(p) => Err(format!("pod {} is {} on {:?}", p.name, p.phase, p.node)),
            None => Ok(()),
        }
    })
    .await;
}

#[then(expr = "some pods of {string} are still Pending")]
async fn some_pending(w: &mut SimWorld, name: String) {
    let s = w.snapshot().await;
    let pending = s.pods_of(&name).filter(|p| p.phase == "Pending").count();
    let running = s.pods_of(&name).filter(|p| p.running()).count();
    if pending == 0 || running == 0 {
        w.fail(format!(
            "want some pods of {name} running and some pending, got {running} running and {pending} pending"
        ));
    }
}

#[then(expr = "each pod of {string} runs on its own node")]
async fn own_node(w: &mut SimWorld, name: String) {
    let s = w.snapshot().await;
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for pod in s.pods_of(&name) {
        let Some(node) = pod.node.as_deref() else {
            w.fail(format!("pod {} is not on a node", pod.name));
        };
        if let Some(other) = seen.insert(node, &pod.name) {
            w.fail(format!("pods {other} and {} share node {node}", pod.name));
        }
    }
    if seen.is_empty() {
        w.fail(format!("no pods of {name}"));
    }
}

fn zone_of<'a>(s: &'a Snapshot, node: Option<&str>) -> &'a str {
    node.and_then(|n| s.node(n))
        .map_or("", |n| n.label("topology.kubernetes.io/zone"))
}

#[then(expr = "the pods of {string} are spread {int} per zone across {int} zones")]
async fn spread(w: &mut SimWorld, name: String, per_zone: usize, zones: usize) {
    let s = w.snapshot().await;
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for pod in s.pods_of(&name) {
        *counts.entry(zone_of(&s, pod.node.as_deref())).or_default() += 1;
    }
    if counts.len() != zones || counts.values().any(|c| *c != per_zone) || counts.contains_key("") {
        w.fail(format!(
            "pods of {name} by zone: {counts:?}, want {per_zone} in each of {zones} zones"
        ));
    }
}

#[then(expr = "every pod of {string} runs in zone {string}")]
async fn pods_in_zone(w: &mut SimWorld, name: String, zone: String) {
    let s = w.snapshot().await;
    let zones: BTreeSet<&str> = s
        .pods_of(&name)
        .map(|p| zone_of(&s, p.node.as_deref()))
        .collect();
    if zones.len() != 1 || !zones.contains(zone.as_str()) {
        w.fail(format!(
            "pods of {name} run in zones {zones:?}, want only {zone}"
        ));
    }
}

// ---- nodes ----

/// The live nodes, failing if there are none.
async fn nodes(w: &mut SimWorld) -> Vec<NodeView> {
    let s = w.snapshot().await;
    let nodes: Vec<NodeView> = s.nodes.into_iter().filter(|n| !n.deleting).collect();
    if nodes.is_empty() {
        w.fail("there are no nodes to check");
    }
    nodes
}

/// Fails naming every node `ok` rejects.
async fn every_node(w: &mut SimWorld, what: &str, ok: impl Fn(&NodeView) -> bool) {
    let nodes = nodes(w).await;
    let bad: Vec<String> = nodes
        .iter()
        .filter(|n| !ok(n))
        .map(|n| n.name.clone())
        .collect();
    if !bad.is_empty() {
        w.fail(format!("nodes that are not {what}: {}", bad.join(", ")));
    }
}

#[then(expr = "every node is a(n) {capacity} instance")]
async fn every_node_capacity(w: &mut SimWorld, capacity: Capacity) {
    let label = capacity.0.label();
    every_node(w, &format!("{label} instances"), |n| {
        n.label("karpenter.sh/capacity-type") == label
    })
    .await;
}

#[then(expr = "every node is in zone {string}")]
async fn every_node_zone(w: &mut SimWorld, zone: String) {
    every_node(w, &format!("in {zone}"), |n| {
        n.label("topology.kubernetes.io/zone") == zone
    })
    .await;
}

#[then(expr = "every node's zone is one of {string}")]
async fn every_node_zone_in(w: &mut SimWorld, zones: String) {
    let zones = list(&zones);
    every_node(w, &format!("in one of {zones:?}"), |n| {
        zones
            .iter()
            .any(|z| n.label("topology.kubernetes.io/zone") == z)
    })
    .await;
}

#[then(expr = "every node's instance type is one of {string}")]
async fn every_node_type_in(w: &mut SimWorld, types: String) {
    let types = list(&types);
    every_node(w, &format!("one of {types:?}"), |n| {
        types
            .iter()
            .any(|t| n.label("node.kubernetes.io/instance-type") == t)
    })
    .await;
}

#[then(expr = "every node has label {string} = {string}")]
async fn every_node_label(w: &mut SimWorld, key: String, value: String) {
    every_node(w, &format!("labelled {key}={value}"), |n| {
        n.labels.get(&key) == Some(&value)
    })
    .await;
}

#[then(expr = "every node belongs to NodePool {string}")]
async fn every_node_pool(w: &mut SimWorld, pool: String) {
    every_node_label(w, "karpenter.sh/nodepool".into(), pool).await;
}

#[then(expr = "some nodes belong to NodePool {string}")]
async fn some_nodes_pool(w: &mut SimWorld, pool: String) {
    let nodes = nodes(w).await;
    if !nodes
        .iter()
        .any(|n| n.label("karpenter.sh/nodepool") == pool)
    {
        w.fail(format!("no node belongs to NodePool {pool}"));
    }
}

/// `key=value:Effect` (or `key:Effect`).
#[then(expr = "every node is tainted {string}")]
async fn every_node_tainted(w: &mut SimWorld, taint: String) {
    let (kv, effect) = taint
        .rsplit_once(':')
        .unwrap_or_else(|| w.fail(format!("taint {taint:?}: write key=value:Effect")));
    let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
    every_node(w, &format!("tainted {taint}"), |n| {
        n.taints
            .iter()
            .any(|(k, v, e)| k == key && v == value && e == effect)
    })
    .await;
}

#[then(expr = "no node has a taint with key {string}")]
async fn no_taint(w: &mut SimWorld, key: String) {
    every_node(w, &format!("free of {key} taints"), |n| {
        n.taints.iter().all(|(k, _, _)| *k != key)
    })
    .await;
}

/// The node's instance-type, zone and capacity-type labels say what the instance behind it is.
#[then("every node's labels match its instance")]
async fn labels_match_instances(w: &mut SimWorld) {
    let s = w.snapshot().await;
    let nodes = nodes(w).await;
    for node in &nodes {
        let Some(instance) = node
            .instance_id
            .as_ref()
            .and_then(|id| s.instances.iter().find(|i| &i.instance.instance_id == id))
        else {
            w.fail(format!("node {} has no live instance", node.name));
        };
        let i = &instance.instance;
        let want = [
            ("node.kubernetes.io/instance-type", i.instance_type.as_str()),
            ("topology.kubernetes.io/zone", i.zone.as_str()),
            ("karpenter.sh/capacity-type", i.capacity_type.label()),
        ];
        for (key, value) in want {
            if node.label(key) != value {
                w.fail(format!(
                    "node {} says {key}={:?}, its instance {} is {value:?}",
                    node.name,
                    node.label(key),
                    i.instance_id
                ));
            }
        }
    }
}

/// Owned (controller reference) by a NodeClaim that names it, and protected by Karpenter's
/// termination finalizer.
#[then("every node is owned by its NodeClaim")]
async fn owned_by_claim(w: &mut SimWorld) {
    let s = w.snapshot().await;
    let nodes = nodes(w).await;
    let raw = {
        let world = w.world().await;
        world
            .api()
            .objects(&karpenter_core::seams::kube::ResourceKind::NODE)
    };
    for node in &nodes {
        let object = raw
            .iter()
            .find(|o| o["metadata"]["name"] == node.name.as_str())
            .cloned()
            .unwrap_or_default();
        let owner = object["metadata"]["ownerReferences"][0]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let claim = s.claims.iter().find(|c| c.name == owner);
        if object["metadata"]["ownerReferences"][0]["kind"] != "NodeClaim"
            || claim.and_then(|c| c.node_name.as_deref()) != Some(node.name.as_str())
        {
            w.fail(format!(
                "node {} is not owned by a NodeClaim naming it (owner {owner:?})",
                node.name
            ));
        }
        let finalizers = object["metadata"]["finalizers"].to_string();
        if !finalizers.contains("karpenter.sh/termination") {
            w.fail(format!(
                "node {} lacks the karpenter.sh/termination finalizer: {finalizers}",
                node.name
            ));
        }
    }
}

#[then("no two nodes share an instance type, zone and capacity type")]
async fn distinct_pools(w: &mut SimWorld) {
    let nodes = nodes(w).await;
    let mut seen = BTreeMap::new();
    for node in &nodes {
        let pool = (
            node.label("node.kubernetes.io/instance-type").to_string(),
            node.label("topology.kubernetes.io/zone").to_string(),
            node.label("karpenter.sh/capacity-type").to_string(),
        );
        if let Some(other) = seen.insert(pool.clone(), node.name.clone()) {
            w.fail(format!("nodes {other} and {} are both {pool:?}", node.name));
        }
    }
}

// ---- launches, instances, cost ----

#[then("no node was launched")]
async fn none_launched(w: &mut SimWorld) {
    let launched = w.launched();
    if !launched.is_empty() {
        let ids: Vec<&str> = launched.iter().map(|i| i.instance_id.as_str()).collect();
        w.fail(format!("instances were launched: {ids:?}"));
    }
}

#[then("no new node was launched")]
async fn none_new(w: &mut SimWorld) {
    let new = w.launched_since_mark();
    if !new.is_empty() {
        let ids: Vec<String> = new
            .iter()
            .map(|i| format!("{} ({})", i.instance_id, i.instance_type))
            .collect();
        w.fail(format!("new instances since the last action: {ids:?}"));
    }
}

#[then(expr = "at most {int} node(s) were/was launched")]
async fn at_most_launched(w: &mut SimWorld, most: usize) {
    let launched = w.launched().len();
    if launched > most {
        w.fail(format!(
            "{launched} instances were launched, want at most {most}"
        ));
    }
}

#[then(expr = "exactly {int} node(s) were/was launched")]
async fn exactly_launched(w: &mut SimWorld, want: usize) {
    let launched = w.launched().len();
    if launched != want {
        w.fail(format!("{launched} instances were launched, want {want}"));
    }
}

#[then(expr = "none of the new nodes is a {capacity} {string} instance")]
async fn none_new_of(w: &mut SimWorld, capacity: Capacity, instance_type: String) {
    let bad: Vec<String> = w
        .launched_since_mark()
        .iter()
        .filter(|i| i.capacity_type == capacity.0 && i.instance_type == instance_type)
        .map(|i| i.instance_id.clone())
        .collect();
    if !bad.is_empty() {
        w.fail(format!(
            "launched as {instance_type}/{}: {bad:?}",
            capacity.0.label()
        ));
    }
}

#[then("no instance is running")]
async fn no_instance(w: &mut SimWorld) {
    let s = w.snapshot().await;
    if !s.instances.is_empty() {
        let ids: Vec<&str> = s
            .instances
            .iter()
            .map(|i| i.instance.instance_id.as_str())
            .collect();
        w.fail(format!("live instances: {ids:?}"));
    }
}

/// Instances that never became a node were terminated (nothing is paid for forever).
#[then("every instance that never became a node was terminated")]
async fn unregistered_terminated(w: &mut SimWorld) {
    let s = w.snapshot().await;
    let registered: BTreeSet<&str> = s
        .nodes
        .iter()
        .filter_map(|n| n.instance_id.as_deref())
        .collect();
    let stray: Vec<&str> = s
        .instances
        .iter()
        .map(|i| i.instance.instance_id.as_str())
        .filter(|id| !registered.contains(id))
        .collect();
    if !stray.is_empty() {
        w.fail(format!("live instances with no node: {stray:?}"));
    }
    let replaced = w.launched().len() > s.nodes.len();
    if !replaced {
        w.fail("no instance was ever replaced: the scenario did not exercise a failed boot");
    }
}

/// At least `vcpus` vCPUs live, and every node right-sized: no dearer per hour than the cheapest
/// offering its NodePool allows that holds the pods it runs (see `offerings`).
#[then(expr = "the nodes launched have at least {int} vCPU in total and cost no more than needed")]
async fn right_sized(w: &mut SimWorld, vcpus: i64) {
    let s = w.snapshot().await;
    let total: i64 = s.instances.iter().map(|i| i.vcpus).sum();
    if total < vcpus {
        w.fail(format!("{total} vCPU launched, want at least {vcpus}"));
    }
    let world = w.world().await;
    let catalog = world.cloud().instance_types();
    let cloud = world.cloud().clone();
    let available = |o: &Offering| {
        let ct = CapacityType::from_label(&o.capacity_type).unwrap_or(CapacityType::OnDemand);
        cloud
            .pool_capacity(&fakecloud::Pool::new(&o.instance_type, &o.zone, ct))
            .is_some_and(|free| free > 0)
    };
    let nodes = nodes(w).await;
    for node in &nodes {
        let pods: Vec<_> = s
            .live_pods()
            .filter(|p| p.node.as_deref() == Some(node.name.as_str()))
            .map(|p| p.requests.clone())
            .collect();
        let pool_name = node.label("karpenter.sh/nodepool");
        let Some(pool) = s
            .nodepools
            .iter()
            .find(|p| p["metadata"]["name"] == pool_name)
        else {
            w.fail(format!("node {} has no NodePool {pool_name:?}", node.name));
        };
        let Some(instance) = s
            .instances
            .iter()
            .find(|i| node.instance_id.as_deref() == Some(i.instance.instance_id.as_str()))
        else {
            w.fail(format!("node {} has no live instance", node.name));
        };
        let Some(best) = cheapest_node_for(&catalog, pool, &pods, &available) else {
            w.fail(format!(
                "no offering of NodePool {pool_name} holds the pods of node {}",
                node.name
            ));
        };
        if instance.price > best.price + 1e-9 {
            w.fail(format!(
                "node {} ({} {}) costs ${:.4}/hour for its {} pods; {} {} in {} holds them for ${:.4}/hour",
                node.name,
                instance.instance.capacity_type.label(),
                instance.instance.instance_type,
                instance.price,
                pods.len(),
                best.capacity_type,
                best.instance_type,
                best.zone,
                best.price
            ));
        }
    }
}

/// The fault kinds a scenario turned on were really injected (a fault scenario that ran without
/// faults would prove nothing).
#[then(expr = "the world really injected {string} faults")]
async fn faults_happened(w: &mut SimWorld, kinds: String) {
    let world = w.world().await;
    let injected = world.faults_injected().clone();
    for kind in list(&kinds) {
        if injected.get(&kind).copied().unwrap_or(0) == 0 {
            w.fail(format!(
                "no {kind} fault was injected; injected: {injected:?}"
            ));
        }
    }
}

// ---- NodeClaims and NodePools ----

#[then("every NodeClaim is Launched, Registered and Initialized")]
async fn claims_ready(w: &mut SimWorld) {
    let s = w.snapshot().await;
    if s.claims.is_empty() {
        w.fail("there are no NodeClaims");
    }
    for claim in &s.claims {
        for condition in ["Launched", "Registered", "Initialized", "Ready"] {
            if claim.condition(condition) != "True" {
                w.fail(format!(
                    "NodeClaim {}: {condition} is {}",
                    claim.name,
                    claim.condition(condition)
                ));
            }
        }
    }
}

#[then(expr = "the NodeClaims of NodePool {string} have at most {int} CPU in total")]
async fn pool_cpu_at_most(w: &mut SimWorld, pool: String, cpu: i64) {
    let s = w.snapshot().await;
    let claims: Vec<_> = s.claims.iter().filter(|c| c.nodepool == pool).collect();
    let total: i64 = claims.iter().map(|c| c.capacity.get("cpu")).sum();
    if claims.is_empty() {
        w.fail(format!("NodePool {pool} has no NodeClaims"));
    }
    if total > cpu * 1000 {
        w.fail(format!(
            "NodePool {pool}'s NodeClaims have {}m CPU, over its {cpu} CPU",
            total
        ));
    }
}

#[then(expr = "the NodeClaims of NodePool {string} have at most {int}Gi memory in total")]
async fn pool_memory_at_most(w: &mut SimWorld, pool: String, gib: i64) {
    let s = w.snapshot().await;
    let claims: Vec<_> = s.claims.iter().filter(|c| c.nodepool == pool).collect();
    let total: i64 = claims.iter().map(|c| c.capacity.get("memory")).sum();
    if claims.is_empty() {
        w.fail(format!("NodePool {pool} has no NodeClaims"));
    }
    if total > gib << 30 {
        w.fail(format!(
            "NodePool {pool}'s NodeClaims have {:.1}Gi memory, over {gib}Gi",
            total as f64 / f64::from(1u32 << 30)
        ));
    }
}

/// `status.nodes` counts its NodeClaims and `status.resources.cpu` sums their capacity.
#[then(expr = "the NodePool {string} reports its {int} node(s) and their CPU in its status")]
async fn pool_status(w: &mut SimWorld, pool: String, nodes: i64) {
    let s = w.snapshot().await;
    let claims: Vec<_> = s.claims.iter().filter(|c| c.nodepool == pool).collect();
    if claims.len() as i64 != nodes {
        w.fail(format!(
            "NodePool {pool} has {} NodeClaims, want {nodes}",
            claims.len()
        ));
    }
    let cpu: i64 = claims.iter().map(|c| c.capacity.get("cpu")).sum();
    let Some(object) = s
        .nodepools
        .iter()
        .find(|p| p["metadata"]["name"] == pool.as_str())
    else {
        w.fail(format!("no NodePool {pool}"));
    };
    let status = &object["status"];
    let reported_cpu = karpenter_features::observe::resources(&status["resources"]).get("cpu");
    if status["nodes"].as_i64() != Some(nodes) || reported_cpu != cpu {
        w.fail(format!(
            "NodePool {pool} status says nodes={} cpu={}m, want nodes={nodes} cpu={cpu}m",
            status["nodes"], reported_cpu
        ));
    }
}

// ---- events ----

fn matching<'a>(
    s: &'a Snapshot,
    reason: &'a str,
    involves: impl Fn(&RecordedEvent) -> bool + 'a,
) -> impl Iterator<Item = &'a RecordedEvent> + 'a {
    s.events_with_reason(reason).filter(move |e| involves(e))
}

#[then(expr = "a FailedScheduling event for a pod of {string} says {string}")]
async fn failed_scheduling(w: &mut SimWorld, name: String, text: String) {
    let s = w.snapshot().await;
    let events: Vec<&RecordedEvent> = matching(&s, "FailedScheduling", |e| {
        e.event.involved.kind == "Pod"
            && e.event
                .key
                .name
                .strip_prefix(name.as_str())
                .is_some_and(|r| r.starts_with('-'))
    })
    .collect();
    if !events.iter().any(|e| e.event.message.contains(&text)) {
        let seen: Vec<&str> = events.iter().map(|e| e.event.message.as_str()).collect();
        w.fail(format!(
            "no FailedScheduling event for a pod of {name} says {text:?}; they say {seen:?}"
        ));
    }
}

#[then(expr = "a NodeClaim had a(n) {string} event saying {string}")]
async fn claim_event(w: &mut SimWorld, reason: String, text: String) {
    let s = w.snapshot().await;
    let events: Vec<&RecordedEvent> =
        matching(&s, &reason, |e| e.event.involved.kind == "NodeClaim").collect();
    if !events.iter().any(|e| e.event.message.contains(&text)) {
        let seen: Vec<&str> = events.iter().map(|e| e.event.message.as_str()).collect();
        w.fail(format!(
            "no {reason} event on a NodeClaim says {text:?}; those there say {seen:?}"
        ));
    }
}

#[then(expr = "no NodeClaim had a(n) {string} event")]
async fn no_claim_event(w: &mut SimWorld, reason: String) {
    let s = w.snapshot().await;
    if let Some(e) = matching(&s, &reason, |e| e.event.involved.kind == "NodeClaim").next() {
        w.fail(format!(
            "NodeClaim {} had {reason}: {}",
            e.event.key.name, e.event.message
        ));
    }
}
