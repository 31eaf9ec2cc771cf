//! `karpenter plan -f FILE... [--catalog FILE] [-o json|table] [--disrupt [--now RFC3339]]
//! [--show-launch --cluster-name N --cluster-endpoint URL --cluster-ca-bundle B64
//! [--cluster-cidr CIDR] [--cluster-dns IP]]`: a dry run of provisioning (and, with `--disrupt`,
//! of disruption: `disrupt.rs`; with `--show-launch`, of the launch: the launch templates each
//! NodeClaim would get, user data included).
//!
//! Reads manifests (NodePools, EC2NodeClasses, workloads, Nodes, volumes, ...), runs the same
//! scheduling simulation the controller runs, and prints the NodeClaims Karpenter would create,
//! the pods existing nodes would take, and the pods nothing can run. Turning documents into a
//! scheduling input is `karpenter_core::plan`'s; this file reads files and renders.
//!
//! Exit codes: 0 a plan was made (unschedulable pods are part of a plan, not a failure), 2 the
//! input (a manifest or the catalog) cannot be read.

use std::cmp::Ordering;
use std::io::{Read, Write};
use std::process::ExitCode;

use karpenter_core::api::Operator;
use karpenter_core::api::labels::{CAPACITY_TYPE_LABEL, ZONE_LABEL};
use karpenter_core::catalog::Catalog;
use karpenter_core::nodeclass::cluster::ClusterInfo;
use karpenter_core::plan::{Cluster, Document, documents, launch};
use karpenter_core::scheduling::{Options, PlannedClaim, Results};
use serde_json::{Value, json};

/// Exit code when some input could not be read, parsed or validated.
const EXIT_UNREADABLE: u8 = 2;

/// How the plan is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One JSON object, for scripts and diffs.
    Json,
    /// A summary for people.
    Table,
}

/// `--disrupt` and `--now`.
#[derive(Clone, Debug, Default)]
pub struct Disrupt {
    pub enabled: bool,
    /// RFC 3339; the wall clock when absent.
    pub now: Option<String>,
}

/// `--show-launch` and the cluster it launches into.
#[derive(Clone, Debug, Default)]
pub struct ShowLaunch {
    pub name: String,
    pub endpoint: String,
    pub ca_bundle: String,
    pub cidr: Option<String>,
    pub dns: Option<String>,
}

pub fn run(
    files: &[String],
    catalog_file: Option<&str>,
    format: Format,
    disrupt: Disrupt,
    show_launch: Option<ShowLaunch>,
) -> ExitCode {
    let info = match show_launch
        .map(|s| {
            ClusterInfo::new(
                &s.name,
                &s.endpoint,
                &s.ca_bundle,
                s.cidr.as_deref(),
                s.dns.as_deref(),
            )
        })
        .transpose()
    {
        Ok(info) => info,
        Err(err) => {
            eprintln!("error: --show-launch: {err}");
            return ExitCode::from(EXIT_UNREADABLE);
        }
    };
    let now = match disrupt.now.as_deref().map(str::parse::<jiff::Timestamp>) {
        // The binary's wall clock is the right "now" for a dry run the user starts by hand; the
        // ban on wall-clock reads protects seeded replay, which `plan` is not part of.
        #[allow(clippy::disallowed_methods)]
        None => jiff::Timestamp::now(),
        Some(Ok(now)) => now,
        Some(Err(err)) => {
            eprintln!("error: --now: not an RFC 3339 time: {err}");
            return ExitCode::from(EXIT_UNREADABLE);
        }
    };
    let Some(documents) = read_documents(files) else {
        return ExitCode::from(EXIT_UNREADABLE);
    };
    let from_file;
    let catalog = match catalog_file {
        None => Catalog::builtin_ref(),
        Some(file) => match read(file)
            .map_err(|e| e.to_string())
            .and_then(|text| Catalog::from_text(&text).map_err(|e| e.to_string()))
        {
            Ok(catalog) => {
                from_file = catalog;
                &from_file
            }
            Err(err) => {
                eprintln!("error: {file}: {err}");
                return ExitCode::from(EXIT_UNREADABLE);
            }
        },
    };
    let cluster = match Cluster::from_documents(&documents) {
        Ok(cluster) => cluster,
        Err(errors) => {
            for err in &errors.0 {
                eprintln!("error: {err}");
            }
            return ExitCode::from(EXIT_UNREADABLE);
        }
    };
    for note in &cluster.notes {
        eprintln!("note: {note}");
    }
    let results = cluster.plan(catalog, Options::default());
    let disruption = disrupt
        .enabled
        .then(|| super::disrupt::decide(&documents, &cluster, catalog, now));
    let text = match format {
        // `{:#}` is serde_json's infallible pretty printer for a `Value`.
        Format::Json => {
            let mut plan = to_json(&results, catalog);
            if let Some(info) = &info {
                add_launch_templates(&mut plan, &results, &cluster, catalog, info);
            }
            if let Some(outcome) = &disruption {
                plan["disruption"] = super::disrupt::to_json(outcome);
            }
            format!("{plan:#}\n")
        }
        Format::Table => {
            let mut text = table(&results);
            if let Some(info) = &info {
                text.push_str(&launch_table(&results, &cluster, catalog, info));
            }
            if let Some(outcome) = &disruption {
                text.push_str(&super::disrupt::table(outcome, now));
            }
            text
        }
    };
    // A closed pipe (`| head`) is not an error of the plan.
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    ExitCode::SUCCESS
}

