//! `When` steps (and the `Given ... is running` forms that set a scene by doing the same):
//! workloads appear, scale and go; time passes; capacity and boots change mid-run.

use std::time::Duration;

use cucumber::gherkin::Step;
use cucumber::{given, when};
use karpenter_features::SimWorld;
use karpenter_features::manifests;
use karpenter_sim::workloads::Deployment;
use serde_json::Value;

use crate::params::{Capacity, Period};
use crate::setup::pools_of;

/// How long a `Given ... is running` waits for its pods: setting the scene must not be where a
/// scenario spends its patience, but it must not hang either.
const SCENE_SETTLES_WITHIN: Duration = Duration::from_secs(10 * 60);

/// Waits until every pod of `name` runs (used by the `is running` forms).
async fn settle(w: &mut SimWorld, name: &str) {
    let want = w.deployment(name).replicas;
    let name = name.to_string();
    w.wait_until(SCENE_SETTLES_WITHIN, move |s| {
        let running = s.pods_of(&name).filter(|p| p.running()).count();
        if running == want {
            Ok(())
        } else {
            Err(format!("{running} of {want} pods of {name} running"))
        }
    })
    .await;
    w.mark();
}

fn from_file(w: &SimWorld, name: &str, file: &str) -> Deployment {
    let documents = manifests::file_documents(file).unwrap_or_else(|e| w.fail(e));
    let document = manifests::find(&documents, "Deployment", name)
        .unwrap_or_else(|e| w.fail(format!("{file}: {e}")));
    Deployment::from_manifest(&document.value).unwrap_or_else(|e| w.fail(e))
}

#[when(expr = "the Deployment {string} from {string} is created")]
async fn deployment_from_file(w: &mut SimWorld, name: String, file: String) {
    let deployment = from_file(w, &name, &file);
    w.create_deployment(deployment).await;
}

#[given(expr = "the Deployment {string} from {string} is running")]
async fn deployment_from_file_running(w: &mut SimWorld, name: String, file: String) {
    deployment_from_file(w, name.clone(), file).await;
    settle(w, &name).await;
}

/// `the Deployment "web" with 3 replicas requesting 500m CPU [and 1Gi memory] is created
/// [with:]` — the docstring, if any, is YAML merged into the pod spec (a nodeSelector,
/// affinity, tolerations, topologySpreadConstraints, ...). With `is running` it also waits
/// until every pod runs.
#[given(
    regex = r#"^the Deployment "([^"]+)" with (\d+) replicas? requesting (\S+) CPU(?: and (\S+) memory)? is (created|running)(?: with:)?$"#
)]
#[when(
    regex = r#"^the Deployment "([^"]+)" with (\d+) replicas? requesting (\S+) CPU(?: and (\S+) memory)? is (created|running)(?: with:)?$"#
)]
async fn deployment_with_requests(
    w: &mut SimWorld,
    name: String,
    replicas: usize,
    cpu: String,
    memory: String,
    state: String,
    step: &Step,
) {
    let memory = (!memory.is_empty()).then_some(memory.as_str());
    let mut deployment = Deployment::with_requests(&name, replicas, &cpu, memory);
    if step.value.ends_with(" with:") {
        let text = step
            .docstring
            .as_deref()
            .unwrap_or_else(|| w.fail("`with:` needs a docstring of pod spec fields"));
        let fields: Value = manifests::documents(text)
            .unwrap_or_else(|e| w.fail(e))
            .into_iter()
            .next()
            .map(|d| d.value)
            .unwrap_or_else(|| w.fail("the docstring is empty"));
        deployment.merge_pod_spec(&fields);
    }
    w.create_deployment(deployment).await;
    if state == "running" {
        settle(w, &name).await;
    }
}

/// A NodePool (with the EC2NodeClass it names, if the file holds it) added to the running
/// cluster.
#[when(expr = "the NodePool {string} from {string} is applied")]
async fn nodepool_applied(w: &mut SimWorld, name: String, file: String) {
    let documents = manifests::file_documents(&file).unwrap_or_else(|e| w.fail(e));
    let pool = manifests::find(&documents, "NodePool", &name)
        .unwrap_or_else(|e| w.fail(format!("{file}: {e}")))
        .value
        .clone();
    w.apply(pool).await;
}

/// Any manifest (NodePool, PodDisruptionBudget, Deployment, ...) applied to the running cluster.
#[when("this manifest is applied:")]
async fn manifest_applied(w: &mut SimWorld, step: &Step) {
    let text = step.docstring.clone().unwrap_or_default();
    let documents = manifests::documents(&text).unwrap_or_else(|e| w.fail(e));
    for document in documents {
        w.apply(document.value).await;
    }
}

#[when(expr = "the Deployment {string} is scaled to {int} replica(s)")]
async fn scale(w: &mut SimWorld, name: String, replicas: usize) {
    w.scale(&name, replicas).await;
}

#[when(expr = "the Deployment {string} is deleted")]
async fn delete(w: &mut SimWorld, name: String) {
    w.delete_deployment(&name).await;
}

#[when(expr = "{period} pass(es)")]
async fn time_passes(w: &mut SimWorld, period: Period) {
    w.mark();
    w.run_for(period.0).await;
}

#[when(expr = "{capacity} capacity for {string} runs out in every zone")]
async fn capacity_runs_out(w: &mut SimWorld, capacity: Capacity, instance_type: String) {
    for pool in pools_of(w, &instance_type) {
        if pool.capacity_type == capacity.0 {
            w.set_pool_capacity(pool, 0).await;
        }
    }
}

/// Capacity comes back: every pool of the type can launch 100 instances again.
#[when(expr = "capacity for {string} returns in every zone")]
async fn capacity_returns(w: &mut SimWorld, instance_type: String) {
    for pool in pools_of(w, &instance_type) {
        w.set_pool_capacity(pool, 100).await;
    }
}

/// Instances launched from now on boot in fakecloud's normal 30-60 s again.
#[when("instances boot normally again")]
async fn boots_recover(w: &mut SimWorld) {
    w.mark();
    let world = w.world().await;
    world.cloud().configure(|c| {
        c.boot.never_boot_fraction = 0.0;
        c.boot.slow_boot_fraction = 0.0;
    });
}
