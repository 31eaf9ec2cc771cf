//! The `Ec2` seam over aws-sdk-ec2 (and aws-sdk-ssm for `get_parameter`).
//!
//! Each call follows every page (`into_paginator`), batches id lists to EC2's limits, and maps
//! errors through [`crate::errors`]. Two EC2 habits are absorbed here so the seam's contract holds:
//! `DescribeInstances` and `TerminateInstances` fail the whole call with
//! `InvalidInstanceID.NotFound` when one id is unknown (or not visible yet), so the adapter drops
//! the ids EC2 names and asks again; and deleting a missing launch template is success.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_ec2::operation::create_fleet::builders::CreateFleetFluentBuilder;
use aws_sdk_ec2::types::{
    self as ec2t, DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest,
    FleetOnDemandAllocationStrategy, FleetType, InstanceLifecycle, InstanceLifecycleType,
    InstanceStateName, OnDemandOptionsRequest, ResourceType, SpotAllocationStrategy,
    SpotOptionsRequest, TagSpecification, TargetCapacitySpecificationRequest,
};
use karpenter_core::catalog::CapacityType;
use karpenter_core::seams::Clock;
use karpenter_core::seams::ec2::{
    CapacityReservation, CreateFleetRequest, CreateFleetResponse, Ec2, Ec2Error, Filter,
    FleetError, FleetInstance, Image, ImageQuery, Instance, InstanceMatchCriteria, InstanceState,
    InstanceStatus, LaunchTemplate, LaunchTemplateRequest, ReservationType, SecurityGroup,
    StatusCheck, Subnet,
};

use crate::errors::{Class, SdkResultExt, failure};
use crate::time::{parse_timestamp, timestamp};

/// Instance ids per `DescribeInstances` call (EC2 accepts up to 1000; smaller batches keep one
/// unknown id from costing a large retry).
pub const DESCRIBE_IDS_BATCH_MAX: usize = 200;
/// Instance ids per `TerminateInstances` call (EC2's limit is 1000).
pub const TERMINATE_IDS_BATCH_MAX: usize = 500;
/// Resource ids per `CreateTags` call (EC2's limit is 1000).
pub const TAG_IDS_BATCH_MAX: usize = 500;
/// Page size of filtered `Describe*` calls (EC2's maximum for instances and images).
pub const DESCRIBE_PAGE_SIZE_MAX: i32 = 1000;

/// EC2 and SSM clients of one region.
#[derive(Clone)]
pub struct AwsEc2 {
    ec2: aws_sdk_ec2::Client,
    ssm: aws_sdk_ssm::Client,
    /// Decides whether an image's `DeprecationTime` has passed.
    clock: Arc<dyn Clock>,
}

impl AwsEc2 {
    pub fn new(ec2: aws_sdk_ec2::Client, ssm: aws_sdk_ssm::Client, clock: Arc<dyn Clock>) -> Self {
        Self { ec2, ssm, clock }
    }
}

pub(crate) fn sdk_filters(filters: &[Filter]) -> Vec<ec2t::Filter> {
    filters
        .iter()
        .map(|f| {
            ec2t::Filter::builder()
                .name(&f.name)
                .set_values(Some(f.values.clone()))
                .build()
        })
        .collect()
}

fn sdk_tags(tags: &BTreeMap<String, String>) -> Vec<ec2t::Tag> {
    tags.iter()
        .map(|(k, v)| ec2t::Tag::builder().key(k).value(v).build())
        .collect()
}

pub(crate) fn tag_map(tags: &[ec2t::Tag]) -> BTreeMap<String, String> {
    tags.iter()
        .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or("").to_string())))
        .collect()
}

fn tag_spec(resource: ResourceType, tags: &BTreeMap<String, String>) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(resource)
        .set_tags(Some(sdk_tags(tags)))
        .build()
}

/// The instance ids an `InvalidInstanceID.NotFound` message names (`The instance IDs 'i-1,
/// i-2' do not exist`, `The instance ID 'i-1' does not exist`).
pub fn missing_instance_ids(message: &str) -> Vec<String> {
    message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("i-") && w.len() > 2)
        .map(String::from)
        .collect()
}

