//! Termination steps: taking a node away (`kubectl delete nodeclaim`/`node`), what protects its
//! pods (PodDisruptionBudgets, do-not-disrupt, DaemonSets and critical pods, the NodePool's
//! terminationGracePeriod), and what must be true of how it went.
//!
//! "That node", "its NodeClaim" and "its instance" are the node an action step singled out
//! ([`SimWorld::single_out`]). Questions about order and timing ("evicted only after", "deleted
//! 90 seconds after") are answered from the world's [`History`](karpenter_features::history),
//! which saw every step, because the objects they are about are gone by the time they are asked.

use std::time::Duration;

use cucumber::{given, then, when};
use jiff::{SignedDuration, Timestamp};
use karpenter_core::seams::ec2::InstanceState;
use karpenter_core::seams::kube::{ObjectKey, Patch, ResourceKind};
use karpenter_features::history::{ClaimRecord, PodRecord, whole_second};
use karpenter_features::{SimWorld, Subject};
use karpenter_sim::workloads::DaemonSet;
use karpenter_sim::world::IDLE_STEP;
use serde_json::json;

use crate::params::Period;

// ---- setup ----

/// `spec.template.spec.terminationGracePeriod` of a NodePool in the setup: how long a node of
/// it may take to terminate before its remaining pods are deleted regardless.
#[given(expr = "the NodePool {string} has a terminationGracePeriod of {period}")]
fn termination_grace_period(w: &mut SimWorld, pool: String, period: Period) {
    let seconds = period.0.as_secs();
    let text = match seconds {
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    };
    w.setup_document("NodePool", &pool)["spec"]["template"]["spec"]["terminationGracePeriod"] =
        json!(text);
}

/// A DaemonSet whose pods request `cpu` (and 64Mi), on every node; `critical` ones have priority
/// class `system-node-critical`. Say it before the nodes exist so they are sized for it.
#[given(regex = r#"^an? (critical )?DaemonSet "([^"]+)" requesting (\S+) CPU runs on every node$"#)]
#[when(regex = r#"^an? (critical )?DaemonSet "([^"]+)" requesting (\S+) CPU runs on every node$"#)]
async fn daemonset(w: &mut SimWorld, critical: String, name: String, cpu: String) {
    w.apply(DaemonSet::manifest(
        &name,
        &cpu,
        "64Mi",
        !critical.is_empty(),
    ))
    .await;
}

/// A PodDisruptionBudget over the Deployment's pods (its template's labels) with `minAvailable`.
#[given(expr = "a PodDisruptionBudget keeps at least {int} pod(s) of {string} available")]
#[when(expr = "a PodDisruptionBudget keeps at least {int} pod(s) of {string} available")]
async fn disruption_budget(w: &mut SimWorld, min_available: u32, name: String) {
    let labels = w.deployment(&name).template["metadata"]["labels"].clone();
    w.apply(json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": format!("{name}-budget"), "namespace": "default"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": labels}}
    }))
    .await;
}

/// `kubectl annotate pods` of the Deployment's live pods with `key=value` (replacements the
/// ReplicaSet creates later do not have it, as in a cluster).
#[given(expr = "the pods of {string} are annotated {string}")]
#[when(expr = "the pods of {string} are annotated {string}")]
async fn annotate_pods(w: &mut SimWorld, name: String, annotation: String) {
    let Some((key, value)) = annotation.split_once('=') else {
        w.fail(format!("annotation {annotation:?}: write key=value"));
    };
    let snapshot = w.snapshot().await;
    let pods: Vec<ObjectKey> = snapshot
        .pods_of(&name)
        .map(|p| ObjectKey::namespaced(p.namespace.clone(), p.name.clone()))
        .collect();
    if pods.is_empty() {
        w.fail(format!("no pods of {name} to annotate"));
    }
    let patch = Patch::Merge(json!({"metadata": {"annotations": {key: value}}}));
    for pod in pods {
        if let Err(err) = w.patch_object(&ResourceKind::POD, &pod, &patch).await {
            w.fail(format!("annotating pod {}: {err}", pod.name));
        }
    }
}

