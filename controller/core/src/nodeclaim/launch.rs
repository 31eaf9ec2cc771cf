//! The launch phase: a claim that is not launched gets an instance. An instance already tagged for
//! the claim is adopted; otherwise the claim's EC2NodeClass is resolved (`crate::nodeclass`), a
//! launch template is made and CreateFleet is asked for one instance across the claim's instance
//! types × one subnet per zone. Capacity errors mark their offerings unavailable; a launch that
//! found no capacity at all deletes the claim so the next provisioning pass plans elsewhere.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use kube_core::ResourceExt;
use serde::Deserialize;
use serde_json::json;

use super::{Flow, LAUNCH_ATTEMPTS_MAX, Lifecycle, Step, condition_true, fleet, key};
use crate::api::conditions::nodeclaim as cond;
use crate::api::ec2nodeclass::InstanceStorePolicy;
use crate::api::labels::{
    ARCH_LABEL, CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, NODECLAIM_TAG, NODEPOOL_LABEL,
    ZONE_ID_LABEL, ZONE_LABEL,
};
use crate::api::{ConditionStatus, EC2NodeClass, NodeClaim, Operator, ProviderId};
use crate::catalog::{CapacityType, Catalog, InstanceType, Offering, Reservation, UNAVAILABLE_TTL};
use crate::context::Context;
use crate::metrics::CloudMethod;
use crate::metrics::cloudprovider::{self, CloudErrorKind};
use crate::nodeclass::cluster::ClusterInfo;
use crate::nodeclass::launchtemplate::LaunchTemplateData;
use crate::nodeclass::userdata::{self, BootstrapInput, UserDataError};
use crate::nodeclass::{ResolveError, ami, instanceprofile, launchtemplate, resolve};
use crate::resources::Resources;
use crate::scheduling::Requirements;
use crate::seams::Retryable;
use crate::seams::ec2::{
    CreateFleetRequest, CreateFleetResponse, Ec2Error, Filter, FleetOverride, InstanceState,
    LaunchTemplateRequest, Subnet,
};
use crate::seams::kube::{KubeError, ObjectKey, Patch, ResourceKind};

pub use super::fleet::{FLEET_INSTANCE_TYPES_MAX, INSUFFICIENT_CAPACITY_CODES};

/// The `Launched=False` reason (and event reason) of a launch EC2 rejected as misconfigured.
pub const CONFIGURATION_REJECTED_REASON: &str = "LaunchConfigurationRejected";
/// Least time between two launch attempts of a claim whose launch was rejected as misconfigured.
pub const LAUNCH_CONFIGURATION_RETRY: std::time::Duration = std::time::Duration::from_secs(60);

/// What a launch produced.
#[derive(Clone, Debug, PartialEq)]
pub struct Launched {
    pub instance_id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    pub image_id: String,
    /// The capacity reservation it runs in (its labels go on the claim).
    pub reservation: Option<Reservation>,
}

impl Launched {
    /// `aws:///<zone>/<instance-id>`, as the AWS cloud provider writes it.
    pub fn provider_id(&self) -> ProviderId {
        ProviderId::new(&self.zone, &self.instance_id)
    }
}

/// Why a launch did not produce an instance.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    /// Nothing left to try: every offering is out of capacity (the claim is deleted and the next
    /// provisioning pass falls back to other offerings).
    #[error("insufficient capacity: {0}")]
    InsufficientCapacity(String),
    /// The EC2NodeClass cannot be resolved (no subnets, no AMI...): the claim is deleted at once
    /// (upstream's `NodeClassNotReady`).
    #[error("node class not resolvable: {0}")]
    NodeClass(String),
    /// The launch cannot be built (cluster facts missing, user data the AMI family rejects) or
    /// CreateFleet refused it for a reason a relaunch does not fix (profile, AMI, parameters,
    /// permissions): reported on the claim, never taken for a capacity error; retried every
    /// [`LAUNCH_CONFIGURATION_RETRY`] until the launch timeout.
    #[error("launch configuration rejected ({code}): {message}")]
    Configuration { code: String, message: String },
    /// An EC2 call failed; retried by the next reconcile.
    #[error("ec2: {0}")]
    Ec2(#[from] Ec2Error),
}

/// The `controller` label of the launch's cloud-provider calls (upstream's lifecycle controller).
const LIFECYCLE_CONTROLLER: &str = "nodeclaim.lifecycle";

impl CloudErrorKind for LaunchError {
    /// Upstream's Create errors: no capacity, a class that cannot launch, anything else.
    fn error_label(&self) -> &'static str {
        match self {
            LaunchError::InsufficientCapacity(_)
            | LaunchError::Ec2(Ec2Error::InsufficientCapacity { .. }) => {
                cloudprovider::INSUFFICIENT_CAPACITY_ERROR
            }
            LaunchError::NodeClass(_) => cloudprovider::NODECLASS_NOT_READY_ERROR,
            LaunchError::Configuration { .. } | LaunchError::Ec2(_) => "",
        }
    }
}

