//! Admission validation: every rule the API server (OpenAPI schema + CEL) and upstream's runtime
//! validation apply, run locally, returning *every* violation with its JSON path.
//!
//! The schema and the CEL rules are not restated here: they are read from the generated CRD
//! ([`crate::api::crd`]), so the CLI, the controller and the API server judge a manifest by the same
//! rules. What neither can express (label-key syntax inside maps, duplicate taints, well-known
//! label values, cron syntax) lives in [`runtime`].

mod runtime;
pub(crate) use runtime::qualified_name_error;
mod schema;
pub mod v1beta1;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use kube_core::cel::{CompiledSchema, Validator, compile_schema};
use serde::Serialize;
use serde_json::Value;

use crate::api::crd::{self, schema_of};
use crate::api::{EC2NodeClass, NodeClaim, NodePool};

/// One broken rule: where, and why.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Violation {
    /// JSON path of the offending field, e.g. `spec.template.spec.requirements[2].values`.
    pub path: String,
    pub message: String,
}

impl Violation {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// All violations of one object (never empty when returned as an error).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct Violations(pub Vec<Violation>);

/// The Karpenter kinds this project validates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    NodePool,
    NodeClaim,
    EC2NodeClass,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::NodePool => "NodePool",
            Kind::NodeClaim => "NodeClaim",
            Kind::EC2NodeClass => "EC2NodeClass",
        }
    }

    /// The v1 `apiVersion` of this kind.
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::NodePool | Kind::NodeClaim => "karpenter.sh/v1",
            Kind::EC2NodeClass => "karpenter.k8s.aws/v1",
        }
    }

    fn index(self) -> usize {
        match self {
            Kind::NodePool => 0,
            Kind::NodeClaim => 1,
            Kind::EC2NodeClass => 2,
        }
    }
}

/// The openAPIV3Schema and compiled CEL rules of one kind, built once per process.
struct KindRules {
    schema: Value,
    cel: CompiledSchema,
}

fn rules(kind: Kind) -> &'static KindRules {
    static RULES: OnceLock<Vec<KindRules>> = OnceLock::new();
    let all = RULES.get_or_init(|| {
        crd::all()
            .into_iter()
            .map(|generated| {
                let schema = schema_of(&generated.crd).clone();
                let cel = compile_schema(&schema);
                KindRules { schema, cel }
            })
            .collect()
    });
    &all[kind.index()]
}

/// Compilation errors of the CEL rules embedded in the generated CRDs (empty when all compile).
/// A non-empty result is a programming error in `api::cel`; a test keeps it empty.
pub fn cel_compilation_errors() -> Vec<String> {
    [Kind::NodePool, Kind::NodeClaim, Kind::EC2NodeClass]
        .into_iter()
        .flat_map(|kind| {
            rules(kind)
                .cel
                .compilation_errors()
                .into_iter()
                .map(move |e| format!("{kind:?}: {e}"))
        })
        .collect()
}

/// Validates a raw object (as parsed from YAML/JSON) of `kind`: schema, CEL and runtime rules.
/// Never panics, whatever the input.
pub fn validate_value(kind: Kind, object: &Value) -> Result<(), Violations> {
    let rules = rules(kind);
    let mut violations = Vec::new();
    let shape_ok = schema::check(&rules.schema, object, &mut violations);
    if shape_ok {
        // CEL runs only on an object of the promised shape (types, required fields): rules
        // assume it. Value violations (patterns, enums, bounds) do not stop it, so one run
        // reports every problem.
        if let Err(errors) = Validator::new().validate_compiled(&rules.cel, object, None) {
            for error in errors.iter() {
                violations.push(Violation::new(
                    error.field_path.clone(),
                    error.message.clone(),
                ));
            }
        }
        runtime::check(kind, object, &mut violations);
    }
    finish(violations)
}

/// Validates a NodePool: every violation with its JSON path.
pub fn validate_nodepool(pool: &NodePool) -> Result<(), Violations> {
    validate_typed(Kind::NodePool, pool)
}

