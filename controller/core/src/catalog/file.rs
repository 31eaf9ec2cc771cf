//! Catalog files: instance types described in YAML (or JSON, which YAML reads too), for
//! `karpenter plan --catalog FILE`, simulations of made-up fleets, and tests.
//!
//! ```yaml
//! instanceTypes:
//!   - name: c.large            # any string, unique in the file
//!     cpu: "2"                 # Kubernetes quantities, as strings or numbers
//!     memory: 4Gi
//!     pods: 29                 # default 110, the kubelet's default max-pods
//!     arch: amd64              # amd64 (default) or arm64
//!     os: linux                # linux (default) or windows
//!     capacity: {nvidia.com/gpu: "1", ephemeral-storage: 50Gi}   # optional, other resources
//!     allocatable: {cpu: 1930m, memory: 3500Mi, pods: 29}       # optional, computed if absent
//!     labels: {karpenter.k8s.aws/instance-category: c}          # optional extra labels
//!     offerings:
//!       - {zone: us-west-2a, capacityType: on-demand, price: 0.085}
//!       - {zone: us-west-2a, capacityType: spot, price: 0.031, available: false}
//!       # a capacity reservation: its id, and optionally its type (default or
//!       # capacity-block), whether it is interruptible and how many instances it has left (1)
//!       - {zone: us-west-2a, capacityType: reserved, price: 0.0000001,
//!          reservationID: cr-0123456789abcdef0, reservationCapacity: 4}
//! ```
//!
//! The file states what the node has: `memory` is taken as the node's memory capacity, so the VM
//! overhead the built-in catalog subtracts from EC2's figures is **not** subtracted here (a file
//! written from `kubectl get node -o yaml` would otherwise lose 7.5% twice). Allocatable, where
//! absent, is computed with the same kube-reserved and eviction-threshold formula as the built-in
//! catalog ([`super::compute_overhead`]); where present, the resources it names are taken as
//! written and the ones it omits are computed, so `allocatable: {cpu: 1930m}` need not restate
//! memory or ephemeral-storage. ephemeral-storage capacity defaults to the 20Gi root volume.
//!
//! Every mistake is reported with the instance type's index and name and the field, and unknown
//! fields are errors: a misspelt `alocatable` must not silently fall back to the computed value.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

use super::overhead::{DEFAULT_EPHEMERAL_STORAGE, compute_overhead};
use super::{CapacityType, Catalog, InstanceType, Offering};
use crate::api::ec2nodeclass::ReservationType;
use crate::api::labels;
use crate::resources::{
    CPU, EPHEMERAL_STORAGE, MEMORY, PODS, QuantityError, Resources, parse_quantity,
};

/// Max pods when a file does not say: the kubelet's default.
pub const DEFAULT_PODS: i64 = 110;

/// Why a catalog file was rejected.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CatalogError {
    /// Not YAML (or JSON) at all; the message carries the line and column.
    #[error("catalog is not valid YAML or JSON: {0}")]
    Syntax(String),
    /// YAML, but not a catalog document (no `instanceTypes` list, unknown top-level field).
    #[error("catalog: {0}")]
    Document(String),
    /// One instance type is wrong: which one (index in `instanceTypes`, and its name when it has
    /// one), which field (a path such as `offerings[1].price`), and what is wrong with it.
    #[error(
        "instanceTypes[{index}] ({}): {field}: {problem}",
        .name.as_deref().unwrap_or("no name")
    )]
    InstanceType {
        index: usize,
        name: Option<String>,
        field: String,
        problem: Problem,
    },
}