impl From<ResolveError> for LaunchError {
    fn from(err: ResolveError) -> Self {
        match err {
            ResolveError::Unresolvable(message) => LaunchError::NodeClass(message),
            ResolveError::Ec2(err) => LaunchError::Ec2(err),
        }
    }
}

impl Lifecycle {
    /// [`super::Phase::Launch`]: a launched claim goes on; any other is launched now.
    pub(super) async fn launch_phase(&self, claim: &NodeClaim) -> Result<Flow, KubeError> {
        if condition_true(claim, cond::LAUNCHED) {
            return Ok(Flow::Continue);
        }
        if let Some(step) = self.launch_timeout(claim).await? {
            return Ok(Flow::Done(step));
        }
        if let Some(step) = self.configuration_backoff(claim).await? {
            return Ok(Flow::Done(step));
        }
        self.launch(claim).await.map(Flow::Done)
    }

    /// A claim not launched within the launch timeout of its creation (whatever kept it:
    /// rejected launches, EC2 errors, a cluster it cannot join yet) is deleted with an event
    /// saying what its `Launched` condition last said. Deleting is what lets its pods fall
    /// through: while the claim exists the provisioner counts it as capacity for them.
    async fn launch_timeout(&self, claim: &NodeClaim) -> Result<Option<Step>, KubeError> {
        let now = self.ctx.now();
        let created = claim
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(now, |t| t.0);
        let timeout = self.ctx.options.lifecycle.launch_timeout;
        if now.duration_since(created).unsigned_abs() < timeout {
            return Ok(None);
        }
        let last = claim
            .status
            .as_ref()
            .and_then(|s| crate::api::conditions::get(&s.conditions, cond::LAUNCHED))
            .map(|c| c.message.clone())
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "no launch attempt finished".to_string());
        let message = format!("not launched within {timeout:?}: {last}");
        self.delete_with_event(claim, "FailedLaunch", message)
            .await?;
        Ok(Some(Step::DeletedLaunchTimeout))
    }

    /// Launches the claim (retrying retryable EC2 errors up to [`LAUNCH_ATTEMPTS_MAX`] times)
    /// and writes the outcome: labels and the `Launched` condition, a failure condition, or the
    /// claim's deletion.
    async fn launch(&self, claim: &NodeClaim) -> Result<Step, KubeError> {
        let now = self.ctx.now();
        let name = claim.name_any();
        let class = self
            .ctx
            .kube
            .get(
                &ResourceKind::EC2_NODE_CLASS,
                &ObjectKey::cluster(claim.spec.node_class_ref.name.clone()),
            )
            .await?
            .and_then(|v| serde_json::from_value::<EC2NodeClass>(v).ok());
        let outcome = self.attempts(claim, class.as_ref(), now).await;
        match outcome {
            Ok(Some(launched)) => self.write_launched(claim, class.as_ref(), &launched).await,
            Ok(None) => {
                let message = format!("EC2NodeClass {} not found", claim.spec.node_class_ref.name);
                self.delete_with_event(claim, "NodeClassNotReady", message)
                    .await?;
                Ok(Step::DeletedNodeClassNotFound)
            }
            Err(LaunchError::InsufficientCapacity(message)) => {
                let message = format!("NodeClaim {name} event: {message}");
                self.delete_with_event(claim, "InsufficientCapacityError", message)
                    .await?;
                Ok(Step::DeletedInsufficientCapacity)
            }
            Err(err @ LaunchError::Configuration { .. }) => {
                self.ctx
                    .recorder
                    .publish(
                        crate::events::Reference::claim(claim),
                        crate::events::EventType::Warning,
                        CONFIGURATION_REJECTED_REASON,
                        format!("NodeClaim {name}: {err}"),
                    )
                    .await;
                // Unknown then False: the transition time records this attempt, which spaces
                // the next one by LAUNCH_CONFIGURATION_RETRY.
                let message = err.to_string();
                let mut list = claim.status.clone().unwrap_or_default().conditions;
                crate::api::conditions::set(
                    &mut list,
                    cond::LAUNCHED,
                    ConditionStatus::Unknown,
                    "",
                    "",
                    None,
                    now,
                );
                let mut retried = claim.clone();
                retried
                    .status
                    .get_or_insert_with(Default::default)
                    .conditions = list;
                let condition = (
                    cond::LAUNCHED,
                    ConditionStatus::False,
                    CONFIGURATION_REJECTED_REASON,
                    &*message,
                );
                self.write_condition(&retried, condition, json!({})).await?;
                Ok(Step::LaunchFailed(err))
            }
            Err(LaunchError::NodeClass(message)) => {
                // Upstream deletes a claim whose NodeClass is not ready at once: the class
                // cannot launch anything, and the provisioner skips its NodePools until it is
                // Ready again, so the pods go to another NodePool instead of waiting here.
                let message = format!(
                    "EC2NodeClass {} cannot launch: {message}",
                    claim.spec.node_class_ref.name
                );
                self.delete_with_event(claim, "NodeClassNotReady", message)
                    .await?;
                Ok(Step::DeletedNodeClassNotReady)
            }
            Err(err) => {
                // An EC2 failure is not knowing yet (Unknown); the launch timeout bounds it.
                let condition = (
                    cond::LAUNCHED,
                    ConditionStatus::Unknown,
                    "LaunchFailed",
                    &*err.to_string(),
                );
                self.write_condition(claim, condition, json!({})).await?;
                Ok(Step::LaunchFailed(err))
            }
        }
    }

    /// Launch attempts, at once after a retryable EC2 error, up to [`LAUNCH_ATTEMPTS_MAX`]
    /// (README deliberate difference 14).
    async fn attempts(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
        now: Timestamp,
    ) -> Result<Option<Launched>, LaunchError> {
        let name = claim.name_any();
        let mut attempt = 1;
        loop {
            // Upstream's `Create`: one attempt, timed and its error counted.
            let attempt_result = self.ctx.metrics.cloud_call(
                LIFECYCLE_CONTROLLER,
                CloudMethod::Create,
                self.adopt_or_launch(claim, class, now),
            );
            match attempt_result.await {
                Err(LaunchError::Ec2(err))
                    if err.is_retryable() && attempt < LAUNCH_ATTEMPTS_MAX =>
                {
                    tracing::debug!(claim = %name, %err, attempt, "launch failed; retrying");
                    attempt += 1;
                }
                outcome => return outcome,
            }
        }
    }

    /// A claim whose launch EC2 rejected as misconfigured waits [`LAUNCH_CONFIGURATION_RETRY`]
    /// between attempts (no tight relaunch loop); the launch timeout deletes it in the end.
    async fn configuration_backoff(&self, claim: &NodeClaim) -> Result<Option<Step>, KubeError> {
        let Some(rejected) = claim
            .status
            .as_ref()
            .and_then(|s| crate::api::conditions::get(&s.conditions, cond::LAUNCHED))
            .filter(|c| c.reason == CONFIGURATION_REJECTED_REASON)
        else {
            return Ok(None);
        };
        let now = self.ctx.now();
        let since = now
            .duration_since(rejected.last_transition_time.0)
            .unsigned_abs();
        Ok((since < LAUNCH_CONFIGURATION_RETRY).then_some(Step::Waiting))
    }

    /// One launch attempt: an instance already tagged for this claim (a launch that happened
    /// just before a restart, or whose answer was lost) is adopted, never launched twice;
    /// otherwise the claim is launched with `class`. `Ok(None)`: nothing tagged and no class.
    async fn adopt_or_launch(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
        now: Timestamp,
    ) -> Result<Option<Launched>, LaunchError> {
        let name = claim.name_any();
        let tagged = self
            .ctx
            .ec2
            .describe_instances(
                &[],
                &[
                    Filter::new(format!("tag:{NODECLAIM_TAG}"), &[&name]),
                    // Never adopt another cluster's instance of the same claim name.
                    Filter::new(
                        format!("tag:{}", super::EKS_CLUSTER_NAME_TAG),
                        &[&self.ctx.options.lifecycle.cluster_name],
                    ),
                ],
            )
            .await?
            .into_iter()
            .find(|i| {
                !matches!(
                    i.state,
                    InstanceState::ShuttingDown | InstanceState::Terminated
                )
            });
        if let Some(instance) = tagged {
            let reservation = instance
                .capacity_reservation_id
                .as_deref()
                .map(|id| reservation_of(class, id));
            return Ok(Some(Launched {
                instance_id: instance.instance_id,
                instance_type: instance.instance_type,
                zone: instance.zone,
                capacity_type: instance.capacity_type,
                image_id: instance.image_id,
                reservation,
            }));
        }
        let Some(class) = class else {
            return Ok(None);
        };
        launch(&self.ctx, claim, class, now).await.map(Some)
    }

    /// The claim is launched: its labels gain the instance's (type, zone, capacity type and the
    /// type's attribute labels), its status the provider id, image, capacity and allocatable,
    /// all as `class` launches the type (upstream's `instanceToNodeClaim` reads the class's
    /// instance types: a Windows class's `kubernetes.io/os` and windows-build).
    async fn write_launched(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
        launched: &Launched,
    ) -> Result<Step, KubeError> {
        let catalog = &*self.ctx.catalog.current();
        let instance_type = catalog
            .get(&launched.instance_type)
            .and_then(|it| match class {
                Some(class) if crate::catalog::nodeclass::changes_capacity(class) => {
                    crate::catalog::nodeclass::instance_type_for(catalog, it, class)
                        .map(std::borrow::Cow::Owned)
                }
                _ => Some(std::borrow::Cow::Borrowed(it)),
            });
        let capacity = instance_type
            .as_ref()
            .map(|t| t.capacity.to_list())
            .unwrap_or_default();
        let allocatable = instance_type
            .as_ref()
            .map(|t| t.allocatable.to_list())
            .unwrap_or_default();
        let mut labels = BTreeMap::from([
            (
                INSTANCE_TYPE_LABEL.to_string(),
                launched.instance_type.clone(),
            ),
            (ZONE_LABEL.to_string(), launched.zone.clone()),
            (
                CAPACITY_TYPE_LABEL.to_string(),
                launched.capacity_type.label().to_string(),
            ),
        ]);
        if let Some(id) = catalog.zone_id(&launched.zone) {
            labels.insert(ZONE_ID_LABEL.to_string(), id.to_string());
        }
        for (k, v) in launched.reservation.iter().flat_map(Reservation::labels) {
            labels.insert(k.to_string(), v);
        }
        for (k, v) in instance_type.iter().flat_map(|t| &t.labels) {
            labels.entry(k.clone()).or_insert_with(|| v.clone());
        }
        let labelled = self
            .ctx
            .kube
            .patch(
                &ResourceKind::NODE_CLAIM,
                &key(claim),
                &Patch::Merge(json!({"metadata": {"labels": labels}})),
            )
            .await?;
        // The status write below is conditional on the version this label write made.
        let labelled: NodeClaim =
            NodeClaim::deserialize(&*labelled).unwrap_or_else(|_| claim.clone());
        let claim = &labelled;
        let status = json!({
            "providerID": launched.provider_id().to_string(),
            "imageID": launched.image_id,
            "capacity": capacity,
            "allocatable": allocatable,
        });
        let condition = (cond::LAUNCHED, ConditionStatus::True, "Launched", "");
        self.write_condition(claim, condition, status).await?;
        Ok(Step::Launched)
    }
}

