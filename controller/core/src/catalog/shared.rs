//! The catalog the controllers read, replaceable while they run: the catalog refresh loop
//! (`operator::loops::CatalogRefreshLoop`) swaps in a new one when EC2's instance types,
//! offerings or prices change, as upstream's instance-type and pricing controllers refresh
//! theirs every 12 h (spot prices hourly).
//!
//! A pass takes [`SharedCatalog::current`] once and decides on that one catalog, so a refresh
//! mid-pass never mixes two of them in one decision.

use std::sync::{Arc, RwLock};

use super::Catalog;

/// One catalog shared by every clone of a `Context`.
#[derive(Clone, Debug)]
pub struct SharedCatalog {
    current: Arc<RwLock<Arc<Catalog>>>,
}

impl SharedCatalog {
    pub fn new(catalog: Arc<Catalog>) -> Self {
        Self {
            current: Arc::new(RwLock::new(catalog)),
        }
    }

    /// The catalog now.
    pub fn current(&self) -> Arc<Catalog> {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// From now on every pass reads `catalog`.
    pub fn replace(&self, catalog: Arc<Catalog>) {
        *self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = catalog;
    }
}
