//! Interruption steps: what EC2 and AWS Health send about a node's instance (through fakecloud,
//! which puts the EventBridge event on the interruption queue the controller polls), what else
//! can land on that queue (duplicates, garbage, events about instances the cluster does not
//! have), and what must be true of the replacement that follows.
//!
//! "The interruption" is the action step's time: the replacement and eviction timings are
//! measured from it.

use std::time::Duration;

use cucumber::{then, when};
use jiff::{SignedDuration, Timestamp};
use karpenter_core::interruption::messages::{
    DETAIL_TYPE_SPOT_INTERRUPTION, Event, Metadata, SCHEMA_VERSION, SOURCE_EC2,
    SpotInterruptionDetail,
};
use karpenter_features::history::whole_second;
use karpenter_features::{SimWorld, Subject};
use karpenter_sim::world::IDLE_STEP;

use crate::params::Period;
use crate::termination::{claim_record, first_eviction};

// ---- what arrives on the queue ----

#[when(expr = "the spot instance of the node running {string} gets an interruption warning")]
async fn spot_warning(w: &mut SimWorld, name: String) {
    let subject = w.single_out(&name).await;
    w.mark();
    if !w.world().await.cloud().interrupt_spot(&subject.instance_id) {
        w.fail(format!(
            "instance {} is not a live spot instance that was not warned yet",
            subject.instance_id
        ));
    }
}

#[when(expr = "the spot instance of the node running {string} gets a rebalance recommendation")]
async fn rebalance(w: &mut SimWorld, name: String) {
    let subject = w.single_out(&name).await;
    w.mark();
    if !w
        .world()
        .await
        .cloud()
        .recommend_rebalance(&subject.instance_id)
    {
        w.fail(format!(
            "instance {} is not a live spot instance",
            subject.instance_id
        ));
    }
}

/// An AWS Health scheduled change: the instance is stopped for maintenance `period` from now.
#[when(
    expr = "AWS schedules maintenance for the instance of the node running {string} in {period}"
)]
async fn maintenance(w: &mut SimWorld, name: String, period: Period) {
    let subject = w.single_out(&name).await;
    w.mark();
    if !w
        .world()
        .await
        .cloud()
        .schedule_maintenance(&subject.instance_id, period.0)
    {
        w.fail(format!("instance {} is not live", subject.instance_id));
    }
}

/// Someone terminates the instance through the EC2 API (the console, a script): EC2 sends state
/// changes to shutting-down and terminated.
#[when(expr = "the instance of the node running {string} is terminated outside Karpenter")]
async fn terminated_outside(w: &mut SimWorld, name: String) {
    let subject = w.single_out(&name).await;
    match w.terminate_instance(&subject.instance_id).await {
        Ok(ids) if ids.contains(&subject.instance_id) => {}
        other => w.fail(format!("terminating {}: {other:?}", subject.instance_id)),
    }
}

/// Someone stops the instance: EC2 sends state changes to stopping and stopped.
#[when(expr = "the instance of the node running {string} is stopped outside Karpenter")]
async fn stopped_outside(w: &mut SimWorld, name: String) {
    let subject = w.single_out(&name).await;
    w.mark();
    if !w.world().await.cloud().stop_instance(&subject.instance_id) {
        w.fail(format!("instance {} is not live", subject.instance_id));
    }
}

/// The first message about the subject's instance since it was singled out (the event the
/// action made EC2 send) is put on the queue again `times` times: SQS delivers at least once.
#[when(expr = "that interruption message is delivered {int} more time(s)")]
async fn duplicate(w: &mut SimWorld, times: usize) {
    let subject = w.subject();
    let cloud = w.world().await.cloud().clone();
    let Some(message) = cloud
        .sent_messages()
        .into_iter()
        .find(|m| m.time >= subject.at && m.body.contains(&subject.instance_id))
    else {
        w.fail(format!(
            "no message about instance {} was sent",
            subject.instance_id
        ));
    };
    for _ in 0..times {
        cloud.inject_message(&message.body);
    }
}

#[when(expr = "{int} malformed message(s) arrive(s) on the interruption queue")]
async fn malformed(w: &mut SimWorld, count: usize) {
    w.mark();
    let cloud = w.world().await.cloud().clone();
    for _ in 0..count {
        cloud.inject_malformed_message();
    }
}

