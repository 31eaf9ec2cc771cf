//! Topology: topology spread constraints and pod (anti-)affinity as counts of matching pods per
//! domain (a zone, a hostname, any label value).
//!
//! Every constraint becomes a [`Group`]: the pods its selector matches, counted per domain. A pod
//! with the constraint asks the group which domains it may use; every placed pod the group's
//! selector matches is recorded in the domain of the node it landed on. Anti-affinity is also
//! enforced the other way round ("inverse"): a pod may not land where a placed pod's
//! anti-affinity term selects it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::pod::{LabelMatcher, PodInfo, SpreadConstraint, Strength, selector_matches};
use crate::api::labels::HOSTNAME_LABEL;

/// What a group enforces.
#[derive(Clone, Debug, PartialEq)]
pub enum GroupKind {
    Spread {
        max_skew: i32,
        min_domains: Option<i32>,
    },
    Affinity,
    AntiAffinity,
}

/// Identity of a group: constraints with equal identity share counts.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKey {
    kind: u8,
    max_skew: i32,
    min_domains: Option<i32>,
    pub topology_key: String,
    namespaces: BTreeSet<String>,
    /// Canonical JSON of the selector (LabelSelector is not Hash).
    selector: String,
}

/// Pods matching a selector in some namespaces, counted per domain of one topology key.
///
/// Domains are dense ids chosen by the solver: a host slot for `kubernetes.io/hostname` (every
/// node and planned claim has one), the index into the key's sorted domain list otherwise. Counts
/// are plain vectors: these lookups run for every candidate of every pod.
#[derive(Clone, Debug)]
pub struct Group {
    pub kind: GroupKind,
    pub topology_key: String,
    pub namespaces: BTreeSet<String>,
    /// Which pods it counts (parsed once: it is asked for every pod and candidate).
    pub selector: LabelMatcher,
    /// Matching pods per domain id.
    counts: Vec<u32>,
    total: u32,
    /// For anti-affinity: pods *carrying* this term per domain id (for the inverse check).
    owners: Vec<u32>,
    owners_total: u32,
    /// For non-hostname keys: (host slot, domain id) of every recorded pod, so a pod whose
    /// node affinity rules some nodes out can discount the pods on them (nodeAffinityPolicy).
    placements: Vec<(usize, usize)>,
}

fn bump(counts: &mut Vec<u32>, id: usize) {
    if counts.len() <= id {
        counts.resize(id + 1, 0);
    }
    counts[id] += 1;
}

impl Group {
    /// Whether this group counts `pod` (its selector matches and the namespace is in scope).
    pub fn counts_pod(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        self.namespaces.contains(namespace) && self.selector.matches(labels)
    }

    pub fn count(&self, domain: usize) -> u32 {
        self.counts.get(domain).copied().unwrap_or(0)
    }

    pub fn record(&mut self, domain: usize) {
        bump(&mut self.counts, domain);
        self.total += 1;
    }

    /// Records a matching pod in `domain` on the node or claim in host `slot`.
    pub fn record_at(&mut self, domain: usize, slot: usize) {
        self.record(domain);
        self.placements.push((slot, domain));
    }

    /// (host slot, domain id) of every pod recorded with [`Group::record_at`].
    pub fn placements(&self) -> &[(usize, usize)] {
        &self.placements
    }

    /// Matching pods across all domains.
    pub fn total(&self) -> u32 {
        self.total
    }

    pub fn owner_count(&self, domain: usize) -> u32 {
        self.owners.get(domain).copied().unwrap_or(0)
    }

    pub fn record_owner(&mut self, domain: usize) {
        bump(&mut self.owners, domain);
        self.owners_total += 1;
    }

    pub fn has_owners(&self) -> bool {
        self.owners_total > 0
    }

    pub fn is_hostname(&self) -> bool {
        self.topology_key == HOSTNAME_LABEL
    }
}

/// A pod's reference to one group, with how strongly it binds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupRef {
    pub group: usize,
    pub strength: Strength,
}

