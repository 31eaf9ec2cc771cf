//! Cluster-level default topology spread constraints (upstream's `--scheduler-config` /
//! `SCHEDULER_CONFIG`): the `podTopologySpread.defaultConstraints` the cluster's kube-scheduler
//! applies to every pod that declares no `topologySpreadConstraints` of its own. Karpenter mirrors
//! them in its scheduling simulation so it buys the capacity those pods will really be spread
//! over; without them it packs a Deployment into one zone that kube-scheduler then refuses to
//! fill.
//!
//! kube-scheduler forbids a `labelSelector` on a default constraint and deduces one per pod (its
//! `helper.DefaultSelector`): the selectors of the Services that select the pod, merged, plus the
//! selector of the pod's controller when that is a ReplicationController, ReplicaSet or
//! StatefulSet. [`DefaultSpreads`] deduces the same selector, so the simulation counts the same
//! pods kube-scheduler does.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController, Service, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use serde::{Deserialize, Serialize};

use super::pod::PodInfo;

/// The parts of the cluster's kube-scheduler configuration Karpenter mirrors. Shaped like
/// kube-scheduler's fields (values copy across) but not its versioned
/// `KubeSchedulerConfiguration` schema, as upstream does.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SchedulerConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_topology_spread: Option<PodTopologySpreadConfig>,
}

/// kube-scheduler's PodTopologySpread plugin arguments, the part Karpenter mirrors.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodTopologySpreadConfig {
    /// Applied to every pod that declares no topology spread constraint of its own.
    #[serde(default)]
    pub default_constraints: Vec<DefaultConstraint>,
}

/// One default constraint: a `TopologySpreadConstraint` as written in the configuration. Its own
/// type (not k8s-openapi's, which skips unknown fields) so a misspelt field is refused, as
/// upstream's strict decoding refuses it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultConstraint {
    #[serde(default)]
    pub max_skew: i32,
    #[serde(default)]
    pub topology_key: String,
    #[serde(default)]
    pub when_unsatisfiable: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_domains: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_taints_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_label_keys: Option<Vec<String>>,
}

impl DefaultConstraint {
    /// The constraint stamped onto a pod, with the selector deduced for it.
    fn with_selector(&self, selector: LabelSelector) -> TopologySpreadConstraint {
        TopologySpreadConstraint {
            max_skew: self.max_skew,
            topology_key: self.topology_key.clone(),
            when_unsatisfiable: self.when_unsatisfiable.clone(),
            label_selector: Some(selector),
            min_domains: self.min_domains,
            node_affinity_policy: self.node_affinity_policy.clone(),
            node_taints_policy: self.node_taints_policy.clone(),
            match_label_keys: None,
        }
    }
}

/// What is wrong with one default constraint (the field it names comes first, as upstream words
/// it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConstraintProblem {
    #[error("maxSkew must be greater than 0")]
    MaxSkew,
    #[error("topologyKey must be set")]
    TopologyKeyMissing,
    #[error("topologyKey {key:?} is not a valid label name, {reason}")]
    TopologyKeyInvalid { key: String, reason: String },
    #[error("whenUnsatisfiable {0:?} must be one of \"DoNotSchedule\" or \"ScheduleAnyway\"")]
    WhenUnsatisfiable(String),
    #[error("labelSelector must not be set, as selectors are deduced for each pod")]
    LabelSelector,
    #[error("matchLabelKeys must not be set, as it has no effect on default constraints")]
    MatchLabelKeys,
}

/// Why a `--scheduler-config` value was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SchedulerConfigError {
    /// Not YAML or JSON of the expected shape (an unknown or misspelt field, a wrong type).
    #[error("decoding scheduler config, {0}")]
    Decode(String),
    #[error("validating scheduler config, podTopologySpread.defaultConstraints[{index}].{problem}")]
    Constraint {
        index: usize,
        problem: ConstraintProblem,
    },
    /// Two constraints share a topology key and `whenUnsatisfiable` (kube-scheduler refuses it).
    #[error(
        "validating scheduler config, podTopologySpread.defaultConstraints[{index}] is a duplicate of [{of}], {{{topology_key}, {when_unsatisfiable}}}"
    )]
    Duplicate {
        index: usize,
        of: usize,
        topology_key: String,
        when_unsatisfiable: String,
    },
}

impl SchedulerConfiguration {
    /// Decodes and validates a `--scheduler-config` value (YAML or JSON). Empty: `None`, no
    /// defaults (upstream's default). Unknown fields and malformed documents are refused, so a
    /// misconfiguration stops the controller at start instead of being ignored.
    pub fn parse(raw: &str) -> Result<Option<Self>, SchedulerConfigError> {
        // Blank (a chart's empty block scalar) decodes to nothing upstream too.
        if raw.trim().is_empty() {
            return Ok(None);
        }
        let config: Self = serde_yaml::from_str(raw)
            .map_err(|err| SchedulerConfigError::Decode(err.to_string()))?;
        config.validate()?;
        Ok(Some(config))
    }

