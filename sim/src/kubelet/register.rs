//! Node registration: what a kubelet does when its instance has booted.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use fakecloud::{Boot, Taint};
use jiff::Timestamp;
use karpenter_core::api::labels::{CAPACITY_TYPE_LABEL, NODEPOOL_LABEL, UNREGISTERED_TAINT_KEY};
use karpenter_core::catalog::{Catalog, InstanceType, PRIVATE_IPV4_ADDRESS};
use karpenter_core::resources::{PODS, Resources};
use karpenter_core::seams::KubeError;
use karpenter_core::seams::kube::{ObjectKey, Patch, ResourceKind};
use serde_json::{Map, Value, json};

use super::{
    DEVICE_PLUGINS_PENDING_ANNOTATION, Kubelet, NOT_READY_TAINT, STARTING_MESSAGE,
    STARTUP_TAINTS_ANNOTATION, TickReport,
};
use crate::objects::{NewCondition, conditions_with, format_time, taint_json};

impl Kubelet {
    /// Creates a Node for every instance that is ready to join and has none yet.
    pub(super) async fn register(
        &self,
        now: Timestamp,
        report: &mut TickReport,
    ) -> Result<(), KubeError> {
        let boots: Vec<Boot> = {
            let mut registered = self.registered();
            let (ready, new) = self.cloud.ready_to_join_except(&registered);
            // An instance that is no longer running never joins again: forget it, so the memory
            // stays as small as the fleet (only when some registered one is no longer ready).
            if registered.len() + new.len() > ready {
                let ready = self.cloud.ready_to_join_ids();
                registered.retain(|id| ready.contains(id));
            }
            new.iter().filter_map(|id| self.cloud.boot(id)).collect()
        };
        if boots.is_empty() {
            return Ok(());
        }
        let existing: BTreeMap<String, Arc<Value>> = self
            .list_nodes()
            .await?
            .into_iter()
            .map(|n| {
                (
                    n["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    n,
                )
            })
            .collect();
        let declared = self.declared_startup_taints().await?;
        let catalog = self.cloud.instance_type_specs();
        for boot in boots {
            let Some(instance_type) = catalog.get(&boot.instance_type) else {
                report.unknown_instance_types.push(boot.instance_id.clone());
                continue;
            };
            let name = boot.private_dns_name.clone();
            let windows = is_windows(&boot.labels);
            let (capacity, allocatable) =
                node_resources(instance_type, &catalog, windows, boot.max_pods);
            let node = match existing.get(&name) {
                // Registered before (by an earlier stand-in, or a create whose status write
                // failed): finish the status if it is missing.
                Some(node) if !node["status"]["conditions"].is_null() => {
                    self.registered().insert(boot.instance_id.clone());
                    continue;
                }
                Some(node) => (**node).clone(),
                None => {
                    let startup = startup_taints(&boot, &declared, &self.config.startup_taint_keys);
                    match self
                        .kube
                        .create(
                            &ResourceKind::NODE,
                            node_object(&boot, &startup, has_extended(&allocatable)),
                        )
                        .await
                    {
                        Ok(node) => node,
                        Err(KubeError::AlreadyExists(_)) => continue,
                        Err(e) => return Err(e),
                    }
                }
            };
            // Not guarded by resourceVersion: the node is new and its status is the kubelet's.
            let status = node_status(&boot, (&capacity, &allocatable), &node, now);
            self.kube
                .patch_status(
                    &ResourceKind::NODE,
                    &ObjectKey::cluster(&name),
                    &Patch::Merge(json!({ "status": status })),
                )
                .await?;
            self.registered().insert(boot.instance_id.clone());
            report.registered.push(name);
        }
        Ok(())
    }

    /// `(key, effect)` of the startup taints each NodeClaim declares, by its `status.providerID`.
    pub(super) async fn declared_startup_taints(
        &self,
    ) -> Result<BTreeMap<String, Vec<(String, String)>>, KubeError> {
        let claims = match self.list_claims().await {
            Ok(list) => list,
            // A world without the NodeClaim kind has no declared startup taints.
            Err(KubeError::NotFound(_)) => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut declared = BTreeMap::new();
        for claim in claims {
            let Some(provider_id) = claim["status"]["providerID"].as_str() else {
                continue;
            };
            let taints = claim["spec"]["startupTaints"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| Some((t["key"].as_str()?.into(), t["effect"].as_str()?.into())))
                .collect();
            declared.insert(provider_id.to_string(), taints);
        }
        Ok(declared)
    }
}

/// The registered taints that are startup taints (see `KubeletConfig::startup_taint_keys`).
fn startup_taints<'a>(
    boot: &'a Boot,
    declared: &BTreeMap<String, Vec<(String, String)>>,
    keys: &BTreeSet<String>,
) -> Vec<&'a Taint> {
    let declared = declared.get(&boot.provider_id);
    boot.taints
        .iter()
        .filter(|t| t.key != UNREGISTERED_TAINT_KEY)
        .filter(|t| {
            keys.contains(&t.key)
                || declared.is_some_and(|d| d.iter().any(|(k, e)| *k == t.key && *e == t.effect))
        })
        .collect()
}

