//! Node selector requirements as value sets: intersection, compatibility and label matching.
//!
//! A requirement is a set of allowed values for one label key, possibly a complement ("any value
//! but these") and possibly bounded (numeric `Gt`/`Lt`/`Gte`/`Lte`). Every operator maps onto that:
//! `In` is a set, `NotIn` a complement, `Exists` the complement of nothing, `DoesNotExist` the
//! empty set. Intersecting requirements then narrows what a node may be, which is how pods,
//! NodePools and instance types are combined.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::api::labels::normalize_label;
use crate::api::{Operator, Requirement as ApiRequirement};

/// Allowed values of one label key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    /// When true, `values` are the excluded values (any other value is allowed).
    complement: bool,
    values: BTreeSet<String>,
    /// Inclusive numeric bounds (only on complements; concrete sets are filtered instead).
    gte: Option<i64>,
    lte: Option<i64>,
    /// Distinct values the final instance-type list must still cover (`minValues`).
    pub min_values: Option<i64>,
}

impl Requirement {
    /// Builds a requirement from an operator and its values. Numeric operators take their first
    /// value; an unparsable one yields an unsatisfiable requirement (validation rejects it first).
    pub fn new(operator: Operator, values: &[String]) -> Self {
        let set = || values.iter().cloned().collect::<BTreeSet<_>>();
        let bound = || values.first().and_then(|v| v.parse::<i64>().ok());
        let mut r = Requirement {
            complement: true,
            values: BTreeSet::new(),
            gte: None,
            lte: None,
            min_values: None,
        };
        match operator {
            Operator::In => {
                r.complement = false;
                r.values = set();
            }
            Operator::NotIn => r.values = set(),
            Operator::Exists => {}
            Operator::DoesNotExist => r.complement = false,
            Operator::Gt => match bound() {
                Some(n) => r.gte = n.checked_add(1),
                None => r.complement = false,
            },
            Operator::Gte => match bound() {
                Some(n) => r.gte = Some(n),
                None => r.complement = false,
            },
            Operator::Lt => match bound() {
                Some(n) => r.lte = n.checked_sub(1),
                None => r.complement = false,
            },
            Operator::Lte => match bound() {
                Some(n) => r.lte = Some(n),
                None => r.complement = false,
            },
        }
        r
    }

    /// `In [value]`.
    pub fn single(value: &str) -> Self {
        Self::new(Operator::In, &[value.to_string()])
    }

    /// `In values`.
    pub fn any_of<S: AsRef<str>>(values: &[S]) -> Self {
        let values: Vec<String> = values.iter().map(|v| v.as_ref().to_string()).collect();
        Self::new(Operator::In, &values)
    }

    /// Whether `value` is allowed.
    pub fn has(&self, value: &str) -> bool {
        let listed = self.values.contains(value);
        (if self.complement { !listed } else { listed }) && self.within_bounds(value)
    }

    fn within_bounds(&self, value: &str) -> bool {
        if self.gte.is_none() && self.lte.is_none() {
            return true;
        }
        match value.parse::<i64>() {
            Ok(n) => self.gte.is_none_or(|g| n >= g) && self.lte.is_none_or(|l| n <= l),
            Err(_) => false,
        }
    }

    /// The values of a concrete set (empty for complements).
    pub fn values(&self) -> impl Iterator<Item = &str> {
        self.values
            .iter()
            .map(String::as_str)
            .filter(move |_| !self.complement)
    }