/// Runs `call` on `ids`; while EC2 answers `InvalidInstanceID.NotFound`, drops the ids it names
/// (or, if it names none of them, the first) and calls again. Bounded by the number of ids.
async fn without_missing<T, F, Fut>(ids: &[String], call: F) -> Result<Vec<T>, Ec2Error>
where
    F: Fn(Vec<String>) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<T>, Ec2Error>>,
{
    let mut ids: Vec<String> = ids.to_vec();
    while !ids.is_empty() {
        match call(ids.clone()).await {
            Err(Ec2Error::NotFound { code, message }) if code == "InvalidInstanceID.NotFound" => {
                let missing = missing_instance_ids(&message);
                let before = ids.len();
                ids.retain(|id| !missing.contains(id));
                if ids.len() == before {
                    ids.remove(0);
                }
            }
            other => return other,
        }
    }
    Ok(Vec::new())
}

/// A dry run's answer: EC2 says `DryRunOperation` when the real call would have succeeded.
fn dry_run_result<E>(
    result: Result<
        (),
        aws_sdk_ec2::error::SdkError<E, aws_smithy_runtime_api::client::orchestrator::HttpResponse>,
    >,
) -> Result<(), Ec2Error>
where
    E: aws_sdk_ec2::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match result {
        Ok(()) => Ok(()),
        Err(error) => {
            let failure = failure(error);
            if failure.code == "DryRunOperation" {
                Ok(())
            } else {
                Err(failure.into())
            }
        }
    }
}

fn capacity_type_of(lifecycle: Option<&InstanceLifecycleType>) -> CapacityType {
    match lifecycle {
        Some(InstanceLifecycleType::Spot) => CapacityType::Spot,
        _ => CapacityType::OnDemand,
    }
}

fn instance_state(name: Option<&InstanceStateName>) -> InstanceState {
    match name {
        Some(InstanceStateName::Running) => InstanceState::Running,
        Some(InstanceStateName::ShuttingDown) => InstanceState::ShuttingDown,
        Some(InstanceStateName::Terminated) => InstanceState::Terminated,
        Some(InstanceStateName::Stopping) => InstanceState::Stopping,
        Some(InstanceStateName::Stopped) => InstanceState::Stopped,
        _ => InstanceState::Pending,
    }
}

fn instance(i: &ec2t::Instance) -> Instance {
    Instance {
        instance_id: i.instance_id().unwrap_or_default().to_string(),
        instance_type: i
            .instance_type()
            .map(|t| t.as_str().to_string())
            .unwrap_or_default(),
        zone: i
            .placement()
            .and_then(|p| p.availability_zone())
            .unwrap_or_default()
            .to_string(),
        subnet_id: i.subnet_id().unwrap_or_default().to_string(),
        image_id: i.image_id().unwrap_or_default().to_string(),
        capacity_type: match i.capacity_reservation_id() {
            // An instance running in a reservation is `reserved` (upstream's rule).
            Some(_) if capacity_type_of(i.instance_lifecycle()) == CapacityType::OnDemand => {
                CapacityType::Reserved
            }
            _ => capacity_type_of(i.instance_lifecycle()),
        },
        state: instance_state(i.state().and_then(|s| s.name())),
        launch_time: i.launch_time().map(timestamp).unwrap_or_default(),
        private_dns_name: i.private_dns_name().unwrap_or_default().to_string(),
        tags: tag_map(i.tags()),
        capacity_reservation_id: i.capacity_reservation_id().map(String::from),
        security_group_ids: {
            let mut ids: Vec<String> = i
                .security_groups()
                .iter()
                .filter_map(|g| g.group_id().map(String::from))
                .collect();
            ids.sort();
            ids.dedup();
            ids
        },
    }
}

fn fleet_overrides(request: &CreateFleetRequest) -> Vec<FleetLaunchTemplateOverridesRequest> {
    request
        .overrides
        .iter()
        .map(|o| {
            FleetLaunchTemplateOverridesRequest::builder()
                .instance_type(ec2t::InstanceType::from(o.instance_type.as_str()))
                .subnet_id(&o.subnet_id)
                .availability_zone(&o.zone)
                // A priority, never a MaxPrice: the hint must not cap what spot may cost.
                .set_priority(o.price)
                .build()
        })
        .collect()
}

