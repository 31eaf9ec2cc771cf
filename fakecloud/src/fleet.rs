//! `CreateFleet` of type `instant` for one instance: choosing an override the way EC2's allocation
//! strategies do and reporting each override it could not use, as EC2 does.
//!
//! - on-demand (and reserved) use `lowest-price`: overrides are tried cheapest first (the request's
//!   price hint, else the pool's price); each dry pool tried on the way is reported as
//!   `InsufficientInstanceCapacity` next to the instance finally launched.
//! - spot uses `price-capacity-optimized`: among pools with free capacity, only the deepest ones
//!   (at least `price_capacity_depth_fraction` of the deepest) are considered, and the cheapest of
//!   those wins, so a cheap but nearly dry pool loses to a slightly dearer deep one.
//!
//! When nothing launches for lack of capacity the response also carries a request-level
//! `UnfulfillableCapacity` error (no instance type or zone).

use std::cmp::{Ordering, Reverse};

use karpenter_core::catalog::CapacityType;
use karpenter_core::seams::ec2::{
    CreateFleetRequest, CreateFleetResponse, Ec2Error, FleetError, FleetInstance, FleetOverride,
    Instance, InstanceState, ReservationType,
};

use crate::bootstrap::{self, BootFamily};
use crate::capacity::Pool;
use crate::events::whole_seconds;
use crate::instances::InstanceRecord;
use crate::network::private_dns_name;
use crate::registration::decode_user_data;
use crate::reservations::LaunchReservation;
use crate::rng::resource_id;
use crate::state::{State, after, after_ms};
use crate::timeline::Due;

/// An override that passed validation.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    pub pool: Pool,
    pub subnet_id: String,
    pub subnet_free_ips: u32,
    pub price: f64,
    pub free: u32,
}

impl State {
    /// `CreateFleet`, idempotent by client token.
    pub fn create_fleet(
        &mut self,
        request: &CreateFleetRequest,
        iam: Option<&crate::iam::FakeIam>,
    ) -> Result<CreateFleetResponse, Ec2Error> {
        // A launch template that does not exist fails the request itself, as EC2 validates it
        // before anything is placed (`InvalidLaunchTemplateName.NotFoundException`); a failed
        // request is not remembered under its client token, so a retry is a new attempt.
        if self.templates.get(&request.launch_template_name).is_none() {
            return Err(missing_template(&request.launch_template_name));
        }
        self.templates
            .mark_used(&request.launch_template_name, self.now);
        let token = &request.client_token;
        if !token.is_empty()
            && let Some((previous, response)) = self.fleets.get(token)
        {
            if previous == request {
                return Ok(response.clone());
            }
            return Err(Ec2Error::InvalidRequest {
                code: "IdempotentParameterMismatch".into(),
                message: format!("Client token {token} was used with different parameters"),
            });
        }
        let response = self.fulfil(request, iam)?;
        if !token.is_empty() {
            self.fleets
                .insert(token.clone(), (request.clone(), response.clone()));
        }
        Ok(response)
    }

    /// EC2 resolves the launch template's instance profile before placing anything: a name IAM
    /// does not know fails the request (`Err`, EC2's message). No profile, or a profile whose
    /// role the cluster does not admit (or that holds none), launches fine and never joins:
    /// `Ok(Some(why))`.
    /// Without attached IAM profiles are not modelled: `Ok(None)`.
    fn profile_check(
        &self,
        iam: Option<&crate::iam::FakeIam>,
        profile: &str,
    ) -> Result<Option<String>, String> {
        let Some(iam) = iam else {
            return Ok(None);
        };
        if profile.is_empty() {
            // EC2 launches without a profile; the kubelet then has no credentials.
            return Ok(Some("the launch template names no instance profile".into()));
        }
        let Some(roles) = iam.profile_roles(profile) else {
            return Err(format!(
                "Value ({profile}) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name"
            ));
        };
        Ok(match roles.first() {
            Some(role) if self.config.access_roles().contains(role) => None,
            Some(role) => Some(format!(
                "role {role} of instance profile {profile} has no access entry"
            )),
            None => Some(format!("instance profile {profile} holds no role")),
        })
    }