/// A well-formed spot interruption warning for an instance id no NodeClaim (and no instance of
/// this account) has: a stale event, or one for another cluster sharing the queue.
#[when("a spot interruption warning arrives for an instance no NodeClaim has")]
async fn unknown_instance(w: &mut SimWorld) {
    w.mark();
    let now = w.now();
    let cloud = w.world().await.cloud().clone();
    let instance_id = "i-0f00000000000dead";
    if cloud.instance(instance_id).is_some() {
        w.fail(format!("instance {instance_id} exists"));
    }
    let body = Event {
        metadata: Metadata {
            version: SCHEMA_VERSION.to_string(),
            id: "7b9a4f8e-0000-4000-8000-00000000dead".to_string(),
            detail_type: DETAIL_TYPE_SPOT_INTERRUPTION.to_string(),
            source: SOURCE_EC2.to_string(),
            account: "123456789012".to_string(),
            time: Timestamp::from_second(now.as_second()).unwrap_or(now),
            region: "us-west-2".to_string(),
            resources: vec![format!(
                "arn:aws:ec2:us-west-2:123456789012:instance/{instance_id}"
            )],
        },
        detail: SpotInterruptionDetail {
            instance_id: instance_id.to_string(),
            instance_action: "terminate".to_string(),
        },
    }
    .to_json();
    cloud.inject_message(&body);
}

/// Instances launched from now on never boot (their replacement cannot come up).
#[when("new instances stop booting")]
async fn stop_booting(w: &mut SimWorld) {
    w.mark();
    w.world()
        .await
        .cloud()
        .configure(|c| c.boot.never_boot_fraction = 1.0);
}

// ---- the queue ----

/// No message is waiting or in flight: every one was handled and deleted.
#[then(expr = "within {period} the interruption queue is empty")]
async fn queue_empty(w: &mut SimWorld, period: Period) {
    let cloud = w.world().await.cloud().clone();
    w.wait_until(period.0, move |_| match cloud.queue_depth() {
        0 => Ok(()),
        depth => Err(format!("{depth} messages in the interruption queue")),
    })
    .await;
}

// ---- replacement and eviction ----

/// The time left until `period` after the subject's action (zero if already past).
fn left_of(w: &SimWorld, subject: &Subject, period: Duration) -> Duration {
    let due = subject.at + SignedDuration::try_from(period).unwrap_or_default();
    Duration::from_secs(due.duration_since(w.now()).as_secs().max(0).unsigned_abs())
}

/// Every pod of the Deployment runs, none on the subject's node.
async fn run_elsewhere(w: &mut SimWorld, limit: Duration, name: String) {
    let subject = w.subject();
    let want = w.deployment(&name).replicas;
    w.wait_until(limit, move |s| {
        let pods: Vec<_> = s.pods_of(&name).collect();
        let running = pods.iter().filter(|p| p.running()).count();
        if let Some(p) = pods
            .iter()
            .find(|p| p.node.as_deref() == Some(subject.node.as_str()))
        {
            return Err(format!("pod {} is still on node {}", p.name, subject.node));
        }
        if running == want && pods.len() == want {
            Ok(())
        } else {
            Err(format!(
                "{running} of {want} pods of {name} running elsewhere"
            ))
        }
    })
    .await;
}

#[then(expr = "within {period} of the interruption all pods of {string} run on other nodes")]
async fn elsewhere_since(w: &mut SimWorld, period: Period, name: String) {
    let subject = w.subject();
    let limit = left_of(w, &subject, period.0);
    run_elsewhere(w, limit, name).await;
}

#[then(expr = "within {period} all pods of {string} run on other nodes")]
async fn elsewhere(w: &mut SimWorld, period: Period, name: String) {
    run_elsewhere(w, period.0, name).await;
}

#[then(expr = "every pod of {string} still runs on that node")]
async fn still_there(w: &mut SimWorld, name: String) {
    let subject = w.subject();
    let want = w.deployment(&name).replicas;
    let s = w.snapshot().await;
    let here = s
        .pods_of(&name)
        .filter(|p| p.running() && p.node.as_deref() == Some(subject.node.as_str()))
        .count();
    if here != want {
        w.fail(format!(
            "{here} of {want} pods of {name} run on node {}",
            subject.node
        ));
    }
}

/// NodeClaims whose `karpenter.sh/replaces` names the subject's.
#[then(expr = "exactly {int} NodeClaim(s) was/were created to replace its NodeClaim")]
async fn replacements(w: &mut SimWorld, want: usize) {
    let subject = w.subject();
    let got: Vec<String> = w
        .history()
        .replacements_of(&subject.claim)
        .into_iter()
        .map(|(name, _)| name.clone())
        .collect();
    if got.len() != want {
        w.fail(format!(
            "NodeClaims replacing {}: {got:?}, want {want}",
            subject.claim
        ));
    }
}

