//! The step library of the behaviour specs: what `features/*.feature` scenarios say, done on the
//! simulated world (`karpenter_sim::world::World`: the real controller over the in-memory API
//! server, the kube-scheduler and kubelet stand-ins and fakecloud, on one clock and one seed).
//!
//! The Gherkin step definitions themselves live in `tests/steps/` (the cucumber test binary);
//! this crate holds what they are made of, so that a new area (termination, interruption,
//! disruption) adds a `.feature` file and a few thin step functions, not new machinery:
//!
//! - [`cluster`]: [`SimWorld`], the cucumber world. `Given` steps only *collect* (manifests,
//!   cloud knobs, the seed); the sim world is built from them by the first step that needs it,
//!   so a scenario reads as setup first, then events. It steps simulated time (a five-minute wait
//!   takes milliseconds), keeps Deployments at their replica count and DaemonSets on every node
//!   (the sim's ReplicaSet and DaemonSet stand-ins, `karpenter_sim::workloads`, the ones the
//!   world's own scenarios use) and checks the sim's invariants after every step, so every
//!   scenario also asserts that nothing leaked, no NodePool went over its limits and no node is
//!   overcommitted.
//! - [`manifests`]: the manifests under `features/manifests/` (the user's examples, unchanged)
//!   and inline ones, split into what the API server takes and the workloads to run.
//! - Deployments (from a manifest or from a step's words) and DaemonSets (one pod per node, so
//!   drains have daemons to order) are the sim's stand-ins, `karpenter_sim::workloads`.
//! - [`history`]: when every pod, node, NodeClaim and instance was first seen in each state,
//!   recorded every step: what "evicted only after", "terminated only after the drain" and
//!   "deleted 90 seconds after" are checked against once the objects are gone.
//! - [`observe`]: one consistent read of pods, nodes, NodeClaims, instances and prices, with
//!   the questions the `Then` steps ask of it.
//! - [`offerings`]: the cheapest offering a NodePool allows that fits a set of pods, computed
//!   from the catalog independently of the controller's scheduler (it is the check on it).
//!
//! Adding an area (termination, interruption, disruption) takes a `.feature` file and step
//! functions over what is here: `SimWorld::world()` gives the API server (`world.api()`:
//! create, delete, `evict` with PodDisruptionBudgets) and fakecloud (`world.cloud()`:
//! `interrupt_spot`, `stop_instance`, fault knobs); `SimWorld::apply` creates a PodDisruptionBudget or any other
//! manifest mid-scenario; an action step calls `SimWorld::mark` so "new nodes" count from it;
//! `wait_until`/`holds_for` step time; [`observe::Snapshot`] maps nodes to instances
//! (`NodeView::instance_id`) and pods to nodes. Termination and interruption steps single out
//! "the node running X" ([`SimWorld::single_out`], a [`Subject`]), act on it as a user or AWS
//! would (`delete_object`, `patch_object`, `terminate_instance`, fakecloud's interruption
//! knobs) and ask the [`history`] how it went.

pub mod cluster;
pub mod history;
pub mod manifests;
pub mod observe;
pub mod offerings;

pub use cluster::{SimWorld, Subject};
