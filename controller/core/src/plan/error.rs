//! Why input cannot be planned: every error names where the offending object came from (file,
//! document number, list item) and, when one field is to blame, that field's path, so a user can
//! go straight to the line to fix.

use std::fmt;

use crate::validation::Violations;

/// Where a document came from: `source` (a file name, `-` for stdin), its 1-based number in that
/// source, and its index when it is an item of a `kind: List` document (what `kubectl get -o
/// yaml` prints).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    pub source: String,
    pub document: usize,
    pub item: Option<usize>,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: document {}", self.source, self.document)?;
        if let Some(item) = self.item {
            write!(f, ", items[{item}]")?;
        }
        Ok(())
    }
}

/// `Kind/name` of an object, readable even when the name is missing.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub kind: String,
    /// `namespace/name` for namespaced kinds, `name` otherwise.
    pub name: String,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.kind.is_empty() {
            "<no kind>"
        } else {
            &self.kind
        };
        if self.name.is_empty() {
            write!(f, "{kind}/<unnamed>")
        } else {
            write!(f, "{kind}/{}", self.name)
        }
    }
}

/// One reason the input cannot be planned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A Karpenter object the API server (or Karpenter) would reject: planning with it would show
    /// a cluster that cannot exist.
    #[error("{at}: invalid {object}: {violations}")]
    Invalid {
        at: Position,
        object: ObjectRef,
        violations: Violations,
    },
    /// A Kubernetes object with a field of the wrong type or an impossible value.
    #[error("{at}: {object}: {field}: {message}")]
    Field {
        at: Position,
        object: ObjectRef,
        /// JSON path inside the object, e.g. `spec.replicas`.
        field: String,
        message: String,
    },
    /// The same object twice: which one the cluster would hold depends on apply order, so the
    /// plan refuses to guess.
    #[error("{at}: {object} is defined twice (first at {first})")]
    Duplicate {
        at: Position,
        object: ObjectRef,
        first: Position,
    },
}

impl PlanError {
    /// Where the offending object came from.
    pub fn position(&self) -> &Position {
        match self {
            PlanError::Invalid { at, .. }
            | PlanError::Field { at, .. }
            | PlanError::Duplicate { at, .. } => at,
        }
    }
}

/// Every error found in the input (never empty when returned), in input order: a user fixing a
/// file sees all of its problems at once, not one per run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
pub struct PlanErrors(pub Vec<PlanError>);
