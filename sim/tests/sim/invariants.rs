//! Bug injection: for each invariant, a deliberately broken behaviour switched on in the
//! simulation (never in the controller; see `karpenter_sim::bugs`) and a seed showing the
//! invariant catches it. Each test checks three things:
//! 1. without the bug the same seed holds the invariant (the bug, not the scenario, is caught);
//! 2. with the bug the invariant is violated;
//! 3. the replay command the swarm prints for that seed, read back, reproduces the same violation.

use crate::sim_block_on;
use std::path::{Path, PathBuf};
use std::time::Duration;

use karpenter_sim::bugs::Bug;
use karpenter_sim::invariants::Invariant;
use karpenter_sim::scenario::Scenario;
use karpenter_sim::swarm::{self, SeedOutcome, Selection, SwarmConfig};
use karpenter_sim::workload_mix::WorkloadSelection;
use karpenter_sim::world::World;
use strum::{IntoEnumIterator, VariantArray};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the sim crate lives in the workspace")
        .to_path_buf()
}

/// A swarm over one of `sim/scenarios/invariants/`, with exactly `faults` on.
fn config(file: &str, faults: &str, safety_minutes: u64, liveness_minutes: u64) -> SwarmConfig {
    let arg = format!("sim/scenarios/invariants/{file}");
    let scenario = Scenario::load(&root().join(&arg).to_string_lossy()).expect("scenario loads");
    let mut config = SwarmConfig::new(scenario, &arg);
    config.faults = faults.parse::<Selection>().expect("fault names");
    config.safety = Duration::from_secs(safety_minutes * 60);
    config.liveness = Duration::from_secs(liveness_minutes * 60);
    config.determinism_every = 0;
    // Each bug scenario is the one situation it was written for: no drawn additions.
    config.workload = WorkloadSelection::Scenario;
    config
}

fn violation<'a>(outcome: &'a SeedOutcome, invariant: &str) -> Option<&'a str> {
    outcome
        .violations
        .iter()
        .find(|v| v.invariant == invariant)
        .map(|v| v.first.as_str())
}

/// The three checks of the module docs, for `invariant`, `bug` and `seed`.
fn catches(mut config: SwarmConfig, bug: Bug, invariant: &str, seed: u64) {
    let clean = swarm::run_seed(&config, seed);
    assert_eq!(
        violation(&clean, invariant),
        None,
        "seed {seed} without the bug must hold {invariant}: {:?}",
        clean.violations
    );
    config.bug = bug;
    let buggy = swarm::run_seed(&config, seed);
    let first = violation(&buggy, invariant).unwrap_or_else(|| {
        panic!(
            "bug {bug} must violate {invariant} on seed {seed}; got {:?}",
            buggy.violations
        )
    });
    assert!(!buggy.log.is_empty(), "a failed seed keeps its event log");
    let replay = config.replay(seed);
    assert!(
        replay.contains(&format!("--bug {bug}")),
        "the replay names the bug: {replay}"
    );
    let (replayed, seeds) = swarm::from_replay(&replay, &root()).expect("replay parses");
    assert_eq!(seeds, vec![seed], "{replay}");
    let again = swarm::run_seed(&replayed, seed);
    assert_eq!(
        violation(&again, invariant),
        Some(first),
        "`{replay}` reproduces the violation"
    );
    assert_eq!(again.event_log_sha256, buggy.event_log_sha256, "{replay}");
}

#[test]
fn nodepool_limits_catches_limits_hidden_from_the_controller() {
    let config = config("tight-limits.yaml", "none", 10, 5);
    catches(config, Bug::HideNodePoolLimits, "nodepool-limits", 1);
}

#[test]
fn no_leaked_instances_catches_dropped_terminations() {
    let config = config("never-boot.yaml", "none", 20, 5);
    catches(config, Bug::DropTerminations, "no-leaked-instances", 1);
}