// ---- actions ----

/// `kubectl delete nodeclaim` of the node the Deployment's pods run on.
#[when(expr = "the NodeClaim of the node running {string} is deleted")]
async fn delete_claim(w: &mut SimWorld, name: String) {
    let subject = w.single_out(&name).await;
    if let Err(err) = w
        .delete_object(
            &ResourceKind::NODE_CLAIM,
            &ObjectKey::cluster(&subject.claim),
        )
        .await
    {
        w.fail(format!("deleting NodeClaim {}: {err}", subject.claim));
    }
}

/// `kubectl delete node` of the node the Deployment's pods run on.
#[when(expr = "the node running {string} is deleted")]
async fn delete_node(w: &mut SimWorld, name: String) {
    let subject = w.single_out(&name).await;
    if let Err(err) = w
        .delete_object(&ResourceKind::NODE, &ObjectKey::cluster(&subject.node))
        .await
    {
        w.fail(format!("deleting node {}: {err}", subject.node));
    }
}

// ---- that node ----

/// The history's record of the subject's NodeClaim.
pub fn claim_record(w: &SimWorld, subject: &Subject) -> ClaimRecord {
    w.history()
        .claims
        .get(&subject.claim)
        .cloned()
        .unwrap_or_else(|| w.fail(format!("NodeClaim {} was never seen", subject.claim)))
}

/// The subject's node, NodeClaim and instance are all gone: the objects from the API server, the
/// instance terminated in EC2 (or already forgotten).
#[then(expr = "within {period} that node, its NodeClaim and its instance are gone")]
async fn subject_gone(w: &mut SimWorld, period: Period) {
    let subject = w.subject();
    let cloud = w.world().await.cloud().clone();
    w.wait_until(period.0, move |s| {
        if s.node(&subject.node).is_some() {
            return Err(format!("node {} still exists", subject.node));
        }
        if s.claims.iter().any(|c| c.name == subject.claim) {
            return Err(format!("NodeClaim {} still exists", subject.claim));
        }
        match cloud.instance_state(&subject.instance_id) {
            None | Some(InstanceState::Terminated) => Ok(()),
            Some(state) => Err(format!("instance {} is {state:?}", subject.instance_id)),
        }
    })
    .await;
}

#[then(expr = "within {period} its NodeClaim is being deleted")]
async fn claim_deleting(w: &mut SimWorld, period: Period) {
    let subject = w.subject();
    w.wait_until(period.0, move |s| {
        match s.claims.iter().find(|c| c.name == subject.claim) {
            Some(c) if !c.deleting => Err(format!("NodeClaim {} is not being deleted", c.name)),
            // Gone is deleted too.
            _ => Ok(()),
        }
    })
    .await;
}

#[then(expr = "for {period} no NodeClaim is being deleted")]
async fn no_claim_deleting(w: &mut SimWorld, period: Period) {
    let known: Vec<String> = w
        .snapshot()
        .await
        .claims
        .iter()
        .map(|c| c.name.clone())
        .collect();
    w.holds_for(period.0, move |s| {
        if let Some(c) = s.claims.iter().find(|c| c.deleting) {
            return Err(format!("NodeClaim {} is being deleted", c.name));
        }
        match known
            .iter()
            .find(|k| !s.claims.iter().any(|c| &c.name == *k))
        {
            Some(gone) => Err(format!("NodeClaim {gone} is gone")),
            None => Ok(()),
        }
    })
    .await;
}

#[then("its instance is still running")]
async fn instance_running(w: &mut SimWorld) {
    let subject = w.subject();
    let state = w.world().await.cloud().instance_state(&subject.instance_id);
    if state != Some(InstanceState::Running) {
        w.fail(format!("instance {} is {state:?}", subject.instance_id));
    }
}