/// Each planned NodeClaim's `launchTemplates` (in `nodeClaims` order).
fn add_launch_templates(
    plan: &mut Value,
    results: &Results,
    cluster: &Cluster,
    catalog: &Catalog,
    info: &ClusterInfo,
) {
    let Some(claims) = plan["nodeClaims"].as_array_mut() else {
        return;
    };
    for (json, claim) in claims.iter_mut().zip(&results.new_claims) {
        json["launchTemplates"] =
            Value::Array(launch::launch_templates(cluster, catalog, info, claim));
    }
}

/// The user data of each planned NodeClaim's launch templates, for people.
fn launch_table(
    results: &Results,
    cluster: &Cluster,
    catalog: &Catalog,
    info: &ClusterInfo,
) -> String {
    let mut out = String::new();
    for (index, claim) in results.new_claims.iter().enumerate() {
        for template in launch::launch_templates(cluster, catalog, info, claim) {
            let field = |key: &str| template[key].as_str().unwrap_or_default().to_string();
            out.push_str(&format!(
                "\nNodeClaim {} ({}), {} {}:\n",
                index + 1,
                claim.node_pool,
                template["amiFamily"].as_str().unwrap_or("?"),
                field("architecture"),
            ));
            if let Some(err) = template["error"].as_str() {
                out.push_str(&format!("  error: {err}\n"));
                continue;
            }
            out.push_str(&format!(
                "  launch template {}, image {}, instance profile {}\n  user data:\n",
                field("name"),
                field("imageId"),
                field("instanceProfile"),
            ));
            for line in field("userData").lines() {
                out.push_str(&format!("    {line}\n"));
            }
        }
    }
    out
}

/// Every document of every file, or `None` after reporting each file that cannot be read.
fn read_documents(files: &[String]) -> Option<Vec<Document>> {
    let mut out = Vec::new();
    let mut failed = false;
    for file in files {
        let text = match read(file) {
            Ok(text) => text,
            Err(err) => {
                eprintln!("error: {file}: {err}");
                failed = true;
                continue;
            }
        };
        match documents(file, &text) {
            Ok(docs) => out.extend(docs),
            Err(err) => {
                let at = match (err.line, err.column) {
                    (Some(line), Some(column)) => format!(":{line}:{column}"),
                    _ => String::new(),
                };
                eprintln!("error: {file}{at}: YAML syntax error: {}", err.message);
                failed = true;
            }
        }
    }
    (!failed).then_some(out)
}

fn read(file: &str) -> std::io::Result<String> {
    if file == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        Ok(text)
    } else {
        std::fs::read_to_string(file)
    }
}

/// Prices to the micro-dollar, so sums print without float noise (`0.30000000000000004`).
fn dollars(price: f64) -> f64 {
    (price * 1e6).round() / 1e6
}

/// Sum of the claims' hourly prices.
fn total_price(results: &Results) -> f64 {
    // A fold from +0.0: `sum()` of nothing is -0.0, which prints as `-0.0000`.
    dollars(
        results
            .new_claims
            .iter()
            .fold(0.0, |total, c| total + c.price),
    )
}

/// Pod keys in natural order: `inflate-2` before `inflate-10`.
fn sorted_pods(pods: &[String]) -> Vec<String> {
    let mut out = pods.to_vec();
    out.sort_by(|a, b| natural(a, b));
    out
}

fn natural(a: &str, b: &str) -> Ordering {
    let split = |s: &str| {
        let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (stem, number) = s.split_at(s.len() - digits);
        (stem.to_string(), number.parse::<u128>().ok())
    };
    split(a).cmp(&split(b)).then_with(|| a.cmp(b))
}

fn to_json(results: &Results, catalog: &Catalog) -> Value {
    let claims: Vec<Value> = results
        .new_claims
        .iter()
        .map(|claim| {
            let requests: serde_json::Map<String, Value> = claim
                .requests
                .to_list()
                .into_iter()
                .map(|(name, quantity)| (name, Value::String(quantity.0)))
                .collect();
            json!({
                "nodePool": claim.node_pool,
                "instanceTypes": claim.instance_types.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
                "requirements": claim.nodeclaim_requirements(),
                "pods": sorted_pods(&claim.pods),
                "requests": requests,
                "pricePerHour": dollars(claim.price),
                "cheapestOffering": cheapest_offering(claim, catalog),
            })
        })
        .collect();
    let mut nodes: Vec<_> = results.existing_nodes.iter().collect();
    nodes.sort_by(|a, b| natural(&a.node, &b.node));
    let mut unschedulable: Vec<_> = results.unschedulable.iter().collect();
    unschedulable.sort_by(|a, b| natural(&a.pod, &b.pod));
    json!({
        "nodeClaims": claims,
        "existingNodes": nodes
            .iter()
            .map(|n| json!({"name": n.node, "pods": sorted_pods(&n.pods)}))
            .collect::<Vec<_>>(),
        "unschedulable": unschedulable
            .iter()
            .map(|u| json!({"pod": u.pod, "reason": u.reason}))
            .collect::<Vec<_>>(),
        "total": {
            "nodeClaims": results.new_claims.len(),
            "pricePerHour": total_price(results),
        },
    })
}