/// The claim's candidate instance types, in the claim's (price) order: listed by its
/// instance-type requirement, compatible with its other requirements, large enough for its
/// requests.
fn candidates<'c>(claim: &NodeClaim, catalog: &'c Catalog) -> Vec<&'c InstanceType> {
    let reqs = Requirements::from_api(&claim.spec.requirements);
    let requests = claim_requests(claim);
    let listed: Vec<&InstanceType> = match reqs
        .get(INSTANCE_TYPE_LABEL)
        .filter(|r| r.operator() == Operator::In)
    {
        Some(r) => r.values().filter_map(|name| catalog.get(name)).collect(),
        None => catalog.instance_types.iter().collect(),
    };
    listed
        .into_iter()
        .filter(|it| {
            reqs.iter().all(|(key, req)| {
                key == ZONE_LABEL
                    || key == CAPACITY_TYPE_LABEL
                    || it.labels.get(key).is_none_or(|v| req.has(v))
            })
        })
        .filter(|it| requests.fits_in(&it.allocatable))
        .collect()
}

/// The claim's resource requests (none if unreadable).
fn claim_requests(claim: &NodeClaim) -> Resources {
    claim
        .spec
        .resources
        .as_ref()
        .map(|r| Resources::from_list(&r.requests).unwrap_or_default())
        .unwrap_or_default()
}