    /// Why EC2 refuses to launch from `template` at all: an image or a security group that
    /// does not exist.
    fn template_refusal(
        &self,
        template: &karpenter_core::seams::ec2::LaunchTemplateRequest,
    ) -> Option<(&'static str, String)> {
        if !self.amis.exists(&template.image_id) {
            return Some((
                "InvalidAMIID.NotFound",
                format!("The image id '[{}]' does not exist", template.image_id),
            ));
        }
        template
            .security_group_ids
            .iter()
            .find(|id| !self.network.security_groups.contains_key(*id))
            .map(|missing| {
                (
                    "InvalidGroup.NotFound",
                    format!("The security group '{missing}' does not exist"),
                )
            })
    }

    fn fulfil(
        &mut self,
        request: &CreateFleetRequest,
        iam: Option<&crate::iam::FakeIam>,
    ) -> Result<CreateFleetResponse, Ec2Error> {
        if request.overrides.is_empty() {
            return Err(Ec2Error::InvalidRequest {
                code: "MissingParameter".into(),
                message: "The request must contain at least one launch template override".into(),
            });
        }
        if let Some(key) = request.tags.keys().find(|k| k.starts_with("aws:")) {
            return Err(Ec2Error::InvalidRequest {
                code: "InvalidParameterValue".into(),
                message: format!("Tag keys starting with 'aws:' are reserved: {key}"),
            });
        }
        let mut response = CreateFleetResponse::default();
        let Some(template) = self
            .templates
            .get(&request.launch_template_name)
            .map(|t| t.request.clone())
        else {
            return Err(missing_template(&request.launch_template_name));
        };
        if let Some((code, message)) = self.template_refusal(&template) {
            response.errors = every_override(request, code, &message);
            return Ok(response);
        }
        let denied = match self.profile_check(iam, &template.instance_profile) {
            Ok(denied) => denied,
            Err(message) => {
                response.errors = every_override(request, "InvalidParameterValue", &message);
                return Ok(response);
            }
        };
        let placement = LaunchReservation::of_template(&template.extra);
        if let Some((code, message)) = self.reservation_misconfigured(request, &placement) {
            response.errors = every_override(request, code, &message);
            return Ok(response);
        }
        let candidates = self.candidates(request, &mut response.errors);
        let order = match request.capacity_type {
            CapacityType::Spot => {
                price_capacity_optimized(candidates, self.config.price_capacity_depth_fraction)
            }
            CapacityType::OnDemand | CapacityType::Reserved => lowest_price(candidates),
        };
        let mut short_of_capacity = false;
        for candidate in order {
            let Some(reservation) = self.reservation_slot(
                request,
                &placement,
                &candidate.pool,
                &mut response.errors,
                &mut short_of_capacity,
            ) else {
                continue;
            };
            if reservation.is_none() && self.capacity.free(&candidate.pool) == 0 {
                short_of_capacity = true;
                response.errors.push(insufficient_capacity(&candidate.pool));
                continue;
            }
            let instance = self.launch(request, &template, &candidate, reservation);
            if let Some(why) = &denied
                && let Some(record) = self.instances.get_mut(&instance.instance_id)
            {
                record.join = Err(bootstrap::JoinError::Unauthorized(why.clone()));
                record.ready_at = None;
            }
            response.instances.push(instance);
            break;
        }
        if response.instances.is_empty() && short_of_capacity {
            response.errors.push(FleetError {
                code: "UnfulfillableCapacity".into(),
                message: "Unable to fulfill capacity due to your request configuration. Please adjust your request and try again.".into(),
                instance_type: None,
                zone: None,
            });
        }
        Ok(response)
    }