    /// Number of allowed values (`usize::MAX`-ish for complements).
    pub fn len(&self) -> usize {
        if self.complement {
            usize::MAX - self.values.len()
        } else {
            self.values.len()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The operator this requirement is equivalent to.
    pub fn operator(&self) -> Operator {
        if self.complement {
            if !self.values.is_empty() {
                Operator::NotIn
            } else if self.gte.is_some() {
                Operator::Gte
            } else if self.lte.is_some() {
                Operator::Lte
            } else {
                Operator::Exists
            }
        } else if self.values.is_empty() {
            Operator::DoesNotExist
        } else {
            Operator::In
        }
    }

    /// One value a node may carry for this key, as upstream's `Requirement.Any()` picks it for a
    /// NodeClaim's custom labels: an `In` set's first value; for a complement (`Exists`,
    /// `NotIn`, bounded `Gt`/`Lt`), an integer it allows. `None` when nothing is allowed.
    ///
    /// Deliberate difference: upstream picks the `In` value in map order and the integer at
    /// random; here both are the smallest allowed (the first value in sorted order, the smallest
    /// integer from 0 (or the lower bound) within the bounds that is not excluded), so the same seed labels the
    /// same claim the same way.
    pub fn any(&self) -> Option<String> {
        if !self.complement {
            return self.values.iter().next().cloned();
        }
        let low = self.gte.unwrap_or(0);
        let high = self.lte.unwrap_or(i64::MAX);
        // At most `values.len()` integers are excluded, so the search ends within that many
        // steps past `low`.
        (low..=high)
            .take(self.values.len() + 1)
            .map(|n| n.to_string())
            .find(|v| !self.values.contains(v))
    }

    /// Values allowed by both.
    pub fn intersection(&self, other: &Requirement) -> Requirement {
        let complement = self.complement && other.complement;
        let gte = max_opt(self.gte, other.gte);
        let lte = min_opt(self.lte, other.lte);
        let min_values = max_opt(self.min_values, other.min_values);
        if let (Some(g), Some(l)) = (gte, lte)
            && g > l
        {
            let mut none = Requirement::new(Operator::DoesNotExist, &[]);
            none.min_values = min_values;
            return none;
        }
        let values: BTreeSet<String> = match (self.complement, other.complement) {
            (true, true) => self.values.union(&other.values).cloned().collect(),
            (true, false) => other.values.difference(&self.values).cloned().collect(),
            (false, true) => self.values.difference(&other.values).cloned().collect(),
            (false, false) => self.values.intersection(&other.values).cloned().collect(),
        };
        let bounded = Requirement {
            complement,
            values: BTreeSet::new(),
            gte,
            lte,
            min_values,
        };
        let values = values
            .into_iter()
            .filter(|v| bounded.within_bounds(v))
            .collect();
        let (gte, lte) = if complement { (gte, lte) } else { (None, None) };
        Requirement {
            complement,
            values,
            gte,
            lte,
            min_values,
        }
    }

    /// Whether some value satisfies both.
    pub fn intersects(&self, other: &Requirement) -> bool {
        !self.intersection(other).is_empty()
    }

    /// As an API requirement for `key` (what a NodeClaim's spec carries).
    pub fn to_api(&self, key: &str) -> ApiRequirement {
        let operator = self.operator();
        let values: Vec<String> = match operator {
            Operator::Gte => vec![self.gte.unwrap_or_default().to_string()],
            Operator::Lte => vec![self.lte.unwrap_or_default().to_string()],
            Operator::In | Operator::NotIn => self.values.iter().cloned().collect(),
            _ => Vec::new(),
        };
        ApiRequirement {
            key: key.to_string(),
            operator,
            values,
            min_values: self.min_values,
        }
    }
}

fn max_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values: Vec<&str> = self.values.iter().map(String::as_str).collect();
        match self.operator() {
            Operator::In => write!(f, "In [{}]", values.join(", ")),
            Operator::NotIn => write!(f, "NotIn [{}]", values.join(", ")),
            Operator::Exists => write!(f, "Exists"),
            Operator::DoesNotExist => write!(f, "DoesNotExist"),
            Operator::Gte | Operator::Lte | Operator::Gt | Operator::Lt => {
                let lo = self.gte.map(|g| format!(">={g}")).unwrap_or_default();
                let hi = self.lte.map(|l| format!("<={l}")).unwrap_or_default();
                write!(
                    f,
                    "{}",
                    [lo, hi]
                        .into_iter()
                        .filter(|s| !s.is_empty())
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            }
        }
    }
}

/// Why two requirement sets cannot describe the same node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Incompatibility {
    /// The incoming side requires a label the other side never sets.
    Undefined { key: String },
    /// Both sides constrain the key and no value satisfies both.
    Disjoint {
        key: String,
        existing: String,
        incoming: String,
    },
}

