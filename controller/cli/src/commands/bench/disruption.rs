//! `karpenter bench-disruption --nodes N --pods M`: one full disruption pass (every candidate
//! considered) over a cluster of N busy m5.2xlarge nodes holding M pods, none of which can be
//! consolidated — the worst case, where every method tries every node. Printed as one JSON
//! object for `cargo xtask bench`.

use std::process::ExitCode;

use karpenter_core::catalog::Catalog;
use karpenter_core::disruption::{Cluster, ClusterView, Exclusions, Options, decide};
use serde_json::json;

use super::{peak_rss_bytes, timed};

fn cluster(nodes: usize, pods: usize) -> Cluster {
    let catalog = Catalog::builtin_ref();
    let it = catalog
        .get("m5.2xlarge")
        .expect("m5.2xlarge is in the built-in catalog");
    let alloc = serde_json::to_value(it.allocatable.to_list()).expect("allocatable");
    let pool = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "requirements": [
                {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
            ],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}},
            "disruption": {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}}
    });
    let mut out = Cluster {
        pools: vec![serde_json::from_value(pool).expect("pool")],
        ..Default::default()
    };
    let per_node = pods.div_ceil(nodes.max(1));
    // Each node is filled to 7.5 of its 7.9 allocatable vCPUs: no other node has room for one
    // more pod, and no m5 type holds the pods of n nodes for less than n m5.2xlarge cost.
    let cpu = format!("{}m", 7500 / per_node.max(1));
    for n in 0..nodes {
        let name = format!("node-{n:05}");
        let zone = ["us-west-2a", "us-west-2b", "us-west-2c"][n % 3];
        let labels = json!({
            "karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.2xlarge",
            "topology.kubernetes.io/zone": zone, "karpenter.sh/capacity-type": "on-demand",
            "karpenter.sh/initialized": "true", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
            "karpenter.k8s.aws/instance-family": "m5", "kubernetes.io/hostname": name,
        });
        let provider = format!("aws:///{zone}/i-{n:017x}");
        let node = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"providerID": provider},
            "status": {"capacity": alloc, "allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]}});
        let claim = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": format!("claim-{n:05}"), "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
            "status": {"nodeName": name, "providerID": provider}});
        out.nodes.push(serde_json::from_value(node).expect("node"));
        out.claims
            .push(serde_json::from_value(claim).expect("claim"));
        for p in 0..per_node {
            if out.pods.len() == pods {
                break;
            }
            let pod = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("app-{n:05}-{p}"), "namespace": "default", "labels": {"app": format!("app-{}", p % 10)}},
                "spec": {"nodeName": name, "containers": [{"name": "app", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
                "status": {"phase": "Running"}});
            out.pods.push(serde_json::from_value(pod).expect("pod"));
        }
    }
    out
}

/// Runs `runs` passes; reports the median.
pub fn run(nodes: usize, pods: usize, runs: usize) -> ExitCode {
    let cluster = cluster(nodes, pods);
    let catalog = Catalog::builtin_ref();
    let now: jiff::Timestamp = "2026-01-01T12:00:00Z".parse().expect("timestamp");
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..runs.max(1) {
        let (elapsed, decision) = timed(|| {
            let view = ClusterView::from_cluster(now, &cluster, catalog);
            decide(&view, catalog, &Options::default(), Exclusions::default())
        });
        times.push(elapsed);
        last = Some(decision);
    }
    times.sort();
    let median = times[times.len() / 2].as_secs_f64();
    let decision = last.expect("at least one run");
    let report = json!({
        "nodes": nodes,
        "pods": cluster.pods.len(),
        "secondsPerPass": median,
        "command": decision.command.is_some(),
        "blocked": decision.blocked.len(),
        "peakRssBytes": peak_rss_bytes(),
        "runs": times.len(),
    });
    println!("{report}");
    // The worst case is the one measured: every node considered, none disruptable.
    if decision.command.is_none() && decision.blocked.len() == nodes {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "expected no command and every node explained, got {:?}",
            decision.command
        );
        ExitCode::FAILURE
    }
}
