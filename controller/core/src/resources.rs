//! Resource quantities as numbers: parsing Kubernetes quantity strings and adding, subtracting
//! and comparing resource lists.
//!
//! Units follow Kubernetes: `cpu` is held in millicores (`MilliValue`), every other resource in
//! whole units rounded up (`Value`: bytes for memory and storage, counts for pods and extended
//! resources). i64 then covers 9.2 exabytes, far past any node.

use std::collections::BTreeMap;
use std::fmt;

use crate::api::{Quantity, ResourceList};

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const PODS: &str = "pods";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";

/// Why a quantity string is not a Kubernetes quantity.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {text:?}: {reason}")]
pub struct QuantityError {
    pub text: String,
    pub reason: &'static str,
}

/// Parses a quantity into milli-units (`1.5` → 1500, `100m` → 100, `1Ki` → 1_024_000).
/// Saturates at the i128 range; callers convert to their unit with [`to_unit`].
pub fn parse_milli(text: &str) -> Result<i128, QuantityError> {
    let err = |reason| QuantityError {
        text: text.to_string(),
        reason,
    };
    let trimmed = text.trim();
    let (sign, body) = match trimmed.as_bytes().first() {
        Some(b'-') => (-1i128, &trimmed[1..]),
        Some(b'+') => (1, &trimmed[1..]),
        _ => (1, trimmed),
    };
    let number_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(number_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(err("expected a number"));
    }
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    // Scale: value = digits × 10^(exp10) × 2^(exp2), in milli-units.
    let (exp10, exp2): (i32, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        s if s.starts_with(['e', 'E']) => {
            let exp: i32 = s[1..].parse().map_err(|_| err("bad exponent"))?;
            if exp.abs() > 30 {
                return Err(err("exponent out of range"));
            }
            (exp, 0)
        }
        _ => return Err(err("unknown suffix")),
    };
    let digits = format!("{whole}{fraction}");
    if digits.len() > 30 {
        return Err(err("too many digits"));
    }
    let mantissa: i128 = digits.parse().map_err(|_| err("expected a number"))?;
    // milli-units: shift by 3, and by the fraction's length.
    let shift10 = exp10 + 3 - fraction.len() as i32;
    let mut value = mantissa
        .checked_mul(1i128 << exp2)
        .ok_or_else(|| err("too large"))?;
    if shift10 >= 0 {
        value = value
            .checked_mul(10i128.pow(shift10 as u32))
            .ok_or_else(|| err("too large"))?;
    } else {
        // Round up, as Kubernetes does when a quantity is finer than the unit.
        let divisor = 10i128.pow((-shift10) as u32);
        value = (value + divisor - 1) / divisor;
    }
    Ok(sign * value)
}

/// Converts milli-units to the unit Kubernetes uses for `resource` (millicores for cpu, whole
/// units rounded up otherwise), saturating at the i64 range.
pub fn to_unit(resource: &str, milli: i128) -> i64 {
    let value = if resource == CPU {
        milli
    } else {
        milli.div_euclid(1000) + i128::from(milli.rem_euclid(1000) != 0)
    };
    value.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// Parses a quantity straight into the unit of `resource`.
pub fn parse_quantity(resource: &str, text: &str) -> Result<i64, QuantityError> {
    parse_milli(text).map(|m| to_unit(resource, m))
}

/// A set of resource amounts (cpu in millicores, the rest in units), ordered by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Resources(BTreeMap<String, i64>);

impl Resources {
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds from `(name, amount)` pairs already in units.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, i64)>) -> Self {
        let mut out = Self::new();
        for (name, amount) in pairs {
            out.add_one(name, amount);
        }
        out
    }

    /// Parses a Kubernetes resource list.
    pub fn from_list(list: &ResourceList) -> Result<Self, QuantityError> {
        let mut out = Self::new();
        for (name, quantity) in list {
            out.add_one(name, parse_quantity(name, quantity.as_str())?);
        }
        Ok(out)
    }

    /// As a Kubernetes resource list (cpu as millicores `1500m`, the rest as plain numbers).
    pub fn to_list(&self) -> ResourceList {
        self.0
            .iter()
            .map(|(name, amount)| {
                let text = if name == CPU {
                    if amount % 1000 == 0 {
                        (amount / 1000).to_string()
                    } else {
                        format!("{amount}m")
                    }
                } else {
                    amount.to_string()
                };
                (name.clone(), Quantity::new(text))
            })
            .collect()
    }

    pub fn get(&self, name: &str) -> i64 {
        self.0.get(name).copied().unwrap_or(0)
    }

    pub fn set(&mut self, name: &str, amount: i64) {
        self.0.insert(name.to_string(), amount);
    }

    pub fn add_one(&mut self, name: &str, amount: i64) {
        let slot = self.0.entry(name.to_string()).or_insert(0);
        *slot = slot.saturating_add(amount);
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }

    pub fn is_empty(&self) -> bool {
        self.0.values().all(|v| *v == 0)
    }

    /// `self + other`.
    pub fn plus(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        for (name, amount) in other.iter() {
            out.add_one(name, amount);
        }
        out
    }

    /// `self - other` (may go negative).
    pub fn minus(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        for (name, amount) in other.iter() {
            out.add_one(name, amount.saturating_neg());
        }
        out
    }

    /// Per-resource maximum of the two.
    pub fn max(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        for (name, amount) in other.iter() {
            let slot = out.0.entry(name.to_string()).or_insert(amount);
            *slot = (*slot).max(amount);
        }
        out
    }

    /// Whether every requested amount fits in `capacity` (absent resources count as 0).
    pub fn fits_in(&self, capacity: &Resources) -> bool {
        self.0
            .iter()
            .all(|(name, amount)| *amount <= 0 || *amount <= capacity.get(name))
    }

    /// The first resource of `self` that `capacity` cannot hold, with both amounts.
    pub fn first_excess(&self, capacity: &Resources) -> Option<(&str, i64, i64)> {
        self.0
            .iter()
            .find(|(name, amount)| **amount > 0 && **amount > capacity.get(name))
            .map(|(name, amount)| (name.as_str(), *amount, capacity.get(name)))
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .to_list()
            .into_iter()
            .map(|(name, q)| format!("{name}={}", q.as_str()))
            .collect();
        write!(f, "{{{}}}", parts.join(", "))
    }
}
