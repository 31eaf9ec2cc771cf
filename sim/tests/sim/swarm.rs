//! The swarm: seeds, fault draws, phases, parallelism and the summary.

use std::collections::BTreeSet;
use std::time::Duration;

use karpenter_sim::faults::FaultMix;
use karpenter_sim::scenario::{LatencyKnob, Scenario};
use karpenter_sim::swarm::{self, FAULTS, Selection, Summary, SwarmConfig};
use karpenter_sim::workload_mix::{
    CUSTOM_POOL, CUSTOM_STARTUP_TAINT, DRAW_DAEMONSET, DRAW_EXPIRING_AND_PINNED, DRAW_LIMITED_POOL,
    DRAW_SCHEDULED_BUDGET, DRAW_STATEFUL, DROUGHT_POOL, DroughtPart, EXPIRING_POOL, Expiring,
    GUARDED, LIMITED_POOL, ON_DEMAND_POOL, OnDemand, PINNED_POOL, PinnedAmi, ScheduledBudget,
    WorkloadMix, WorkloadSelection,
};

fn short(safety_minutes: u64, liveness_minutes: u64) -> SwarmConfig {
    // `KARPENTER_SIM_LOG` as for the binary (`cargo test ... -- --nocapture`); a second test in
    // the same process keeps the first one's logger.
    let _ = karpenter_sim::logging::install_from_env();
    let mut config = SwarmConfig::new(Scenario::load("default").expect("built-in"), "default");
    config.safety = Duration::from_secs(safety_minutes * 60);
    config.liveness = Duration::from_secs(liveness_minutes * 60);
    config
}

#[test]
fn seeds_parse_inclusive_ranges_and_single_seeds() {
    assert_eq!(swarm::parse_seeds("17..17").ok(), Some(vec![17]));
    assert_eq!(swarm::parse_seeds("1..3").ok(), Some(vec![1, 2, 3]));
    assert_eq!(swarm::parse_seeds("1..=3").ok(), Some(vec![1, 2, 3]));
    assert_eq!(swarm::parse_seeds("5").ok(), Some(vec![5]));
    assert!(swarm::parse_seeds("3..1").is_err());
    assert!(swarm::parse_seeds("a..b").is_err());
}

#[test]
fn fault_selections_parse_and_print_back() {
    assert_eq!("drawn".parse::<Selection>().ok(), Some(Selection::Drawn));
    let none = "none".parse::<Selection>().expect("none");
    assert_eq!(none, Selection::Only(BTreeSet::new()));
    let two = "spot-storm,ec2-5xx".parse::<Selection>().expect("two");
    assert_eq!(two.to_string(), "ec2-5xx,spot-storm");
    assert!("spot-storm,meteor".parse::<Selection>().is_err());
}

#[test]
fn a_seed_draws_its_faults_the_same_way_every_time_and_seeds_differ() {
    let draws: Vec<FaultMix> = (1..=40).map(FaultMix::draw).collect();
    assert_eq!(draws[0], FaultMix::draw(1));
    assert!(draws.windows(2).any(|w| w[0] != w[1]));
    // Swarm testing: over 40 seeds every fault of the catalogue is both on and off somewhere.
    for fault in FAULTS {
        assert!(
            draws.iter().any(|m| m.names().contains(&fault)),
            "{fault} never on"
        );
        assert!(
            draws.iter().any(|m| !m.names().contains(&fault)),
            "{fault} never off"
        );
    }
    // Forcing a set of faults on gives each the intensity the seed's draw gives it.
    for seed in 1..=10 {
        let drawn = FaultMix::draw(seed);
        assert_eq!(FaultMix::draw_only(seed, &drawn.names()), drawn);
    }
    let storm = FaultMix::draw_only(7, &["spot-storm"]);
    assert_eq!(storm.names(), vec!["spot-storm"]);
    let both = FaultMix::draw_only(7, &["spot-storm", "ec2-throttle"]);
    assert_eq!(storm.spot_storm, both.spot_storm);
    assert!(storm.ec2_throttle.is_none() && both.ec2_throttle.is_some());
}

#[test]
fn a_drawn_mix_goes_on_over_the_scenarios_own_faults() {
    let scenario_faults = FaultMix::draw_only(3, &["pdb-never-allows", "spot-storm"]);
    let drawn = FaultMix::draw_only(5, &["spot-storm", "api-5xx"]);
    let merged = drawn.clone().or(scenario_faults.clone());
    assert_eq!(
        merged.names(),
        vec!["spot-storm", "api-5xx", "pdb-never-allows"]
    );
    assert_eq!(merged.spot_storm, drawn.spot_storm, "the drawn one wins");
    assert_eq!(merged.pdb_never_allows, scenario_faults.pdb_never_allows);
}

