//! `karpenter plan --disrupt`: what successive disruption passes would do to the cluster the
//! manifests describe, now (or at `--now`), decided by the controller's own engine
//! (`karpenter_core::disruption::plan_all`); this file only renders it.

use karpenter_core::catalog::Catalog;
use karpenter_core::disruption::{self, Command};
use karpenter_core::plan::{Cluster, Document, disruption_view};
use serde_json::{Value, json};

/// The commands in order and every other managed node's reason.
pub struct Outcome {
    pub commands: Vec<Command>,
    pub blocked: Vec<(String, String)>,
}

/// Runs the engine over the manifests at `now`.
pub fn decide(
    documents: &[Document],
    cluster: &Cluster,
    catalog: &Catalog,
    now: jiff::Timestamp,
) -> Outcome {
    let view = disruption_view(documents, cluster, catalog, now);
    let (commands, blocked) = disruption::plan_all(&view, catalog, &disruption::Options::default());
    Outcome {
        commands,
        blocked: blocked.into_iter().collect(),
    }
}

fn dollars(price: f64) -> f64 {
    (price * 1e6).round() / 1e6
}

/// The `"disruption"` object of the JSON plan.
pub fn to_json(outcome: &Outcome) -> Value {
    let commands: Vec<Value> = outcome
        .commands
        .iter()
        .map(|c| {
            json!({
                "method": c.method.as_str(),
                "nodes": c.node_names(),
                "replacements": c.replacements.iter().map(|r| json!({
                    "instanceTypes": r.planned.instance_types.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
                    "capacityType": r.capacity_type,
                    "zones": r.zones,
                })).collect::<Vec<_>>(),
                "savingsPerHour": dollars(c.savings_per_hour),
            })
        })
        .collect();
    json!({
        "commands": commands,
        "blocked": outcome
            .blocked
            .iter()
            .map(|(node, reason)| json!({"node": node, "reason": reason}))
            .collect::<Vec<_>>(),
    })
}

fn list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The same in prose, for the table output.
pub fn table(outcome: &Outcome, now: jiff::Timestamp) -> String {
    let mut out = format!("\ndisruption at {now}:\n");
    if outcome.commands.is_empty() {
        out.push_str("  nothing would be disrupted\n");
    }
    for (i, c) in outcome.commands.iter().enumerate() {
        let names = c.node_names();
        let noun = if names.len() == 1 { "node" } else { "nodes" };
        let action = match c.replacements.as_slice() {
            [] => format!("delete {noun} {}", list(&names)),
            replacements => {
                let news: Vec<String> = replacements
                    .iter()
                    .map(|r| {
                        let types = &r.planned.instance_types;
                        let first = types.first().map(|t| t.to_string()).unwrap_or_default();
                        let more = match types.len() {
                            0 | 1 => String::new(),
                            n => format!(" or {} other types", n - 1),
                        };
                        let zones = if r.zones.is_empty() {
                            "any zone".to_string()
                        } else {
                            r.zones.join(",")
                        };
                        format!("{first}{more}, {}, in {zones}", r.capacity_type)
                    })
                    .collect();
                format!(
                    "replace {noun} {} with {} new node{} ({})",
                    list(&names),
                    replacements.len(),
                    if replacements.len() == 1 { "" } else { "s" },
                    news.join("; ")
                )
            }
        };
        out.push_str(&format!(
            "  {}. {}: {action}, saving ${:.4}/hour\n",
            i + 1,
            c.method.as_str(),
            dollars(c.savings_per_hour)
        ));
    }
    if !outcome.blocked.is_empty() {
        out.push_str("  kept:\n");
        for (node, reason) in &outcome.blocked {
            out.push_str(&format!("    {node}: {reason}\n"));
        }
    }
    out
}