/// Whether `instance_type` is offered (and not cached unavailable) in `zone` as `capacity_type`.
fn available(
    ctx: &Context,
    instance_type: &InstanceType,
    zone: &str,
    capacity_type: CapacityType,
    now: Timestamp,
) -> bool {
    instance_type
        .offerings
        .iter()
        .any(|o| o.zone == zone && o.capacity_type == capacity_type && o.available)
        && !ctx
            .unavailable
            .is_unavailable(&instance_type.name, zone, capacity_type, now)
}

/// Launches one instance for `claim` with `class`: resolves the class, picks the capacity type
/// (spot when allowed and some spot offering is left, else on-demand) and one architecture, then
/// CreateFleet over the candidates × subnets.
pub async fn launch(
    ctx: &Context,
    claim: &NodeClaim,
    class: &EC2NodeClass,
    now: Timestamp,
) -> Result<Launched, LaunchError> {
    let reqs = Requirements::from_api(&claim.spec.requirements);
    // The types as the class launches them (a Windows class's os, build and resources, the
    // kubelet's and root volume's capacity), as the provisioner planned the claim with.
    let catalog = ctx.catalog.current();
    let sized = crate::catalog::nodeclass::for_node_class(&catalog, class);
    let types = candidates(claim, sized.as_ref().unwrap_or(&catalog));
    if types.is_empty() {
        return Err(LaunchError::InsufficientCapacity(
            "no instance type of the claim fits its requests".into(),
        ));
    }
    let zone_id = reqs.get(ZONE_ID_LABEL);
    let zone_allowed = |z: &str| {
        reqs.get(ZONE_LABEL).is_none_or(|r| r.has(z))
            && zone_id.is_none_or(|r| catalog.zone_id(z).is_some_and(|id| r.has(id)))
    };
    let subnets = resolve::subnets(ctx.ec2.as_ref(), class, zone_allowed).await?;
    let security_groups = resolve::security_groups(ctx.ec2.as_ref(), class).await?;
    if reqs
        .get(CAPACITY_TYPE_LABEL)
        .is_none_or(|r| r.has(CapacityType::Reserved.label()))
        && let Some(launched) = launch_reserved(
            ctx,
            claim,
            class,
            &reqs,
            &types,
            &subnets,
            &security_groups,
            now,
        )
        .await?
    {
        return Ok(launched);
    }
    let capacity_type = spot_or_on_demand(ctx, &reqs, &types, &subnets, now)?;
    // Cheapest first, exotic types only when asked for, one architecture (its AMI is in the
    // launch template), at most 60 types.
    let requests = claim_requests(claim);
    let price = |t: &InstanceType, ct: CapacityType| {
        subnets
            .keys()
            .filter(|z| available(ctx, t, z, ct, now))
            .filter_map(|z| {
                t.offerings
                    .iter()
                    .find(|o| &o.zone == z && o.capacity_type == ct)
            })
            .map(|o| o.price)
            .min_by(f64::total_cmp)
    };
    let types = fleet::compose(&types, capacity_type, &requests, price);
    if types.is_empty() {
        return Err(LaunchError::InsufficientCapacity(
            "no available offering in the selected subnets".into(),
        ));
    }
    let (image_id, types) = fleet_image(ctx, class, types).await?;
    let overrides = overrides(ctx, &types, &subnets, capacity_type, now);
    if overrides.is_empty() {
        return Err(LaunchError::InsufficientCapacity(
            "no available offering in the selected subnets".into(),
        ));
    }
    let tags = instance_tags(ctx, claim, class);
    let template = launch_template(
        ctx,
        claim,
        class,
        &image_id,
        capacity_type,
        security_groups,
        None,
    )?;
    let request = CreateFleetRequest {
        capacity_block: false,
        capacity_type,
        launch_template_name: template.name.clone(),
        overrides,
        tags,
        client_token: claim.uid().unwrap_or_else(|| claim.name_any()),
        context: class.spec.context.clone(),
    };
    let response = fleet_with_template(ctx, &template, &request).await?;
    launched_from(ctx, &request, response, image_id, now)
}