/// How many shared NodePool objects [`validate_nodepool_shared`] remembers verdicts on (the
/// oldest is forgotten first): a cluster's pools, a few times over.
pub const SHARED_VERDICTS_MAX_ENTRIES: usize = 64;

/// [`validate_nodepool`] for a pool shared from a watch cache, remembered by the object's
/// identity: a cached object is never changed in place (a change replaces the `Arc`), and the
/// memo holds the `Arc`, so an address it compares against cannot be reused. Serializing the
/// pool for the content-keyed memo on every scheduling snapshot was 3.5 % of a swarm seed's CPU
/// (perf, seeds 1..16).
pub fn validate_nodepool_shared(pool: &Arc<NodePool>) -> Result<(), Violations> {
    type Shared = VecDeque<(Arc<NodePool>, Result<(), Violations>)>;
    static SHARED: OnceLock<Mutex<Shared>> = OnceLock::new();
    let shared = SHARED.get_or_init(Default::default);
    if let Some((_, verdict)) = shared
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(held, _)| Arc::ptr_eq(held, pool))
    {
        return verdict.clone();
    }
    let verdict = validate_nodepool(pool);
    let mut shared = shared.lock().unwrap_or_else(|e| e.into_inner());
    if shared.len() >= SHARED_VERDICTS_MAX_ENTRIES {
        shared.pop_front();
    }
    shared.push_back((pool.clone(), verdict.clone()));
    verdict
}

/// Validates a NodeClaim: every violation with its JSON path.
pub fn validate_nodeclaim(claim: &NodeClaim) -> Result<(), Violations> {
    validate_typed(Kind::NodeClaim, claim)
}

/// Validates an EC2NodeClass: every violation with its JSON path.
pub fn validate_ec2nodeclass(class: &EC2NodeClass) -> Result<(), Violations> {
    validate_typed(Kind::EC2NodeClass, class)
}

fn validate_typed<T: Serialize>(kind: Kind, object: &T) -> Result<(), Violations> {
    match serde_json::to_value(object) {
        Ok(mut value) => {
            // What the API server and the controllers write changes on every status write and
            // is not the user's to get wrong: leaving it out lets an unchanged spec's verdict
            // be remembered across them.
            if let Some(fields) = value.as_object_mut() {
                fields.remove("status");
            }
            if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
                for field in BOOKKEEPING {
                    metadata.remove(field);
                }
            }
            validate_remembered(kind, &value)
        }
        Err(err) => Err(Violations(vec![Violation::new(
            "",
            format!("cannot serialize: {err}"),
        )])),
    }
}

/// Metadata the API server keeps, left out of a typed object's validation.
const BOOKKEEPING: [&str; 5] = [
    "resourceVersion",
    "managedFields",
    "generation",
    "uid",
    "creationTimestamp",
];

/// At most this many verdicts are remembered (then all are forgotten): a cluster has a handful
/// of NodePools and EC2NodeClasses, each validated many times per pass while unchanged.
const VERDICTS_MAX: usize = 256;

/// [`validate_value`], remembered by the object's exact JSON: the verdict is a pure function of
/// it. Every scheduling snapshot and readiness pass validates every NodePool; doing the schema
/// and CEL work each time took over a third of a simulation's CPU (perf, default scenario).
fn validate_remembered(kind: Kind, value: &Value) -> Result<(), Violations> {
    type Verdicts = HashMap<(Kind, String), Result<(), Violations>>;
    static VERDICTS: OnceLock<Mutex<Verdicts>> = OnceLock::new();
    let key = (kind, value.to_string());
    let verdicts = VERDICTS.get_or_init(Default::default);
    if let Some(verdict) = verdicts.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return verdict.clone();
    }
    let verdict = validate_value(kind, value);
    let mut verdicts = verdicts.lock().unwrap_or_else(|e| e.into_inner());
    if verdicts.len() >= VERDICTS_MAX {
        verdicts.clear();
    }
    verdicts.insert(key, verdict.clone());
    verdict
}

fn finish(mut violations: Vec<Violation>) -> Result<(), Violations> {
    violations.sort();
    violations.dedup();
    if violations.is_empty() {
        Ok(())
    } else {
        Err(Violations(violations))
    }
}