    /// The reservation slot a candidate launches into: `Some(Some(id))` taken from the targeted
    /// reservation (or an open one an on-demand launch falls into), `Some(None)` none, `None`
    /// when the candidate cannot launch (an error for it is recorded).
    fn reservation_slot(
        &mut self,
        request: &CreateFleetRequest,
        placement: &LaunchReservation,
        pool: &Pool,
        errors: &mut Vec<FleetError>,
        short_of_capacity: &mut bool,
    ) -> Option<Option<String>> {
        let (instance_type, zone) = (&pool.instance_type, &pool.zone);
        let Some(id) = &placement.target else {
            // EC2 puts an on-demand launch that does not opt out into a matching open
            // reservation with room.
            if request.capacity_type == CapacityType::OnDemand && placement.accepts_open() {
                return Some(
                    self.reservations
                        .open_for(instance_type, zone)
                        .filter(|id| self.reservations.take(id)),
                );
            }
            return Some(None);
        };
        let matches = self
            .reservations
            .get(id)
            .is_some_and(|r| &r.instance_type == instance_type && &r.zone == zone);
        if !matches {
            errors.push(pool_error(
                pool,
                "InvalidParameterValue",
                &format!(
                    "Instance type {instance_type} in {zone} does not match capacity reservation {id}"
                ),
            ));
            return None;
        }
        if !self.reservations.take(id) {
            *short_of_capacity = true;
            errors.push(pool_error(
                pool,
                "ReservationCapacityExceeded",
                &format!(
                    "Insufficient capacity in capacity reservation {id} to launch the requested instances"
                ),
            ));
            return None;
        }
        Some(Some(id.clone()))
    }

    /// Why a launch template and request cannot launch as their reservation settings say
    /// (code, message), if they cannot: a `reserved` request must target a reservation, the
    /// target must exist, and a capacity block needs its market type.
    fn reservation_misconfigured(
        &self,
        request: &CreateFleetRequest,
        placement: &LaunchReservation,
    ) -> Option<(&'static str, String)> {
        let Some(id) = &placement.target else {
            return (request.capacity_type == CapacityType::Reserved).then(|| {
                (
                    "InvalidParameterCombination",
                    "A launch into reserved capacity must target a capacity reservation".into(),
                )
            });
        };
        if request.capacity_type == CapacityType::Spot {
            return Some((
                "InvalidParameterCombination",
                "Spot instances cannot launch into a capacity reservation".into(),
            ));
        }
        let Some(reservation) = self.reservations.get(id) else {
            return Some((
                "InvalidCapacityReservationId.NotFound",
                format!("The capacity reservation ID '{id}' does not exist"),
            ));
        };
        let block = reservation.reservation_type == ReservationType::CapacityBlock;
        if block != (placement.market_type.as_deref() == Some("capacity-block")) {
            return Some((
                "InvalidParameterCombination",
                format!(
                    "Capacity reservation {id} is {}; the launch's market type must {}be capacity-block",
                    if block {
                        "a capacity block"
                    } else {
                        "not a capacity block"
                    },
                    if block { "" } else { "not " }
                ),
            ));
        }
        None
    }

    /// Valid overrides, with an error for each invalid one (in request order).
    fn candidates(
        &self,
        request: &CreateFleetRequest,
        errors: &mut Vec<FleetError>,
    ) -> Vec<Candidate> {
        let mut candidates = Vec::new();
        for o in &request.overrides {
            let Some(subnet) = self.network.subnets.get(&o.subnet_id).map(|s| &s.subnet) else {
                errors.push(override_error(
                    o,
                    &o.zone,
                    "InvalidSubnetID.NotFound",
                    &format!("The subnet ID '{}' does not exist", o.subnet_id),
                ));
                continue;
            };
            // A reserved launch is an on-demand launch into a reservation: the type must be
            // offered on-demand there.
            let capacity_type = match request.capacity_type {
                CapacityType::Reserved => CapacityType::OnDemand,
                other => other,
            };
            let pool = Pool::new(&o.instance_type, &subnet.zone, capacity_type);
            let Some(pool_price) = self
                .capacity
                .offered(&pool)
                .then(|| self.prices.at(&pool, self.now))
                .flatten()
            else {
                errors.push(override_error(
                    o,
                    &subnet.zone,
                    "Unsupported",
                    &format!(
                        "Your requested instance type ({}) is not supported in your requested Availability Zone ({}).",
                        o.instance_type, subnet.zone
                    ),
                ));
                continue;
            };
            if subnet.available_ip_address_count == 0 {
                errors.push(override_error(
                    o,
                    &subnet.zone,
                    "InsufficientFreeAddressesInSubnet",
                    &format!(
                        "There are not enough free addresses in subnet '{}' to satisfy the requested number of instances.",
                        subnet.subnet_id
                    ),
                ));
                continue;
            }
            let price = match request.capacity_type {
                CapacityType::Spot => pool_price,
                _ => o.price.unwrap_or(pool_price),
            };
            candidates.push(Candidate {
                free: self.capacity.free(&pool),
                pool,
                subnet_id: subnet.subnet_id.clone(),
                subnet_free_ips: subnet.available_ip_address_count,
                price,
            });
        }
        candidates
    }

