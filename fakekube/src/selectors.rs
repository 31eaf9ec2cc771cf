//! Label and field selectors of list and watch, and the `metav1.LabelSelector` of a
//! PodDisruptionBudget. Unsupported syntax is an error ([`KubeError::Invalid`]), never a silent
//! "matches everything": a selector the controller thinks filters must filter.

use std::collections::BTreeSet;

use karpenter_core::seams::KubeError;
use karpenter_core::seams::kube::{ListOptions, ResourceKind};
use serde_json::Value;

/// The longest label key Kubernetes accepts: a 253-character DNS prefix, `/`, a 63-character name.
const LABEL_KEY_LEN_MAX: usize = 317;
/// The longest label value Kubernetes accepts.
const LABEL_VALUE_LEN_MAX: usize = 63;

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Requirement {
    Exists(String),
    NotExists(String),
    Equals(String, String),
    /// Also matches objects without the label, as Kubernetes does.
    NotEquals(String, String),
    In(String, BTreeSet<String>),
    /// Also matches objects without the label, as Kubernetes does.
    NotIn(String, BTreeSet<String>),
}

impl Requirement {
    fn matches(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        let get = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        match self {
            Requirement::Exists(key) => get(key).is_some(),
            Requirement::NotExists(key) => get(key).is_none(),
            Requirement::Equals(key, value) => get(key) == Some(value.as_str()),
            Requirement::NotEquals(key, value) => get(key) != Some(value.as_str()),
            Requirement::In(key, values) => get(key).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(key, values) => get(key).is_none_or(|v| !values.contains(v)),
        }
    }
}

/// A label selector: every requirement must hold. Empty matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses Kubernetes' string syntax: `a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (b,c)`,
    /// `a notin (b,c)`, joined by commas.
    pub fn parse(text: &str) -> Result<Self, KubeError> {
        let invalid = |why: &str| KubeError::Invalid(format!("label selector {text:?}: {why}"));
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let mut requirements = Vec::new();
        for term in split_top_level(text).map_err(|why| invalid(&why))? {
            let term = term.trim();
            if term.is_empty() {
                return Err(invalid("empty requirement"));
            }
            requirements.push(parse_requirement(term).map_err(|why| invalid(&why))?);
        }
        Ok(Self { requirements })
    }

    /// The selector of a PodDisruptionBudget (`metav1.LabelSelector`: `matchLabels` and
    /// `matchExpressions`). `None` for a null selector, which selects nothing in `policy/v1`.
    pub fn from_label_selector(selector: &Value) -> Result<Option<Self>, String> {
        if selector.is_null() {
            return Ok(None);
        }
        let object = selector
            .as_object()
            .ok_or_else(|| "selector is not an object".to_string())?;
        let mut requirements = Vec::new();
        if let Some(labels) = object.get("matchLabels").filter(|v| !v.is_null()) {
            let labels = labels
                .as_object()
                .ok_or_else(|| "matchLabels is not an object".to_string())?;
            for (key, value) in labels {
                let value = value
                    .as_str()
                    .ok_or_else(|| format!("matchLabels[{key}] is not a string"))?;
                requirements.push(Requirement::Equals(key.clone(), value.to_string()));
            }
        }
        if let Some(expressions) = object.get("matchExpressions").filter(|v| !v.is_null()) {
            let expressions = expressions
                .as_array()
                .ok_or_else(|| "matchExpressions is not an array".to_string())?;
            for expression in expressions {
                requirements.push(expression_requirement(expression)?);
            }
        }
        Ok(Some(Self { requirements }))
    }

    pub fn matches(&self, object: &Value) -> bool {
        let labels = object["metadata"]["labels"].as_object();
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

fn expression_requirement(expression: &Value) -> Result<Requirement, String> {
    let key = expression["key"]
        .as_str()
        .ok_or_else(|| "matchExpressions key is not a string".to_string())?
        .to_string();
    let values: BTreeSet<String> = expression["values"]
        .as_array()
        .map(|values| {
            values
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    match expression["operator"].as_str() {
        Some("In") if !values.is_empty() => Ok(Requirement::In(key, values)),
        Some("NotIn") if !values.is_empty() => Ok(Requirement::NotIn(key, values)),
        Some("Exists") if values.is_empty() => Ok(Requirement::Exists(key)),
        Some("DoesNotExist") if values.is_empty() => Ok(Requirement::NotExists(key)),
        other => Err(format!(
            "matchExpressions operator {other:?} with {} values is not valid",
            values.len()
        )),
    }
}

/// Splits at commas outside parentheses (`a in (b,c),d` is two terms).
fn split_top_level(text: &str) -> Result<Vec<&str>, String> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1).ok_or("unbalanced ')'")?,
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced '('".to_string());
    }
    terms.push(&text[start..]);
    Ok(terms)
}

