//! Parameter types the step expressions use, so a step says `{period}` or `{capacity}` and gets
//! a typed value.

use std::str::FromStr;
use std::time::Duration;

use cucumber::Parameter;
use karpenter_core::catalog::CapacityType;

/// A span of simulated time: `90 seconds`, `2 minutes`, `1 hour`.
#[derive(Clone, Copy, Debug, Parameter)]
#[param(name = "period", regex = r"\d+ (?:seconds?|minutes?|hours?)")]
pub struct Period(pub Duration);

impl FromStr for Period {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (amount, unit) = text
            .split_once(' ')
            .ok_or_else(|| format!("not a period: {text:?}"))?;
        let amount: u64 = amount.parse().map_err(|e| format!("{text:?}: {e}"))?;
        let seconds = match unit.trim_end_matches('s') {
            "second" => 1,
            "minute" => 60,
            "hour" => 3600,
            _ => return Err(format!("unknown unit in {text:?}")),
        };
        Ok(Period(Duration::from_secs(amount * seconds)))
    }
}

/// How an instance is bought, as the `karpenter.sh/capacity-type` label says it.
#[derive(Clone, Copy, Debug, Parameter)]
#[param(name = "capacity", regex = "spot|on-demand")]
pub struct Capacity(pub CapacityType);

impl FromStr for Capacity {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        CapacityType::from_label(text)
            .map(Capacity)
            .ok_or_else(|| format!("not a capacity type: {text:?}"))
    }
}

/// A comma-separated list in one quoted string: `"m6i.large, m6i.xlarge"` (empty: none).
pub fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}