    pub(crate) fn launch(
        &mut self,
        request: &CreateFleetRequest,
        template: &karpenter_core::seams::ec2::LaunchTemplateRequest,
        candidate: &Candidate,
        reservation: Option<String>,
    ) -> FleetInstance {
        let now = self.now;
        let mut instance_id = resource_id(&mut self.rng.ids, "i");
        while self.instances.contains_key(&instance_id) {
            instance_id = resource_id(&mut self.rng.ids, "i");
        }
        // A reservation's slot was taken by the caller; it is the capacity the instance uses.
        if reservation.is_none() {
            self.capacity.take(&candidate.pool);
        }
        let ip = self
            .network
            .take_ip(&candidate.subnet_id)
            .unwrap_or_else(|| "10.255.255.254".to_string());
        let zone_id = self
            .network
            .subnets
            .get(&candidate.subnet_id)
            .map(|s| s.subnet.zone_id.clone())
            .unwrap_or_default();
        let user_data = decode_user_data(&template.user_data);
        // The bootstrap reads the user data: one it rejects, or that names another cluster,
        // never joins (the instance runs on; the draw is made anyway, keeping streams aligned).
        let family = BootFamily::of_image(self.amis.name_of(&template.image_id).unwrap_or(""));
        let join = bootstrap::join(family, &user_data, &self.config.cluster_identity());
        let ready_at = self
            .config
            .boot
            .draw(&mut self.rng.boot)
            .map(|d| after(now, d).max(after_ms(now, self.config.pending_duration_ms)))
            .filter(|_| join.is_ok());
        let pool = candidate.pool.clone();
        let capacity_type = match reservation {
            Some(_) => CapacityType::Reserved,
            None => pool.capacity_type,
        };
        let record = InstanceRecord {
            instance: Instance {
                instance_id: instance_id.clone(),
                instance_type: pool.instance_type.clone(),
                zone: pool.zone.clone(),
                subnet_id: candidate.subnet_id.clone(),
                image_id: template.image_id.clone(),
                capacity_type,
                state: InstanceState::Pending,
                launch_time: whole_seconds(now),
                private_dns_name: private_dns_name(&ip, &self.config.region),
                tags: request.tags.clone(),
                capacity_reservation_id: reservation.clone(),
                security_group_ids: security_groups(&template.security_group_ids),
            },
            pool: pool.clone(),
            zone_id,
            visible_at: after_ms(now, self.config.eventual_consistency_lag_ms),
            holds_capacity: reservation.is_none(),
            holds_ip: true,
            ready_at,
            user_data,
            join,
            warned: false,
            status: Default::default(),
            reservation: reservation.clone(),
        };
        self.instances.insert(instance_id.clone(), record);
        self.timeline.at(
            after_ms(now, self.config.pending_duration_ms),
            Due::Running(instance_id.clone()),
        );
        if capacity_type == CapacityType::Spot {
            self.schedule_random_interruption(&instance_id);
        }
        FleetInstance {
            instance_id,
            instance_type: pool.instance_type,
            zone: pool.zone,
            subnet_id: candidate.subnet_id.clone(),
            capacity_type,
            capacity_reservation_id: reservation,
        }
    }

