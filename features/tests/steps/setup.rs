//! `Given` steps: what the cluster starts from (manifests, the seed) and how the cloud behaves
//! (capacity, boots, faults). They only collect; the world is built by the first step that
//! needs it.

use cucumber::gherkin::Step;
use cucumber::given;
use fakecloud::Pool;
use karpenter_core::catalog::Catalog;
use karpenter_features::SimWorld;
use karpenter_features::manifests::{self, Document};

use crate::params::Capacity;

#[given(expr = "the seed {int}")]
fn the_seed(w: &mut SimWorld, seed: u64) {
    w.setup();
    w.seed = seed;
}

fn documents_of(w: &SimWorld, file: &str) -> Vec<Document> {
    manifests::file_documents(file).unwrap_or_else(|e| w.fail(e))
}

/// The NodePool, and the EC2NodeClass it names when the same file holds it.
#[given(expr = "the NodePool {string} from {string}")]
fn nodepool_from_file(w: &mut SimWorld, name: String, file: String) {
    let documents = documents_of(w, &file);
    let pool = manifests::find(&documents, "NodePool", &name)
        .unwrap_or_else(|e| w.fail(format!("{file}: {e}")))
        .value
        .clone();
    let class_name = pool["spec"]["template"]["spec"]["nodeClassRef"]["name"]
        .as_str()
        .unwrap_or_default();
    let class = manifests::find(&documents, "EC2NodeClass", class_name)
        .ok()
        .map(|d| d.value.clone());
    w.add_documents(std::iter::once(pool).chain(class));
}

#[given(expr = "the EC2NodeClass {string} from {string}")]
fn nodeclass_from_file(w: &mut SimWorld, name: String, file: String) {
    let documents = documents_of(w, &file);
    let class = manifests::find(&documents, "EC2NodeClass", &name)
        .unwrap_or_else(|e| w.fail(format!("{file}: {e}")))
        .value
        .clone();
    w.add_documents([class]);
}

/// Every cluster object of a file (its workloads are created by `When` steps).
#[given(expr = "the manifests from {string}")]
fn manifests_from_file(w: &mut SimWorld, file: String) {
    let documents = documents_of(w, &file);
    w.add_documents(
        documents
            .into_iter()
            .filter(|d| manifests::is_cluster_object(&d.kind))
            .map(|d| d.value),
    );
}

/// Inline cluster objects: `Given the NodePool "x":` (or `the NodePools:`, `the manifests:`)
/// followed by a YAML docstring.
#[given(regex = r#"^the (?:NodePools?(?: "([^"]+)")?|manifests):$"#)]
fn inline_manifests(w: &mut SimWorld, name: String, step: &Step) {
    let text = step.docstring.clone().unwrap_or_default();
    let documents = manifests::documents(&text).unwrap_or_else(|e| w.fail(e));
    if let Some(other) = documents
        .iter()
        .find(|d| !manifests::is_cluster_object(&d.kind))
    {
        w.fail(format!(
            "{}/{} is a workload: create it with a When step",
            other.kind, other.name
        ));
    }
    if !name.is_empty() && manifests::find(&documents, "NodePool", &name).is_err() {
        w.fail(format!("the docstring holds no NodePool {name:?}"));
    }
    w.add_documents(documents.into_iter().map(|d| d.value));
}

/// The offerings of `instance_type` in the catalog, as fakecloud pools.
pub fn pools_of(w: &SimWorld, instance_type: &str) -> Vec<Pool> {
    let catalog = Catalog::builtin_ref();
    let Some(it) = catalog.get(instance_type) else {
        w.fail(format!(
            "the catalog has no instance type {instance_type:?}"
        ));
    };
    it.offerings
        .iter()
        .map(|o| Pool::new(instance_type, &o.zone, o.capacity_type))
        .collect()
}

fn exhaust(w: &mut SimWorld, pools: Vec<Pool>) {
    if pools.is_empty() {
        w.fail("no such offering to exhaust");
    }
    w.setup()
        .pool_capacity
        .extend(pools.into_iter().map(|p| (p, 0)));
}

#[given(expr = "{capacity} capacity for {string} is exhausted in every zone")]
fn capacity_type_exhausted(w: &mut SimWorld, capacity: Capacity, instance_type: String) {
    let pools = pools_of(w, &instance_type)
        .into_iter()
        .filter(|p| p.capacity_type == capacity.0)
        .collect();
    exhaust(w, pools);
}

#[given(expr = "all capacity for {string} is exhausted in every zone")]
fn all_capacity_exhausted(w: &mut SimWorld, instance_type: String) {
    let pools = pools_of(w, &instance_type);
    exhaust(w, pools);
}

#[given(expr = "all capacity for {string} is exhausted in {string}")]
fn zone_exhausted(w: &mut SimWorld, instance_type: String, zone: String) {
    let pools = pools_of(w, &instance_type)
        .into_iter()
        .filter(|p| p.zone == zone)
        .collect();
    exhaust(w, pools);
}

/// Every (instance type, zone, capacity type) pool can launch only this many instances.
#[given(expr = "every capacity pool holds only {int} instance(s)")]
fn pool_capacity(w: &mut SimWorld, units: u32) {
    w.knobs().pool_capacity = Some(units);
}

#[given("no instance boots")]
fn no_instance_boots(w: &mut SimWorld) {
    w.knobs().never_boot_fraction = Some(1.0);
}

/// Bootstraps take up to fakecloud's slow-boot maximum (10 minutes) instead of 30-60 s.
#[given("every instance boots slowly")]
fn every_instance_boots_slowly(w: &mut SimWorld) {
    w.knobs().slow_boot_fraction = Some(1.0);
}

#[given(expr = "EC2 throttles {int}% of calls")]
fn ec2_throttles(w: &mut SimWorld, percent: u32) {
    w.knobs().ec2_throttle_rate = Some(f64::from(percent) / 100.0);
}

#[given(expr = "EC2 fails {int}% of calls with a server error")]
fn ec2_server_errors(w: &mut SimWorld, percent: u32) {
    w.knobs().ec2_unavailable_rate = Some(f64::from(percent) / 100.0);
}

/// `DescribeInstances` does not show a new instance for this long (EC2's eventual consistency).
#[given(expr = "EC2 shows new instances only after {int} seconds")]
fn ec2_lags(w: &mut SimWorld, seconds: u64) {
    w.knobs().eventual_consistency_lag_ms = Some(seconds * 1000);
}

#[given(expr = "the API server fails {int}% of calls")]
fn api_server_errors(w: &mut SimWorld, percent: u32) {
    w.knobs().api_unavailable_rate = Some(f64::from(percent) / 100.0);
}

#[given(expr = "{int}% of API writes conflict")]
fn api_conflicts(w: &mut SimWorld, percent: u32) {
    w.knobs().api_conflict_rate = Some(f64::from(percent) / 100.0);
}