#[test]
fn pods_fit_nodes_catches_an_overcommitting_scheduler() {
    let config = config("web.yaml", "none", 5, 5);
    catches(config, Bug::SchedulerOvercommit, "pods-fit-nodes", 1);
}

#[test]
fn drained_before_terminate_catches_instances_terminated_before_the_drain() {
    let config = config("spot-drain.yaml", "none", 15, 10);
    catches(
        config,
        Bug::TerminateOnClaimDelete,
        "drained-before-terminate",
        1,
    );
}

/// Spot nodes interrupted at 8 minutes: their drains must start on tainted nodes.
#[test]
fn draining_nodes_closed_catches_nodes_drained_without_the_disrupted_taint() {
    let config = config("spot-drain.yaml", "none", 15, 10);
    catches(config, Bug::StripDisruptedTaint, "draining-nodes-closed", 1);
}

/// The same drains with a scheduler blind to the taint: evicted pods land back on their node.
#[test]
fn draining_nodes_closed_catches_pods_bound_to_a_node_being_drained() {
    let config = config("spot-drain.yaml", "none", 15, 10);
    catches(
        config,
        Bug::SchedulerIgnoresDisruptedTaint,
        "draining-nodes-closed",
        1,
    );
}

/// A claim force-deleted at 6 minutes leaves its instance running: garbage collection must
/// terminate it within the window.
#[test]
fn no_leaked_instances_catches_garbage_collection_blind_to_orphaned_instances() {
    let config = config("force-deleted-claim.yaml", "none", 15, 10);
    catches(config, Bug::GcBlind, "no-leaked-instances", 1);
}

#[test]
fn pdb_respected_catches_evictions_turned_into_deletes() {
    let config = config("pdb-drain.yaml", "none", 15, 10);
    catches(config, Bug::EvictionsAsDeletes, "pdb-respected", 2);
}

#[test]
fn do_not_disrupt_respected_catches_a_hidden_annotation() {
    let config = config("do-not-disrupt-drain.yaml", "none", 15, 10);
    catches(config, Bug::HideDoNotDisrupt, "do-not-disrupt-respected", 3);
}

/// Spot nodes holding ordinary and `system-cluster-critical` pods, interrupted at 8 minutes:
/// each drain must evict the critical pods only once the ordinary ones are gone.
#[test]
fn drain_order_catches_critical_pods_evicted_with_the_ordinary_ones() {
    let config = config("critical-drain.yaml", "none", 15, 10);
    catches(config, Bug::HidePriorityClasses, "drain-order", 1);
}

#[test]
fn claim_storm_catches_launch_retries_minting_claims() {
    let config = config("no-capacity.yaml", "none", 5, 1);
    catches(config, Bug::MintClaimOnFailedLaunch, "claim-storm", 1);
}

/// Twelve pending pods: every claim planned for them is created twice, so the in-flight claims
/// are planned for twice the CPU the pods ask for.
#[test]
fn provisioning_bounded_catches_claims_created_twice() {
    let config = config("web.yaml", "none", 5, 5);
    catches(config, Bug::DoubleClaimCreates, "provisioning-bounded", 1);
}

#[test]
fn interruption_rehomed_catches_dropped_interruption_messages() {
    let config = config("spot-drain.yaml", "none", 15, 10);
    catches(
        config,
        Bug::DropInterruptionMessages,
        "interruption-rehomed",
        2,
    );
}

#[test]
fn scheduled_change_acted_catches_dropped_maintenance_notices() {
    // EC2 schedules one node's stop 10 minutes ahead; with the queue's messages dropped the
    // controller never hears of it and the node is still in service when EC2 stops it.
    let config = config("scheduled-maintenance.yaml", "none", 20, 5);
    catches(
        config,
        Bug::DropInterruptionMessages,
        "scheduled-change-acted",
        1,
    );
}