    /// Draws when EC2 will reclaim this spot instance (exponential with the configured rate), and
    /// the rebalance recommendation ahead of it.
    fn schedule_random_interruption(&mut self, instance_id: &str) {
        let rate = self.config.spot_interruption_rate_per_hour;
        if rate <= 0.0 {
            return;
        }
        let uniform: f64 = rand::Rng::r#gen(&mut self.rng.spot);
        let hours = -(1.0 - uniform).ln() / rate;
        let ms = (hours * 3_600_000.0).min(u64::MAX as f64 / 2.0) as u64;
        let warning = after_ms(self.now, ms);
        self.timeline
            .at(warning, Due::SpotInterruption(instance_id.to_string()));
        let lead = self.config.rebalance_recommendation_lead_ms;
        if lead > 0 {
            let lead = jiff::SignedDuration::from_millis(lead.min(i64::MAX as u64) as i64);
            let at = warning.checked_sub(lead).unwrap_or(self.now).max(self.now);
            self.timeline
                .at(at, Due::RebalanceRecommendation(instance_id.to_string()));
        }
    }
}

/// Cheapest first; ties by instance type, zone, then the emptiest subnet.
/// The groups an instance launched from a template gets: the template's, sorted (EC2 answers
/// `DescribeInstances` with the interface's groups, order not significant).
fn security_groups(ids: &[String]) -> Vec<String> {
    let mut ids = ids.to_vec();
    ids.sort();
    ids.dedup();
    ids
}

fn lowest_price(mut candidates: Vec<Candidate>) -> Vec<Candidate> {
    candidates.sort_by(|a, b| a.price.total_cmp(&b.price).then_with(|| tie_break(a, b)));
    candidates
}

/// The cheapest of the deep pools if any pool has capacity, else every candidate (each fails).
fn price_capacity_optimized(candidates: Vec<Candidate>, depth_fraction: f64) -> Vec<Candidate> {
    let deepest = candidates.iter().map(|c| c.free).max().unwrap_or(0);
    if deepest == 0 {
        return lowest_price(candidates);
    }
    let floor = ((f64::from(deepest) * depth_fraction).ceil() as u32).clamp(1, deepest);
    candidates
        .into_iter()
        .filter(|c| c.free >= floor)
        .min_by(|a, b| {
            a.price
                .total_cmp(&b.price)
                .then_with(|| Reverse(a.free).cmp(&Reverse(b.free)))
                .then_with(|| tie_break(a, b))
        })
        .into_iter()
        .collect()
}

fn tie_break(a: &Candidate, b: &Candidate) -> Ordering {
    (&a.pool.instance_type, &a.pool.zone)
        .cmp(&(&b.pool.instance_type, &b.pool.zone))
        .then_with(|| Reverse(a.subnet_free_ips).cmp(&Reverse(b.subnet_free_ips)))
        .then_with(|| a.subnet_id.cmp(&b.subnet_id))
}

fn insufficient_capacity(pool: &Pool) -> FleetError {
    let message = match pool.capacity_type {
        CapacityType::Spot => {
            "There is no Spot capacity available that matches your request.".to_string()
        }
        _ => format!(
            "We currently do not have sufficient {} capacity in the Availability Zone you requested ({}). Our system will be working on provisioning additional capacity.",
            pool.instance_type, pool.zone
        ),
    };
    FleetError {
        code: "InsufficientInstanceCapacity".into(),
        message,
        instance_type: Some(pool.instance_type.clone()),
        zone: Some(pool.zone.clone()),
    }
}

fn pool_error(pool: &Pool, code: &str, message: &str) -> FleetError {
    FleetError {
        code: code.into(),
        message: message.into(),
        instance_type: Some(pool.instance_type.clone()),
        zone: Some(pool.zone.clone()),
    }
}

fn override_error(o: &FleetOverride, zone: &str, code: &str, message: &str) -> FleetError {
    FleetError {
        code: code.into(),
        message: message.into(),
        instance_type: Some(o.instance_type.clone()),
        zone: Some(zone.to_string()),
    }
}

fn every_override(request: &CreateFleetRequest, code: &str, message: &str) -> Vec<FleetError> {
    request
        .overrides
        .iter()
        .map(|o| override_error(o, &o.zone, code, message))
        .collect()
}

/// EC2's answer to a CreateFleet naming a launch template that does not exist.
fn missing_template(name: &str) -> Ec2Error {
    Ec2Error::NotFound {
        code: "InvalidLaunchTemplateName.NotFoundException".into(),
        message: format!(
            "The specified launch template, with template name {name}, does not exist."
        ),
    }
}
