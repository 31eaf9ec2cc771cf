//! Matching rules of the core API, written from the Kubernetes API reference: tolerations against
//! taints, node selector terms against node labels and name, label selectors against pod labels,
//! and the namespaces an affinity term applies to.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

pub(crate) type Labels = BTreeMap<String, String>;

/// Whether one toleration tolerates one taint (`v1.Toleration.ToleratesTaint`): the effect matches
/// (an empty effect matches all), the key matches (an empty key matches all), and then `Exists`
/// matches any value while `Equal` (the default) needs the same value.
pub(crate) fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

/// Whether any toleration tolerates the taint.
pub(crate) fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

/// The first taint with a scheduling effect (`NoSchedule`, `NoExecute`) none of the tolerations
/// tolerates. `PreferNoSchedule` only affects scoring, which the stand-in does not model.
pub(crate) fn untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| !tolerated(tolerations, t))
}

/// Whether a node selector (required node affinity) matches: terms are ORed, and an empty term
/// matches nothing.
pub(crate) fn node_selector_matches(
    selector: &NodeSelector,
    node_name: &str,
    labels: &Labels,
) -> bool {
    selector
        .node_selector_terms
        .iter()
        .any(|term| term_matches(term, node_name, labels))
}

/// One term: all `matchExpressions` on labels and all `matchFields` (only `metadata.name` exists)
/// hold, and at least one of them is given.
pub(crate) fn term_matches(term: &NodeSelectorTerm, node_name: &str, labels: &Labels) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            let value = (r.key == "metadata.name").then_some(node_name);
            value.is_some() && requirement_matches(r, value)
        })
}

/// One `NodeSelectorRequirement` against the value of its key (`None`: the node lacks the label).
/// `Gt`/`Lt` compare integers; a value that is not one matches neither.
pub(crate) fn requirement_matches(
    requirement: &NodeSelectorRequirement,
    value: Option<&str>,
) -> bool {
    let values = requirement.values.as_deref().unwrap_or_default();
    let integer = |text: &str| text.parse::<i64>().ok();
    match requirement.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(actual), [bound]) = (value.and_then(integer), values) else {
                return false;
            };
            let Some(bound) = integer(bound) else {
                return false;
            };
            if requirement.operator == "Gt" {
                actual > bound
            } else {
                actual < bound
            }
        }
        _ => false,
    }
}

/// Whether a label selector matches `labels`. `None` (a nil selector) matches nothing, an empty
/// selector everything; `matchLabels` and `matchExpressions` are ANDed. `extra` adds `key In
/// (value)` requirements (topology spread's `matchLabelKeys`).
pub(crate) fn selector_matches(
    selector: Option<&LabelSelector>,
    extra: &[(String, String)],
    labels: &Labels,
) -> bool {
    let Some(selector) = selector else {
        return false;
    };
    let match_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let expressions = selector.match_expressions.iter().flatten().all(|e| {
        let value = labels.get(&e.key);
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    let extra = extra.iter().all(|(k, v)| labels.get(k) == Some(v));
    match_labels && expressions && extra
}

/// The namespaces an affinity term selects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Namespaces {
    All,
    Some(BTreeSet<String>),
}

impl Namespaces {
    pub(crate) fn contains(&self, namespace: &str) -> bool {
        match self {
            Namespaces::All => true,
            Namespaces::Some(set) => set.contains(namespace),
        }
    }
}

/// The namespaces of an affinity term of a pod in `own`: `namespaces` plus those matching
/// `namespaceSelector` (an empty selector: all); neither given means the pod's own namespace.
pub(crate) fn term_namespaces(
    term: &PodAffinityTerm,
    own: &str,
    namespace_labels: &BTreeMap<String, Labels>,
) -> Namespaces {
    let listed = term.namespaces.as_deref().unwrap_or_default();
    let Some(selector) = &term.namespace_selector else {
        if listed.is_empty() {
            return Namespaces::Some(BTreeSet::from([own.to_string()]));
        }
        return Namespaces::Some(listed.iter().cloned().collect());
    };
    let empty = selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty);
    if empty {
        return Namespaces::All;
    }
    let mut set: BTreeSet<String> = listed.iter().cloned().collect();
    set.extend(
        namespace_labels
            .iter()
            .filter(|(_, labels)| selector_matches(Some(selector), &[], labels))
            .map(|(name, _)| name.clone()),
    );
    Namespaces::Some(set)
}

/// Whether a pod (namespace, labels) is selected by an affinity term of a pod in `owner_namespace`.
pub(crate) fn term_selects(
    term: &PodAffinityTerm,
    owner_namespace: &str,
    namespace_labels: &BTreeMap<String, Labels>,
    namespace: &str,
    labels: &Labels,
) -> bool {
    term_namespaces(term, owner_namespace, namespace_labels).contains(namespace)
        && selector_matches(term.label_selector.as_ref(), &[], labels)
}