#[test]
fn interruption_rehomed_excuses_a_drain_no_replacement_could_be_ready_for() {
    // New nodes stay NotReady for a minute: a replacement launched at the warning turns Ready
    // 90 s after it at the earliest, when the controller's hold has ended and the drain started
    // without it. The world was too slow, not the controller: excused, not a violation.
    let config = config("spot-slow-cni.yaml", "none", 15, 10);
    let outcome = swarm::run_seed(&config, 1);
    assert_eq!(violation(&outcome, "interruption-rehomed"), None);
    assert!(
        outcome.rehome_checked >= 1 && outcome.rehome_excused >= 1,
        "the storm's drain is checked and excused: {} checked, {} excused",
        outcome.rehome_checked,
        outcome.rehome_excused
    );
}

#[test]
fn claims_progress_catches_lost_registration_timeouts() {
    let config = config("never-boot.yaml", "none", 20, 5);
    catches(config, Bug::KeepUnregisteredClaims, "claims-progress", 2);
}

#[test]
fn nodes_join_catches_unjoinable_nodes_left_running() {
    // The controller names the wrong endpoint: no node joins. Without the bug each claim times
    // out and its instance is terminated; with it the instances run on unregistered.
    let config = config("wrong-endpoint.yaml", "none", 30, 5);
    catches(config, Bug::KeepUnregisteredClaims, "nodes-join", 1);
}

#[test]
fn foreign_instances_untouched_catches_gc_over_the_cluster_tag() {
    let config = config("web.yaml", "none", 10, 5);
    catches(
        config,
        Bug::GcOverClusterTag,
        "foreign-instances-untouched",
        1,
    );
}

/// The neighbour cluster's Karpenter instance, found by a collector scoped by the cluster tag's
/// key alone and taken for one of ours, is terminated as a leak.
#[test]
fn foreign_instances_untouched_catches_instance_gc_over_every_cluster() {
    let config = config("web.yaml", "none", 10, 5);
    catches(
        config,
        Bug::InstanceGcOverAnyCluster,
        "foreign-instances-untouched",
        1,
    );
}

#[test]
fn termination_progress_catches_ignored_terminations() {
    let config = config("never-boot.yaml", "none", 25, 10);
    catches(config, Bug::IgnoreTerminations, "termination-progress", 3);
}

#[test]
fn pods_scheduled_catches_pending_pods_hidden_from_the_controller() {
    let config = config("web.yaml", "none", 15, 5);
    catches(config, Bug::HidePendingPods, "pods-scheduled", 1);
}

#[test]
fn liveness_catches_pending_pods_hidden_from_the_controller() {
    let config = config("web.yaml", "none", 5, 5);
    catches(config, Bug::HidePendingPods, "liveness", 2);
}

#[test]
fn single_leader_catches_candidates_blind_to_the_lease_holder() {
    let config = config("web.yaml", "leader-failover", 10, 5);
    catches(config, Bug::HideLeaseHolder, "single-leader", 1);
}

#[test]
fn determinism_catches_a_world_that_differs_between_runs() {
    let mut config = config("web.yaml", "none", 5, 5);
    config.determinism_every = 1;
    let clean = swarm::run_seed(&config, 4);
    assert!(clean.determinism_checked);
    assert_eq!(
        violation(&clean, "determinism"),
        None,
        "{:?}",
        clean.violations
    );
    config.bug = Bug::Nondeterministic;
    let buggy = swarm::run_seed(&config, 4);
    assert!(
        violation(&buggy, "determinism").is_some(),
        "{:?}",
        buggy.violations
    );
    let replay = config.replay(4);
    assert!(replay.contains("--determinism-every 1"), "{replay}");
    let (replayed, _) = swarm::from_replay(&replay, &root()).expect("replay parses");
    let again = swarm::run_seed(&replayed, 4);
    assert!(
        violation(&again, "determinism").is_some(),
        "`{replay}` reproduces it: {:?}",
        again.violations
    );
}