fn fleet_response(
    request: &CreateFleetRequest,
    output: &aws_sdk_ec2::operation::create_fleet::CreateFleetOutput,
) -> CreateFleetResponse {
    let mut response = CreateFleetResponse::default();
    for launched in output.instances() {
        let o = launched
            .launch_template_and_overrides()
            .and_then(|lt| lt.overrides());
        let instance_type = launched
            .instance_type()
            .map(|t| t.as_str())
            .or_else(|| o.and_then(|o| o.instance_type()).map(|t| t.as_str()))
            .unwrap_or_default();
        let zone = launched
            .availability_zone()
            .or_else(|| o.and_then(|o| o.availability_zone()))
            .unwrap_or_default();
        let subnet_id = launched
            .subnet_id()
            .or_else(|| o.and_then(|o| o.subnet_id()))
            .unwrap_or_default();
        let capacity_type = match launched.lifecycle() {
            Some(InstanceLifecycle::Spot) => CapacityType::Spot,
            // A launch into a reservation is on-demand to EC2 and reserved to Karpenter.
            _ if request.capacity_type == CapacityType::Reserved => CapacityType::Reserved,
            Some(InstanceLifecycle::OnDemand) => CapacityType::OnDemand,
            _ => request.capacity_type,
        };
        for id in launched.instance_ids() {
            response.instances.push(FleetInstance {
                instance_id: id.clone(),
                instance_type: instance_type.to_string(),
                zone: zone.to_string(),
                subnet_id: subnet_id.to_string(),
                capacity_type,
                capacity_reservation_id: None,
            });
        }
    }
    for error in output.errors() {
        let o = error
            .launch_template_and_overrides()
            .and_then(|lt| lt.overrides());
        response.errors.push(FleetError {
            code: error.error_code().unwrap_or("Unknown").to_string(),
            message: error.error_message().unwrap_or_default().to_string(),
            instance_type: o
                .and_then(|o| o.instance_type())
                .map(|t| t.as_str().to_string()),
            zone: o.and_then(|o| o.availability_zone()).map(String::from),
        });
    }
    response
}

impl AwsEc2 {
    async fn describe_instance_batch(
        &self,
        ids: Vec<String>,
        filters: &[Filter],
    ) -> Result<Vec<Instance>, Ec2Error> {
        let mut call = self
            .ec2
            .describe_instances()
            .set_filters(Some(sdk_filters(filters)));
        if ids.is_empty() {
            // MaxResults is refused together with InstanceIds.
            call = call.max_results(DESCRIBE_PAGE_SIZE_MAX);
        } else {
            call = call.set_instance_ids(Some(ids));
        }
        let pages: Vec<_> = call
            .into_paginator()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .seam()?;
        Ok(pages
            .iter()
            .flat_map(|page| page.reservations())
            .flat_map(|r| r.instances())
            .map(instance)
            .collect())
    }

    async fn terminate_batch(&self, ids: Vec<String>) -> Result<Vec<String>, Ec2Error> {
        let output = self
            .ec2
            .terminate_instances()
            .set_instance_ids(Some(ids))
            .send()
            .await
            .seam()?;
        Ok(output
            .terminating_instances()
            .iter()
            .filter_map(|c| c.instance_id().map(String::from))
            .collect())
    }