/// All groups of one scheduling run, plus the pods' references to them.
#[derive(Clone, Debug, Default)]
pub struct Topology {
    pub groups: Vec<Group>,
    index: HashMap<GroupKey, usize>,
    /// Anti-affinity groups, checked in reverse against every incoming pod.
    pub anti_groups: Vec<usize>,
}

/// Resolves which namespaces a term covers: listed ones, those a namespace selector matches,
/// or the pod's own.
pub fn term_namespaces(
    own: &str,
    listed: &[String],
    selector: Option<&LabelSelector>,
    namespaces: &BTreeMap<String, BTreeMap<String, String>>,
) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = listed.iter().cloned().collect();
    if let Some(selector) = selector {
        for (name, labels) in namespaces {
            if selector_matches(Some(selector), labels) {
                out.insert(name.clone());
            }
        }
    }
    if out.is_empty() && selector.is_none() {
        out.insert(own.to_string());
    }
    out
}

impl Topology {
    fn group_for(
        &mut self,
        kind: GroupKind,
        topology_key: &str,
        namespaces: BTreeSet<String>,
        selector: Option<&LabelSelector>,
    ) -> usize {
        let (tag, max_skew, min_domains) = match &kind {
            GroupKind::Spread {
                max_skew,
                min_domains,
            } => (0, *max_skew, *min_domains),
            GroupKind::Affinity => (1, 0, None),
            GroupKind::AntiAffinity => (2, 0, None),
        };
        let key = GroupKey {
            kind: tag,
            max_skew,
            min_domains,
            topology_key: topology_key.to_string(),
            namespaces: namespaces.clone(),
            selector: serde_json::to_string(&selector).unwrap_or_default(),
        };
        if let Some(i) = self.index.get(&key) {
            return *i;
        }
        self.groups.push(Group {
            kind,
            topology_key: topology_key.to_string(),
            namespaces,
            selector: LabelMatcher::new(selector),
            counts: Vec::new(),
            total: 0,
            owners: Vec::new(),
            owners_total: 0,
            placements: Vec::new(),
        });
        let i = self.groups.len() - 1;
        if tag == 2 {
            self.anti_groups.push(i);
        }
        self.index.insert(key, i);
        i
    }

    /// Registers `pod`'s constraints, returning its references: spread, affinity, anti-affinity.
    pub fn register(
        &mut self,
        pod: &PodInfo,
        namespaces: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> PodTopology {
        let own: BTreeSet<String> = [pod.namespace.clone()].into();
        let spread = pod
            .spread
            .iter()
            .map(|c: &SpreadConstraint| GroupRef {
                group: self.group_for(
                    GroupKind::Spread {
                        max_skew: c.max_skew,
                        min_domains: c.min_domains,
                    },
                    &c.topology_key,
                    own.clone(),
                    c.selector.as_ref(),
                ),
                strength: c.strength,
            })
            .collect();
        let terms = |terms: &[super::pod::AffinityTerm], kind: GroupKind, this: &mut Self| {
            terms
                .iter()
                .map(|t| GroupRef {
                    group: this.group_for(
                        kind.clone(),
                        &t.topology_key,
                        term_namespaces(
                            &pod.namespace,
                            &t.namespaces,
                            t.namespace_selector.as_ref(),
                            namespaces,
                        ),
                        t.selector.as_ref(),
                    ),
                    strength: t.strength,
                })
                .collect::<Vec<_>>()
        };
        let affinity = terms(&pod.affinity, GroupKind::Affinity, self);
        let anti_affinity = terms(&pod.anti_affinity, GroupKind::AntiAffinity, self);
        PodTopology {
            spread,
            affinity,
            anti_affinity,
        }
    }
}

/// A pod's references into the topology.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodTopology {
    pub spread: Vec<GroupRef>,
    pub affinity: Vec<GroupRef>,
    pub anti_affinity: Vec<GroupRef>,
}

impl PodTopology {
    pub fn is_empty(&self) -> bool {
        self.spread.is_empty() && self.affinity.is_empty() && self.anti_affinity.is_empty()
    }
}