/// Spot when the claim allows it and some spot offering is left in its subnets' zones, else
/// on-demand; an error when neither is.
fn spot_or_on_demand(
    ctx: &Context,
    reqs: &Requirements,
    types: &[&InstanceType],
    subnets: &BTreeMap<String, Subnet>,
    now: Timestamp,
) -> Result<CapacityType, LaunchError> {
    [CapacityType::Spot, CapacityType::OnDemand]
        .into_iter()
        .filter(|ct| {
            reqs.get(CAPACITY_TYPE_LABEL)
                .is_none_or(|r| r.has(ct.label()))
        })
        .find(|ct| {
            types
                .iter()
                .any(|t| subnets.keys().any(|z| available(ctx, t, z, *ct, now)))
        })
        .ok_or_else(|| {
            LaunchError::InsufficientCapacity("every offering of the claim is unavailable".into())
        })
}

/// The image a fleet of `types` (one architecture, cheapest first; not empty) launches with,
/// and the types that share it: the class's `status.amis` entry serving the cheapest type
/// ([`ami::for_instance_type`]), keeping only the types that entry serves too (one launch
/// template, one image). Launching from the status, as upstream does, keeps launches and drift
/// on one view: a node launched after a release but before the status moves gets the image
/// drift still accepts (and is rolled with the others once it moves), never an image drift
/// calls drifted; and a GPU or Neuron type gets its accelerated variant, not the standard image.
///
/// A class whose status lists no AMI (one the status controller has not resolved yet, or a
/// hand-made one in tests) is resolved through its terms, for the cheapest type's architecture.
/// Upstream refuses to launch for a class that is not Ready; the provisioner here plans only
/// for Ready classes, so only a NodeClaim created for an unresolved class reaches this.
async fn fleet_image<'t>(
    ctx: &Context,
    class: &EC2NodeClass,
    types: Vec<&'t InstanceType>,
) -> Result<(String, Vec<&'t InstanceType>), LaunchError> {
    assert!(!types.is_empty(), "a fleet has at least one type");
    let amis = class
        .status
        .as_ref()
        .map(|s| s.amis.as_slice())
        .unwrap_or_default();
    if amis.is_empty() {
        let image_id = resolve::image(
            ctx.ec2.as_ref(),
            class,
            &arch_of(types[0]),
            &ctx.options.lifecycle.kubernetes_version,
        )
        .await?;
        return Ok((image_id, types));
    }
    let chosen: Vec<Option<&str>> = types
        .iter()
        .map(|t| ami::for_instance_type(amis, &t.labels).map(|a| a.id.as_str()))
        .collect();
    let Some(image_id) = chosen.iter().flatten().next().map(|id| id.to_string()) else {
        return Err(LaunchError::NodeClass(format!(
            "no AMI of the class's status serves instance type {} (or any other of the claim's)",
            types[0].name
        )));
    };
    let types = types
        .into_iter()
        .zip(&chosen)
        .filter(|(_, id)| **id == Some(image_id.as_str()))
        .map(|(t, _)| t)
        .collect();
    Ok((image_id, types))
}