/// Each NodeClaim replacing the subject's, with when it was initialized; fails if there is none.
fn replacement_initializations(
    w: &SimWorld,
    subject: &Subject,
) -> Vec<(String, Option<Timestamp>)> {
    let replacements: Vec<(String, Option<Timestamp>)> = w
        .history()
        .replacements_of(&subject.claim)
        .into_iter()
        .map(|(name, c)| (name.clone(), c.initialized_since))
        .collect();
    if replacements.is_empty() {
        w.fail(format!("nothing replaced NodeClaim {}", subject.claim));
    }
    replacements
}

/// Replacement first: the first pod of the node to be evicted went after every replacement
/// NodeClaim was initialized (in whole seconds: the eviction's time is its pod's
/// `deletionTimestamp`, see [`whole_second`]).
#[then("no pod on that node was evicted before its replacement was initialized")]
async fn evicted_after_replacement(w: &mut SimWorld) {
    let subject = w.subject();
    let replacements = replacement_initializations(w, &subject);
    let Some(evicted) = first_eviction(w, &subject) else {
        w.fail(format!("no pod on node {} was evicted", subject.node));
    };
    for (name, initialized) in replacements {
        match initialized {
            Some(at) if whole_second(at) <= evicted => {}
            other => w.fail(format!(
                "the first eviction on node {} was at {evicted}; replacement {name} initialized at {other:?}",
                subject.node
            )),
        }
    }
}

#[then("its replacement never initialized")]
async fn replacement_not_initialized(w: &mut SimWorld) {
    let subject = w.subject();
    let replacements = replacement_initializations(w, &subject);
    if let Some((name, at)) = replacements.iter().find(|(_, at)| at.is_some()) {
        w.fail(format!("replacement {name} initialized at {at:?}"));
    }
}

/// A spot warning marks its offering unavailable: the replacement is another instance type,
/// zone or capacity type.
#[then("its replacement is not the interrupted spot offering")]
async fn other_offering(w: &mut SimWorld) {
    let subject = w.subject();
    let launched = w.launched();
    let offering = |id: &str| {
        launched
            .iter()
            .find(|i| i.instance_id == id)
            .map(|i| (i.instance_type.clone(), i.zone.clone(), i.capacity_type))
    };
    let Some(interrupted) = offering(&subject.instance_id) else {
        w.fail(format!("instance {} was never seen", subject.instance_id));
    };
    let ids: Vec<Option<String>> = w
        .history()
        .replacements_of(&subject.claim)
        .into_iter()
        .map(|(_, c)| c.instance_id.clone())
        .collect();
    if ids.is_empty() {
        w.fail(format!("nothing replaced NodeClaim {}", subject.claim));
    }
    for id in ids {
        let replacement = id.as_deref().and_then(offering);
        if replacement.is_none() || replacement.as_ref() == Some(&interrupted) {
            w.fail(format!(
                "the replacement ({replacement:?}) is the interrupted offering {interrupted:?}"
            ));
        }
    }
}

/// The first eviction on the node came `seconds` after the interruption, give or take the
/// world's longest step (an idle world steps 10 s at a time). The interruption's time is its
/// message's, in whole seconds (EventBridge's format, [`whole_second`]): the controller's hold
/// runs from it.
#[then(expr = "eviction on that node begins {int} seconds after the interruption")]
async fn eviction_begins(w: &mut SimWorld, seconds: u64) {
    let subject = w.subject();
    let due = whole_second(subject.at) + SignedDuration::from_secs(seconds as i64);
    let latest = due + SignedDuration::try_from(IDLE_STEP).unwrap_or_default();
    let limit = left_of(w, &subject, Duration::from_secs(seconds) + IDLE_STEP);
    let node = subject.node.clone();
    w.wait_until(limit, move |s| {
        let evicting = s
            .pods
            .iter()
            .any(|p| p.node.as_deref() == Some(node.as_str()) && p.deleting);
        if evicting {
            Ok(())
        } else {
            Err(format!("no pod on node {node} is being evicted"))
        }
    })
    .await;
    match first_eviction(w, &subject) {
        Some(at) if at >= due && at <= latest => {}
        other => w.fail(format!(
            "the first eviction on node {} was at {other:?}, want between {due} and {latest}",
            subject.node
        )),
    }
}

/// Acted on at once: no eviction deadline was written and the drain never held for a replacement.
#[then("its NodeClaim never waited for a replacement")]
async fn never_waited(w: &mut SimWorld) {
    let subject = w.subject();
    let record = claim_record(w, &subject);
    if let Some(deadline) = record.eviction_deadline {
        w.fail(format!(
            "NodeClaim {} was given an eviction deadline {deadline}",
            subject.claim
        ));
    }
    if record.had_condition("Drained", "Unknown", Some("AwaitingReplacement")) {
        w.fail(format!(
            "NodeClaim {} waited for a replacement",
            subject.claim
        ));
    }
}
