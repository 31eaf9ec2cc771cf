//! The dense resource space of one run: resource names interned to indices (cpu, memory, pods,
//! ephemeral-storage first, then what the run meets), so the hot fit checks are a handful of
//! integer compares over `Vec<i64>`.

use crate::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources};

pub(super) type Dense = Vec<i64>;

/// Maps resource names to dense indices for one run.
///
/// Looked up by a scan of `names`, not a hash map: a run meets a handful of names (cpu, memory,
/// pods, ephemeral-storage, a GPU or ENI resource), most compares stop at the length, and
/// hashing every name of every instance type was a tenth of a disruption pass (perf).
pub(super) struct Space {
    pub(super) names: Vec<String>,
}

impl Space {
    pub(super) fn new() -> Self {
        let mut space = Space { names: Vec::new() };
        for name in [CPU, MEMORY, PODS, EPHEMERAL_STORAGE] {
            space.intern(name);
        }
        space
    }

    /// A space over exactly `names`, in that order.
    pub(super) fn with_names(names: Vec<String>) -> Self {
        Space { names }
    }

    pub(super) fn intern(&mut self, name: &str) -> usize {
        if let Some(i) = self.index(name) {
            return i;
        }
        self.names.push(name.to_string());
        self.names.len() - 1
    }

    fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    pub(super) fn learn(&mut self, resources: &Resources) {
        for (name, _) in resources.iter() {
            self.intern(name);
        }
    }

    pub(super) fn dense(&self, resources: &Resources) -> Dense {
        let mut out = vec![0; self.names.len()];
        for (name, amount) in resources.iter() {
            if let Some(i) = self.index(name) {
                out[i] = amount;
            }
        }
        out
    }

    pub(super) fn sparse(&self, dense: &[i64]) -> Resources {
        Resources::from_pairs(
            self.names
                .iter()
                .zip(dense)
                .filter(|(_, v)| **v != 0)
                .map(|(n, v)| (n.as_str(), *v)),
        )
    }
}

pub(super) fn fits(used: &[i64], request: &[i64], capacity: &[i64]) -> bool {
    used.iter()
        .zip(request)
        .zip(capacity)
        .all(|((u, r), c)| *r <= 0 || u + r <= *c)
}

pub(super) fn add(into: &mut [i64], other: &[i64]) {
    into.iter_mut().zip(other).for_each(|(a, b)| *a += b);
}
