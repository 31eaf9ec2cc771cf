//! Prices (with spot price history) and cost accounting: instance-seconds × the pool's price in
//! force during those seconds, so a simulation can report what a run cost and compare strategies.
//!
//! Billing follows EC2: an instance is billed from `running` until it starts shutting down or
//! stopping; `pending`, `stopped` and `shutting-down` time is free.

use std::collections::BTreeMap;

use jiff::Timestamp;
use karpenter_core::catalog::{CapacityType, Catalog};

use crate::capacity::Pool;

/// One price change of a pool.
#[derive(Clone, Debug, PartialEq)]
pub struct PricePoint {
    pub time: Timestamp,
    /// US dollars per hour.
    pub price: f64,
}

/// Prices by pool, each a history sorted by time (on-demand prices rarely move; spot ones do).
#[derive(Clone, Debug, Default)]
pub(crate) struct Prices {
    history: BTreeMap<Pool, Vec<PricePoint>>,
}

impl Prices {
    pub fn new(catalog: &Catalog, start: Timestamp) -> Self {
        let mut history = BTreeMap::new();
        for it in &catalog.instance_types {
            for offering in &it.offerings {
                history.insert(
                    Pool::new(&it.name, &offering.zone, offering.capacity_type),
                    vec![PricePoint {
                        time: start,
                        price: offering.price,
                    }],
                );
            }
        }
        Self { history }
    }

    /// The price in force at `at` (the earliest known price before history starts).
    pub fn at(&self, pool: &Pool, at: Timestamp) -> Option<f64> {
        let points = self.history.get(pool)?;
        let later = points.partition_point(|p| p.time <= at);
        points.get(later.saturating_sub(1)).map(|p| p.price)
    }

    /// Records a new price from `at` on; false if the pool is not offered.
    pub fn set(&mut self, pool: &Pool, at: Timestamp, price: f64) -> bool {
        let Some(points) = self.history.get_mut(pool) else {
            return false;
        };
        let index = points.partition_point(|p| p.time <= at);
        points.insert(index, PricePoint { time: at, price });
        true
    }

    pub fn history(&self, pool: &Pool) -> Vec<PricePoint> {
        self.history.get(pool).cloned().unwrap_or_default()
    }

    /// Dollars for running in `pool` over `[from, until)`, following price changes.
    pub fn dollars(&self, pool: &Pool, from: Timestamp, until: Timestamp) -> f64 {
        let Some(points) = self.history.get(pool) else {
            return 0.0;
        };
        if until <= from {
            return 0.0;
        }
        let mut total = 0.0;
        let mut cursor = from;
        let mut price = self.at(pool, from).unwrap_or(0.0);
        for point in points.iter().filter(|p| p.time > from && p.time < until) {
            total += hours(cursor, point.time) * price;
            cursor = point.time;
            price = point.price;
        }
        total + hours(cursor, until) * price
    }
}

fn hours(from: Timestamp, until: Timestamp) -> f64 {
    let ms = until.as_millisecond() - from.as_millisecond();
    ms.max(0) as f64 / 3_600_000.0
}

/// Billed time of one instance.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Usage {
    pub pool: Pool,
    pub from: Timestamp,
    pub until: Option<Timestamp>,
}

/// What one instance cost so far.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceCost {
    pub instance_id: String,
    pub pool: Pool,
    pub seconds: f64,
    pub dollars: f64,
}

/// Cost of one capacity type.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CostLine {
    pub instance_seconds: f64,
    pub dollars: f64,
}

/// What the run cost so far, by capacity type and by instance (sorted by id).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CostReport {
    pub by_capacity_type: BTreeMap<CapacityType, CostLine>,
    pub instances: Vec<InstanceCost>,
    pub total_dollars: f64,
}

/// Usage records by instance id; kept after EC2 forgets an instance, so the report covers the run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ledger {
    usage: BTreeMap<String, Usage>,
}

impl Ledger {
    pub fn start(&mut self, instance_id: &str, pool: Pool, at: Timestamp) {
        self.usage.insert(
            instance_id.to_string(),
            Usage {
                pool,
                from: at,
                until: None,
            },
        );
    }

    pub fn stop(&mut self, instance_id: &str, at: Timestamp) {
        if let Some(usage) = self.usage.get_mut(instance_id)
            && usage.until.is_none()
        {
            usage.until = Some(at.max(usage.from));
        }
    }

    pub fn report(&self, prices: &Prices, now: Timestamp) -> CostReport {
        let mut report = CostReport::default();
        for (instance_id, usage) in &self.usage {
            let until = usage.until.unwrap_or(now).max(usage.from);
            let seconds = hours(usage.from, until) * 3600.0;
            let dollars = prices.dollars(&usage.pool, usage.from, until);
            let line = report
                .by_capacity_type
                .entry(usage.pool.capacity_type)
                .or_default();
            line.instance_seconds += seconds;
            line.dollars += dollars;
            report.total_dollars += dollars;
            report.instances.push(InstanceCost {
                instance_id: instance_id.clone(),
                pool: usage.pool.clone(),
                seconds,
                dollars,
            });
        }
        report
    }
}