/// `key=value:Effect` / `key:Effect`, the kubelet's `--register-with-taints` syntax.
pub(super) fn taint_flag(key: &str, value: &str, effect: &str) -> String {
    if value.is_empty() {
        format!("{key}:{effect}")
    } else {
        format!("{key}={value}:{effect}")
    }
}

/// `(key, effect)` of each entry of the startup-taints annotation.
pub(super) fn parse_taint_flags(text: &str) -> Vec<(String, String)> {
    text.split(',')
        .filter_map(|entry| {
            let (key_value, effect) = entry.trim().rsplit_once(':')?;
            let key = key_value.split_once('=').map_or(key_value, |(k, _)| k);
            Some((key.to_string(), effect.to_string()))
        })
        .collect()
}

/// The node label the EBS CSI driver's topology key becomes.
pub const EBS_CSI_ZONE_LABEL: &str = "topology.ebs.csi.aws.com/zone";
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// The Node as the kubelet creates it: its name, labels and taints, and the provider id.
fn node_object(boot: &Boot, startup: &[&Taint], extended: bool) -> Value {
    let mut labels = boot.labels.clone();
    // Karpenter passes the NodeClaim's labels (capacity type included) as `--node-labels`; a
    // node whose user data lacks it still gets it, as the controller would sync it.
    if labels.contains_key(NODEPOOL_LABEL) {
        labels
            .entry(CAPACITY_TYPE_LABEL.to_string())
            .or_insert_with(|| boot.capacity_type.label().to_string());
    }
    // The EBS CSI driver's node plugin runs on every node of the simulated cluster: the kubelet
    // labels the node with the topology the driver reports (its zone), which is what the node
    // affinity of the volumes it provisions names.
    if let Some(zone) = labels.get(ZONE_LABEL).cloned() {
        labels.insert(EBS_CSI_ZONE_LABEL.to_string(), zone);
    }
    let mut taints: Vec<Value> = boot
        .taints
        .iter()
        .map(|t| taint_json(&t.key, &t.value, &t.effect))
        .collect();
    // Registered NotReady: the node lifecycle controller taints it until the kubelet is ready.
    taints.push(taint_json(NOT_READY_TAINT, "", "NoSchedule"));
    let mut metadata = json!({ "name": boot.private_dns_name, "labels": labels });
    if extended {
        metadata["annotations"] = json!({ DEVICE_PLUGINS_PENDING_ANNOTATION: "true" });
    }
    if !startup.is_empty() {
        let flags: Vec<String> = startup
            .iter()
            .map(|t| taint_flag(&t.key, &t.value, &t.effect))
            .collect();
        metadata["annotations"][STARTUP_TAINTS_ANNOTATION] = json!(flags.join(","));
    }
    let spec = json!({ "providerID": boot.provider_id, "taints": taints });
    json!({ "apiVersion": "v1", "kind": "Node", "metadata": metadata, "spec": spec })
}

