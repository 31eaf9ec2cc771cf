//! Tests of karpenter-core: validation rules, generated CRDs, the user's examples, the seams, and
//! properties of the validator over arbitrary input. One test binary keeps link time down.

mod api_server;
mod capacity_reservations;
mod catalog;
mod conditions;
mod crds;
mod disruption;
mod disruption_pass;
mod drift;
mod examples;
mod fleet;
mod interruption;
mod interruption_handler;
mod launchtemplate;
mod leader;
mod live_catalog;
mod metrics;
mod nodeclaim;
mod nodeclass_termination;
mod nodepool_status;
mod operator_loops;
mod plan;
mod podevents;
mod properties;
mod provisioning;
mod runtime;
mod scheduler_config;
mod scheduling;
mod scheduling_properties;
mod seams;
mod support;
mod termination;
mod tidy;
mod userdata;
mod validation;