#[test]
fn every_bug_has_a_command_line_name() {
    for &bug in Bug::VARIANTS {
        assert_eq!(bug.name().parse::<Bug>().ok(), Some(bug));
    }
    assert!("no-such-bug".parse::<Bug>().is_err());
}

#[test]
fn invariants_keep_their_stable_names_in_report_order() {
    // The names are what reports, replays and the README use: renaming or reordering a variant
    // must not change them.
    let names: Vec<&str> = Invariant::iter().map(Invariant::name).collect();
    assert_eq!(
        names,
        [
            "nodepool-limits",
            "no-leaked-instances",
            "foreign-instances-untouched",
            "foreign-templates-untouched",
            "pinned-ami-honoured",
            "pods-fit-nodes",
            "drained-before-terminate",
            "draining-nodes-closed",
            "drain-order",
            "startup-taints-honoured",
            "pdb-respected",
            "do-not-disrupt-respected",
            "disruption-respects-pdbs",
            "budgets-respected",
            "consolidate-after-honoured",
            "consolidation-saves",
            "consolidation-churn",
            "claim-storm",
            "provisioning-bounded",
            "unavailable-offerings-honoured",
            "interruption-rehomed",
            "scheduled-change-acted",
            "nodes-join",
            "claims-progress",
            "termination-progress",
            "expiration-honoured",
            "launch-templates-collected",
            "pods-scheduled",
            "single-leader",
            "liveness",
        ]
    );
    for invariant in Invariant::iter() {
        assert_eq!(invariant.name().parse::<Invariant>().ok(), Some(invariant));
        assert_eq!(invariant.to_string(), invariant.name());
    }
    assert!("no-such-invariant".parse::<Invariant>().is_err());
}

#[test]
fn a_fresh_world_reports_every_invariant_held_in_report_order() {
    let scenario = Scenario::load("default").expect("the default scenario loads");
    let world = sim_block_on(World::new(1, scenario)).expect("the world builds");
    let results = world.invariants().results();
    let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
    let expected: Vec<&str> = Invariant::iter().map(Invariant::name).collect();
    assert_eq!(names, expected);
    assert!(
        results
            .iter()
            .all(|r| r.held && r.violations == 0 && r.first.is_none())
    );
}

/// On `scale-in-waves` (four sizes) the controller packs pods onto few large nodes and empties them
/// one by one, so a hidden budget never shows; on one small size a wave empties many nodes at once
/// and only the budget keeps their removal to one at a time (8 of 20 at once with the bug, seeds 1..3).
#[test]
fn budgets_respected_catches_budgets_hidden_from_the_controller() {
    let config = config("scale-in-one-size.yaml", "none", 30, 5);
    catches(config, Bug::HideDisruptionBudgets, "budgets-respected", 1);
}

/// A scale-in leaves underutilized nodes holding pods a `maxUnavailable: 0` budget pins: with
/// the budgets hidden from it, consolidation starts commands on them (mutation 11's bug, at the
/// seam).
#[test]
fn disruption_respects_pdbs_catches_budgets_hidden_from_the_controller() {
    let config = config("pdb-consolidate.yaml", "none", 20, 5);
    catches(config, Bug::HidePdbs, "disruption-respects-pdbs", 1);
}

#[test]
fn consolidation_churn_catches_replacements_consolidated_at_once() {
    let config = config("scale-in-waves.yaml", "none", 30, 5);
    catches(
        config,
        Bug::HideConsolidationSettling,
        "consolidation-churn",
        1,
    );
}

/// Nodes of a pool with `expireAfter: 5m`: hidden from the controller, none is ever deleted.
#[test]
fn expiration_honoured_catches_an_expire_after_hidden_from_the_controller() {
    let config = config("expiring.yaml", "none", 12, 5);
    catches(config, Bug::HideExpireAfter, "expiration-honoured", 1);
}

