//! karpenter-core: the product's logic, written against narrow seams so that the same code runs in
//! production, in the deterministic simulation and in e2e.
//!
//! # Modules
//!
//! The API and what reads it:
//! - [`api`]: the Karpenter v1 types (NodePool, NodeClaim, EC2NodeClass), their CRDs, the
//!   well-known labels, annotations and tags ([`api::labels`]) and [`api::ProviderId`].
//! - [`validation`]: upstream's admission rules (schema, CEL, runtime) as one Rust function per
//!   object, returning every violation with its JSON path.
//! - [`manifest`]: multi-document YAML into typed, validated objects.
//! - [`plan`]: `karpenter plan`'s pure half: manifests in, a scheduling input out.
//!
//! The ground the controllers stand on:
//! - [`seams`]: the traits every world plugs into (`Clock`, `KubeApi`, `Ec2`, `Sqs`).
//! - [`context`]: the one `Arc<Context>` every controller holds (seams, caches, metrics,
//!   recorder, options).
//! - [`state`]: watch-fed caches of the kinds the controllers read.
//! - [`runtime`]: work queues, informers and the runners every controller loop is built from.
//! - [`events`]: the event [`events::Recorder`]; [`metrics`]: the Prometheus metrics.
//! - [`catalog`]: instance types and their priced offerings, and the unavailable-offerings cache
//!   ([`catalog::UnavailableOfferings`]).
//! - [`resources`]: resource quantities as numbers.
//! - [`scheduling`]: the scheduling simulation (pods × nodes × NodePools → placements and
//!   planned NodeClaims); pure, no I/O.
//!
//! The controllers, by the object they own (Karpenter's `controllers/<object>/<concern>`):
//! - [`provisioning`]: pending pods → NodeClaims (batching, the cluster snapshot, the solve).
//! - [`nodeclaim`]: a NodeClaim's lifecycle (launch, registration, initialization, liveness) and
//!   garbage collection.
//! - [`nodeclass`]: resolving an EC2NodeClass (subnets, security groups, AMI).
//! - [`nodepool`]: NodePool status (node and resource counts).
//! - [`disruption`]: emptiness, drift and consolidation under budgets, PDBs and
//!   `do-not-disrupt` (a pure decision engine and the orchestration that carries commands out),
//!   expiration, and the pod-events controller that keeps `lastPodEventTime`.
//! - [`termination`]: the termination finalizer (taint, drain, volumes, instance, finalizers).
//! - [`interruption`]: the SQS interruption queue (spot warnings, scheduled changes, state
//!   changes).
//! - [`replacement`]: the replacement-first protocol those three share through annotations.
//! - [`state_metrics`], [`pod_metrics`], [`status_metrics`]: upstream's metric controllers
//!   (node, NodePool and pod gauges; operatorpkg's `operator_*` status-condition series), passes
//!   over the caches that write only metrics.
//! - [`leader`]: leader election over a Lease.
//! - [`operator`]: the one composition point: every controller over one context, one step.
//!
//! # One pending pod, end to end
//!
//! ```text
//!  Pod (Pending, Unschedulable)
//!   │ provisioning: the batch window closes (1 s idle, 10 s max)
//!   ▼
//!  Snapshot (pools, nodes, in-flight claims, pending pods)  ──▶  scheduling::solve
//!   │ a PlannedClaim (pool, instance types cheapest first, requirements, requests)
//!   ▼
//!  NodeClaim created (generateName <pool>-)  ·  Nominated event on the pod
//!   │ nodeclaim, same step: finalizer, then the phases
//!   ▼
//!  launch: adopt a tagged instance, or resolve the EC2NodeClass (nodeclass) and CreateFleet
//!   │ status.providerID aws:///<zone>/<instance-id>, Launched=True
//!   ▼
//!  instance boots (EC2)  ──▶  kubelet registers a Node with that providerID
//!   │ registration: labels, taints, finalizer and owner onto the Node; Registered=True
//!   ▼
//!  initialization: Node Ready, startup taints gone, extended resources allocatable;
//!   │ Initialized=True, the Node labelled karpenter.sh/initialized
//!   ▼
//!  kube-scheduler binds the pod to the Node  ──▶  Running
//! ```
//!
//! Every state lives in the API server or EC2, so a restarted controller resumes wherever this
//! was interrupted.

pub mod api;
pub mod capacityreservation;
pub mod catalog;
pub mod context;
pub mod disruption;
pub mod events;
pub mod interruption;
pub mod leader;
pub mod manifest;
pub mod metrics;
pub mod nodeclaim;
pub mod nodeclass;
pub mod nodepool;
pub mod operator;
pub mod plan;
pub mod pod_metrics;
pub mod provisioning;
pub mod rbac;
pub mod replacement;
pub mod resources;
pub mod runtime;
pub mod scheduling;
pub mod seams;
pub mod state;
pub mod state_metrics;
pub mod status_metrics;
pub mod termination;
pub mod validation;