/// Capacity and allocatable from the catalog (extended resources left out until the device
/// plugins report them), `Ready=False` while the node starts and the pressure conditions
/// `False`, and the node's addresses.
fn node_status(
    boot: &Boot,
    (capacity, allocatable): (&Resources, &Resources),
    node: &Value,
    now: Timestamp,
) -> Value {
    let conditions = conditions_with(
        node,
        &[
            NewCondition {
                type_: "MemoryPressure",
                status: "False",
                reason: Some("KubeletHasSufficientMemory"),
                message: Some("kubelet has sufficient memory available"),
            },
            NewCondition {
                type_: "DiskPressure",
                status: "False",
                reason: Some("KubeletHasNoDiskPressure"),
                message: Some("kubelet has no disk pressure"),
            },
            NewCondition {
                type_: "PIDPressure",
                status: "False",
                reason: Some("KubeletHasSufficientPID"),
                message: Some("kubelet has sufficient PID available"),
            },
            NewCondition {
                type_: "Ready",
                status: "False",
                reason: Some("KubeletNotReady"),
                message: Some(STARTING_MESSAGE),
            },
        ],
        now,
    );
    let conditions: Vec<Value> = conditions
        .into_iter()
        .map(|mut c| {
            c["lastHeartbeatTime"] = json!(format_time(now));
            c
        })
        .collect();
    json!({
        "capacity": quantities(capacity, false),
        "allocatable": quantities(allocatable, false),
        "conditions": conditions,
        "addresses": [
            { "type": "Hostname", "address": boot.private_dns_name },
            { "type": "InternalDNS", "address": boot.private_dns_name },
        ],
    })
}

/// A resource list as Kubernetes writes it (cpu in cores or millicores, the rest as integers);
/// extended resources only with `extended`.
pub(super) fn quantities(resources: &Resources, extended: bool) -> Value {
    let map: Map<String, Value> = resources
        .to_list()
        .into_iter()
        .filter(|(name, _)| extended || !is_extended(name))
        .map(|(name, quantity)| (name, Value::String(quantity.0)))
        .collect();
    Value::Object(map)
}

/// The extended resources of a resource list only, as a device plugin (or the VPC resource
/// controller) adds them to a registered node's status.
pub(super) fn extended_only(resources: &Resources) -> Value {
    let map: Map<String, Value> = resources
        .to_list()
        .into_iter()
        .filter(|(name, _)| is_extended(name))
        .map(|(name, quantity)| (name, Value::String(quantity.0)))
        .collect();
    Value::Object(map)
}

/// Resources a device plugin reports (anything but the kubelet's own).
fn is_extended(name: &str) -> bool {
    !["cpu", "memory", "pods", "ephemeral-storage"].contains(&name)
}

/// Whether the node will advertise extended resources.
fn has_extended(allocatable: &Resources) -> bool {
    allocatable
        .to_list()
        .iter()
        .any(|(name, q)| is_extended(name) && q.0 != "0")
}

/// The kubelet's default max pods: what a Windows kubelet runs with unless told otherwise.
const KUBELET_DEFAULT_MAX_PODS: i64 = 110;

/// Whether a node's (or a boot's) labels say it runs Windows.
pub(super) fn is_windows(labels: &BTreeMap<String, String>) -> bool {
    labels.get("kubernetes.io/os").map(String::as_str) == Some("windows")
}

/// Capacity and allocatable of a node of `instance_type` once every agent runs: the catalog's,
/// and on a Windows node the kubelet's max pods (`--max-pods`, else 110: the EKS Windows
/// bootstrap does not compute an ENI limit) and the `vpc.amazonaws.com/PrivateIPv4Address`
/// that EKS's VPC resource controller advertises (the primary interface's IPv4 addresses less
/// its own: Windows pods get addresses from that interface only). Memory keeps the catalog's
/// Linux overhead (a known approximation of the stand-in).
pub(super) fn node_resources(
    instance_type: &InstanceType,
    catalog: &Catalog,
    windows: bool,
    max_pods: Option<u32>,
) -> (Resources, Resources) {
    let mut capacity = instance_type.capacity.clone();
    let mut allocatable = instance_type.allocatable.clone();
    if windows {
        let pods = max_pods.map_or(KUBELET_DEFAULT_MAX_PODS, i64::from);
        capacity.set(PODS, pods);
        allocatable.set(PODS, pods);
        if let Some(addresses) = catalog
            .ipv4_per_interface
            .get(&instance_type.name)
            .map(|ipv4| ipv4 - 1)
            .filter(|n| *n > 0)
        {
            capacity.set(PRIVATE_IPV4_ADDRESS, addresses);
            allocatable.set(PRIVATE_IPV4_ADDRESS, addresses);
        }
    }
    (capacity, allocatable)
}