/// The architecture of a type (its AMI is chosen for it).
fn arch_of(t: &InstanceType) -> String {
    t.labels
        .get(ARCH_LABEL)
        .cloned()
        .unwrap_or_else(|| "amd64".into())
}

/// Creates `template` unless one of its name exists (names are hashes of the content, so an
/// existing one is this one), and marks it used so the unused-template collector keeps it.
async fn ensure_template(
    ctx: &Context,
    template: &LaunchTemplateRequest,
) -> Result<(), LaunchError> {
    ctx.templates.used(&template.name, ctx.clock.now());
    match ctx.ec2.create_launch_template(template).await {
        Ok(_) => Ok(()),
        Err(Ec2Error::InvalidRequest { code, .. }) if code.contains("AlreadyExists") => Ok(()),
        Err(err) => Err(err.into()),
    }
}

/// One override per (type, subnet) whose offering is available, in the types' (price) order.
fn overrides(
    ctx: &Context,
    types: &[&InstanceType],
    subnets: &BTreeMap<String, Subnet>,
    capacity_type: CapacityType,
    now: Timestamp,
) -> Vec<FleetOverride> {
    let mut overrides = Vec::new();
    for instance_type in types {
        for (zone, subnet) in subnets {
            if !available(ctx, instance_type, zone, capacity_type, now) {
                continue;
            }
            let price = instance_type
                .offerings
                .iter()
                .find(|o| &o.zone == zone && o.capacity_type == capacity_type)
                .map(|o| o.price);
            overrides.push(FleetOverride {
                instance_type: instance_type.name.clone(),
                subnet_id: subnet.subnet_id.clone(),
                zone: zone.clone(),
                price,
            });
        }
    }
    overrides
}

/// The tags of the instance: upstream's set for the class (the user's own without the keys
/// Karpenter reserves, then the cluster, NodePool and EC2NodeClass tags) plus the claim's name.
fn instance_tags(
    ctx: &Context,
    claim: &NodeClaim,
    class: &EC2NodeClass,
) -> BTreeMap<String, String> {
    let pool = claim
        .labels()
        .get(NODEPOOL_LABEL)
        .cloned()
        .unwrap_or_default();
    let mut tags = launchtemplate::tags(class, &ctx.options.lifecycle.cluster_name, &pool);
    tags.insert(NODECLAIM_TAG.into(), claim.name_any());
    tags
}

/// The launch template for this claim, AMI and capacity type (see [`template_data`]), as the EC2
/// seam takes it.
fn launch_template(
    ctx: &Context,
    claim: &NodeClaim,
    class: &EC2NodeClass,
    image_id: &str,
    capacity_type: CapacityType,
    security_groups: BTreeSet<String>,
    reservation: Option<&Reservation>,
) -> Result<LaunchTemplateRequest, LaunchError> {
    // Neither is the class's fault in a way its status shows, so neither deletes the claim at
    // once (that would recreate it every pass): the claim says why and the launch timeout ends it.
    let cluster =
        ctx.options
            .lifecycle
            .cluster
            .as_ref()
            .ok_or_else(|| LaunchError::Configuration {
                code: "ClusterNotDiscovered".into(),
                message: "the cluster's endpoint, CA bundle and service CIDR are not configured"
                    .into(),
            })?;
    let groups = security_groups.into_iter().collect();
    let data =
        template_data(cluster, claim, class, image_id, capacity_type, groups).map_err(|err| {
            LaunchError::Configuration {
                code: "InvalidUserData".into(),
                message: err.to_string(),
            }
        })?;
    let data = match reservation {
        Some(reservation) => launchtemplate::into_reservation(data, reservation),
        None => data,
    };
    Ok(LaunchTemplateRequest {
        name: data.name(),
        image_id: data.image_id.clone(),
        user_data: data.user_data.clone(),
        security_group_ids: data.security_group_ids.clone(),
        instance_profile: data.instance_profile.clone(),
        extra: data.extra(),
        tags: data.tags,
    })
}

