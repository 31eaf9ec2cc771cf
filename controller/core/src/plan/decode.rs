//! One document into one typed object: Karpenter objects through [`check_document`] (the same
//! validation `karpenter validate` applies), the Kubernetes kinds a plan reads into k8s-openapi
//! types with the path of any field that does not fit, everything else recognised and left out.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::{ObjectRef, PlanError, Position};
use crate::api::{EC2NodeClass, NodePool};
use crate::manifest::{KarpenterObject, Outcome, check_document};

/// A document the plan understands, typed.
#[derive(Clone, Debug)]
pub(crate) enum Object {
    NodePool(Box<NodePool>),
    NodeClass(Box<EC2NodeClass>),
    /// Valid, but not capacity the plan can use (only Nodes are).
    NodeClaim,
    Pod(Box<Pod>),
    Deployment(Box<Deployment>),
    ReplicaSet(Box<ReplicaSet>),
    StatefulSet(Box<StatefulSet>),
    Job(Box<Job>),
    DaemonSet(Box<DaemonSet>),
    Node(Box<Node>),
    Namespace(Box<Namespace>),
    Claim(Box<PersistentVolumeClaim>),
    Volume(Box<PersistentVolume>),
    StorageClass(Box<StorageClass>),
    /// Well-formed; budgets limit disruption, not provisioning.
    Budget,
    /// A kind that plays no part in provisioning (a Service, a ConfigMap).
    Other,
}

/// A decoded document with its identity and origin.
#[derive(Clone, Debug)]
pub(crate) struct Decoded {
    pub at: Position,
    pub object_ref: ObjectRef,
    pub object: Object,
}

/// The Kubernetes kinds a plan reads: `(kind, apiVersion, namespaced)`.
const KINDS: [(&str, &str, bool); 12] = [
    ("Pod", "v1", true),
    ("Deployment", "apps/v1", true),
    ("ReplicaSet", "apps/v1", true),
    ("StatefulSet", "apps/v1", true),
    ("DaemonSet", "apps/v1", true),
    ("Job", "batch/v1", true),
    ("Node", "v1", false),
    ("Namespace", "v1", false),
    ("PersistentVolumeClaim", "v1", true),
    ("PersistentVolume", "v1", false),
    ("StorageClass", "storage.k8s.io/v1", false),
    ("PodDisruptionBudget", "policy/v1", true),
];

/// Whether objects of `kind` live in a namespace (Karpenter's kinds do not).
fn namespaced(kind: &str) -> bool {
    KINDS.iter().any(|(k, _, ns)| *k == kind && *ns)
}

/// The identity of `document` as errors and notes print it.
pub(crate) fn object_ref(document: &Value) -> ObjectRef {
    let kind = document["kind"].as_str().unwrap_or_default().to_string();
    let name = document["metadata"]["name"].as_str().unwrap_or_default();
    let name = if namespaced(&kind) && !name.is_empty() {
        let namespace = document["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        format!("{namespace}/{name}")
    } else {
        name.to_string()
    };
    ObjectRef { kind, name }
}

/// Decodes one document. Invalid Karpenter objects and Kubernetes objects whose fields do not fit
/// their type are errors; unknown kinds are [`Object::Other`].
pub(crate) fn decode(at: Position, document: &Value) -> Result<Decoded, PlanError> {
    let object_ref = object_ref(document);
    let checked = check_document(document);
    let object = match checked.outcome {
        Outcome::Invalid(violations) => {
            return Err(PlanError::Invalid {
                at,
                object: object_ref,
                violations,
            });
        }
        Outcome::Valid(KarpenterObject::NodePool(pool)) => Object::NodePool(pool),
        Outcome::Valid(KarpenterObject::EC2NodeClass(class)) => Object::NodeClass(class),
        Outcome::Valid(KarpenterObject::NodeClaim(_)) => Object::NodeClaim,
        Outcome::Other => kubernetes(&at, &object_ref, document)?,
    };
    Ok(Decoded {
        at,
        object_ref,
        object,
    })
}

fn kubernetes(at: &Position, object: &ObjectRef, document: &Value) -> Result<Object, PlanError> {
    let api_version = document["apiVersion"].as_str().unwrap_or_default();
    let Some((kind, want, _)) = KINDS.iter().find(|(k, _, _)| *k == object.kind) else {
        return Ok(Object::Other);
    };
    if api_version != *want {
        // A kind we read at an apiVersion we do not: an old manifest (extensions/v1beta1) the API
        // server no longer serves, or a custom resource that shares the name. Either way the user
        // should know it was not planned.
        return Err(field_error(
            at,
            object,
            "apiVersion",
            format!("Unsupported value: {api_version:?}: {kind} is served as {want}"),
        ));
    }
    if document["metadata"]["name"]
        .as_str()
        .is_none_or(str::is_empty)
    {
        // Pods and replicas are reported by name, and a nameless object cannot be referred to
        // (a claim by its pod, a pod by its node); the API server requires one too.
        return Err(field_error(
            at,
            object,
            "metadata.name",
            "Required value: name is required",
        ));
    }
    let err = |e: serde_path_to_error::Error<serde_json::Error>| {
        field_error(at, object, e.path().to_string(), e.inner().to_string())
    };
    Ok(match *kind {
        "Pod" => Object::Pod(typed(document).map_err(err)?),
        "Deployment" => Object::Deployment(typed(document).map_err(err)?),
        "ReplicaSet" => Object::ReplicaSet(typed(document).map_err(err)?),
        "StatefulSet" => Object::StatefulSet(typed(document).map_err(err)?),
        "DaemonSet" => Object::DaemonSet(typed(document).map_err(err)?),
        "Job" => Object::Job(typed(document).map_err(err)?),
        "Node" => Object::Node(typed(document).map_err(err)?),
        "Namespace" => Object::Namespace(typed(document).map_err(err)?),
        "PersistentVolumeClaim" => Object::Claim(typed(document).map_err(err)?),
        "PersistentVolume" => Object::Volume(typed(document).map_err(err)?),
        "StorageClass" => Object::StorageClass(typed(document).map_err(err)?),
        "PodDisruptionBudget" => {
            typed::<PodDisruptionBudget>(document).map_err(err)?;
            Object::Budget
        }
        _ => Object::Other,
    })
}

fn typed<T: DeserializeOwned>(
    document: &Value,
) -> Result<Box<T>, serde_path_to_error::Error<serde_json::Error>> {
    serde_path_to_error::deserialize(document).map(Box::new)
}

/// A [`PlanError::Field`] for `object` at `at`.
pub(crate) fn field_error(
    at: &Position,
    object: &ObjectRef,
    field: impl Into<String>,
    message: impl Into<String>,
) -> PlanError {
    PlanError::Field {
        at: at.clone(),
        object: object.clone(),
        field: field.into(),
        message: message.into(),
    }
}
