//! The `Ec2` seam served by the fake: each call goes through [`FakeCloud::serve`] (faults,
//! latency, catching up with the clock, the call log) and then the model in `State`.

use std::collections::BTreeMap;

use async_trait::async_trait;
use karpenter_core::seams::ec2::{
    CapacityReservation, CreateFleetRequest, CreateFleetResponse, Ec2, Ec2Error, Filter, Image,
    ImageQuery, Instance, InstanceStatus, LaunchTemplate, LaunchTemplateRequest, SecurityGroup,
    Subnet,
};

use fakekit::{FromInjected, list, serve};

use crate::FakeCloud;
use crate::faults::{Injected, Operation};
use crate::instances::state_name;

impl FromInjected<Injected, Operation> for Ec2Error {
    fn from_injected(kind: Injected, _: Operation) -> Self {
        match kind {
            Injected::Throttle => {
                Ec2Error::Throttled("RequestLimitExceeded: Request limit exceeded.".into())
            }
            Injected::InternalError => {
                Ec2Error::Unavailable("InternalError: An internal error has occurred.".into())
            }
            Injected::Unavailable => Ec2Error::Unavailable(
                "Unavailable: The server is overloaded and can't handle the request.".into(),
            ),
        }
    }
}

fn filters_text(filters: &[Filter]) -> String {
    list(
        filters
            .iter()
            .map(|f| format!("{}={}", f.name, f.values.join("|"))),
    )
}

fn tags_text(tags: &BTreeMap<String, String>) -> String {
    list(tags.iter().map(|(k, v)| format!("{k}={v}")))
}

#[async_trait]
impl Ec2 for FakeCloud {
    async fn create_fleet(
        &self,
        request: &CreateFleetRequest,
    ) -> Result<CreateFleetResponse, Ec2Error> {
        let input = format!(
            "{} lt={} token={} overrides={}",
            request.capacity_type.label(),
            request.launch_template_name,
            request.client_token,
            list(
                request
                    .overrides
                    .iter()
                    .map(|o| format!("{}/{}/{}", o.instance_type, o.zone, o.subnet_id))
            )
        );
        let iam = self.iam();
        serve(
            self,
            Operation::CreateFleet,
            input,
            |state, _| state.create_fleet(request, iam.as_deref()),
            |response| {
                format!(
                    "instances={} errors={}",
                    list(response.instances.iter().map(|i| format!(
                        "{}:{}/{}/{}",
                        i.instance_id,
                        i.instance_type,
                        i.zone,
                        i.capacity_type.label()
                    ))),
                    list(response.errors.iter().map(|e| format!(
                        "{}:{}/{}",
                        e.code,
                        e.instance_type.as_deref().unwrap_or("-"),
                        e.zone.as_deref().unwrap_or("-")
                    )))
                )
            },
        )
        .await
    }

    async fn describe_instances(
        &self,
        instance_ids: &[String],
        filters: &[Filter],
    ) -> Result<Vec<Instance>, Ec2Error> {
        let input = format!(
            "ids={} filters={}",
            list(instance_ids),
            filters_text(filters)
        );
        serve(
            self,
            Operation::DescribeInstances,
            input,
            |state, _| state.describe_instances(instance_ids, filters),
            |instances| {
                list(
                    instances
                        .iter()
                        .map(|i| format!("{}:{}", i.instance_id, state_name(i.state))),
                )
            },
        )
        .await
    }

    async fn terminate_instances(&self, instance_ids: &[String]) -> Result<Vec<String>, Ec2Error> {
        serve(
            self,
            Operation::TerminateInstances,
            list(instance_ids),
            |state, _| Ok(state.terminate_instances(instance_ids)),
            |ids| list(ids),
        )
        .await
    }

    async fn create_tags(
        &self,
        resource_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), Ec2Error> {
        let input = format!("ids={} tags={}", list(resource_ids), tags_text(tags));
        serve(
            self,
            Operation::CreateTags,
            input,
            |state, _| state.create_tags(resource_ids, tags),
            |_| String::new(),
        )
        .await
    }