/// What is wrong with one field of an instance type.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Problem {
    #[error("is required")]
    Missing,
    /// The field does not have the expected shape (serde's message: unknown field, wrong type).
    #[error("{0}")]
    Malformed(String),
    #[error("{0}")]
    Quantity(QuantityError),
    #[error("must not be negative, got {0}")]
    Negative(String),
    #[error("name is already used by instanceTypes[{0}]")]
    DuplicateName(usize),
    #[error("unknown capacity type {0:?}; expected on-demand, spot or reserved")]
    UnknownCapacityType(String),
    #[error("price must be a finite number of dollars per hour, at least 0; got {0}")]
    InvalidPrice(f64),
    #[error("an instance type needs at least one offering")]
    NoOfferings,
    #[error(
        "zone {zone} and capacity type {capacity_type} are already offered at offerings[{first}]"
    )]
    DuplicateOffering {
        zone: String,
        capacity_type: String,
        first: usize,
    },
    #[error("unsupported {what} {value:?}; expected {expected}")]
    Unsupported {
        what: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("is given twice, as {0} and in capacity")]
    GivenTwice(&'static str),
    #[error("label value {label:?} contradicts {field}: {value:?}")]
    ConflictingLabel {
        label: String,
        field: &'static str,
        value: String,
    },
    /// Amounts in the crate's units (millicores for cpu, bytes for memory).
    #[error(
        "allocatable {} exceeds capacity {}",
        show(.resource, *.allocatable),
        show(.resource, *.capacity)
    )]
    ExceedsCapacity {
        resource: String,
        allocatable: i64,
        capacity: i64,
    },
    /// The computed kube-reserved + eviction threshold leave nothing: a type no pod could use is
    /// almost certainly a mistake in the file (often memory for a node left at 110 pods).
    #[error(
        "capacity {} is less than the kube-reserved and eviction threshold of {} it implies; \
         give fewer pods or state allocatable",
        show(.resource, *.capacity),
        show(.resource, *.overhead)
    )]
    OverheadExceedsCapacity {
        resource: String,
        overhead: i64,
        capacity: i64,
    },
}

/// An amount for a message: cpu in millicores, byte amounts in Mi when whole, the rest as is.
fn show(resource: &str, amount: i64) -> String {
    const MIB: i64 = 1 << 20;
    if resource == CPU {
        format!("{amount}m")
    } else if [MEMORY, EPHEMERAL_STORAGE].contains(&resource) && amount % MIB == 0 {
        format!("{}Mi", amount / MIB)
    } else {
        amount.to_string()
    }
}

/// Parses a catalog file; see the module documentation for the format.
pub fn parse(text: &str) -> Result<Catalog, CatalogError> {
    let doc: serde_yaml::Value =
        serde_yaml::from_str(text).map_err(|e| CatalogError::Syntax(e.to_string()))?;
    if doc.is_null() {
        return Err(CatalogError::Document(
            "the file is empty; expected a mapping with an instanceTypes list".to_string(),
        ));
    }
    let raw: RawCatalog = serde_path_to_error::deserialize(doc)
        .map_err(|e| CatalogError::Document(format!("{}: {}", path_text(e.path()), e.inner())))?;

    let mut first_index: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::with_capacity(raw.instance_types.len());
    for (index, value) in raw.instance_types.into_iter().enumerate() {
        let name = value
            .get("name")
            .and_then(serde_yaml::Value::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_string);
        let fail = |field: &str, problem: Problem| CatalogError::InstanceType {
            index,
            name: name.clone(),
            field: field.to_string(),
            problem,
        };
        let raw: RawInstanceType = serde_path_to_error::deserialize(value).map_err(|e| {
            fail(
                &path_text(e.path()),
                Problem::Malformed(e.inner().to_string()),
            )
        })?;
        let it = convert(raw).map_err(|(field, problem)| fail(&field, problem))?;
        if let Some(&first) = first_index.get(&it.name) {
            return Err(fail("name", Problem::DuplicateName(first)));
        }
        first_index.insert(it.name.clone(), index);
        out.push(it);
    }
    Ok(Catalog::new(out))
}

/// serde_path_to_error writes the root as `.`; the field of a whole instance type reads better as
/// `(instance type)`.
fn path_text(path: &serde_path_to_error::Path) -> String {
    let text = path.to_string();
    if text == "." {
        "(instance type)".to_string()
    } else {
        text
    }
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    rename_all = "camelCase",
    expecting = "a mapping with an instanceTypes list"
)]
struct RawCatalog {
    instance_types: Vec<serde_yaml::Value>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    rename_all = "camelCase",
    expecting = "an instance type (a mapping with name, cpu, memory, offerings, ...)"
)]
struct RawInstanceType {
    name: Option<String>,
    cpu: Option<Scalar>,
    memory: Option<Scalar>,
    pods: Option<Scalar>,
    arch: Option<String>,
    os: Option<String>,
    #[serde(default)]
    capacity: BTreeMap<String, Scalar>,
    allocatable: Option<BTreeMap<String, Scalar>>,
    #[serde(default)]
    labels: BTreeMap<String, Scalar>,
    #[serde(default)]
    offerings: Vec<RawOffering>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    rename_all = "camelCase",
    expecting = "an offering (a mapping with zone, capacityType, price)"
)]
struct RawOffering {
    zone: Option<String>,
    capacity_type: Option<String>,
    price: Option<f64>,
    available: Option<bool>,
    #[serde(rename = "reservationID")]
    reservation_id: Option<String>,
    reservation_type: Option<String>,
    interruptible: Option<bool>,
    reservation_capacity: Option<u32>,
}