fn parse_requirement(term: &str) -> Result<Requirement, String> {
    if let Some(open) = term.find('(') {
        let close = term
            .rfind(')')
            .filter(|close| *close == term.len() - 1)
            .ok_or_else(|| format!("{term:?}: text after ')'"))?;
        let head: Vec<&str> = term[..open].split_whitespace().collect();
        let values = term[open + 1..close]
            .split(',')
            .map(|v| checked_value(v.trim()))
            .collect::<Result<BTreeSet<String>, String>>()?;
        return match head.as_slice() {
            [key, "in"] => Ok(Requirement::In(checked_key(key)?, values)),
            [key, "notin"] => Ok(Requirement::NotIn(checked_key(key)?, values)),
            _ => Err(format!(
                "{term:?}: expected `key in (…)` or `key notin (…)`"
            )),
        };
    }
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::NotExists(checked_key(key.trim())?));
    }
    if let Some((key, value)) = term.split_once("!=") {
        return Ok(Requirement::NotEquals(
            checked_key(key.trim())?,
            checked_value(value.trim())?,
        ));
    }
    if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Ok(Requirement::Equals(
            checked_key(key.trim())?,
            checked_value(value.trim())?,
        ));
    }
    Ok(Requirement::Exists(checked_key(term)?))
}

fn checked_key(key: &str) -> Result<String, String> {
    let ok = !key.is_empty()
        && key.len() <= LABEL_KEY_LEN_MAX
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(key.to_string())
    } else {
        Err(format!("{key:?} is not a valid label key"))
    }
}

fn checked_value(value: &str) -> Result<String, String> {
    let ok = value.len() <= LABEL_VALUE_LEN_MAX
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(value.to_string())
    } else {
        Err(format!("{value:?} is not a valid label value"))
    }
}

/// One term of a field selector.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FieldRequirement {
    /// JSON pointer of the field (`/spec/nodeName`).
    pointer: &'static str,
    value: String,
    equal: bool,
}

/// A field selector: every term must hold. Empty matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses `field=value`, `field==value` and `field!=value` terms joined by commas, for the
    /// fields Kubernetes indexes for `kind`: `metadata.name` and `metadata.namespace` everywhere;
    /// `spec.nodeName`, `spec.schedulerName`, `spec.restartPolicy`, `status.phase` and
    /// `status.nominatedNodeName` on pods; `spec.unschedulable` on nodes. Any other field is
    /// rejected, as Kubernetes rejects it ("field label not supported").
    pub fn parse(kind: &ResourceKind, text: &str) -> Result<Self, KubeError> {
        let invalid = |why: String| KubeError::Invalid(format!("field selector {text:?}: {why}"));
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let mut requirements = Vec::new();
        for term in text.split(',') {
            let term = term.trim();
            let (field, value, equal) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, v, true)
            } else {
                return Err(invalid(format!("{term:?} is not `field=value`")));
            };
            let field = field.trim();
            let pointer = field_pointer(kind, field)
                .ok_or_else(|| invalid(format!("field label not supported: {field}")))?;
            requirements.push(FieldRequirement {
                pointer,
                value: value.trim().to_string(),
                equal,
            });
        }
        Ok(Self { requirements })
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.requirements.iter().all(|r| {
            let actual = match object.pointer(r.pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                _ => String::new(),
            };
            (actual == r.value) == r.equal
        })
    }
}

fn field_pointer(kind: &ResourceKind, field: &str) -> Option<&'static str> {
    match field {
        "metadata.name" => return Some("/metadata/name"),
        "metadata.namespace" => return Some("/metadata/namespace"),
        _ => {}
    }
    if *kind == ResourceKind::POD {
        match field {
            "spec.nodeName" => Some("/spec/nodeName"),
            "spec.schedulerName" => Some("/spec/schedulerName"),
            "spec.restartPolicy" => Some("/spec/restartPolicy"),
            "status.phase" => Some("/status/phase"),
            "status.nominatedNodeName" => Some("/status/nominatedNodeName"),
            _ => None,
        }
    } else if *kind == ResourceKind::NODE && field == "spec.unschedulable" {
        Some("/spec/unschedulable")
    } else {
        None
    }
}

/// What a list or watch selects: a namespace (or all) and both selectors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Filter {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    pub fn parse(kind: &ResourceKind, options: &ListOptions) -> Result<Self, KubeError> {
        if !kind.namespaced
            && let Some(namespace) = &options.namespace
        {
            return Err(KubeError::Invalid(format!(
                "{} is cluster-scoped: cannot list in namespace {namespace}",
                kind.plural
            )));
        }
        Ok(Self {
            namespace: options.namespace.clone(),
            labels: LabelSelector::parse(options.label_selector.as_deref().unwrap_or(""))?,
            fields: FieldSelector::parse(kind, options.field_selector.as_deref().unwrap_or(""))?,
        })
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| object["metadata"]["namespace"].as_str() == Some(ns))
            && self.labels.matches(object)
            && self.fields.matches(object)
    }
}

/// The filters of a list or watch as the call log shows them.
pub(crate) fn describe(options: &ListOptions) -> String {
    let mut parts = Vec::new();
    if let Some(ns) = &options.namespace {
        parts.push(format!("ns={ns}"));
    }
    if let Some(l) = options.label_selector.as_deref().filter(|l| !l.is_empty()) {
        parts.push(format!("labels={l}"));
    }
    if let Some(f) = options.field_selector.as_deref().filter(|f| !f.is_empty()) {
        parts.push(format!("fields={f}"));
    }
    if parts.is_empty() {
        "*".to_string()
    } else {
        parts.join(" ")
    }
}
