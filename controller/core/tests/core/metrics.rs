//! Our metrics against upstream's table (`docs/metrics.md`): names, types and label sets.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use karpenter_core::metrics::Metrics;

/// One row of the committed table.
#[derive(Debug)]
struct Row {
    name: String,
    type_: String,
    labels: BTreeSet<String>,
    state: String,
}

fn table() -> Vec<Row> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/metrics.md");
    let text = std::fs::read_to_string(&path).expect("docs/metrics.md is committed");
    let start = text
        .find("<!-- table:start -->")
        .expect("table start marker");
    let end = text.find("<!-- table:end -->").expect("table end marker");
    text[start..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            Row {
                name: cells[0].trim_matches('`').to_string(),
                type_: cells[1].to_string(),
                labels: cells[2]
                    .split(',')
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect(),
                state: cells[3].to_string(),
            }
        })
        .collect()
}

/// What the encoding exports: by family name (counters with `_total`), its type and labels.
fn exported() -> BTreeMap<String, (String, BTreeSet<String>)> {
    let metrics = Metrics::new();
    metrics.touch_all();
    let text = metrics.encode();
    let mut families: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, type_) = rest.split_once(' ').expect("name and type");
            let name = if type_ == "counter" {
                format!("{name}_total")
            } else {
                name.to_string()
            };
            families.insert(name, (type_.to_string(), BTreeSet::new()));
        }
    }
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, labels)) = line.split_once('{') else {
            continue;
        };
        let family = families
            .keys()
            .find(|f| {
                series == f.as_str()
                    || ["_bucket", "_sum", "_count", "_created"]
                        .iter()
                        .any(|s| series == format!("{f}{s}"))
            })
            .cloned();
        let Some(family) = family else { continue };
        let labels = labels.split('}').next().unwrap_or_default();
        for pair in labels.split(',').filter(|p| !p.is_empty()) {
            let key = pair.split('=').next().unwrap_or_default().trim();
            if key != "le" {
                families
                    .get_mut(&family)
                    .expect("family")
                    .1
                    .insert(key.to_string());
            }
        }
    }
    families
}

/// Review H2: dashboards built on upstream's names and labels must find ours. The table is the
/// contract: exported rows must match exactly, missing rows must stay unexported (so the table
/// says what is true), and nothing is exported that the table does not name.
#[test]
fn every_exported_metric_has_upstreams_name_and_labels_as_the_committed_table_says() {
    let table = table();
    assert!(table.len() >= 30, "the table parsed: {table:?}");
    let exported = exported();
    let mut problems = Vec::new();
    for row in &table {
        let ours = exported.get(&row.name);
        match (row.state.as_str(), ours) {
            ("exported" | "ours", Some((type_, labels))) => {
                if *type_ != row.type_ {
                    problems.push(format!(
                        "{}: type {type_}, table says {}",
                        row.name, row.type_
                    ));
                }
                if *labels != row.labels {
                    problems.push(format!(
                        "{}: labels {labels:?}, table says {:?}",
                        row.name, row.labels
                    ));
                }
            }
            ("differs", Some((_, labels))) => {
                if *labels != row.labels {
                    problems.push(format!(
                        "{}: labels {labels:?}, table says {:?}",
                        row.name, row.labels
                    ));
                }
            }
            ("missing", Some(_)) => problems.push(format!(
                "{}: exported, but the table says missing",
                row.name
            )),
            ("missing", None) => {}
            (state, None) => {
                problems.push(format!("{}: not exported, table says {state}", row.name))
            }
            (state, Some(_)) => problems.push(format!("{}: unknown state {state}", row.name)),
        }
    }
    let named: BTreeSet<&str> = table.iter().map(|r| r.name.as_str()).collect();
    for name in exported.keys() {
        if !named.contains(name.as_str()) {
            problems.push(format!("{name}: exported but not in docs/metrics.md"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_provisioning_pass_records_created_claims_scheduling_time_and_cluster_state() {
    let metrics = Metrics::new();
    let created = serde_json::json!({"metadata": {"labels": {"karpenter.sh/nodepool": "default"}}});
    metrics.record_created("provisioning", &created);
    let text = metrics.encode();
    assert!(
        text.contains(
            "karpenter_nodeclaims_created_total{reason=\"provisioning\",nodepool=\"default\",min_values_relaxed=\"false\"} 1"
        ),
        "{text}"
    );
}