/// The launch template of `claim` with `class`, as upstream builds it
/// (`nodeclass::launchtemplate`): the family's user data for this cluster
/// (`nodeclass::userdata`: the claim's labels with its capacity type, its taints then startup
/// taints, `spec.kubelet`, the user's `userData`), the class's block devices, metadata options,
/// network and monitoring settings, its instance profile and upstream's tags. Pure: the launch
/// path and `karpenter plan --show-launch` both use it.
pub fn template_data(
    cluster: &ClusterInfo,
    claim: &NodeClaim,
    class: &EC2NodeClass,
    image_id: &str,
    capacity_type: CapacityType,
    security_group_ids: Vec<String>,
) -> Result<LaunchTemplateData, UserDataError> {
    let family = userdata::family(class);
    let mut labels = claim.labels().clone();
    labels.insert(
        CAPACITY_TYPE_LABEL.to_string(),
        capacity_type.label().to_string(),
    );
    let input = BootstrapInput {
        cluster,
        labels,
        taints: claim
            .spec
            .taints
            .iter()
            .chain(&claim.spec.startup_taints)
            .cloned()
            .collect(),
        kubelet: class.spec.kubelet.as_ref(),
        user_data: class.spec.user_data.as_deref(),
        raid0: class.spec.instance_store_policy == Some(InstanceStorePolicy::RAID0),
    };
    let user_data = userdata::generate(family, &input)?;
    let pool = claim
        .labels()
        .get(NODEPOOL_LABEL)
        .cloned()
        .unwrap_or_default();
    let tags = launchtemplate::tags(class, &cluster.name, &pool);
    let mut data =
        launchtemplate::build(class, family, image_id, security_group_ids, user_data, tags);
    if data.instance_profile.is_empty() {
        data.instance_profile = instanceprofile::profile_name(class, &cluster.name);
    }
    Ok(data)
}

/// CreateFleet with `template`, made sure of first. A template EC2 says does not exist (deleted
/// as unused the instant this launch took it up, see `nodeclass::garbagecollection`, or by
/// another process while the EC2 cache still knew it) is forgotten, in the usage record and the
/// cache (deleting a missing template succeeds), made again, and the fleet retried once, as
/// upstream retries it.
async fn fleet_with_template(
    ctx: &Context,
    template: &LaunchTemplateRequest,
    request: &CreateFleetRequest,
) -> Result<CreateFleetResponse, LaunchError> {
    ensure_template(ctx, template).await?;
    match ctx.ec2.create_fleet(request).await {
        Err(err) if template_gone(&err) => {
            tracing::info!(launch_template = %template.name, "launch template gone; making it again");
            ctx.templates.forget(&template.name);
            ctx.ec2.delete_launch_template(&template.name).await?;
            ensure_template(ctx, template).await?;
            Ok(ctx.ec2.create_fleet(request).await?)
        }
        other => Ok(other?),
    }
}

/// Whether CreateFleet failed because its launch template does not exist.
fn template_gone(err: &Ec2Error) -> bool {
    matches!(err, Ec2Error::NotFound { code, .. }
        if code.starts_with("InvalidLaunchTemplateName.NotFound")
            || code.starts_with("InvalidLaunchTemplateId.NotFound"))
}

/// The instance of a CreateFleet for one instance; every capacity error marks its offering
/// unavailable for [`UNAVAILABLE_TTL`], and a fleet that launched nothing is an
/// insufficient-capacity error.
fn launched_from(
    ctx: &Context,
    request: &CreateFleetRequest,
    response: CreateFleetResponse,
    image_id: String,
    now: Timestamp,
) -> Result<Launched, LaunchError> {
    for error in &response.errors {
        if fleet::classify(&error.code) == fleet::FleetErrorClass::Capacity
            && let (Some(instance_type), Some(zone)) = (&error.instance_type, &error.zone)
        {
            ctx.unavailable.mark(
                instance_type,
                zone,
                request.capacity_type,
                now,
                UNAVAILABLE_TTL,
            );
        }
    }
    match response.instances.into_iter().next() {
        Some(instance) => Ok(Launched {
            instance_id: instance.instance_id,
            instance_type: instance.instance_type,
            zone: instance.zone,
            capacity_type: instance.capacity_type,
            image_id,
            // An on-demand launch never lands in a reservation: its template opts out.
            reservation: None,
        }),
        None => {
            if let Some(error) = fleet::configuration_error(&response.errors) {
                return Err(LaunchError::Configuration {
                    code: error.code.clone(),
                    message: error.message.clone(),
                });
            }
            let codes: BTreeSet<&str> = response.errors.iter().map(|e| e.code.as_str()).collect();
            Err(LaunchError::InsufficientCapacity(format!(
                "CreateFleet launched nothing ({})",
                codes.into_iter().collect::<Vec<_>>().join(", ")
            )))
        }
    }
}

/// The reservation `id` as `class`'s status describes it (an id the status no longer lists, or
/// no class: a default, non-interruptible reservation, which is what the labels then say).
fn reservation_of(class: Option<&EC2NodeClass>, id: &str) -> Reservation {
    let listed = class
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.capacity_reservations.iter().find(|r| r.id == id));
    Reservation {
        id: id.to_string(),
        kind: listed.map(|r| r.reservation_type).unwrap_or_default(),
        interruptible: listed.and_then(|r| r.interruptible).unwrap_or(false),
        capacity: 0,
    }
}