    /// The checks of kube-scheduler's `ValidatePodTopologySpreadArgs` (upstream mirrors them, so
    /// a configuration accepted here is one the cluster's kube-scheduler accepts too).
    pub fn validate(&self) -> Result<(), SchedulerConfigError> {
        let constraints = self.default_constraints();
        for (index, constraint) in constraints.iter().enumerate() {
            validate_constraint(constraint)
                .map_err(|problem| SchedulerConfigError::Constraint { index, problem })?;
            if let Some(of) = constraints[..index].iter().position(|earlier| {
                earlier.topology_key == constraint.topology_key
                    && earlier.when_unsatisfiable == constraint.when_unsatisfiable
            }) {
                return Err(SchedulerConfigError::Duplicate {
                    index,
                    of,
                    topology_key: constraint.topology_key.clone(),
                    when_unsatisfiable: constraint.when_unsatisfiable.clone(),
                });
            }
        }
        Ok(())
    }

    /// The configured default constraints (none when the section is absent).
    pub fn default_constraints(&self) -> &[DefaultConstraint] {
        self.pod_topology_spread
            .as_ref()
            .map(|p| p.default_constraints.as_slice())
            .unwrap_or_default()
    }

    /// Whether any default constraint is configured (only then are Services and workload
    /// controllers read to deduce selectors).
    pub fn has_default_constraints(&self) -> bool {
        !self.default_constraints().is_empty()
    }
}

fn validate_constraint(constraint: &DefaultConstraint) -> Result<(), ConstraintProblem> {
    if constraint.max_skew <= 0 {
        return Err(ConstraintProblem::MaxSkew);
    }
    if constraint.topology_key.is_empty() {
        return Err(ConstraintProblem::TopologyKeyMissing);
    }
    if let Some(reason) = crate::validation::qualified_name_error(&constraint.topology_key) {
        return Err(ConstraintProblem::TopologyKeyInvalid {
            key: constraint.topology_key.clone(),
            reason,
        });
    }
    if !matches!(
        constraint.when_unsatisfiable.as_str(),
        "DoNotSchedule" | "ScheduleAnyway"
    ) {
        return Err(ConstraintProblem::WhenUnsatisfiable(
            constraint.when_unsatisfiable.clone(),
        ));
    }
    // A static selector would match an unrelated set of pods in every other workload.
    if constraint.label_selector.is_some() {
        return Err(ConstraintProblem::LabelSelector);
    }
    // Inert upstream: the deduced selector replaces whatever the keys merged in.
    if constraint
        .match_label_keys
        .as_ref()
        .is_some_and(|k| !k.is_empty())
    {
        return Err(ConstraintProblem::MatchLabelKeys);
    }
    Ok(())
}

/// The objects kube-scheduler deduces default selectors from, by reference.
#[derive(Clone, Debug, Default)]
pub struct SelectorSources<'a> {
    pub services: Vec<&'a Service>,
    pub replica_sets: Vec<&'a ReplicaSet>,
    pub stateful_sets: Vec<&'a StatefulSet>,
    pub replication_controllers: Vec<&'a ReplicationController>,
}

/// A namespaced object's `(namespace, name)`.
type Key<'a> = (&'a str, &'a str);

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Key<'_> {
    (
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// What a pod's controller adds to the deduced selector, shaped as kube-scheduler folds it in: a
/// ReplicationController's selector overwrites the Services' labels (`labels.Merge`); a
/// ReplicaSet's or StatefulSet's is ANDed on as requirements (`selector.Add`).
#[derive(Clone, Debug, Default)]
struct OwnerContribution {
    match_labels: BTreeMap<String, String>,
    match_expressions: Vec<LabelSelectorRequirement>,
}

/// Applies the configured default constraints to the scheduling view of pods that declare none,
/// with the selector kube-scheduler would deduce for each. One per snapshot: it indexes the
/// selector sources once and remembers each workload's selector, since a workload's pods share
/// the inputs (namespace, controller, labels).
#[derive(Debug)]
pub struct DefaultSpreads<'a> {
    constraints: &'a [DefaultConstraint],
    services: BTreeMap<&'a str, Vec<&'a Service>>,
    replica_sets: BTreeMap<Key<'a>, &'a ReplicaSet>,
    stateful_sets: BTreeMap<Key<'a>, &'a StatefulSet>,
    replication_controllers: BTreeMap<Key<'a>, &'a ReplicationController>,
    /// Deduced selectors by (namespace, controller UID, labels); `None`: nothing deduced.
    deduced: BTreeMap<(String, String, BTreeMap<String, String>), Option<LabelSelector>>,
}

