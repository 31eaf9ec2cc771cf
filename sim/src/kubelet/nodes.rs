//! Nodes over their life: startup taints removed once the node has been Ready long enough, and a
//! node whose instance stopped or went away marked NotReady (the kubelet stops posting status)
//! and, once its instance is gone for good, deleted after `node_gone_ms` (what the cloud node
//! lifecycle controller does).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::OnceLock;

use jiff::Timestamp;
use karpenter_core::catalog::Catalog;
use karpenter_core::seams::KubeError;
use karpenter_core::seams::ec2::InstanceState;
use karpenter_core::seams::kube::{DeleteOptions, DeleteOutcome, ObjectKey, Patch, ResourceKind};
use serde_json::{Value, json};

use super::register::{extended_only, node_resources, parse_taint_flags};
use super::{
    DEVICE_PLUGINS_PENDING_ANNOTATION, Kubelet, NOT_READY_TAINT, STARTING_MESSAGE,
    STARTUP_TAINTS_ANNOTATION, STARTUP_TAINTS_REMOVED_ANNOTATION, TickReport, lost_race,
};
use crate::objects::{
    NewCondition, after_ms, condition, condition_true, conditions_with, format_time, guarded,
    parse_time, taint_json,
};

/// What EC2 says about a node's instance.
enum Instance {
    /// Pending or running: the kubelet is alive.
    Alive,
    /// Stopping or stopped: the kubelet is down but the instance may come back.
    Down(&'static str),
    /// Shutting down, terminated, or unknown to EC2: the node will never come back.
    Gone(&'static str),
}

impl Kubelet {
    /// Follows instance state on every node with an `aws:///` provider id, and removes startup
    /// taints that are due. Nodes without one (static nodes of a scenario) are left alone.
    pub(super) async fn nodes(
        &self,
        now: Timestamp,
        report: &mut TickReport,
    ) -> Result<(), KubeError> {
        let nodes = self.list_nodes().await?;
        // Read once a tick, and only if a node needs them (a copy of the whole catalog per node
        // was a sizeable part of a 2,000-node launch).
        let mut declared = None;
        let catalog = OnceLock::new();
        let mut last_settled = std::mem::take(&mut *self.settled_nodes());
        let mut settled = BTreeMap::new();
        for node in nodes {
            let address = Arc::as_ptr(&node) as usize;
            if let Some((held, id)) = last_settled.remove(&address)
                && matches!(
                    self.cloud.instance_state(&id),
                    Some(InstanceState::Pending | InstanceState::Running)
                )
            {
                settled.insert(address, (held, id));
                continue;
            }
            let Some(instance_id) = instance_id(&node) else {
                continue;
            };
            let instance = match self.cloud.instance_state(&instance_id) {
                Some(InstanceState::Pending | InstanceState::Running) => Instance::Alive,
                Some(InstanceState::Stopping) => Instance::Down("stopping"),
                Some(InstanceState::Stopped) => Instance::Down("stopped"),
                Some(InstanceState::ShuttingDown) => Instance::Gone("shutting-down"),
                Some(InstanceState::Terminated) => Instance::Gone("terminated"),
                None => Instance::Gone("unknown to EC2"),
            };
            match instance {
                Instance::Alive => {
                    // One change per node and tick: each write needs the node as written.
                    if self.become_ready(&node, now, report).await?
                        || self.report_devices(&node, &catalog, now, report).await?
                    {
                        continue;
                    }
                    if declared.is_none() {
                        declared = Some(self.declared_startup_taints().await?);
                    }
                    let declared = node["spec"]["providerID"]
                        .as_str()
                        .and_then(|id| declared.as_ref()?.get(id))
                        .map_or(&[][..], Vec::as_slice);
                    if settled_node(&node, declared) {
                        settled.insert(address, (Arc::clone(&node), instance_id));
                        continue;
                    }
                    self.remove_startup_taints(&node, declared, now, report)
                        .await?;
                }
                Instance::Down(state) => {
                    self.not_ready((*node).clone(), &instance_id, state, now, report)
                        .await?;
                }
                Instance::Gone(state) => {
                    if let Some(node) = self
                        .not_ready((*node).clone(), &instance_id, state, now, report)
                        .await?
                    {
                        self.delete_gone(&node, now, report).await?;
                    }
                }
            }
        }
        *self.settled_nodes() = settled;
        Ok(())
    }

    fn settled_nodes(&self) -> std::sync::MutexGuard<'_, BTreeMap<usize, (Arc<Value>, String)>> {
        self.settled_nodes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A node registered `NotReady` (the CNI starting) turns Ready `ready_delay_ms` after it
    /// registered, and loses the `node.kubernetes.io/not-ready:NoSchedule` taint. Returns
    /// whether it wrote.
    async fn become_ready(
        &self,
        node: &Value,
        now: Timestamp,
        report: &mut TickReport,
    ) -> Result<bool, KubeError> {
        let Some(ready) = condition(node, "Ready") else {
            return Ok(false);
        };
        let not_ready_tainted = node["spec"]["taints"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["key"] == NOT_READY_TAINT);
        if ready["status"] == "True"
            && not_ready_tainted
            && node["metadata"]["deletionTimestamp"].is_null()
        {
            // The node lifecycle controller's retry: a Ready node whose not-ready taint removal
            // lost a race (a conflict) still loses it, on this tick.
            return self.drop_not_ready_taint(node, report).await;
        }
        if ready["status"] != "False"
            || ready["message"] != STARTING_MESSAGE
            || !node["metadata"]["deletionTimestamp"].is_null()
        {
            return Ok(false);
        }
        let since = parse_time(Some(&ready["lastTransitionTime"])).unwrap_or(Timestamp::MIN);
        if now < after_ms(since, self.config.ready_delay_ms) {
            return Ok(false);
        }
        let conditions = conditions_with(
            node,
            &[NewCondition {
                type_: "Ready",
                status: "True",
                reason: Some("KubeletReady"),
                message: Some("kubelet is posting ready status"),
            }],
            now,
        );
        let name = node_name(node);
        let key = ObjectKey::cluster(&name);
        let patch = guarded(node, json!({ "status": { "conditions": conditions } }));
        let written = match self
            .kube
            .patch_status(&ResourceKind::NODE, &key, &Patch::Merge(patch))
            .await
        {
            Ok(written) => written,
            Err(e) if lost_race(&e) => {
                report.conflicts += 1;
                return Ok(true);
            }
            Err(e) => return Err(e),
        };
        report.nodes_ready.push(name);
        self.drop_not_ready_taint(&written, report).await
    }

    /// The node lifecycle controller's part for a Ready node: its `node.kubernetes.io/not-ready`
    /// taints go. A lost race is retried on a later tick (see [`Self::become_ready`]).
    async fn drop_not_ready_taint(
        &self,
        node: &Value,
        report: &mut TickReport,
    ) -> Result<bool, KubeError> {
        let key = ObjectKey::cluster(node_name(node));
        let taints: Vec<Value> = node["spec"]["taints"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["key"] != NOT_READY_TAINT)
            .cloned()
            .collect();
        let patch = guarded(node, json!({ "spec": { "taints": taints } }));
        match self
            .kube
            .patch(&ResourceKind::NODE, &key, &Patch::Merge(patch))
            .await
        {
            Ok(_) => {}
            Err(e) if lost_race(&e) => report.conflicts += 1,
            Err(e) => return Err(e),
        }
        Ok(true)
    }

    /// A Ready node waiting for its device plugins reports its extended resources
    /// `device_plugin_delay_ms` after it became Ready. Returns whether it wrote.
    async fn report_devices(
        &self,
        node: &Value,
        catalog: &OnceLock<Arc<Catalog>>,
        now: Timestamp,
        report: &mut TickReport,
    ) -> Result<bool, KubeError> {
        if node["metadata"]["annotations"][DEVICE_PLUGINS_PENDING_ANNOTATION].is_null()
            || !condition_true(node, "Ready")
        {
            return Ok(false);
        }
        let ready_since = condition(node, "Ready")
            .and_then(|c| parse_time(Some(&c["lastTransitionTime"])))
            .unwrap_or(Timestamp::MIN);
        if now < after_ms(ready_since, self.config.device_plugin_delay_ms) {
            return Ok(false);
        }
        let instance_type = node["metadata"]["labels"]["node.kubernetes.io/instance-type"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let catalog = catalog.get_or_init(|| self.cloud.instance_type_specs());
        let Some(it) = catalog.get(&instance_type) else {
            return Ok(false);
        };
        let windows = node["metadata"]["labels"]["kubernetes.io/os"] == "windows";
        // Only the extended resources: the kubelet's own (a Windows node's max pods) stay.
        let (capacity, allocatable) = node_resources(it, catalog, windows, None);
        let name = node_name(node);
        let key = ObjectKey::cluster(&name);
        let status = guarded(
            node,
            json!({ "status": {
                "capacity": extended_only(&capacity),
                "allocatable": extended_only(&allocatable),
            }}),
        );
        match self
            .kube
            .patch_status(&ResourceKind::NODE, &key, &Patch::Merge(status))
            .await
        {
            Ok(written) => {
                let patch = guarded(
                    &written,
                    json!({ "metadata": { "annotations": { DEVICE_PLUGINS_PENDING_ANNOTATION: null } } }),
                );
                match self
                    .kube
                    .patch(&ResourceKind::NODE, &key, &Patch::Merge(patch))
                    .await
                {
                    Ok(_) => report.devices_reported.push(name),
                    Err(e) if lost_race(&e) => report.conflicts += 1,
                    Err(e) => return Err(e),
                }
            }
            Err(e) if lost_race(&e) => report.conflicts += 1,
            Err(e) => return Err(e),
        }
        Ok(true)
    }

    /// The startup taints' owners (a CNI, a security agent: daemons that untaint the node once
    /// they run): once the node has been Ready for `startup_taint_removal_ms`, removes the
    /// startup taints it registered with (the annotation listing them goes too) and those its
    /// NodeClaim declares (`declared`, by key and effect) that it carries — registration puts
    /// these on a node whose user data did not register with them (`amiFamily: Custom`), and an
    /// agent already running removes them whenever they appear. What was removed is added to
    /// [`STARTUP_TAINTS_REMOVED_ANNOTATION`], the owners' record of being done.
    async fn remove_startup_taints(
        &self,
        node: &Value,
        declared: &[(String, String)],
        now: Timestamp,
        report: &mut TickReport,
    ) -> Result<(), KubeError> {
        let listed = node["metadata"]["annotations"][STARTUP_TAINTS_ANNOTATION].as_str();
        if listed.is_none() && declared.is_empty() {
            return Ok(());
        }
        if !condition_true(node, "Ready") || !node["metadata"]["deletionTimestamp"].is_null() {
            return Ok(());
        }
        let ready_since = condition(node, "Ready")
            .and_then(|c| parse_time(Some(&c["lastTransitionTime"])))
            .unwrap_or(Timestamp::MIN);
        if now < after_ms(ready_since, self.config.startup_taint_removal_ms) {
            return Ok(());
        }
        let mut startup = listed.map(parse_taint_flags).unwrap_or_default();
        startup.extend(declared.iter().cloned());
        let (removed, kept): (Vec<Value>, Vec<Value>) = node["spec"]["taints"]
            .as_array()
            .into_iter()
            .flatten()
            .cloned()
            .partition(|t| {
                startup
                    .iter()
                    .any(|(key, effect)| t["key"] == key.as_str() && t["effect"] == effect.as_str())
            });
        if listed.is_none() && removed.is_empty() {
            return Ok(());
        }
        let mut done: BTreeSet<String> = node["metadata"]["annotations"]
            [STARTUP_TAINTS_REMOVED_ANNOTATION]
            .as_str()
            .map(|d| {
                d.split(',')
                    .filter(|e| !e.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        done.extend(removed.iter().map(|t| {
            let field = |name: &str| t[name].as_str().unwrap_or_default().to_string();
            format!("{}:{}", field("key"), field("effect"))
        }));
        let done = (!done.is_empty()).then(|| done.into_iter().collect::<Vec<_>>().join(","));
        let patch = guarded(
            node,
            json!({
                "metadata": { "annotations": {
                    STARTUP_TAINTS_ANNOTATION: null,
                    STARTUP_TAINTS_REMOVED_ANNOTATION: done,
                } },
                "spec": { "taints": kept },
            }),
        );
        let name = node_name(node);
        match self
            .kube
            .patch(
                &ResourceKind::NODE,
                &ObjectKey::cluster(&name),
                &Patch::Merge(patch),
            )
            .await
        {
            Ok(_) => report.startup_taints_removed.push(name),
            Err(e) if lost_race(&e) => report.conflicts += 1,
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Makes sure the node says `Ready=False` and carries the not-ready taints; returns the node
    /// as written, or `None` if a write lost a race (the next tick tries again).
    async fn not_ready(
        &self,
        mut node: Value,
        instance_id: &str,
        state: &str,
        now: Timestamp,
        report: &mut TickReport,
    ) -> Result<Option<Value>, KubeError> {
        let key = ObjectKey::cluster(node_name(&node));
        let ready_status = condition(&node, "Ready").map(|c| c["status"].clone());
        if ready_status.is_none() || ready_status == Some(json!("True")) {
            let message = format!(
                "instance {instance_id} is {state}: the kubelet stopped posting node status"
            );
            let conditions = conditions_with(
                &node,
                &[NewCondition {
                    type_: "Ready",
                    status: "False",
                    reason: Some("KubeletNotReady"),
                    message: Some(&message),
                }],
                now,
            );
            let patch = guarded(&node, json!({ "status": { "conditions": conditions } }));
            match self
                .kube
                .patch_status(&ResourceKind::NODE, &key, &Patch::Merge(patch))
                .await
            {
                Ok(written) => {
                    node = Value::clone(&written);
                    report.nodes_not_ready.push(key.name.clone());
                }
                Err(e) if lost_race(&e) => {
                    report.conflicts += 1;
                    return Ok(None);
                }
                Err(e) => return Err(e),
            }
        }
        let mut taints: Vec<Value> = node["spec"]["taints"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut added = false;
        for effect in ["NoSchedule", "NoExecute"] {
            let present = taints
                .iter()
                .any(|t| t["key"] == NOT_READY_TAINT && t["effect"] == effect);
            if !present {
                let mut taint = taint_json(NOT_READY_TAINT, "", effect);
                if effect == "NoExecute" {
                    taint["timeAdded"] = json!(format_time(now));
                }
                taints.push(taint);
                added = true;
            }
        }
        // A node being deleted is tainted too: Kubernetes' node lifecycle controller does not
        // look at `deletionTimestamp`, and its taint eviction must reach the pods of a node whose
        // finalizer (Karpenter's termination) keeps it while its instance is stopped.
        if added {
            let patch = guarded(&node, json!({ "spec": { "taints": taints } }));
            match self
                .kube
                .patch(&ResourceKind::NODE, &key, &Patch::Merge(patch))
                .await
            {
                Ok(written) => node = Value::clone(&written),
                Err(e) if lost_race(&e) => {
                    report.conflicts += 1;
                    return Ok(None);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(Some(node))
    }

    /// Deletes a NotReady node of a gone instance once `node_gone_ms` has passed since it went
    /// NotReady. A node with finalizers is only marked; the controller removes them. Its pods go
    /// when the node does (see the pod pass).
    async fn delete_gone(
        &self,
        node: &Value,
        now: Timestamp,
        report: &mut TickReport,
    ) -> Result<(), KubeError> {
        if !node["metadata"]["deletionTimestamp"].is_null() {
            return Ok(());
        }
        let not_ready_since = condition(node, "Ready")
            .and_then(|c| parse_time(Some(&c["lastTransitionTime"])))
            .unwrap_or(Timestamp::MIN);
        if now < after_ms(not_ready_since, self.config.node_gone_ms) {
            return Ok(());
        }
        let name = node_name(node);
        let options = DeleteOptions {
            grace_period_seconds: None,
            precondition_uid: node["metadata"]["uid"].as_str().map(str::to_string),
        };
        match self
            .kube
            .delete(&ResourceKind::NODE, &ObjectKey::cluster(&name), &options)
            .await
        {
            Ok(DeleteOutcome::Deleted) => report.nodes_deleted.push(name),
            Ok(DeleteOutcome::Marked(_)) => report.nodes_marked.push(name),
            Ok(DeleteOutcome::NotFound) => {}
            Err(e) if lost_race(&e) => report.conflicts += 1,
            Err(e) => return Err(e),
        }
        Ok(())
    }
}

/// Whether nothing a tick does can apply to `node` (of a live instance) until the node changes:
/// it is Ready without the not-ready taint (nothing for [`Kubelet::become_ready`]), its device
/// plugins reported (nothing for [`Kubelet::report_devices`]), and it lists no startup taints
/// and carries none of those its NodeClaim declares (`declared`; nothing for
/// [`Kubelet::remove_startup_taints`]). None of these waits on the time once it holds.
pub(super) fn settled_node(node: &Value, declared: &[(String, String)]) -> bool {
    let taints = node["spec"]["taints"].as_array();
    let carries = |key: &str, effect: Option<&str>| {
        taints
            .into_iter()
            .flatten()
            .any(|t| t["key"] == key && effect.is_none_or(|e| t["effect"].as_str() == Some(e)))
    };
    condition_true(node, "Ready")
        && !carries(NOT_READY_TAINT, None)
        && node["metadata"]["annotations"][DEVICE_PLUGINS_PENDING_ANNOTATION].is_null()
        && node["metadata"]["annotations"][STARTUP_TAINTS_ANNOTATION].is_null()
        && !declared
            .iter()
            .any(|(key, effect)| carries(key, Some(effect)))
}

fn node_name(node: &Value) -> String {
    node["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The EC2 instance id in an `aws:///ZONE/INSTANCE_ID` provider id.
pub(super) fn instance_id(node: &Value) -> Option<String> {
    let provider_id = node["spec"]["providerID"].as_str()?;
    let rest = provider_id.strip_prefix("aws:///")?;
    let id = rest.rsplit('/').next()?;
    id.starts_with("i-").then(|| id.to_string())
}