#[test]
fn a_second_storm_taking_back_the_room_interrupted_pods_counted_on_excuses_their_check() {
    // Seed 364, one of the 1,000-seed swarm's five failures: a storm at 20m10s warns a node whose
    // pods a never-allowing PDB pins; the controller rightly launches nothing (another node has
    // room), and a second storm at 21m54s takes that node back before the reclaim. Nothing can
    // boot in what is left of the notice: capacity did not exist, so the check is excused.
    // The world as that swarm drew it: the scenario's workload, and the faults drawn before
    // `ec2-lost-response` and `claim-force-deleted` existed (drawn after them, they move nothing).
    let mut config = short(23, 3);
    config.workload = WorkloadSelection::Scenario;
    let before: BTreeSet<String> = FaultMix::draw(364)
        .names()
        .into_iter()
        .filter(|f| !["ec2-lost-response", "claim-force-deleted"].contains(f))
        .map(str::to_string)
        .collect();
    config.faults = Selection::Only(before);
    let outcome = swarm::run_seed(&config, 364);
    assert!(outcome.passed(), "{:?}", outcome.violations);
    assert!(
        outcome.rehome_excused >= 1,
        "{} checked, {} excused",
        outcome.rehome_checked,
        outcome.rehome_excused
    );
}

#[test]
fn a_claim_the_provisioner_made_for_a_draining_candidates_pods_is_not_judged_as_its_consolidation_replacement()
 {
    // Seed 35 of the swarm once latency was drawn by default: a consolidation command
    // (`Underutilized 1`, 16:29) launched its one replacement; its candidate, an on-demand node
    // at $0.306/h, was deleted at 18:41 and was still draining at 20:09, when the provisioner
    // packed its pods with 56 new pending pods onto a c6a.8xlarge spot claim ($0.413/h) naming it
    // in `karpenter.sh/replaces`. That claim is the provisioner's (upstream's provisioner
    // schedules the pods of deleting nodes too), not the command's: `consolidation-saves` must
    // not hold it to the candidate's price.
    let mut config = short(30, 1);
    config.scenario.cloud.latency = LatencyKnob::Drawn;
    let outcome = swarm::run_seed(&config, 35);
    let judged = outcome
        .violations
        .iter()
        .find(|v| v.invariant == "consolidation-saves");
    assert!(judged.is_none(), "{judged:?}");
}

#[test]
fn a_short_swarm_passes_and_its_output_does_not_depend_on_jobs() {
    // Liveness as long as the default: a claim force-deleted late in the safety phase may be
    // replaced by an instance that never boots, which its 15 min registration timeout replaces.
    let mut config = short(10, 25);
    config.determinism_every = 3;
    let seeds = [1, 2, 3, 4];
    let one = swarm::run_swarm(&config, &seeds, 1, &|_, _| {}).expect("swarm runs");
    let two = swarm::run_swarm(&config, &seeds, 2, &|_, _| {}).expect("swarm runs");
    assert_eq!(one, two, "results are sorted by seed whatever the threads");
    for outcome in &one {
        assert!(
            outcome.passed(),
            "seed {}: {:?}",
            outcome.seed,
            outcome.violations
        );
        assert!(outcome.log.is_empty(), "passing seeds drop their log");
    }
    assert!(one[2].determinism_checked && !one[0].determinism_checked);
    let summary = Summary::of(&config, &one);
    assert_eq!((summary.seeds, summary.passed), (4, 4));
    assert!(summary.failed.is_empty());
    assert_eq!(summary.determinism_checked, 1);
    assert_eq!(summary.faults_fired.len(), FAULTS.len());
    let json = serde_json::to_value(&summary).expect("serializes");
    for key in ["seeds", "passed", "failed", "faultsFired", "faultsOn"] {
        assert!(json.get(key).is_some(), "{key} in {json}");
    }
}

#[test]
fn a_seed_draws_its_workload_the_same_way_every_time_and_every_part_is_on_and_off_somewhere() {
    let safety = Duration::from_secs(30 * 60);
    let draws: Vec<WorkloadMix> = (1..=40).map(|s| WorkloadMix::draw(s, safety)).collect();
    assert_eq!(draws[0], WorkloadMix::draw(1, safety));
    let switched = |on: bool, part: &'static str| on.then_some(part);
    let parts = [
        Some("guarded"),
        Some("budget"),
        Some("scale-down"),
        switched(DRAW_LIMITED_POOL, "limited-pool"),
        switched(DRAW_EXPIRING_AND_PINNED, "expiring"),
        switched(DRAW_EXPIRING_AND_PINNED, "pinned-ami"),
        Some("on-demand"),
        Some("drought"),
        Some("custom-ami"),
        Some("critical"),
        switched(DRAW_DAEMONSET, "daemonset"),
        switched(DRAW_STATEFUL, "stateful"),
        switched(DRAW_SCHEDULED_BUDGET, "scheduled-budget"),
    ];
    for part in parts.into_iter().flatten() {
        let on = draws.iter().filter(|m| m.names().contains(&part)).count();
        assert!(
            on > 0 && on < 40,
            "{part} is on for some seeds only ({on}/40)"
        );
    }
    for mix in &draws {
        // A scale-down falls in the safety phase, at least a minute before its end.
        assert!(
            mix.scale_down
                .is_none_or(|at| at + Duration::from_secs(60) <= safety)
        );
        assert!(
            mix.on_demand
                .as_ref()
                .is_none_or(|o| o.scale_down + Duration::from_secs(60) <= safety)
        );
        // A drought outlasts the unavailable-offerings TTL (3 min), and it and one more TTL
        // (the retry that finds capacity) end inside the safety phase.
        assert!(mix.drought.as_ref().is_none_or(|d| {
            d.duration > Duration::from_secs(180)
                && d.from + d.duration + Duration::from_secs(180) <= safety
        }));
    }
}