/// `key=value:Effect` or `key:Effect`.
#[then(expr = "within {period} that node is tainted {string}")]
async fn subject_tainted(w: &mut SimWorld, period: Period, taint: String) {
    let subject = w.subject();
    let Some((kv, effect)) = taint.rsplit_once(':') else {
        w.fail(format!("taint {taint:?}: write key=value:Effect"));
    };
    let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
    let (key, value, effect) = (key.to_string(), value.to_string(), effect.to_string());
    w.wait_until(period.0, move |s| {
        let Some(node) = s.node(&subject.node) else {
            return Err(format!("node {} is gone", subject.node));
        };
        if node
            .taints
            .iter()
            .any(|(k, v, e)| *k == key && *v == value && *e == effect)
        {
            Ok(())
        } else {
            Err(format!("node {} has taints {:?}", node.name, node.taints))
        }
    })
    .await;
}

#[then(expr = "no pod of {string} was ever bound to that node")]
async fn never_bound(w: &mut SimWorld, name: String) {
    let subject = w.subject();
    let bound: Vec<String> = w
        .history()
        .pods_on(&subject.node)
        .into_iter()
        .filter(|p| p.of(&name))
        .map(PodRecord::key)
        .collect();
    if !bound.is_empty() {
        w.fail(format!("pods bound to node {}: {bound:?}", subject.node));
    }
}

/// Holds while the Deployment's pods that were on the node when it was singled out are still
/// there, bound and not being deleted.
#[then(expr = "for {period} the pods of {string} stay on that node")]
async fn stay_on_node(w: &mut SimWorld, period: Period, name: String) {
    let subject = w.subject();
    let want: Vec<String> = w
        .snapshot()
        .await
        .pods_of(&name)
        .filter(|p| p.node.as_deref() == Some(subject.node.as_str()))
        .map(|p| p.name.clone())
        .collect();
    if want.is_empty() {
        w.fail(format!("no pod of {name} is on node {}", subject.node));
    }
    w.holds_for(period.0, move |s| {
        for pod in &want {
            match s.pods.iter().find(|p| &p.name == pod) {
                Some(p) if p.deleting => return Err(format!("pod {pod} is being deleted")),
                Some(p) if p.node.as_deref() == Some(subject.node.as_str()) => {}
                _ => return Err(format!("pod {pod} left node {}", subject.node)),
            }
        }
        Ok(())
    })
    .await;
}

#[then(expr = "for {period} at least {int} pod(s) of {string} is/are Running")]
async fn at_least_running(w: &mut SimWorld, period: Period, least: usize, name: String) {
    w.holds_for(period.0, move |s| {
        let running = s.pods_of(&name).filter(|p| p.running()).count();
        if running >= least {
            Ok(())
        } else {
            Err(format!(
                "{running} pods of {name} running, want at least {least}"
            ))
        }
    })
    .await;
}

/// Pods of `name` that were on the subject's node, failing if there were none.
fn pods_on_subject(w: &SimWorld, subject: &Subject, name: &str) -> Vec<PodRecord> {
    let pods: Vec<PodRecord> = w
        .history()
        .pods_on(&subject.node)
        .into_iter()
        .filter(|p| p.of(name))
        .cloned()
        .collect();
    if pods.is_empty() {
        w.fail(format!(
            "no pod of {name} was ever on node {}",
            subject.node
        ));
    }
    pods
}

/// Every pod of `name` that was on the node was evicted (an `Evicted` event names its uid, and
/// its deletion was requested).
#[then(expr = "every pod of {string} that was on that node was evicted")]
async fn all_evicted(w: &mut SimWorld, name: String) {
    let subject = w.subject();
    let s = w.snapshot().await;
    let uids: Vec<(String, String)> = w
        .history()
        .pods
        .iter()
        .filter(|(_, p)| p.node.as_deref() == Some(subject.node.as_str()) && p.of(&name))
        .map(|(uid, p)| (uid.clone(), p.key()))
        .collect();
    if uids.is_empty() {
        w.fail(format!(
            "no pod of {name} was ever on node {}",
            subject.node
        ));
    }
    for (uid, key) in uids {
        let evicted = s
            .events_with_reason("Evicted")
            .any(|e| e.event.involved.kind == "Pod" && e.event.uid.as_deref() == Some(&uid));
        if !evicted {
            w.fail(format!("pod {key} was not evicted"));
        }
    }
}