impl fmt::Display for Incompatibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Incompatibility::Undefined { key } => {
                write!(f, "label {key:?} does not have known values")
            }
            Incompatibility::Disjoint {
                key,
                existing,
                incoming,
            } => {
                write!(f, "key {key}, {incoming} not in {existing}")
            }
        }
    }
}

/// Requirements on a node, by label key (ordered, so iteration and output are deterministic).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Requirements(BTreeMap<String, Requirement>);

impl Requirements {
    pub fn new() -> Self {
        Self::default()
    }

    /// From API requirements (deprecated label keys are normalized).
    pub fn from_api(requirements: &[ApiRequirement]) -> Self {
        let mut out = Self::new();
        for r in requirements {
            let mut requirement = Requirement::new(r.operator, &r.values);
            requirement.min_values = r.min_values;
            out.add(normalize_label(&r.key), requirement);
        }
        out
    }

    /// Each label as an `In [value]` requirement.
    pub fn from_labels<'a>(labels: impl IntoIterator<Item = (&'a String, &'a String)>) -> Self {
        let mut out = Self::new();
        for (key, value) in labels {
            out.add(normalize_label(key), Requirement::single(value));
        }
        out
    }

    /// Narrows `key` by `requirement` (intersection with what is already there).
    pub fn add(&mut self, key: &str, requirement: Requirement) {
        match self.0.get_mut(key) {
            Some(existing) => *existing = existing.intersection(&requirement),
            None => {
                self.0.insert(key.to_string(), requirement);
            }
        }
    }

    /// Narrows by every requirement of `other`.
    pub fn add_all(&mut self, other: &Requirements) {
        for (key, requirement) in &other.0 {
            self.add(key, requirement.clone());
        }
    }

    pub fn get(&self, key: &str) -> Option<&Requirement> {
        self.0.get(key)
    }

    pub fn has_key(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Requirement)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a node with `self` could also satisfy `incoming`. Keys `incoming` requires that
    /// `self` does not define are incompatible unless they are in `allow_undefined` (well-known
    /// labels every node gets) or only exclude values (`NotIn`/`DoesNotExist`).
    pub fn compatible(
        &self,
        incoming: &Requirements,
        allow_undefined: fn(&str) -> bool,
    ) -> Result<(), Incompatibility> {
        for (key, requirement) in &incoming.0 {
            if self.0.contains_key(key) || allow_undefined(key) {
                continue;
            }
            if matches!(
                requirement.operator(),
                Operator::NotIn | Operator::DoesNotExist
            ) {
                continue;
            }
            return Err(Incompatibility::Undefined { key: key.clone() });
        }
        self.intersects(incoming)
    }

    /// Whether every key both sides constrain has a common value.
    pub fn intersects(&self, incoming: &Requirements) -> Result<(), Incompatibility> {
        let excluding =
            |r: &Requirement| matches!(r.operator(), Operator::NotIn | Operator::DoesNotExist);
        for (key, theirs) in &incoming.0 {
            let Some(existing) = self.0.get(key) else {
                continue;
            };
            if existing.intersects(theirs) || (excluding(theirs) && excluding(existing)) {
                continue;
            }
            return Err(Incompatibility::Disjoint {
                key: key.clone(),
                existing: existing.to_string(),
                incoming: theirs.to_string(),
            });
        }
        Ok(())
    }

    /// Whether a node carrying exactly `labels` satisfies every requirement (absent labels only
    /// satisfy `NotIn`/`DoesNotExist`).
    pub fn matches_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0
            .iter()
            .all(|(key, requirement)| match labels.get(key) {
                Some(value) => requirement.has(value),
                None => matches!(
                    requirement.operator(),
                    Operator::NotIn | Operator::DoesNotExist
                ),
            })
    }

    /// As API requirements, by key.
    pub fn to_api(&self) -> Vec<ApiRequirement> {
        self.0.iter().map(|(key, r)| r.to_api(key)).collect()
    }
}

impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(k, r)| format!("{k} {r}")).collect();
        write!(f, "{}", parts.join(", "))
    }
}
