//! PodDisruptionBudgets as disruption reads them: which pods each one covers and how many
//! disruptions it allows now, computed from its spec and the pods (as the API server's disruption
//! controller would), so a dry run over YAML without PDB status decides the same way.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube_core::{ResourceExt, Selector, SelectorExt};

use super::view::PodFacts;

/// One PodDisruptionBudget: its name, the pods it covers and the disruptions it allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PdbFacts {
    /// `namespace/name`.
    pub name: String,
    /// `namespace/name` of every (non-terminal) pod it selects.
    pub pods: BTreeSet<String>,
    pub disruptions_allowed: u64,
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Running and Ready, not terminating. A pod without status (a hand-written manifest bound by
/// `spec.nodeName`) is taken as healthy.
fn is_healthy(pod: &Pod) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let Some(status) = &pod.status else {
        return true;
    };
    let running = status.phase.as_deref().is_none_or(|p| p == "Running");
    let ready = status
        .conditions
        .as_deref()
        .is_none_or(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    running && ready
}

/// `value` of `total`, a count or a percentage rounded up (Kubernetes'
/// `GetScaledValueFromIntOrPercent(.., true)`).
fn scaled(value: &IntOrString, total: u64) -> u64 {
    match value {
        IntOrString::Int(n) => u64::try_from(*n).unwrap_or(0),
        IntOrString::String(text) => {
            let percent: u64 = text.trim_end_matches('%').parse().unwrap_or(0);
            (total * percent).div_ceil(100)
        }
    }
}

impl PdbFacts {
    /// The budget over `pods` (each with its facts). `None` for a budget without a selector (it
    /// selects nothing).
    pub fn of(pdb: &PodDisruptionBudget, pods: &[(&Pod, PodFacts)]) -> Option<Self> {
        let spec = pdb.spec.as_ref()?;
        let selector = Selector::try_from(spec.selector.clone()?).ok()?;
        let namespace = pdb.namespace().unwrap_or_else(|| "default".into());
        let covered: Vec<&(&Pod, PodFacts)> = pods
            .iter()
            .filter(|(pod, facts)| {
                facts.namespace == namespace && !is_terminal(pod) && selector.matches(&facts.labels)
            })
            .collect();
        let expected = covered.len() as u64;
        let healthy = covered.iter().filter(|(pod, _)| is_healthy(pod)).count() as u64;
        let desired = match (&spec.min_available, &spec.max_unavailable) {
            (Some(min), _) => scaled(min, expected),
            (None, Some(max)) => expected.saturating_sub(scaled(max, expected)),
            (None, None) => 0,
        };
        Some(Self {
            name: format!("{namespace}/{}", pdb.name_any()),
            pods: covered.iter().map(|(_, f)| f.key.clone()).collect(),
            disruptions_allowed: healthy.saturating_sub(desired),
        })
    }
}

/// Why the PDBs do not let `pod` be evicted now, if they do not: a budget that allows no
/// disruption, or more than one budget (the Eviction API refuses those).
pub fn blocks(pdbs: &[PdbFacts], pod: &str) -> Option<String> {
    let covering: Vec<&PdbFacts> = pdbs.iter().filter(|p| p.pods.contains(pod)).collect();
    if covering.len() > 1 {
        let names: Vec<&str> = covering.iter().map(|p| p.name.as_str()).collect();
        return Some(format!(
            "pod {pod} is covered by more than one pdb ({}), which the Eviction API refuses",
            names.join(", ")
        ));
    }
    covering
        .first()
        .filter(|p| p.disruptions_allowed == 0)
        .map(|p| format!("pdb {} allows no disruption of pod {pod} now", p.name))
}

/// The PodDisruptionBudgets that let no covered pod be evicted, whatever the pods' health:
/// `maxUnavailable` of 0 (or `"0%"`) or `minAvailable: "100%"` (upstream's `isFullyBlocking`).
/// The provisioner plans no replacement capacity for the pods they cover on a deleting node:
/// those pods leave only when the node's terminationGracePeriod forces them.
#[derive(Clone, Debug, Default)]
pub struct FullyBlocking {
    /// Namespace and selector of each such budget.
    budgets: Vec<(String, Selector)>,
}

impl FullyBlocking {
    pub fn new<'a>(pdbs: impl IntoIterator<Item = &'a PodDisruptionBudget>) -> Self {
        let budgets = pdbs
            .into_iter()
            .filter_map(|pdb| {
                let spec = pdb.spec.as_ref()?;
                let blocks = match (&spec.min_available, &spec.max_unavailable) {
                    (_, Some(IntOrString::Int(0))) => true,
                    (_, Some(IntOrString::String(max))) => max.trim() == "0%",
                    (Some(IntOrString::String(min)), None) => min.trim() == "100%",
                    _ => false,
                };
                if !blocks {
                    return None;
                }
                let selector = Selector::try_from(spec.selector.clone()?).ok()?;
                Some((
                    pdb.namespace().unwrap_or_else(|| "default".into()),
                    selector,
                ))
            })
            .collect();
        Self { budgets }
    }

    /// Whether one of the budgets covers `pod`.
    pub fn covers(&self, pod: &Pod) -> bool {
        let namespace = pod.namespace().unwrap_or_else(|| "default".into());
        self.budgets
            .iter()
            .any(|(ns, selector)| *ns == namespace && selector.matches(pod.labels()))
    }
}
