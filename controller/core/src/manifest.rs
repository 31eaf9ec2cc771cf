//! Reading manifests: multi-document YAML (or JSON) into Karpenter objects, each validated with
//! [`crate::validation`], every other kind identified and left alone.

use serde::Deserialize;
use serde_json::Value;

use crate::api::{EC2NodeClass, NodeClaim, NodePool};
use crate::validation::{self, Kind, Violation, Violations, v1beta1};

/// The YAML could not be read at all.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    pub message: String,
    /// 1-based position of the error, when the parser knows it.
    pub line: Option<usize>,
    pub column: Option<usize>,
}

/// Splits multi-document YAML into its non-empty documents, numbered from 1 in file order.
pub fn parse_documents(text: &str) -> Result<Vec<(usize, Value)>, ParseError> {
    let mut documents = Vec::new();
    for (i, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(document).map_err(|err| {
            let location = err.location();
            ParseError {
                message: format!("document {}: {err}", i + 1),
                line: location.as_ref().map(|l| l.line()),
                column: location.as_ref().map(|l| l.column()),
            }
        })?;
        if !value.is_null() {
            documents.push((i + 1, value));
        }
    }
    Ok(documents)
}

/// A Karpenter object that passed validation.
#[derive(Clone, Debug, PartialEq)]
pub enum KarpenterObject {
    NodePool(Box<NodePool>),
    NodeClaim(Box<NodeClaim>),
    EC2NodeClass(Box<EC2NodeClass>),
}

/// What one document turned out to be.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// A valid Karpenter v1 object.
    Valid(KarpenterObject),
    /// A Karpenter object (v1 or v1beta1) that would be rejected.
    Invalid(Violations),
    /// Not a Karpenter object (a Deployment, say): nothing to validate.
    Other,
}

/// One document's identity and outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    pub kind: String,
    pub name: String,
    pub outcome: Outcome,
}

/// Identifies and validates one parsed document. Never panics, whatever the input.
pub fn check_document(document: &Value) -> Checked {
    let kind = document["kind"].as_str().unwrap_or_default().to_string();
    let api_version = document["apiVersion"].as_str().unwrap_or_default();
    let name = document["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let invalid = |violations: Vec<Violation>| Outcome::Invalid(Violations(violations));
    let outcome = if !document.is_object() {
        invalid(vec![Violation::new(
            "",
            "a manifest document must be a mapping",
        )])
    } else if kind.is_empty() || api_version.is_empty() {
        invalid(vec![Violation::new(
            if kind.is_empty() {
                "kind"
            } else {
                "apiVersion"
            },
            "Required value: every manifest needs apiVersion and kind",
        )])
    } else if v1beta1::is_v1beta1(api_version) {
        invalid(vec![Violation::new(
            "apiVersion",
            v1beta1::explain(&kind, document),
        )])
    } else {
        match karpenter_kind(api_version, &kind) {
            KindMatch::Karpenter(k) => check_karpenter(k, document, &name),
            KindMatch::WrongVersion(want) => invalid(vec![Violation::new(
                "apiVersion",
                format!("Unsupported value: {api_version:?}: {kind} is served as {want}"),
            )]),
            KindMatch::Other => Outcome::Other,
        }
    };
    Checked {
        kind,
        name,
        outcome,
    }
}

enum KindMatch {
    Karpenter(Kind),
    WrongVersion(&'static str),
    Other,
}

fn karpenter_kind(api_version: &str, kind: &str) -> KindMatch {
    let group = api_version.split_once('/').map_or("", |(group, _)| group);
    let found = [Kind::NodePool, Kind::NodeClaim, Kind::EC2NodeClass]
        .into_iter()
        .find(|k| k.name() == kind && k.api_version().starts_with(&format!("{group}/")));
    match found {
        Some(k) if k.api_version() == api_version => KindMatch::Karpenter(k),
        Some(k) => KindMatch::WrongVersion(k.api_version()),
        None => KindMatch::Other,
    }
}

fn check_karpenter(kind: Kind, document: &Value, name: &str) -> Outcome {
    let mut violations = Vec::new();
    if name.is_empty() {
        violations.push(Violation::new(
            "metadata.name",
            "Required value: name is required",
        ));
    }
    if let Err(Violations(found)) = validation::validate_value(kind, document) {
        violations.extend(found);
    }
    if !violations.is_empty() {
        return Outcome::Invalid(Violations(violations));
    }
    let typed = match kind {
        Kind::NodePool => deserialize(document).map(|o| KarpenterObject::NodePool(Box::new(o))),
        Kind::NodeClaim => deserialize(document).map(|o| KarpenterObject::NodeClaim(Box::new(o))),
        Kind::EC2NodeClass => {
            deserialize(document).map(|o| KarpenterObject::EC2NodeClass(Box::new(o)))
        }
    };
    match typed {
        Ok(object) => Outcome::Valid(object),
        Err(violation) => Outcome::Invalid(Violations(vec![violation])),
    }
}

/// Deserializes a schema-valid document; a failure here means the schema and the types disagree,
/// and is still reported with the field's path rather than a panic.
fn deserialize<T: serde::de::DeserializeOwned>(document: &Value) -> Result<T, Violation> {
    serde_path_to_error::deserialize(document)
        .map_err(|err| Violation::new(err.path().to_string(), err.inner().to_string()))
}