/// The `scheduled-budget` part: the scenario's first NodePool (which lists no budgets) gets the
/// CRD's default budget and the drawn one; its copies (here `limited-pool`) are left as written.
#[test]
fn a_drawn_scheduled_budget_goes_on_the_first_nodepool_beside_the_default_budget() {
    let budget = ScheduledBudget {
        schedule: "*/10 * * * *".to_string(),
        duration: "5m".to_string(),
        nodes: "0".to_string(),
        reasons: Some(vec!["Drifted".to_string()]),
    };
    let drawn = WorkloadMix {
        limited_pool: Some(8),
        scheduled_budget: Some(budget),
        ..WorkloadMix::default()
    }
    .apply(Scenario::load("default").expect("built-in"));
    let documents =
        karpenter_core::manifest::parse_documents(&drawn.manifests).expect("manifests parse");
    let pool = |name: &str| {
        documents
            .iter()
            .map(|(_, d)| d)
            .find(|d| d["kind"] == "NodePool" && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("NodePool {name}"))
            .clone()
    };
    assert_eq!(
        pool("default")["spec"]["disruption"]["budgets"],
        serde_json::json!([
            { "nodes": "10%" },
            { "nodes": "0", "schedule": "*/10 * * * *", "duration": "5m", "reasons": ["Drifted"] },
        ])
    );
    assert!(pool(LIMITED_POOL)["spec"]["disruption"]["budgets"].is_null());
    for (_, document) in &documents {
        let checked = karpenter_core::manifest::check_document(document);
        assert!(
            !matches!(
                checked.outcome,
                karpenter_core::manifest::Outcome::Invalid(_)
            ),
            "{document}"
        );
    }
}