/// A YAML scalar as text: quantities may be written `2` or `"2"`, label values `6` or `"6"`.
struct Scalar(String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a number")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

type FieldError = (String, Problem);

fn quantity(field: &str, resource: &str, text: &str) -> Result<i64, FieldError> {
    let value =
        parse_quantity(resource, text).map_err(|e| (field.to_string(), Problem::Quantity(e)))?;
    if value < 0 {
        return Err((field.to_string(), Problem::Negative(text.to_string())));
    }
    Ok(value)
}

/// Turns one validated-by-shape instance type into the catalog's form, checking the values
/// (in field order: the first problem is the one reported).
fn convert(raw: RawInstanceType) -> Result<InstanceType, FieldError> {
    let name = raw
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or(("name".to_string(), Problem::Missing))?;
    let mut capacity = capacity(&raw)?;
    let (allocatable, overhead) = allocatable(&raw, &mut capacity)?;
    let arch = one_of(
        raw.arch,
        "arch",
        "architecture",
        ["amd64", "arm64"],
        "amd64 or arm64",
    )?;
    let os = one_of(
        raw.os,
        "os",
        "operating system",
        ["linux", "windows"],
        "linux or windows",
    )?;
    let mut type_labels: BTreeMap<String, String> = raw
        .labels
        .into_iter()
        .map(|(key, value)| (key, value.0))
        .collect();
    for (label, field, value) in [
        (labels::INSTANCE_TYPE_LABEL, "name", &name),
        (labels::ARCH_LABEL, "arch", &arch),
        (labels::OS_LABEL, "os", &os),
    ] {
        if let Some(existing) = type_labels.get(label)
            && existing != value
        {
            return Err((
                format!("labels.{label}"),
                Problem::ConflictingLabel {
                    label: existing.clone(),
                    field,
                    value: value.clone(),
                },
            ));
        }
        type_labels.insert(label.to_string(), value.clone());
    }
    Ok(InstanceType {
        name,
        labels: type_labels,
        capacity,
        overhead,
        allocatable,
        offerings: offerings(raw.offerings)?,
    })
}

/// Capacity: the top-level cpu/memory/pods, or the same keys in `capacity`, not both; pods and
/// ephemeral storage default.
fn capacity(raw: &RawInstanceType) -> Result<Resources, FieldError> {
    let mut capacity = Resources::new();
    for (resource, top) in [(CPU, &raw.cpu), (MEMORY, &raw.memory), (PODS, &raw.pods)] {
        let in_map = raw.capacity.get(resource);
        let (field, text) = match (top, in_map) {
            (Some(_), Some(_)) => {
                return Err((
                    format!("capacity.{resource}"),
                    Problem::GivenTwice(resource),
                ));
            }
            (Some(t), None) => (resource.to_string(), t.0.as_str()),
            (None, Some(m)) => (format!("capacity.{resource}"), m.0.as_str()),
            (None, None) if resource == PODS => {
                capacity.set(PODS, DEFAULT_PODS);
                continue;
            }
            (None, None) => return Err((resource.to_string(), Problem::Missing)),
        };
        capacity.set(resource, quantity(&field, resource, text)?);
    }
    for (resource, text) in &raw.capacity {
        if ![CPU, MEMORY, PODS].contains(&resource.as_str()) {
            let field = format!("capacity.{resource}");
            capacity.set(resource, quantity(&field, resource, &text.0)?);
        }
    }
    if !raw.capacity.contains_key(EPHEMERAL_STORAGE) {
        capacity.set(EPHEMERAL_STORAGE, DEFAULT_EPHEMERAL_STORAGE);
    }
    Ok(capacity)
}

/// Allocatable and overhead: computed, then overridden by what the file states. A resource only
/// listed in allocatable (e.g. nvidia.com/gpu) is capacity too: a node cannot allocate what it
/// lacks.
fn allocatable(
    raw: &RawInstanceType,
    capacity: &mut Resources,
) -> Result<(Resources, Resources), FieldError> {
    let computed_overhead = compute_overhead(capacity);
    let mut allocatable = capacity.minus(&computed_overhead);
    let stated = raw.allocatable.as_ref();
    for (resource, text) in stated.into_iter().flatten() {
        let field = format!("allocatable.{resource}");
        let value = quantity(&field, resource, &text.0)?;
        allocatable.set(resource, value);
        if !capacity.iter().any(|(r, _)| r == resource.as_str()) {
            capacity.set(resource, value);
        }
        if value > capacity.get(resource) {
            return Err((
                field,
                Problem::ExceedsCapacity {
                    resource: resource.clone(),
                    allocatable: value,
                    capacity: capacity.get(resource),
                },
            ));
        }
    }
    for (resource, amount) in allocatable.iter() {
        if amount < 0 && !stated.is_some_and(|s| s.contains_key(resource)) {
            let field = if raw.capacity.contains_key(resource) {
                format!("capacity.{resource}")
            } else {
                resource.to_string()
            };
            return Err((
                field,
                Problem::OverheadExceedsCapacity {
                    resource: resource.to_string(),
                    overhead: computed_overhead.get(resource),
                    capacity: capacity.get(resource),
                },
            ));
        }
    }
    // Only what is actually held back, so a file without allocatable gets exactly
    // `compute_overhead`'s result.
    let overhead = Resources::from_pairs(
        capacity
            .minus(&allocatable)
            .iter()
            .filter(|(_, amount)| *amount != 0),
    );
    Ok((allocatable, overhead))
}

/// `value` when it is one of `[default, other]` (`default` when absent); else an unsupported
/// `what`, `expected` saying what is.
fn one_of(
    value: Option<String>,
    field: &str,
    what: &'static str,
    [default, other]: [&str; 2],
    expected: &'static str,
) -> Result<String, FieldError> {
    let value = value.unwrap_or_else(|| default.to_string());
    if value == default || value == other {
        return Ok(value);
    }
    Err((
        field.to_string(),
        Problem::Unsupported {
            what,
            value,
            expected,
        },
    ))
}

/// The offerings: at least one, each with a zone, a known capacity type and a price, no
/// (zone, capacity type) twice.
fn offerings(raw: Vec<RawOffering>) -> Result<Vec<Offering>, FieldError> {
    if raw.is_empty() {
        return Err(("offerings".to_string(), Problem::NoOfferings));
    }
    let mut offerings: Vec<Offering> = Vec::with_capacity(raw.len());
    for (i, o) in raw.into_iter().enumerate() {
        let field = |f: &str| format!("offerings[{i}].{f}");
        let zone = o
            .zone
            .filter(|z| !z.is_empty())
            .ok_or((field("zone"), Problem::Missing))?;
        let capacity_type_text = o
            .capacity_type
            .ok_or((field("capacityType"), Problem::Missing))?;
        let capacity_type = CapacityType::from_label(&capacity_type_text).ok_or((
            field("capacityType"),
            Problem::UnknownCapacityType(capacity_type_text.clone()),
        ))?;
        let price = o.price.ok_or((field("price"), Problem::Missing))?;
        if !price.is_finite() || price < 0.0 {
            return Err((field("price"), Problem::InvalidPrice(price)));
        }
        let reservation = match (capacity_type, o.reservation_id) {
            (CapacityType::Reserved, Some(id)) => Some(super::Reservation {
                id,
                kind: match o.reservation_type.as_deref() {
                    None => ReservationType::Default,
                    Some(kind) => ReservationType::from_label(kind).ok_or_else(|| {
                        (
                            field("reservationType"),
                            Problem::Unsupported {
                                what: "reservation type",
                                value: kind.to_string(),
                                expected: "default or capacity-block",
                            },
                        )
                    })?,
                },
                interruptible: o.interruptible.unwrap_or(false),
                capacity: o.reservation_capacity.unwrap_or(1),
            }),
            (CapacityType::Reserved, None) => {
                return Err((field("reservationID"), Problem::Missing));
            }
            (_, Some(_)) => {
                return Err((
                    field("reservationID"),
                    Problem::Malformed("only reserved offerings name a reservation".into()),
                ));
            }
            (_, None) => None,
        };
        if let Some(first) = offerings.iter().position(|x: &Offering| {
            x.zone == zone
                && x.capacity_type == capacity_type
                && x.reservation_id() == reservation.as_ref().map(|r| r.id.as_str())
        }) {
            return Err((
                field("zone"),
                Problem::DuplicateOffering {
                    zone,
                    capacity_type: capacity_type_text,
                    first,
                },
            ));
        }
        offerings.push(Offering {
            reservation,
            zone,
            capacity_type,
            price,
            available: o.available.unwrap_or(true),
        });
    }
    Ok(offerings)
}