    async fn describe_subnets(&self, filters: &[Filter]) -> Result<Vec<Subnet>, Ec2Error> {
        serve(
            self,
            Operation::DescribeSubnets,
            filters_text(filters),
            |state, _| state.network.describe_subnets(filters),
            |subnets| {
                list(subnets.iter().map(|s| {
                    format!(
                        "{}:{}:{}",
                        s.subnet_id, s.zone, s.available_ip_address_count
                    )
                }))
            },
        )
        .await
    }

    async fn describe_security_groups(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<SecurityGroup>, Ec2Error> {
        serve(
            self,
            Operation::DescribeSecurityGroups,
            filters_text(filters),
            |state, _| state.network.describe_security_groups(filters),
            |groups| list(groups.iter().map(|g| g.group_id.as_str())),
        )
        .await
    }

    async fn describe_images(&self, query: &ImageQuery) -> Result<Vec<Image>, Ec2Error> {
        let input = format!(
            "ids={} owners={} filters={}",
            list(&query.image_ids),
            list(&query.owners),
            filters_text(&query.filters)
        );
        serve(
            self,
            Operation::DescribeImages,
            input,
            |state, _| state.amis.describe(query, &state.config.account_id),
            |images| list(images.iter().map(|i| i.image_id.as_str())),
        )
        .await
    }

    async fn get_parameter(&self, name: &str) -> Result<Option<String>, Ec2Error> {
        serve(
            self,
            Operation::GetParameter,
            name.to_string(),
            |state, _| Ok(state.amis.parameter(name)),
            |value| value.clone().unwrap_or_else(|| "none".into()),
        )
        .await
    }

    async fn create_launch_template(
        &self,
        request: &LaunchTemplateRequest,
    ) -> Result<LaunchTemplate, Ec2Error> {
        let input = format!(
            "name={} image={} sgs={} tags={}",
            request.name,
            request.image_id,
            list(&request.security_group_ids),
            tags_text(&request.tags)
        );
        serve(
            self,
            Operation::CreateLaunchTemplate,
            input,
            |state, _| {
                let state = &mut *state;
                state
                    .templates
                    .create(request, &mut state.rng.ids, state.now)
            },
            |template| template.launch_template_id.clone(),
        )
        .await
    }

    async fn describe_launch_templates(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<LaunchTemplate>, Ec2Error> {
        serve(
            self,
            Operation::DescribeLaunchTemplates,
            filters_text(filters),
            |state, _| state.templates.describe(filters),
            |templates| list(templates.iter().map(|t| t.launch_template_name.as_str())),
        )
        .await
    }

    async fn delete_launch_template(&self, name: &str) -> Result<(), Ec2Error> {
        serve(
            self,
            Operation::DeleteLaunchTemplate,
            name.to_string(),
            |state, _| {
                state.templates.delete(name);
                Ok(())
            },
            |_| String::new(),
        )
        .await
    }

    async fn describe_instance_status(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<InstanceStatus>, Ec2Error> {
        serve(
            self,
            Operation::DescribeInstanceStatus,
            filters_text(filters),
            |state, _| state.describe_instance_status(filters),
            |statuses| list(statuses.iter().map(|s| s.instance_id.clone())),
        )
        .await
    }

    async fn describe_capacity_reservations(
        &self,
        ids: &[String],
        filters: &[Filter],
    ) -> Result<Vec<CapacityReservation>, Ec2Error> {
        let input = format!("ids={} filters={}", list(ids), filters_text(filters));
        serve(
            self,
            Operation::DescribeCapacityReservations,
            input,
            |state, _| state.reservations.describe(ids, filters),
            |found| {
                list(found.iter().map(|r| {
                    format!(
                        "{}:{}/{}",
                        r.id, r.available_instance_count, r.total_instance_count
                    )
                }))
            },
        )
        .await
    }
}