/// The order reservations are tried in (upstream's `CapacityReservationTypeFilter`): ordinary
/// ODCRs, then capacity blocks, then interruptible ODCRs; one kind per launch.
fn reservation_priority(r: &Reservation) -> u8 {
    match (r.kind, r.interruptible) {
        (crate::api::ec2nodeclass::ReservationType::Default, false) => 0,
        (crate::api::ec2nodeclass::ReservationType::CapacityBlock, _) => 1,
        (crate::api::ec2nodeclass::ReservationType::Default, true) => 2,
    }
}

/// Launches `claim` into one of the capacity reservations its class selects and its
/// requirements allow, trying them cheapest first (one CreateFleet each, with a launch template
/// that targets the reservation); `Ok(None)` when none is available or every one was full (each
/// full one is marked unavailable until the next sync).
///
/// Deliberate difference: upstream puts one launch template per reservation into a single
/// CreateFleet; this tries them one after another (the seam's fleet has one template).
#[allow(clippy::too_many_arguments)]
async fn launch_reserved(
    ctx: &Context,
    claim: &NodeClaim,
    class: &EC2NodeClass,
    reqs: &Requirements,
    types: &[&InstanceType],
    subnets: &BTreeMap<String, Subnet>,
    security_groups: &BTreeSet<String>,
    now: Timestamp,
) -> Result<Option<Launched>, LaunchError> {
    for (instance_type, offering) in reserved_options(ctx, class, reqs, types, subnets) {
        let (Some(reservation), Some(subnet)) =
            (offering.reservation.clone(), subnets.get(&offering.zone))
        else {
            continue;
        };
        let (image_id, _) = fleet_image(ctx, class, vec![instance_type]).await?;
        let template = launch_template(
            ctx,
            claim,
            class,
            &image_id,
            CapacityType::Reserved,
            security_groups.clone(),
            Some(&reservation),
        )?;
        let request = CreateFleetRequest {
            capacity_block: reservation.kind
                == crate::api::ec2nodeclass::ReservationType::CapacityBlock,
            capacity_type: CapacityType::Reserved,
            launch_template_name: template.name.clone(),
            overrides: vec![FleetOverride {
                instance_type: instance_type.name.clone(),
                subnet_id: subnet.subnet_id.clone(),
                zone: offering.zone.clone(),
                price: Some(offering.price),
            }],
            tags: instance_tags(ctx, claim, class),
            // One token per reservation tried: each is its own idempotent request.
            client_token: format!(
                "{}-{}",
                claim.uid().unwrap_or_else(|| claim.name_any()),
                reservation.id
            ),
            context: class.spec.context.clone(),
        };
        let response = fleet_with_template(ctx, &template, &request).await?;
        if let Some(instance) = response.instances.into_iter().next() {
            ctx.reservations.mark_launched(&reservation.id, now);
            return Ok(Some(Launched {
                instance_id: instance.instance_id,
                instance_type: instance.instance_type,
                zone: instance.zone,
                capacity_type: CapacityType::Reserved,
                image_id,
                reservation: Some(reservation),
            }));
        }
        if let Some(error) = fleet::configuration_error(&response.errors) {
            return Err(LaunchError::Configuration {
                code: error.code.clone(),
                message: error.message.clone(),
            });
        }
        tracing::info!(claim = %claim.name_any(), reservation = %reservation.id, "capacity reservation is full; marked unavailable");
        ctx.reservations.mark_unavailable(&reservation.id);
    }
    Ok(None)
}

/// The reserved offerings of `class` the claim may launch into, in the order they are tried: the
/// first kind of reservation available (ordinary, capacity block, interruptible), cheapest first.
fn reserved_options<'t>(
    ctx: &Context,
    class: &EC2NodeClass,
    reqs: &Requirements,
    types: &[&'t InstanceType],
    subnets: &BTreeMap<String, Subnet>,
) -> Vec<(&'t InstanceType, Offering)> {
    let reserved = crate::catalog::reservations::reserved_offerings(
        &ctx.catalog.current(),
        class,
        &ctx.reservations,
    );
    let allowed = |o: &Offering| {
        let Some(r) = &o.reservation else {
            return false;
        };
        o.available
            && subnets.contains_key(&o.zone)
            && r.labels()
                .iter()
                .all(|(key, value)| reqs.get(key).is_none_or(|req| req.has(value)))
    };
    let mut options: Vec<(&InstanceType, Offering)> = types
        .iter()
        .flat_map(|t| {
            reserved
                .get(&t.name)
                .into_iter()
                .flatten()
                .filter(|o| allowed(o))
                .map(move |o| (*t, o.clone()))
        })
        .collect();
    let priority = |o: &Offering| o.reservation.as_ref().map_or(u8::MAX, reservation_priority);
    options.sort_by(|(a, oa), (b, ob)| {
        priority(oa)
            .cmp(&priority(ob))
            .then(oa.price.total_cmp(&ob.price))
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| oa.reservation_id().cmp(&ob.reservation_id()))
    });
    if let Some(first) = options.first().map(|(_, o)| priority(o)) {
        options.retain(|(_, o)| priority(o) == first);
    }
    options
}