/// Do-not-disrupt pods on nodes that expire at 5 minutes with a 2-minute terminationGracePeriod:
/// no eviction moves them, so the terminator must delete each at the deadline minus its grace
/// period (30 s) before the instance goes at the deadline. With those deletes dropped, the
/// instance is terminated under pods nobody deleted.
#[test]
fn drained_before_terminate_catches_pod_deletes_dropped_at_the_grace_deadline() {
    let config = config("expiring-do-not-disrupt.yaml", "none", 12, 5);
    catches(config, Bug::DropPodDeletes, "drained-before-terminate", 1);
}

/// Twelve pods launched at the start, then no launch: their templates fall out of use, and
/// with deletes dropped they are still there ten minutes on.
#[test]
fn launch_templates_collected_catches_template_deletes_dropped() {
    let config = config("web.yaml", "none", 15, 5);
    catches(
        config,
        Bug::KeepLaunchTemplates,
        "launch-templates-collected",
        1,
    );
}

/// The neighbour cluster's template, found by a collector scoped by the tag's key alone, is
/// deleted as unused.
#[test]
fn foreign_templates_untouched_catches_template_collection_over_every_cluster() {
    let config = config("web.yaml", "none", 5, 5);
    catches(
        config,
        Bug::TemplateGcOverAnyCluster,
        "foreign-templates-untouched",
        1,
    );
}

/// Nodes pinned to `al2023@v20250601`; a release at 5 minutes. Resolved as `@latest`, the
/// class drifts onto the new release and its replacements boot it.
#[test]
fn pinned_ami_honoured_catches_a_pinned_alias_that_follows_the_latest_release() {
    let config = config("pinned-ami.yaml", "none", 15, 5);
    catches(
        config,
        Bug::PinnedAliasFollowsLatest,
        "pinned-ami-honoured",
        1,
    );
}

/// A web deployment scaled in at 8 minutes on m5 nodes with `consolidateAfter: 2m`: with the
/// controller blind to `lastPodEventTime`, the nodes the scale-in touched are consolidated within
/// the validation delay of the scale-in, not two minutes after it.
#[test]
fn consolidate_after_honoured_catches_last_pod_events_hidden_from_the_controller() {
    let config = config("consolidate-replace.yaml", "none", 20, 5);
    catches(
        config,
        Bug::HideLastPodEvents,
        "consolidate-after-honoured",
        1,
    );
}

/// The same scale-in: the node consolidation replaces by a smaller one is replaced, under the
/// bug, by a node of its own offering, at its own price.
#[test]
fn consolidation_saves_catches_replacements_launched_at_the_replaced_price() {
    let config = config("consolidate-replace.yaml", "none", 20, 5);
    catches(
        config,
        Bug::ReplaceWithOwnOffering,
        "consolidation-saves",
        1,
    );
}

/// m5.large spot is dry in every zone: a controller that learns it from CreateFleet's errors asks
/// again only after three minutes; one that never sees the errors asks again at once.
#[test]
fn unavailable_offerings_honoured_catches_capacity_errors_hidden_from_the_controller() {
    let config = config("no-capacity.yaml", "none", 10, 1);
    catches(
        config,
        Bug::HideCapacityErrors,
        "unavailable-offerings-honoured",
        1,
    );
}

/// Custom-AMI nodes whose user data leaves the pool's startup taint out: registration must put
/// it on each node; with it stripped from the registration patch, pods land before its owner
/// removed it.
#[test]
fn startup_taints_honoured_catches_nodes_registered_without_their_startup_taints() {
    let config = config("custom-startup-taints.yaml", "none", 10, 5);
    // Unbroken, the world works end to end: the nodes join with the class's own user data,
    // registration adds the taint, its owner removes it and every pod runs.
    let clean = swarm::run_seed(&config, 1);
    assert!(clean.violations.is_empty(), "{:?}", clean.violations);
    catches(
        config,
        Bug::StripStartupTaints,
        "startup-taints-honoured",
        1,
    );
}