/// The eviction tiers: the first eviction of a pod of `later` came no sooner than the last pod
/// of `earlier` left the node (it was gone, not merely terminating), and every pod of both left.
/// Compared in whole seconds: an eviction's time is its pod's `deletionTimestamp`
/// ([`whole_second`]).
#[then(
    expr = "on that node the pods of {string} were evicted only after every pod of {string} had left"
)]
async fn tier_order(w: &mut SimWorld, later: String, earlier: String) {
    let subject = w.subject();
    let first = pods_on_subject(w, &subject, &earlier);
    let second = pods_on_subject(w, &subject, &later);
    let Some(last_left) = first.iter().map(|p| p.gone).collect::<Option<Vec<_>>>() else {
        w.fail(format!(
            "a pod of {earlier} never left node {}",
            subject.node
        ));
    };
    let last_left = last_left.into_iter().max();
    for pod in &second {
        let Some(requested) = pod.deletion_requested else {
            w.fail(format!("pod {} was never evicted", pod.key()));
        };
        if last_left.is_some_and(|left| requested < whole_second(left)) {
            w.fail(format!(
                "pod {} was evicted at {requested}, before the last pod of {earlier} left at {}",
                pod.key(),
                last_left.unwrap_or_default()
            ));
        }
    }
}

/// The pods of `name` on the node were deleted `period` after the NodeClaim's deletion and not
/// one step sooner: waits for that, failing if any goes early or none goes by a step after.
#[then(
    expr = "the pods of {string} on that node are deleted {period} after its NodeClaim was, not sooner"
)]
async fn deleted_after(w: &mut SimWorld, name: String, period: Period) {
    let subject = w.subject();
    let pods = pods_on_subject(w, &subject, &name);
    let Some(deleted) = claim_record(w, &subject).deleting_since else {
        w.fail(format!("NodeClaim {} was never deleted", subject.claim));
    };
    let due = deleted + SignedDuration::try_from(period.0).unwrap_or_default();
    let names: Vec<String> = pods.iter().map(|p| p.name.clone()).collect();
    let deployment = name.clone();
    let until = due + SignedDuration::try_from(IDLE_STEP).unwrap_or_default();
    let limit = Duration::from_secs(
        until
            .duration_since(w.now())
            .as_secs()
            .max(0)
            .unsigned_abs(),
    );
    w.wait_until(limit, move |s| {
        let left = names
            .iter()
            .filter(|n| {
                s.pods
                    .iter()
                    .find(|p| &p.name == *n)
                    .is_none_or(|p| p.deleting)
            })
            .count();
        if left == names.len() {
            Ok(())
        } else {
            Err(format!("{left} of {} pods of {name} deleted", names.len()))
        }
    })
    .await;
    for pod in pods_on_subject(w, &subject, &deployment) {
        match pod.deletion_requested {
            Some(at) if at >= due && at <= until => {}
            other => w.fail(format!(
                "pod {} deleted at {other:?}, want between {due} and {until}",
                pod.key()
            )),
        }
    }
}

/// EC2 started terminating the instance only after every pod the drain waits for had left the
/// node (pods that tolerate `karpenter.sh/disrupted` stay by choice).
#[then("its instance began terminating only after every pod had left that node")]
async fn terminated_after_drain(w: &mut SimWorld) {
    let subject = w.subject();
    let Some(began) = w
        .history()
        .instances
        .get(&subject.instance_id)
        .and_then(|i| i.termination_began())
    else {
        w.fail(format!(
            "instance {} never began terminating",
            subject.instance_id
        ));
    };
    let pods: Vec<PodRecord> = w
        .history()
        .pods_on(&subject.node)
        .into_iter()
        .filter(|p| !p.tolerates_disrupted)
        .cloned()
        .collect();
    if pods.is_empty() {
        w.fail(format!("no pod was ever on node {}", subject.node));
    }
    for pod in pods {
        match pod.gone {
            Some(left) if left <= began => {}
            left => w.fail(format!(
                "instance {} began terminating at {began}, pod {} left at {left:?}",
                subject.instance_id,
                pod.key()
            )),
        }
    }
}

