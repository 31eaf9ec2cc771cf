//! Capacity Karpenter does not own: instances a managed node group (or any other owner) runs in
//! the account, tagged as their owner tags them and joining the cluster with the labels and
//! taints their owner's bootstrap gives them. They boot like any instance (pending, running,
//! billed, spot-free) but never through Karpenter's launch templates, so the world can check
//! that Karpenter never terminates, tags or adopts them.

use std::collections::BTreeMap;

use karpenter_core::catalog::CapacityType;
use karpenter_core::seams::ec2::{CreateFleetRequest, Ec2Error, LaunchTemplateRequest};

use crate::FakeCloud;
use crate::bootstrap::{KubeletView, Taint};
use crate::capacity::Pool;
use crate::fleet::Candidate;
use crate::state::after_ms;

/// An instance of another owner, as that owner starts it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ForeignInstance {
    pub instance_type: String,
    pub zone: String,
    pub image_id: String,
    /// The owner's tags (EKS: `eks:cluster-name`, `eks:nodegroup-name`,
    /// `kubernetes.io/cluster/NAME=owned`, `aws:autoscaling:groupName`).
    pub tags: BTreeMap<String, String>,
    /// Labels and taints its kubelet registers with.
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
}

impl FakeCloud {
    /// The zones that have a subnet, sorted.
    pub fn subnet_zones(&self) -> Vec<String> {
        let state = self.current();
        let zones: std::collections::BTreeSet<String> = state
            .network
            .subnets
            .values()
            .map(|s| s.subnet.zone.clone())
            .collect();
        zones.into_iter().collect()
    }

    /// Creates a launch template another owner keeps in the account (another cluster's
    /// Karpenter, say), as that owner would, outside any fault or call log: the world checks
    /// that this cluster's Karpenter never deletes it.
    pub fn create_foreign_launch_template(
        &self,
        request: &LaunchTemplateRequest,
    ) -> Result<karpenter_core::seams::ec2::LaunchTemplate, Ec2Error> {
        let mut state = self.current();
        let state = &mut *state;
        state
            .templates
            .create(request, &mut state.rng.ids, state.now)
    }

    /// Starts `instance` on-demand in the first subnet of its zone; it joins the cluster after
    /// the usual pending time. Fails if the zone has no subnet or the pool no capacity.
    pub fn run_foreign_instance(&self, instance: &ForeignInstance) -> Result<String, Ec2Error> {
        let mut state = self.current();
        let subnet = state
            .network
            .subnets
            .values()
            .find(|s| s.subnet.zone == instance.zone)
            .map(|s| s.subnet.clone())
            .ok_or_else(|| Ec2Error::InvalidRequest {
                code: "InvalidSubnet".into(),
                message: format!("no subnet in {}", instance.zone),
            })?;
        let pool = Pool::new(
            &instance.instance_type,
            &instance.zone,
            CapacityType::OnDemand,
        );
        if state.capacity.free(&pool) == 0 {
            return Err(Ec2Error::InvalidRequest {
                code: "InsufficientInstanceCapacity".into(),
                message: format!("no capacity for {}", instance.instance_type),
            });
        }
        let candidate = Candidate {
            free: state.capacity.free(&pool),
            pool,
            subnet_id: subnet.subnet_id.clone(),
            subnet_free_ips: subnet.available_ip_address_count,
            price: 0.0,
        };
        let request = CreateFleetRequest {
            capacity_block: false,
            capacity_type: CapacityType::OnDemand,
            launch_template_name: String::new(),
            overrides: Vec::new(),
            tags: instance.tags.clone(),
            client_token: String::new(),
            context: None,
        };
        let template = LaunchTemplateRequest {
            name: String::new(),
            image_id: instance.image_id.clone(),
            user_data: String::new(),
            security_group_ids: Vec::new(),
            instance_profile: String::new(),
            tags: BTreeMap::new(),
            extra: BTreeMap::new(),
        };
        let launched = state.launch(&request, &template, &candidate, None);
        let now = state.now;
        let pending_ms = state.config.pending_duration_ms;
        if let Some(record) = state.instances.get_mut(&launched.instance_id) {
            let mut taints = instance.taints.clone();
            taints.sort();
            record.join = Ok(KubeletView {
                labels: instance.labels.clone(),
                taints,
                max_pods: None,
                cluster_dns: Vec::new(),
            });
            record.ready_at = Some(after_ms(now, pending_ms));
        }
        Ok(launched.instance_id)
    }
}