/// The offering `pricePerHour` is for: the cheapest instance type's cheapest offering the claim's
/// zone and capacity-type requirements allow.
fn cheapest_offering(claim: &PlannedClaim, catalog: &Catalog) -> Value {
    let requirements = claim.nodeclaim_requirements();
    let allows = |key: &str, value: &str| {
        requirements
            .iter()
            .filter(|r| r.key == key)
            .all(|r| match r.operator {
                Operator::In => r.values.iter().any(|v| v == value),
                Operator::NotIn => !r.values.iter().any(|v| v == value),
                _ => true,
            })
    };
    let offering = claim
        .instance_types
        .first()
        .and_then(|name| catalog.get(name))
        .and_then(|it| {
            it.offerings
                .iter()
                .filter(|o| o.available)
                .filter(|o| allows(ZONE_LABEL, &o.zone))
                .filter(|o| allows(CAPACITY_TYPE_LABEL, o.capacity_type.label()))
                .min_by(|a, b| a.price.total_cmp(&b.price))
                .map(|o| (it.name.as_str(), o))
        });
    match offering {
        Some((name, o)) => json!({
            "instanceType": name,
            "zone": o.zone,
            "capacityType": o.capacity_type.label(),
        }),
        None => Value::Null,
    }
}

/// The value(s) a claim's requirement on `key` allows, readably: `us-west-2a`, `spot,on-demand`,
/// or `any`.
fn pinned(claim: &PlannedClaim, key: &str) -> String {
    claim
        .requirements
        .iter()
        .find(|r| r.key == key && r.operator == Operator::In)
        .map_or_else(|| "any".to_string(), |r| r.values.join(","))
}

fn table(results: &Results) -> String {
    let mut rows: Vec<[String; 7]> = vec![[
        "NODEPOOL".to_string(),
        "INSTANCE TYPE".to_string(),
        "OPTIONS".to_string(),
        "ZONE".to_string(),
        "CAPACITY TYPE".to_string(),
        "PODS".to_string(),
        "$/HOUR".to_string(),
    ]];
    for claim in &results.new_claims {
        rows.push([
            claim.node_pool.clone(),
            claim
                .instance_types
                .first()
                .map(|t| t.to_string())
                .unwrap_or_default(),
            claim.instance_types.len().to_string(),
            pinned(claim, ZONE_LABEL),
            pinned(claim, CAPACITY_TYPE_LABEL),
            claim.pods.len().to_string(),
            format!("{:.4}", dollars(claim.price)),
        ]);
    }
    let mut out = String::new();
    if results.new_claims.is_empty() {
        out.push_str("no new NodeClaims\n");
    } else {
        let widths: Vec<usize> = (0..7)
            .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
            .collect();
        for row in &rows {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                // Numbers align right, names left.
                .map(|(c, (cell, w))| match c {
                    2 | 5 | 6 => format!("{cell:>w$}"),
                    _ => format!("{cell:<w$}"),
                })
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
    }
    let pods: usize = results.new_claims.iter().map(|c| c.pods.len()).sum();
    out.push_str(&format!(
        "total: {} new node{}, {pods} pod{}, ${:.4}/hour (cheapest instance type of each)\n",
        results.new_claims.len(),
        if results.new_claims.len() == 1 {
            ""
        } else {
            "s"
        },
        if pods == 1 { "" } else { "s" },
        total_price(results),
    ));
    let mut nodes: Vec<_> = results
        .existing_nodes
        .iter()
        .filter(|n| !n.pods.is_empty())
        .collect();
    nodes.sort_by(|a, b| natural(&a.node, &b.node));
    if !nodes.is_empty() {
        out.push_str("\nexisting nodes:\n");
        for node in nodes {
            out.push_str(&format!(
                "  {}: {}\n",
                node.node,
                sorted_pods(&node.pods).join(", ")
            ));
        }
    }
    let mut unschedulable: Vec<_> = results.unschedulable.iter().collect();
    unschedulable.sort_by(|a, b| natural(&a.pod, &b.pod));
    if !unschedulable.is_empty() {
        out.push_str("\nunschedulable:\n");
        for u in unschedulable {
            out.push_str(&format!("  {}: {}\n", u.pod, u.reason));
        }
    }
    out
}