    /// The `CreateFleet` call for `request`: instant, one instance, upstream's allocation
    /// strategies, tags on the instance, its volumes and the fleet.
    fn fleet_call(&self, request: &CreateFleetRequest) -> CreateFleetFluentBuilder {
        let default_type = match request.capacity_type {
            CapacityType::Spot => DefaultTargetCapacityType::Spot,
            CapacityType::Reserved if request.capacity_block => {
                DefaultTargetCapacityType::CapacityBlock
            }
            CapacityType::OnDemand | CapacityType::Reserved => DefaultTargetCapacityType::OnDemand,
        };
        let config = FleetLaunchTemplateConfigRequest::builder()
            .launch_template_specification(
                FleetLaunchTemplateSpecificationRequest::builder()
                    .launch_template_name(&request.launch_template_name)
                    .version("$Latest")
                    .build(),
            )
            .set_overrides(Some(fleet_overrides(request)))
            .build();
        self.ec2
            .create_fleet()
            .r#type(FleetType::Instant)
            .launch_template_configs(config)
            .target_capacity_specification(
                TargetCapacitySpecificationRequest::builder()
                    .total_target_capacity(1)
                    .default_target_capacity_type(default_type)
                    .build(),
            )
            .spot_options(
                SpotOptionsRequest::builder()
                    .allocation_strategy(SpotAllocationStrategy::PriceCapacityOptimized)
                    .build(),
            )
            .on_demand_options(
                OnDemandOptionsRequest::builder()
                    .allocation_strategy(FleetOnDemandAllocationStrategy::LowestPrice)
                    .build(),
            )
            .tag_specifications(tag_spec(ResourceType::Instance, &request.tags))
            .tag_specifications(tag_spec(ResourceType::Volume, &request.tags))
            .tag_specifications(tag_spec(ResourceType::Fleet, &request.tags))
            .set_client_token(Some(request.client_token.clone()).filter(|t| !t.is_empty()))
            .set_context(request.context.clone())
    }

    /// Asks EC2 whether `request` would be accepted, launching nothing (`DryRun=true`): how
    /// upstream validates an EC2NodeClass (permissions, template, image, subnets) before use.
    /// `DryRunOperation` is `Ok`; any other answer is the error EC2 gave.
    pub async fn dry_run_create_fleet(&self, request: &CreateFleetRequest) -> Result<(), Ec2Error> {
        dry_run_result(
            self.fleet_call(request)
                .dry_run(true)
                .send()
                .await
                .map(|_| ()),
        )
    }

    /// `RunInstances` of one `instance_type` from `launch_template_name` in `subnet_id`, as a
    /// dry run (see [`AwsEc2::dry_run_create_fleet`]).
    pub async fn dry_run_run_instances(
        &self,
        launch_template_name: &str,
        instance_type: &str,
        subnet_id: &str,
    ) -> Result<(), Ec2Error> {
        let result = self
            .ec2
            .run_instances()
            .dry_run(true)
            .min_count(1)
            .max_count(1)
            .instance_type(ec2t::InstanceType::from(instance_type))
            .subnet_id(subnet_id)
            .launch_template(
                ec2t::LaunchTemplateSpecification::builder()
                    .launch_template_name(launch_template_name)
                    .build(),
            )
            .send()
            .await
            .map(|_| ());
        dry_run_result(result)
    }

    fn image(&self, i: &ec2t::Image) -> Image {
        let now = self.clock.now();
        Image {
            image_id: i.image_id().unwrap_or_default().to_string(),
            name: i.name().unwrap_or_default().to_string(),
            architecture: i
                .architecture()
                .map(|a| a.as_str().to_string())
                .unwrap_or_default(),
            creation_date: parse_timestamp(i.creation_date()),
            deprecated: i
                .deprecation_time()
                .map(|t| parse_timestamp(Some(t)) <= now)
                .unwrap_or(false),
            owner_id: i.owner_id().unwrap_or_default().to_string(),
            tags: tag_map(i.tags()),
        }
    }
}

#[async_trait]
impl Ec2 for AwsEc2 {
    async fn create_fleet(
        &self,
        request: &CreateFleetRequest,
    ) -> Result<CreateFleetResponse, Ec2Error> {
        let output = self.fleet_call(request).send().await.seam()?;
        Ok(fleet_response(request, &output))
    }

    async fn describe_instances(
        &self,
        instance_ids: &[String],
        filters: &[Filter],
    ) -> Result<Vec<Instance>, Ec2Error> {
        let mut found = Vec::new();
        if instance_ids.is_empty() {
            found = self.describe_instance_batch(Vec::new(), filters).await?;
        } else {
            for batch in instance_ids.chunks(DESCRIBE_IDS_BATCH_MAX) {
                let instances =
                    without_missing(batch, |ids| self.describe_instance_batch(ids, filters))
                        .await?;
                found.extend(instances);
            }
        }
        found.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
        found.dedup_by(|a, b| a.instance_id == b.instance_id);
        Ok(found)
    }