/// The `custom-ami` part: a Custom class whose own user data joins the world's cluster through
/// nodeadm (the image is an EKS AL2023 one) without the pool's startup taint, a pool declaring it,
/// and pods pinned to that pool.
#[test]
fn a_drawn_custom_ami_class_joins_the_worlds_cluster_without_the_pools_startup_taint() {
    let scenario = Scenario::load("default").expect("built-in");
    let cloud = scenario.cloud.cloud_config(1);
    let drawn = WorkloadMix {
        custom_ami: Some((2, 750)),
        ..WorkloadMix::default()
    }
    .apply(scenario);
    let documents =
        karpenter_core::manifest::parse_documents(&drawn.manifests).expect("manifests parse");
    let find = |kind: &str| {
        documents
            .iter()
            .map(|(_, d)| d)
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == CUSTOM_POOL)
            .unwrap_or_else(|| panic!("the custom {kind}"))
    };
    let class = find("EC2NodeClass");
    assert_eq!(class["spec"]["amiFamily"], "Custom");
    let image = class["spec"]["amiSelectorTerms"][0]["name"]
        .as_str()
        .expect("an image by name");
    assert_eq!(
        fakecloud::bootstrap::BootFamily::of_image(image),
        fakecloud::bootstrap::BootFamily::Al2023
    );
    let user_data = class["spec"]["userData"].as_str().expect("user data");
    let view = fakecloud::bootstrap::join(
        fakecloud::bootstrap::BootFamily::Al2023,
        user_data,
        &cloud.cluster_identity(),
    )
    .expect("nodeadm joins the world's cluster with it");
    let taints: Vec<(&str, &str)> = view
        .taints
        .iter()
        .map(|t| (t.key.as_str(), t.effect.as_str()))
        .collect();
    assert_eq!(taints, [("karpenter.sh/unregistered", "NoExecute")]);
    assert!(view.labels.is_empty(), "{:?}", view.labels);
    let pool = find("NodePool");
    assert!(pool["spec"]["weight"].is_null() && pool["spec"]["limits"].is_null());
    assert_eq!(
        pool["spec"]["template"]["spec"]["nodeClassRef"]["name"],
        CUSTOM_POOL
    );
    assert_eq!(
        pool["spec"]["template"]["spec"]["startupTaints"],
        serde_json::json!([{ "key": CUSTOM_STARTUP_TAINT, "effect": "NoSchedule" }])
    );
    let capacity: Vec<&serde_json::Value> = pool["spec"]["template"]["spec"]["requirements"]
        .as_array()
        .expect("requirements")
        .iter()
        .filter(|r| r["key"] == "karpenter.sh/capacity-type")
        .collect();
    assert_eq!(
        capacity,
        [
            &serde_json::json!({"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]})
        ]
    );
    let deployment = drawn
        .workloads
        .iter()
        .filter_map(|e| e.deployment.as_ref().map(|d| (e.at, d)))
        .find(|(_, d)| d.name == CUSTOM_POOL)
        .expect("the pinned deployment");
    assert_eq!(deployment.0, Duration::ZERO);
    assert_eq!(
        (deployment.1.replicas, deployment.1.cpu.as_str()),
        (2, "750m")
    );
    assert_eq!(
        deployment.1.node_selector.get("karpenter.sh/nodepool"),
        Some(&CUSTOM_POOL.to_string())
    );
}

#[test]
fn a_drawn_drought_pool_can_use_only_the_dry_offering_and_its_pods_arrive_as_the_drought_starts() {
    let scenario = Scenario::load("default").expect("built-in");
    let mix = WorkloadMix {
        drought: Some(DroughtPart {
            instance_type: "m6i.xlarge".into(),
            zone: "us-west-2b".into(),
            from: Duration::from_secs(4 * 60),
            duration: Duration::from_secs(7 * 60),
            replicas: 2,
            cpu: 500,
        }),
        ..WorkloadMix::default()
    };
    let drawn = mix.apply(scenario);
    let documents =
        karpenter_core::manifest::parse_documents(&drawn.manifests).expect("manifests parse");
    let pool = documents
        .iter()
        .map(|(_, d)| d)
        .find(|d| d["kind"] == "NodePool" && d["metadata"]["name"] == DROUGHT_POOL)
        .expect("the drought pool");
    assert!(pool["spec"]["weight"].is_null() && pool["spec"]["limits"].is_null());
    assert_eq!(
        pool["spec"]["template"]["spec"]["requirements"],
        serde_json::json!([
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m6i.xlarge"]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2b"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        ])
    );
    assert_eq!(
        pool["spec"]["template"]["spec"]["nodeClassRef"]["name"],
        "default"
    );
    assert_eq!(drawn.cloud.droughts.len(), 1);
    let drought = &drawn.cloud.droughts[0];
    assert_eq!(
        (
            drought.instance_type.as_str(),
            drought.zone.as_str(),
            drought.capacity_type.as_str(),
            drought.from,
            drought.duration
        ),
        (
            "m6i.xlarge",
            "us-west-2b",
            "on-demand",
            Duration::from_secs(4 * 60),
            Duration::from_secs(7 * 60)
        )
    );
    let events: Vec<(Duration, u32, String, Option<&String>)> = drawn
        .workloads
        .iter()
        .filter_map(|e| e.deployment.as_ref().map(|d| (e.at, d)))
        .filter(|(_, d)| d.name == DROUGHT_POOL)
        .map(|(at, d)| {
            let selector = d.node_selector.get("karpenter.sh/nodepool");
            (at, d.replicas, d.cpu.clone(), selector)
        })
        .collect();
    let pool_name = DROUGHT_POOL.to_string();
    assert_eq!(
        events,
        vec![(
            Duration::from_secs(4 * 60),
            2,
            "500m".to_string(),
            Some(&pool_name)
        )]
    );
    assert!(drawn.workloads.windows(2).all(|w| w[0].at <= w[1].at));
}

#[test]
fn a_drawn_on_demand_pool_allows_only_on_demand_and_its_pinned_deployment_is_cut_to_one() {
    let scenario = Scenario::load("default").expect("built-in");
    let mix = WorkloadMix {
        on_demand: Some(OnDemand {
            replicas: 5,
            cpu: 750,
            scale_down: Duration::from_secs(14 * 60),
        }),
        ..WorkloadMix::default()
    };
    let drawn = mix.apply(scenario.clone());
    let documents =
        karpenter_core::manifest::parse_documents(&drawn.manifests).expect("manifests parse");
    let pool = documents
        .iter()
        .map(|(_, d)| d)
        .find(|d| d["kind"] == "NodePool" && d["metadata"]["name"] == ON_DEMAND_POOL)
        .expect("the on-demand pool");
    assert!(pool["spec"]["weight"].is_null() && pool["spec"]["limits"].is_null());
    let requirements = pool["spec"]["template"]["spec"]["requirements"]
        .as_array()
        .expect("requirements");
    let capacity: Vec<&serde_json::Value> = requirements
        .iter()
        .filter(|r| r["key"] == "karpenter.sh/capacity-type")
        .collect();
    assert_eq!(capacity.len(), 1, "{requirements:?}");
    assert_eq!(capacity[0]["values"], serde_json::json!(["on-demand"]));
    // The default pool's other requirements are kept (arch, os, category, generation).
    assert_eq!(requirements.len(), 5);
    let events: Vec<(Duration, u32, String)> = drawn
        .workloads
        .iter()
        .filter_map(|e| e.deployment.as_ref().map(|d| (e.at, d)))
        .filter(|(_, d)| d.name == ON_DEMAND_POOL)
        .map(|(at, d)| (at, d.replicas, d.cpu.clone()))
        .collect();
    assert_eq!(
        events,
        vec![
            (Duration::ZERO, 5, "750m".to_string()),
            (Duration::from_secs(14 * 60), 1, "750m".to_string()),
        ]
    );
    let pinned = drawn
        .workloads
        .iter()
        .filter_map(|e| e.deployment.as_ref())
        .find(|d| d.name == ON_DEMAND_POOL)
        .expect("the pinned Deployment");
    assert_eq!(
        pinned.node_selector.get("karpenter.sh/nodepool"),
        Some(&ON_DEMAND_POOL.to_string())
    );
    assert!(drawn.workloads.windows(2).all(|w| w[0].at <= w[1].at));
    // The scenario's own pool still allows spot.
    let default = documents
        .iter()
        .map(|(_, d)| d)
        .find(|d| d["kind"] == "NodePool" && d["metadata"]["name"] == "default")
        .expect("the default pool");
    assert!(
        default["spec"]["template"]["spec"]["requirements"]
            .to_string()
            .contains("spot")
    );
}

#[test]
fn a_drawn_workload_adds_do_not_disrupt_pods_a_budget_and_a_scale_down_to_the_scenario() {
    let scenario = Scenario::load("default").expect("built-in");
    let mix = WorkloadMix {
        guarded: Some((4, 500)),
        budget: Some(("minAvailable".into(), "50%".into())),
        scale_down: Some(Duration::from_secs(25 * 60)),
        ..WorkloadMix::default()
    };
    let drawn = mix.apply(scenario.clone());
    let guarded = drawn
        .workloads
        .iter()
        .filter_map(|e| e.deployment.as_ref())
        .find(|d| d.name == GUARDED)
        .expect("the guarded Deployment");
    assert_eq!(guarded.replicas, 4);
    assert_eq!(
        guarded
            .annotations
            .get("karpenter.sh/do-not-disrupt")
            .map(String::as_str),
        Some("true")
    );
    // The manifests still parse as the world reads them, the budget among them.
    let documents =
        karpenter_core::manifest::parse_documents(&drawn.manifests).expect("manifests parse");
    let budget = documents
        .iter()
        .map(|(_, d)| d)
        .find(|d| d["kind"] == "PodDisruptionBudget")
        .expect("the budget");
    assert_eq!(budget["spec"]["minAvailable"], "50%");
    assert_eq!(budget["spec"]["selector"]["matchLabels"]["app"], "web");
    // web is at 60 replicas from 20m: cut to 20 at 25m, events still in time order.
    let cut = drawn
        .workloads
        .iter()
        .find(|e| e.at == Duration::from_secs(25 * 60))
        .and_then(|e| e.deployment.as_ref())
        .expect("the scale-down");
    assert_eq!((cut.name.as_str(), cut.replicas), ("web", 20));
    assert!(drawn.workloads.windows(2).all(|w| w[0].at <= w[1].at));
    assert_eq!(
        WorkloadMix::default()
            .apply(scenario.clone())
            .workloads
            .len(),
        scenario.workloads.len()
    );
    let mut config = short(30, swarm::LIVENESS_DEFAULT.as_secs() / 60);
    config.workload = WorkloadSelection::Scenario;
    assert_eq!(config.workload_mix(3), WorkloadMix::default());
    assert!(config.replay(3).ends_with("--workload scenario"));
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let (back, _) = swarm::from_replay(&config.replay(3), root).expect("parses");
    assert_eq!(back.workload, WorkloadSelection::Scenario);
}

#[test]
fn the_default_replay_command_is_short_and_reads_back() {
    let config = short(30, swarm::LIVENESS_DEFAULT.as_secs() / 60);
    assert_eq!(
        config.replay(17),
        "cargo xtask sim swarm --seeds 17..17 --scenario default"
    );
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let (back, seeds) = swarm::from_replay(&config.replay(17), root).expect("parses");
    assert_eq!(seeds, vec![17]);
    assert_eq!(back.replay(17), config.replay(17));
    let shorter = short(5, 10);
    assert_eq!(
        shorter.replay(3),
        "cargo xtask sim swarm --seeds 3..3 --scenario default --safety 5m --liveness 10m"
    );
}

#[test]
fn with_stop_on_fail_no_seed_starts_after_one_failed() {
    // Thirty simulated seconds of safety and no time to settle: the default scenario's first
    // pods are still pending (no node boots that fast), so every seed fails `liveness` cheaply.
    let mut config = short(0, 0);
    config.safety = Duration::from_secs(30);
    config.determinism_every = 0;
    let seeds = [1, 2, 3, 4, 5, 6];
    let all = swarm::run_swarm(&config, &seeds, 1, &|_, _| {}).expect("swarm runs");
    assert_eq!(all.len(), 6, "without the option every seed runs");
    assert!(all.iter().all(|o| !o.passed()), "every seed fails");
    config.stop_on_fail = true;
    let one = swarm::run_swarm(&config, &seeds, 1, &|_, _| {}).expect("swarm runs");
    assert_eq!(one.len(), 1, "one thread: only the first seed ran");
    assert_eq!(one[0], all[0], "the seed that ran is the same run");
    let two = swarm::run_swarm(&config, &seeds, 2, &|_, _| {}).expect("swarm runs");
    assert!(
        (1..=2).contains(&two.len()),
        "two threads: at most the two seeds already started, not {}",
        two.len()
    );
}

#[test]
fn a_drawn_workload_adds_a_limited_pool_an_expiring_pool_and_a_pinned_class_with_a_release() {
    let scenario = Scenario::load("default").expect("built-in");
    let mix = WorkloadMix {
        limited_pool: Some(7),
        expiring: Some(Expiring {
            expire_after: Duration::from_secs(12 * 60),
            replicas: 2,
            cpu: 500,
        }),
        pinned_ami: Some(PinnedAmi {
            release_at: Duration::from_secs(9 * 60),
            replicas: 3,
        }),
        ..WorkloadMix::default()
    };
    let drawn = mix.apply(scenario.clone());
    let documents =
        karpenter_core::manifest::parse_documents(&drawn.manifests).expect("manifests parse");
    let find = |kind: &str, name: &str| {
        documents
            .iter()
            .map(|(_, d)| d)
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{kind} {name}"))
            .clone()
    };
    // Limited: above the default pool's weight 10, 7 cpu, the default pool's requirements.
    let limited = find("NodePool", LIMITED_POOL);
    assert_eq!(limited["spec"]["weight"], 20);
    assert_eq!(limited["spec"]["limits"]["cpu"], "7");
    let default = find("NodePool", "default");
    assert_eq!(
        limited["spec"]["template"]["spec"]["requirements"],
        default["spec"]["template"]["spec"]["requirements"]
    );
    // Expiring: no weight, no limits, expireAfter 12m and a grace period; its Deployment pinned.
    let expiring = find("NodePool", EXPIRING_POOL);
    assert!(expiring["spec"]["weight"].is_null() && expiring["spec"]["limits"].is_null());
    assert_eq!(expiring["spec"]["template"]["spec"]["expireAfter"], "12m");
    assert_eq!(
        expiring["spec"]["template"]["spec"]["terminationGracePeriod"],
        "5m"
    );
    let pinned_to = |name: &str| {
        drawn
            .workloads
            .iter()
            .filter_map(|e| e.deployment.as_ref())
            .find(|d| d.name == name)
            .unwrap_or_else(|| panic!("Deployment {name}"))
            .clone()
    };
    let deployment = pinned_to(EXPIRING_POOL);
    assert_eq!((deployment.replicas, deployment.cpu.as_str()), (2, "500m"));
    assert_eq!(
        deployment.node_selector.get("karpenter.sh/nodepool"),
        Some(&EXPIRING_POOL.to_string())
    );
    // Pinned: its own class on the pinned alias, a pool on it, a Deployment, a release at 9m.
    let class = find("EC2NodeClass", PINNED_POOL);
    assert_eq!(
        class["spec"]["amiSelectorTerms"][0]["alias"],
        "al2023@v20250601"
    );
    assert_eq!(class["spec"]["role"], "KarpenterNodeRole-sim");
    let pool = find("NodePool", PINNED_POOL);
    assert_eq!(
        pool["spec"]["template"]["spec"]["nodeClassRef"]["name"],
        PINNED_POOL
    );
    assert_eq!(pinned_to(PINNED_POOL).replicas, 3);
    let release = drawn.faults.ami_release.expect("an AMI release");
    assert_eq!(release.at, vec![Duration::from_secs(9 * 60)]);
    // The scenario's first Deployment is still the one the budget and scale-down take.
    assert_eq!(
        drawn
            .workloads
            .iter()
            .filter_map(|e| e.deployment.as_ref())
            .filter(|d| d.name == "web")
            .count(),
        scenario
            .workloads
            .iter()
            .filter_map(|e| e.deployment.as_ref())
            .filter(|d| d.name == "web")
            .count()
    );
}

/// Runs `seed` of the default swarm as drawn (faults, workload, latency) with `safety` minutes
/// of faults and the swarm's own liveness phase, and asserts it passes; returns (rehome checks,
/// excused). The whole liveness phase, not a shorter one: with the `expiring` part drawn, a
/// drain a never-allowing PDB holds ends only at its pool's 5-minute terminationGracePeriod, so
/// a seed can settle later than 3 minutes after the faults stop (seeds 71 and 916); a settled
/// seed ends its liveness phase at once, so passing seeds cost no more. The world is the one
/// drawn before the `critical` part (drawn last, so leaving it out changes nothing else): these
/// seeds were found, and their excuses shown, without it.
fn passes_as_drawn(seed: u64, safety_minutes: u64) -> (u64, u64) {
    let mut config = short(safety_minutes, swarm::LIVENESS_DEFAULT.as_secs() / 60);
    config.draw = |seed, safety| WorkloadMix {
        critical: None,
        ..WorkloadMix::draw(seed, safety)
    };
    let outcome = swarm::run_seed(&config, seed);
    assert!(outcome.passed(), "seed {seed}: {:?}", outcome.violations);
    (outcome.rehome_checked, outcome.rehome_excused)
}

#[test]
fn a_replacement_whose_claim_a_user_force_deleted_during_the_notice_excuses_the_rehome_check() {
    // Seed 400 of the 1,000-seed swarm: the replacement of a warned node was Ready and the drain
    // had begun when the `claim-force-deleted` fault removed the replacement's NodeClaim; garbage
    // collection terminated its instance, and the evicted pods had nowhere to go. The world took
    // the room, not the controller.
    // Its world as drawn before the `custom-ami` part, which is on for seed 400 and changes it.
    let mut config = short(7, 3);
    config.draw = |seed, safety| WorkloadMix {
        custom_ami: None,
        critical: None,
        ..WorkloadMix::draw(seed, safety)
    };
    assert!(WorkloadMix::draw(400, config.safety).custom_ami.is_some());
    let outcome = swarm::run_seed(&config, 400);
    assert!(outcome.passed(), "seed 400: {:?}", outcome.violations);
    let (checked, excused) = (outcome.rehome_checked, outcome.rehome_excused);
    assert!(excused >= 1, "{checked} checked, {excused} excused");
}

#[test]
fn a_replacement_warned_in_the_step_that_reaches_the_reclaim_excuses_the_rehome_check() {
    // Seed 591: a never-allowing PDB held the warned node's pods until the reclaim; the step that
    // reached the reclaim (2 s past it) also brought a warning for the replacement, and the
    // controller had tainted it before the check looked. At the reclaim the room was there.
    let (checked, excused) = passes_as_drawn(591, 11);
    assert!(excused >= 1, "{checked} checked, {excused} excused");
}

#[test]
fn a_replacement_ec2_scheduled_for_a_stop_during_the_notice_excuses_the_rehome_check() {
    // Seed 398 of the 1,000-seed swarm at 410eb54: a spot warning at 00:16:05 for the node of two
    // `stateful` replicas (zonal volumes in us-west-2a); the controller launched a replacement
    // there 13 s later, and at 00:17:15 AWS Health scheduled that replacement's instance for a
    // stop (the `scheduled-maintenance` fault). The controller deleted the replacement's claim,
    // as upstream's interruption controller does for a scheduled change, the hold had no
    // replacement left to wait for, and the second replacement (a slow boot) could not be up
    // before the reclaim. The world took the capacity back, as a spot warning of the replacement
    // would have.
    let (checked, excused) = passes_as_drawn(398, 18);
    assert!(excused >= 1, "{checked} checked, {excused} excused");
}

#[test]
fn pdb_paced_drains_of_three_nodes_after_the_faults_settle_within_the_liveness_deadline() {
    // Seed 925 of the 1,000-seed swarm at 410eb54: when the faults stopped, a scheduled change's
    // drain was under way and the `budget` part's PodDisruptionBudget (`maxUnavailable: 1`) over
    // the `web` Deployment let it evict one pod per replacement start (~13 s); behind it the
    // scenario's burst, an `expiring` node's forced drain and the drift (AMI release) of a node
    // holding 88 pods followed, each web pod again one at a time. Nothing stuck: the last pod
    // was evicted 1,464 s in and the cluster settled 1,537 s after the faults stopped (replayed
    // with `--liveness 60m`), past the 25-minute deadline it then had.
    passes_as_drawn(925, 30);
}

#[test]
fn replacements_a_scale_down_removed_before_the_reclaim_still_count_as_homes() {
    // Seed 727: 44 pods of a warned node were evicted and re-created elsewhere; the drawn
    // scale-down deleted those replacements 6 s before the reclaim. They had found homes: the
    // check must not owe them room again.
    passes_as_drawn(727, 30);
}

#[test]
fn a_drift_command_may_start_once_the_previous_commands_node_is_gone() {
    // Seed 916: a drift command's Node finished draining and was deleted while its NodeClaim
    // waited for EC2 to terminate the instance; the next drift command of the pool (budget
    // "10%" of 3 nodes: 1) started then. Upstream counts only initialized nodes, which need
    // their Node, so the slot was free; `budgets-respected` counted the claim.
    passes_as_drawn(916, 30);
}

#[test]
fn seed_43_where_a_scale_up_took_the_replacements_room_passes_as_drawn() {
    // Seed 43 (expiring part on): the controller launched a replacement 4 s after the warning and
    // it was Ready before the hold ended, but the scenario's scale-up a minute later had its pods
    // bound there first; the PDB-held pod it was launched for lost that room, and the second
    // replacement launched 8 s after the scale-up could not boot before the reclaim. The
    // kube-scheduler gave the room away; no controller can reserve it.
    // Since the worlds' EC2 caches and the uninitialized-node replacement fix (twelfth session)
    // seed 43's world no longer meets that situation: it passes without the excuse, so this test
    // no longer shows the excuse is needed (seeds 104 and 43 tried; another seed to find).
    passes_as_drawn(43, 30);
}

#[test]
fn a_scale_up_that_takes_the_room_a_warned_nodes_pods_were_planned_into_excuses_the_rehome_check() {
    // Seed 469 (expiring part on): at the warning the PDB-held pods of the expiring pool's node fit
    // on another node of that pool, so the controller, as upstream's provisioner does, planned
    // them there and launched nothing; the scenario's scale-up 42 s later had its pods bound into
    // that room, and the node launched for the displaced pods 9 s after the scale-up could not
    // boot before the reclaim. The kube-scheduler gave the room away; no controller can reserve it.
    let (checked, excused) = passes_as_drawn(469, 30);
    assert!(excused >= 1, "{checked} checked, {excused} excused");
}

#[test]
fn a_spot_warning_on_a_node_already_expiring_gets_its_held_pods_replacement_capacity() {
    // Seed 71 (expiring part on): the node had expired and its drain was held by never-allowing
    // PDBs when its spot warning came. The handler did not mark a claim already being deleted,
    // so the provisioner left the PDB-held pods out and nothing was booted for them before the
    // reclaim: eleven pods lost their node with no room anywhere.
    passes_as_drawn(71, 30);
}

#[test]
fn a_statefulset_whose_zonal_volumes_a_hard_zone_spread_deadlocks_is_not_drawn() {
    // Seed 3 of the first swarm with the `stateful` part (spread drawn on): kube-scheduler bound
    // three replicas' volumes into us-west-2a before a node existed in us-west-2c; once one did,
    // the rescheduled `db-0`, pinned to us-west-2a by its volume, broke `maxSkew: 1` there for
    // good, as it would in a real cluster (see `DRAW_STATEFUL_SPREAD`). Without the spread the
    // seed settles.
    let mix = WorkloadMix::draw(3, swarm::SAFETY_DEFAULT);
    let stateful = mix.stateful.expect("seed 3 draws the stateful part");
    assert!(!stateful.spread_by_zone);
    passes_as_drawn(3, 30);
}

/// Runs `seed` as the default swarm does (30 minutes of faults, the liveness deadline, the whole
/// drawn workload) and asserts it passes.
fn passes_as_in_the_swarm(seed: u64) {
    let config = short(30, swarm::LIVENESS_DEFAULT.as_secs() / 60);
    let outcome = swarm::run_seed(&config, seed);
    assert!(outcome.passed(), "seed {seed}: {:?}", outcome.violations);
}

#[test]
fn a_claim_whose_pdb_held_pods_leave_just_before_the_bound_gets_the_slack_for_its_shutdown() {
    // Seed 583 of the 1,000-seed swarm at b9cdfbc: a drift command's node held 57 pods behind a
    // PodDisruptionBudget (no terminationGracePeriod: it may wait for them forever); the last one
    // left 44 s before the 900 s bound and the claim was gone about 70 s later, 909 s after its
    // deletion. `termination-progress` looked for held pods only once past the bound, so it never
    // saw the hold that its doc grants slack after.
    passes_as_in_the_swarm(583);
}

#[test]
fn an_orphan_outlives_a_throttled_garbage_collection_only_as_long_as_the_throttling() {
    // Seed 350: `claim-force-deleted` removed a claim 4 s after a collection pass; the next pass,
    // two minutes on, was throttled three times, then listed the orphan but had its
    // TerminateInstances throttled twice and a DescribeInstances answered 503. With a 1 s retry
    // base doubling (upstream's rate limiter starts at 5 ms) the orphan ran 151 s unowned.
    passes_as_in_the_swarm(350);
}

#[test]
fn a_zone_emptied_for_ten_minutes_may_cost_its_pinned_pods_a_claim_per_sixty_fresh_offerings() {
    // Seed 325: a `capacity-wave` emptied us-west-2a for 600 s while 23 pods (StatefulSet
    // replicas with volumes there among them) could run nowhere else. Each claim's CreateFleet
    // named the 60 cheapest offerings not yet known unavailable, as upstream's does, so a pool
    // took up to three spot and two on-demand claims each time the 3-minute unavailable-offerings
    // TTL ran out: 34 claims failed within ten minutes, each having tried offerings that had not
    // failed within the TTL. `claim-storm` counted them all against 10 + 23.
    passes_as_in_the_swarm(325);
}

#[test]
fn a_statefulset_pod_moved_by_consolidation_at_each_change_of_the_cluster_is_not_churn() {
    // Seeds 402, 618 and 876: a StatefulSet pod pinned to one zone by its volume was moved by
    // consolidation three times in 20–30 minutes: after the initial provisioning (a delete, then
    // a cheaper replacement of the node it landed on once `consolidateAfter` had passed, or a
    // second delete), after a fault took its node and the provisioner launched new ones, after
    // the scenario's scale-up added nodes with room. Each move was a cheaper packing that
    // upstream makes too, none inside the replacement hold; the hour-long window counted the
    // cluster's changes, not churn.
    for seed in [402, 618, 876] {
        passes_as_in_the_swarm(seed);
    }
}