/// The Node object went only once EC2 reported the instance terminated.
#[then("that node was removed only after its instance was terminated")]
async fn node_after_instance(w: &mut SimWorld) {
    let subject = w.subject();
    let terminated = w
        .history()
        .instances
        .get(&subject.instance_id)
        .and_then(|i| i.since(InstanceState::Terminated));
    let gone = w.history().nodes.get(&subject.node).and_then(|n| n.gone);
    match (terminated, gone) {
        (Some(t), Some(g)) if g >= t => {}
        _ => w.fail(format!(
            "node {} gone at {gone:?}, instance {} terminated at {terminated:?}",
            subject.node, subject.instance_id
        )),
    }
}

/// A status condition the subject's NodeClaim was ever seen with (it may be gone by now).
#[then(
    regex = r#"^its NodeClaim reported the condition "([^"]+)" = "([^"]+)"(?: because "([^"]+)")?$"#
)]
async fn claim_condition(w: &mut SimWorld, type_: String, status: String, reason: String) {
    let subject = w.subject();
    let record = claim_record(w, &subject);
    let reason = (!reason.is_empty()).then_some(reason.as_str());
    if !record.had_condition(&type_, &status, reason) {
        w.fail(format!(
            "NodeClaim {} never had {type_}={status} (reason {reason:?}); seen: {:?}",
            subject.claim, record.conditions_seen
        ));
    }
}

// ---- events ----

#[then(expr = "that node had a(n) {string} event saying {string}")]
async fn node_event(w: &mut SimWorld, reason: String, text: String) {
    let subject = w.subject();
    let s = w.snapshot().await;
    let seen: Vec<&str> = s
        .events_with_reason(&reason)
        .filter(|e| e.event.involved.kind == "Node" && e.event.key.name == subject.node)
        .map(|e| e.event.message.as_str())
        .collect();
    if !seen.iter().any(|m| m.contains(&text)) {
        w.fail(format!(
            "no {reason} event on node {} says {text:?}; they say {seen:?}",
            subject.node
        ));
    }
}

/// Exactly `count` events of `reason` on the subject's NodeClaim.
#[then(expr = "its NodeClaim had {int} {string} event(s)")]
async fn claim_events(w: &mut SimWorld, count: usize, reason: String) {
    let subject = w.subject();
    let s = w.snapshot().await;
    let seen = s
        .events_with_reason(&reason)
        .filter(|e| e.event.involved.kind == "NodeClaim" && e.event.key.name == subject.claim)
        .count();
    if seen != count {
        w.fail(format!(
            "NodeClaim {} had {seen} {reason} events, want {count}",
            subject.claim
        ));
    }
}

#[then(expr = "a pod of {string} had a(n) {string} event saying {string}")]
async fn pod_event(w: &mut SimWorld, name: String, reason: String, text: String) {
    let s = w.snapshot().await;
    let seen: Vec<&str> = s
        .events_with_reason(&reason)
        .filter(|e| {
            e.event.involved.kind == "Pod"
                && e.event
                    .key
                    .name
                    .strip_prefix(name.as_str())
                    .is_some_and(|r| r.starts_with('-'))
        })
        .map(|e| e.event.message.as_str())
        .collect();
    if !seen.iter().any(|m| m.contains(&text)) {
        w.fail(format!(
            "no {reason} event on a pod of {name} says {text:?}; they say {seen:?}"
        ));
    }
}

/// The first time a pod on the subject's node had its deletion requested (an eviction, or a
/// delete the drain made), if any.
pub fn first_eviction(w: &SimWorld, subject: &Subject) -> Option<Timestamp> {
    w.history()
        .pods_on(&subject.node)
        .into_iter()
        .filter_map(|p| p.deletion_requested)
        .min()
}
