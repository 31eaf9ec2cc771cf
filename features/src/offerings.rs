//! "No more than needed", made checkable per node: the cheapest offering (instance type, zone,
//! capacity type) the node's NodePool allows that holds the pods the node runs. A node that
//! costs more per hour than that is oversized or overpriced for what it carries. (How many
//! nodes there should be is a separate question the scenarios ask with node counts.)
//!
//! Written from the NodePool API's meaning (requirements as node-selector terms over the
//! instance type's labels plus its zone and capacity type), not with the controller's
//! `scheduling` module: it is a check on that code, so it must not share its mistakes.

use karpenter_core::catalog::Catalog;
use karpenter_core::resources::Resources;
use serde_json::Value;

/// One offering: where and how an instance type can be bought, at what hourly price.
#[derive(Clone, Debug, PartialEq)]
pub struct Offering {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub price: f64,
}

/// Whether the requirement `{key, operator, values}` admits a node with `labels`.
fn admits(requirement: &Value, labels: &dyn Fn(&str) -> Option<String>) -> bool {
    let key = requirement["key"].as_str().unwrap_or_default();
    let values: Vec<&str> = requirement["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let value = labels(key);
    let number = |v: &str| v.parse::<i64>().ok();
    let bound = values.first().and_then(|v| number(v));
    let compare = |f: fn(i64, i64) -> bool| {
        value
            .as_deref()
            .and_then(number)
            .zip(bound)
            .is_some_and(|(v, b)| f(v, b))
    };
    match requirement["operator"].as_str().unwrap_or_default() {
        "In" => value.is_some_and(|v| values.contains(&v.as_str())),
        "NotIn" => value.is_none_or(|v| !values.contains(&v.as_str())),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => compare(|v, b| v > b),
        "Lt" => compare(|v, b| v < b),
        "Gte" => compare(|v, b| v >= b),
        "Lte" => compare(|v, b| v <= b),
        _ => false,
    }
}

/// The cheapest offering `nodepool` allows whose allocatable holds all of `pods` at once, among
/// offerings `available` says can launch now. `None` if no single node could.
pub fn cheapest_node_for(
    catalog: &Catalog,
    nodepool: &Value,
    pods: &[Resources],
    available: &dyn Fn(&Offering) -> bool,
) -> Option<Offering> {
    let requirements: Vec<&Value> = nodepool["spec"]["template"]["spec"]["requirements"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let mut total = pods.iter().fold(Resources::new(), |acc, p| acc.plus(p));
    total.add_one("pods", pods.len() as i64);
    let mut best: Option<Offering> = None;
    for it in &catalog.instance_types {
        if !total.fits_in(&it.allocatable) {
            continue;
        }
        for offering in it.offerings.iter().filter(|o| o.available) {
            let labels = |key: &str| match key {
                "topology.kubernetes.io/zone" => Some(offering.zone.clone()),
                "karpenter.sh/capacity-type" => Some(offering.capacity_type.label().to_string()),
                _ => it.labels.get(key).cloned(),
            };
            if !requirements.iter().all(|r| admits(r, &labels)) {
                continue;
            }
            let candidate = Offering {
                instance_type: it.name.clone(),
                zone: offering.zone.clone(),
                capacity_type: offering.capacity_type.label().to_string(),
                price: offering.price,
            };
            if available(&candidate) && best.as_ref().is_none_or(|b| candidate.price < b.price) {
                best = Some(candidate);
            }
        }
    }
    best
}