    async fn terminate_instances(&self, instance_ids: &[String]) -> Result<Vec<String>, Ec2Error> {
        let mut terminated = Vec::new();
        for batch in instance_ids.chunks(TERMINATE_IDS_BATCH_MAX) {
            terminated.extend(without_missing(batch, |ids| self.terminate_batch(ids)).await?);
        }
        terminated.sort();
        terminated.dedup();
        Ok(terminated)
    }

    async fn create_tags(
        &self,
        resource_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), Ec2Error> {
        for batch in resource_ids.chunks(TAG_IDS_BATCH_MAX) {
            self.ec2
                .create_tags()
                .set_resources(Some(batch.to_vec()))
                .set_tags(Some(sdk_tags(tags)))
                .send()
                .await
                .seam()?;
        }
        Ok(())
    }

    async fn describe_subnets(&self, filters: &[Filter]) -> Result<Vec<Subnet>, Ec2Error> {
        let pages: Vec<_> = self
            .ec2
            .describe_subnets()
            .set_filters(Some(sdk_filters(filters)))
            .into_paginator()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .seam()?;
        let mut subnets: Vec<Subnet> = pages
            .iter()
            .flat_map(|p| p.subnets())
            .map(|s| Subnet {
                subnet_id: s.subnet_id().unwrap_or_default().to_string(),
                zone: s.availability_zone().unwrap_or_default().to_string(),
                zone_id: s.availability_zone_id().unwrap_or_default().to_string(),
                available_ip_address_count: s
                    .available_ip_address_count()
                    .unwrap_or(0)
                    .max(0)
                    .unsigned_abs(),
                tags: tag_map(s.tags()),
            })
            .collect();
        subnets.sort_by(|a, b| a.subnet_id.cmp(&b.subnet_id));
        Ok(subnets)
    }