impl<'a> DefaultSpreads<'a> {
    /// `None` when the configuration has no default constraint (nothing to apply).
    pub fn new(config: &'a SchedulerConfiguration, sources: SelectorSources<'a>) -> Option<Self> {
        if !config.has_default_constraints() {
            return None;
        }
        let mut services: BTreeMap<&str, Vec<&Service>> = BTreeMap::new();
        for service in sources.services {
            services
                .entry(key_of(&service.metadata).0)
                .or_default()
                .push(service);
        }
        Some(Self {
            constraints: config.default_constraints(),
            services,
            replica_sets: by_key(sources.replica_sets, |o| &o.metadata),
            stateful_sets: by_key(sources.stateful_sets, |o| &o.metadata),
            replication_controllers: by_key(sources.replication_controllers, |o| &o.metadata),
            deduced: BTreeMap::new(),
        })
    }

    /// Gives `info` (the scheduling view of `pod`) the default constraints when the pod declares
    /// none of its own and a selector can be deduced for it; all or nothing, as kube-scheduler.
    /// Only the scheduling view changes: nothing is written to the API server.
    pub fn apply(&mut self, info: &mut PodInfo, pod: &Pod) {
        let declares = pod
            .spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.as_ref())
            .is_some_and(|c| !c.is_empty());
        if declares {
            return;
        }
        let Some(selector) = self.selector(pod) else {
            return;
        };
        let constraints: Vec<TopologySpreadConstraint> = self
            .constraints
            .iter()
            .map(|c| c.with_selector(selector.clone()))
            .collect();
        info.set_spread(&constraints);
    }

    /// The selector kube-scheduler deduces for `pod`'s default constraints; `None` when it
    /// deduces an empty one (then the pod gets no defaults: an empty selector would count every
    /// pod of the namespace).
    pub fn selector(&mut self, pod: &Pod) -> Option<LabelSelector> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let owner_uid = controller_of(pod)
            .map(|o| o.uid.clone())
            .unwrap_or_default();
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let key = (namespace.to_string(), owner_uid, labels);
        if let Some(known) = self.deduced.get(&key) {
            return known.clone();
        }
        let selector = self.deduce(pod, namespace, &key.2);
        self.deduced.insert(key, selector.clone());
        selector
    }

    fn deduce(
        &self,
        pod: &Pod,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Option<LabelSelector> {
        let mut match_labels = BTreeMap::new();
        for service in self.services.get(namespace).into_iter().flatten() {
            // A Service without a selector selects no pod; one with an empty selector selects
            // every pod but contributes no label.
            let Some(selector) = service.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
                continue;
            };
            if selector.iter().all(|(k, v)| labels.get(k) == Some(v)) {
                match_labels.extend(selector.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        let owner = self.owner_contribution(pod, namespace).unwrap_or_default();
        match_labels.extend(owner.match_labels);
        let match_expressions = owner.match_expressions;
        if match_labels.is_empty() && match_expressions.is_empty() {
            return None;
        }
        Some(LabelSelector {
            match_labels: (!match_labels.is_empty()).then_some(match_labels),
            match_expressions: (!match_expressions.is_empty()).then_some(match_expressions),
        })
    }

    /// What the pod's controller contributes; `None` for no controller, a kind kube-scheduler
    /// does not read, or a controller that is gone (upstream carries on without it).
    fn owner_contribution(&self, pod: &Pod, namespace: &str) -> Option<OwnerContribution> {
        let owner = controller_of(pod)?;
        let key = (namespace, owner.name.as_str());
        match (owner.api_version.as_str(), owner.kind.as_str()) {
            ("v1", "ReplicationController") => {
                let rc = self.replication_controllers.get(&key)?;
                let selector = rc.spec.as_ref()?.selector.clone().unwrap_or_default();
                (!selector.is_empty()).then_some(OwnerContribution {
                    match_labels: selector,
                    match_expressions: Vec::new(),
                })
            }
            ("apps/v1", "ReplicaSet") => {
                let rs = self.replica_sets.get(&key)?;
                Some(requirements_of(&rs.spec.as_ref()?.selector))
            }
            ("apps/v1", "StatefulSet") => {
                let ss = self.stateful_sets.get(&key)?;
                Some(requirements_of(&ss.spec.as_ref()?.selector))
            }
            _ => None,
        }
    }
}

fn by_key<'a, T>(
    objects: Vec<&'a T>,
    meta: impl Fn(&'a T) -> &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> BTreeMap<Key<'a>, &'a T> {
    objects.into_iter().map(|o| (key_of(meta(o)), o)).collect()
}

/// The pod's controller reference (`controller: true`).
fn controller_of(
    pod: &Pod,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// A workload's selector as requirements (each `matchLabels` entry a one-value `In`), ANDed onto
/// the Services' labels as kube-scheduler's `selector.Add` does.
fn requirements_of(selector: &LabelSelector) -> OwnerContribution {
    let mut match_expressions: Vec<LabelSelectorRequirement> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(key, value)| LabelSelectorRequirement {
            key: key.clone(),
            operator: "In".to_string(),
            values: Some(vec![value.clone()]),
        })
        .collect();
    match_expressions.extend(selector.match_expressions.iter().flatten().cloned());
    OwnerContribution {
        match_labels: BTreeMap::new(),
        match_expressions,
    }
}
