//! Whole-world runs: determinism, and the scenarios the project promises (a burst converges
//! within the batch window plus boot time, capacity errors fall back, never-booting instances
//! are replaced without leaks).

use std::time::Duration;

use karpenter_sim::report::Report;
use karpenter_sim::scenario::Scenario;
use karpenter_sim::world::World;

const POOL: &str = r#"
manifests: |
  apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {name: default}
  spec:
    template:
      spec:
        requirements:
          - {key: kubernetes.io/arch, operator: In, values: [amd64]}
          - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
          - {key: node.kubernetes.io/instance-type, operator: In, values: [TYPES]}
        nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
    limits: {cpu: 2000}
  ---
  apiVersion: karpenter.k8s.aws/v1
  kind: EC2NodeClass
  metadata: {name: default}
  spec:
    role: KarpenterNodeRole-sim
    amiSelectorTerms: [{alias: al2023@latest}]
    subnetSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
    securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
"#;

fn scenario(types: &str, rest: &str) -> Scenario {
    let text = format!(
        "name: test\nduration: 30m\nstep: 1s\n{}\n{rest}",
        POOL.replace("TYPES", types)
    );
    Scenario::parse("test", &text).expect("test scenario parses")
}

fn run(seed: u64, scenario: Scenario, duration: Duration) -> Report {
    futures::executor::block_on(async {
        let mut world = World::new(seed, scenario).await.expect("world builds");
        world
            .run(Some(duration), &mut |_, _| {})
            .await
            .expect("world runs")
    })
}

#[test]
fn the_same_seed_replays_bit_for_bit_and_another_seed_differs() {
    let default = || Scenario::load("default").expect("built-in");
    let a = run(7, default(), Duration::from_secs(15 * 60));
    let b = run(7, default(), Duration::from_secs(15 * 60));
    assert_eq!(a, b, "two runs of one seed must be identical");
    let c = run(8, default(), Duration::from_secs(15 * 60));
    assert_ne!(
        a.event_log_sha256, c.event_log_sha256,
        "another seed gives another log"
    );
    assert!(a.passed(), "{:?}", a.invariants);
}

#[test]
fn a_burst_of_500_pods_runs_within_the_batch_window_plus_boot_time() {
    let s = scenario(
        "c6i.2xlarge, c6i.4xlarge, m6i.2xlarge, m6i.4xlarge",
        "workloads:\n  - at: 0s\n    deployment: {name: burst, replicas: 500, cpu: 250m, memory: 256Mi}\n",
    );
    for seed in [3, 4, 5] {
        let report = run(seed, s.clone(), Duration::from_secs(10 * 60));
        assert!(report.converged, "seed {seed}: {report:?}");
        assert_eq!(report.pods.running, 500);
        // Batch window (≤ 10 s) + launch + boot (fakecloud's default boot is well under 2 min).
        assert!(
            report.pods.pending_seconds_p99 <= 180.0,
            "seed {seed}: p99 {}s",
            report.pods.pending_seconds_p99
        );
        assert!(report.passed(), "seed {seed}: {:?}", report.invariants);
    }
}

#[test]
fn spot_capacity_errors_fall_back_to_on_demand_and_still_converge() {
    let s = scenario(
        "m5.large",
        "cloud:\n  exhausted:\n    - [m5.large, us-west-2a, spot]\n    - [m5.large, us-west-2b, spot]\n    - [m5.large, us-west-2c, spot]\nworkloads:\n  - at: 0s\n    deployment: {name: web, replicas: 6, cpu: 500m, memory: 512Mi}\n",
    );
    for seed in [5, 6, 7] {
        let report = run(seed, s.clone(), Duration::from_secs(15 * 60));
        assert!(report.converged, "seed {seed}: {report:?}");
        let types = &report.nodes.launched_by_type;
        assert!(
            types.keys().all(|k| k.ends_with("/on-demand")),
            "seed {seed}: {types:?}"
        );
        assert!(report.passed(), "seed {seed}: {:?}", report.invariants);
    }
}

#[test]
fn slow_and_never_booting_instances_are_replaced_and_nothing_leaks() {
    let s = scenario(
        "m5.large",
        "cloud:\n  neverBootFraction: 0.3\n  slowBootFraction: 0.3\nworkloads:\n  - at: 0s\n    deployment: {name: web, replicas: 8, cpu: 500m, memory: 512Mi}\n",
    );
    // Each never-booting instance costs the 15-minute registration timeout before its
    // replacement launches, and a replacement may itself never boot: an hour allows a chain.
    let mut replaced = 0;
    for seed in [11, 12, 13] {
        let report = run(seed, s.clone(), Duration::from_secs(60 * 60));
        assert!(report.converged, "seed {seed}: {report:?}");
        assert!(report.passed(), "seed {seed}: {:?}", report.invariants);
        replaced += report.nodes.terminated;
        // Terminated instances are counted by type too.
        assert_eq!(
            report.nodes.terminated_by_type.values().sum::<usize>(),
            report.nodes.terminated,
            "seed {seed}: {:?}",
            report.nodes
        );
    }
    assert!(replaced > 0, "some never-booting instance was replaced");
}

#[test]
fn eventual_consistency_and_throttling_cause_no_duplicate_launches_or_leaks() {
    let s = scenario(
        "m5.large, m5.xlarge",
        "cloud:\n  eventualConsistencyLagMs: 8000\n  ec2ThrottleRate: 0.2\n  ec2UnavailableRate: 0.05\n  apiUnavailableRate: 0.02\n  apiConflictRate: 0.05\nworkloads:\n  - at: 0s\n    deployment: {name: web, replicas: 8, cpu: 500m, memory: 512Mi}\n",
    );
    for seed in [13, 14, 15] {
        let report = run(seed, s.clone(), Duration::from_secs(30 * 60));
        let throttled = report
            .faults_injected
            .get("ec2-throttle")
            .copied()
            .unwrap_or(0);
        assert!(
            throttled > 0,
            "seed {seed}: the scenario must actually throttle"
        );
        assert!(report.converged, "seed {seed}: {report:?}");
        assert!(report.passed(), "seed {seed}: {:?}", report.invariants);
        // 8 × 500m needs at most three of the smallest nodes: more launches would be duplicates.
        assert!(
            report.nodes.launched <= 3,
            "seed {seed}: launched {}: {:?}",
            report.nodes.launched,
            report.nodes.launched_by_type
        );
    }
}

#[test]
fn the_built_in_scenarios_parse() {
    for (name, text) in karpenter_sim::scenario::BUILTIN {
        Scenario::parse(name, text).expect("built-in scenario parses");
    }
}