    async fn describe_security_groups(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<SecurityGroup>, Ec2Error> {
        let pages: Vec<_> = self
            .ec2
            .describe_security_groups()
            .set_filters(Some(sdk_filters(filters)))
            .into_paginator()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .seam()?;
        let mut groups: Vec<SecurityGroup> = pages
            .iter()
            .flat_map(|p| p.security_groups())
            .map(|g| SecurityGroup {
                group_id: g.group_id().unwrap_or_default().to_string(),
                group_name: g.group_name().unwrap_or_default().to_string(),
                tags: tag_map(g.tags()),
            })
            .collect();
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(groups)
    }

    async fn describe_images(&self, query: &ImageQuery) -> Result<Vec<Image>, Ec2Error> {
        let pages: Vec<_> = self
            .ec2
            .describe_images()
            .set_image_ids(Some(query.image_ids.clone()).filter(|ids| !ids.is_empty()))
            .set_owners(Some(query.owners.clone()).filter(|o| !o.is_empty()))
            .set_filters(Some(sdk_filters(&query.filters)))
            .into_paginator()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .seam()?;
        let mut images: Vec<Image> = pages
            .iter()
            .flat_map(|p| p.images())
            .map(|i| self.image(i))
            .collect();
        images.sort_by(|a, b| a.image_id.cmp(&b.image_id));
        Ok(images)
    }

    async fn get_parameter(&self, name: &str) -> Result<Option<String>, Ec2Error> {
        match self.ssm.get_parameter().name(name).send().await {
            Ok(output) => Ok(output.parameter().and_then(|p| p.value()).map(String::from)),
            Err(error) => {
                let failure = failure(error);
                if failure.class == Class::NotFound {
                    Ok(None)
                } else {
                    Err(failure.into())
                }
            }
        }
    }

    async fn create_launch_template(
        &self,
        request: &LaunchTemplateRequest,
    ) -> Result<LaunchTemplate, Ec2Error> {
        let data = crate::template::launch_template_data(request)?;
        let output = self
            .ec2
            .create_launch_template()
            .launch_template_name(&request.name)
            .launch_template_data(data)
            .tag_specifications(tag_spec(ResourceType::LaunchTemplate, &request.tags))
            .send()
            .await
            .seam()?;
        let template = output.launch_template();
        Ok(LaunchTemplate {
            launch_template_id: template
                .and_then(|t| t.launch_template_id())
                .unwrap_or_default()
                .to_string(),
            launch_template_name: template
                .and_then(|t| t.launch_template_name())
                .unwrap_or(&request.name)
                .to_string(),
            tags: template.map(|t| tag_map(t.tags())).unwrap_or_default(),
        })
    }

    async fn describe_launch_templates(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<LaunchTemplate>, Ec2Error> {
        let pages: Vec<_> = self
            .ec2
            .describe_launch_templates()
            .set_filters(Some(sdk_filters(filters)))
            .into_paginator()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .seam()?;
        let mut templates: Vec<LaunchTemplate> = pages
            .iter()
            .flat_map(|p| p.launch_templates())
            .map(|t| LaunchTemplate {
                launch_template_id: t.launch_template_id().unwrap_or_default().to_string(),
                launch_template_name: t.launch_template_name().unwrap_or_default().to_string(),
                tags: tag_map(t.tags()),
            })
            .collect();
        templates.sort_by(|a, b| a.launch_template_id.cmp(&b.launch_template_id));
        Ok(templates)
    }

    async fn delete_launch_template(&self, name: &str) -> Result<(), Ec2Error> {
        match self
            .ec2
            .delete_launch_template()
            .launch_template_name(name)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(error) => {
                let failure = failure(error);
                if failure.class == Class::NotFound {
                    Ok(())
                } else {
                    Err(failure.into())
                }
            }
        }
    }

    async fn describe_instance_status(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<InstanceStatus>, Ec2Error> {
        let pages: Vec<_> = self
            .ec2
            .describe_instance_status()
            .set_filters(Some(sdk_filters(filters)))
            .into_paginator()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .seam()?;
        let checks = |summary: Option<&ec2t::InstanceStatusSummary>| -> Vec<StatusCheck> {
            summary
                .map(|s| {
                    s.details()
                        .iter()
                        .map(|d| StatusCheck {
                            name: d.name().map(|n| n.as_str().to_string()).unwrap_or_default(),
                            status: d
                                .status()
                                .map(|n| n.as_str().to_string())
                                .unwrap_or_default(),
                            impaired_since: d.impaired_since().map(timestamp),
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut out: Vec<InstanceStatus> = pages
            .iter()
            .flat_map(|p| p.instance_statuses())
            .map(|s| InstanceStatus {
                instance_id: s.instance_id().unwrap_or_default().to_string(),
                instance_checks: checks(s.instance_status()),
                system_checks: checks(s.system_status()),
                events: s
                    .events()
                    .iter()
                    .filter_map(|e| e.code().map(|c| c.as_str().to_string()))
                    .collect(),
            })
            .collect();
        out.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
        Ok(out)
    }

    async fn describe_capacity_reservations(
        &self,
        ids: &[String],
        filters: &[Filter],
    ) -> Result<Vec<CapacityReservation>, Ec2Error> {
        let pages: Vec<_> = self
            .ec2
            .describe_capacity_reservations()
            .set_capacity_reservation_ids(Some(ids.to_vec()).filter(|ids| !ids.is_empty()))
            .set_filters(Some(sdk_filters(filters)).filter(|f| !f.is_empty()))
            .into_paginator()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .seam()?;
        let count = |n: Option<i32>| n.and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
        let mut out: Vec<CapacityReservation> = pages
            .iter()
            .flat_map(|p| p.capacity_reservations())
            .map(|r| CapacityReservation {
                id: r.capacity_reservation_id().unwrap_or_default().to_string(),
                instance_type: r.instance_type().unwrap_or_default().to_string(),
                zone: r.availability_zone().unwrap_or_default().to_string(),
                owner_id: r.owner_id().unwrap_or_default().to_string(),
                instance_match_criteria: match r.instance_match_criteria() {
                    Some(ec2t::InstanceMatchCriteria::Open) => InstanceMatchCriteria::Open,
                    _ => InstanceMatchCriteria::Targeted,
                },
                reservation_type: match r.reservation_type() {
                    Some(ec2t::CapacityReservationType::CapacityBlock) => {
                        ReservationType::CapacityBlock
                    }
                    _ => ReservationType::Default,
                },
                interruptible: r.interruptible().unwrap_or(false),
                state: r
                    .state()
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_default(),
                total_instance_count: count(r.total_instance_count()),
                available_instance_count: count(r.available_instance_count()),
                end_date: r.end_date().map(timestamp),
                tags: tag_map(r.tags()),
            })
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }
}
