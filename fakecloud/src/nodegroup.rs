//! Capacity Karpenter does not own: instances a managed node group (or any other owner) runs in
//! the account, tagged as their owner tags them and joining the cluster with the labels and
//! taints their owner's bootstrap gives them. They boot like any instance (pending, running,
//! billed, spot-free) but never through Karpenter's launch templates, so the world can check
//! that Karpenter never terminates, tags or adopts them.

use std::collections::BTreeMap;

use karpenter_core::catalog::CapacityType;
use karpenter_core::seams::ec2::{CreateFleetRequest, Ec2Error, LaunchTemplateRequest, Subnet};

use crate::FakeCloud;
use crate::bootstrap::{JoinError, KubeletView, Taint};
use crate::capacity::Pool;
use crate::fleet::Candidate;
use crate::rng::resource_id;
use crate::state::{State, after_ms};

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
        let id = start(&mut state, instance, &subnet)?;
        let now = state.now;
        let pending_ms = state.config.pending_duration_ms;
        if let Some(record) = state.instances.get_mut(&id) {
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
        Ok(id)
    }

    /// Starts `instance` on-demand for another cluster (`cluster`) that shares the account, as
    /// its own Karpenter would: in a subnet of that cluster's own in the zone (made here, tagged
    /// `subnet_tags`, so no selector of this cluster finds it), its kubelet joining that cluster,
    /// so no Node of it ever registers in this one. Its ids and boot draw come from streams of
    /// their own: every id and boot time of this cluster's launches stays as it was. EC2's
    /// capacity is shared: it takes a unit of its pool. Fails as
    /// [`run_foreign_instance`](Self::run_foreign_instance) does.
    pub fn run_neighbour_instance(
        &self,
        instance: &ForeignInstance,
        cluster: &str,
        subnet_tags: BTreeMap<String, String>,
    ) -> Result<String, Ec2Error> {
        let mut state = self.current();
        let state = &mut *state;
        let zone_id =
            karpenter_core::catalog::builtin::zone_id(&state.config.region, &instance.zone);
        let subnet = Subnet {
            subnet_id: resource_id(&mut state.rng.neighbour_ids, "subnet"),
            zone: instance.zone.clone(),
            zone_id,
            available_ip_address_count: state.config.subnet_free_ips_default,
            tags: subnet_tags,
        };
        state.network.add_subnet(subnet.clone());
        std::mem::swap(&mut state.rng.ids, &mut state.rng.neighbour_ids);
        std::mem::swap(&mut state.rng.boot, &mut state.rng.neighbour_boot);
        let started = start(state, instance, &subnet);
        std::mem::swap(&mut state.rng.ids, &mut state.rng.neighbour_ids);
        std::mem::swap(&mut state.rng.boot, &mut state.rng.neighbour_boot);
        let id = started?;
        if let Some(record) = state.instances.get_mut(&id) {
            record.join = Err(JoinError::WrongCluster(format!(
                "its bootstrap joins cluster {cluster}"
            )));
            record.ready_at = None;
        }
        Ok(id)
    }
}

/// Launches `instance` on-demand in `subnet` outside any fault or call log, with no launch
/// template; the caller says whether and how it joins.
fn start(
    state: &mut State,
    instance: &ForeignInstance,
    subnet: &Subnet,
) -> Result<String, Ec2Error> {
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
    Ok(state
        .launch(&request, &template, &candidate, None)
        .instance_id)
}
