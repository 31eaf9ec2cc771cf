//! Calls as data, and one forwarding point per seam.
//!
//! Each seam has a call enum ([`KubeCall`], [`Ec2Call`], [`SqsCall`]: one variant per trait
//! method, holding its arguments) and a reply enum ([`KubeReply`], [`Ec2Reply`], [`SqsReply`]: the
//! method's result). A *layer* ([`KubeLayer`], [`Ec2Layer`], [`SqsLayer`]) sees every call of a
//! seam as one value, with the implementation below it: it may pass the call on
//! (`call.send(next)`), answer it itself, send another call instead, or change the reply. One
//! generic wrapper, [`Layered`], turns a layer over an implementation back into the seam, so
//! layers stack (`Layered::new(a, Arc::new(Layered::new(b, inner)))`) and a cross-cutting concern
//! (a process that can die, an audit of what the controller removed, a deliberately broken
//! behaviour, a metrics or retry policy) is written once, as one `match` over the calls it cares
//! about, instead of once per seam method. This is the tower `Layer`/`Service` habit kube-rs uses
//! for its client, kept object safe and free of `tower` itself.
//!
//! Adding a seam method costs: the trait method, its call and reply variants, the `send` arm and
//! the [`Layered`] method (and the implementations of the seam, as before).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::ec2::{
    CapacityReservation, CreateFleetRequest, CreateFleetResponse, Ec2, Ec2Error, Filter, Image,
    ImageQuery, Instance, InstanceStatus, LaunchTemplate, LaunchTemplateRequest, SecurityGroup,
    Subnet,
};
use super::kube::{
    DeleteOptions, DeleteOutcome, EventRecord, KubeApi, KubeError, ListOptions, ObjectKey,
    ObjectList, Patch, ResourceKind, SharedObject, WatchStream,
};
use super::sqs::{Message, Sqs, SqsError};

/// One call of the [`KubeApi`] seam, with its arguments.
#[derive(Clone, Debug)]
pub enum KubeCall<'a> {
    Get {
        kind: &'a ResourceKind,
        key: &'a ObjectKey,
    },
    List {
        kind: &'a ResourceKind,
        options: &'a ListOptions,
    },
    Create {
        kind: &'a ResourceKind,
        object: Value,
    },
    Patch {
        kind: &'a ResourceKind,
        key: &'a ObjectKey,
        patch: &'a Patch,
    },
    PatchStatus {
        kind: &'a ResourceKind,
        key: &'a ObjectKey,
        patch: &'a Patch,
    },
    Delete {
        kind: &'a ResourceKind,
        key: &'a ObjectKey,
        options: &'a DeleteOptions,
    },
    Evict {
        pod: &'a ObjectKey,
        options: &'a DeleteOptions,
    },
    Watch {
        kind: &'a ResourceKind,
        options: &'a ListOptions,
        resource_version: &'a str,
    },
    RecordEvent {
        event: &'a EventRecord,
    },
}

/// The result of a [`KubeCall`], by method (`patch` and `patch_status` share [`KubeReply::Patch`]).
pub enum KubeReply {
    Get(Result<Option<Value>, KubeError>),
    List(Result<ObjectList, KubeError>),
    Create(Result<Value, KubeError>),
    Patch(Result<SharedObject, KubeError>),
    Delete(Result<DeleteOutcome, KubeError>),
    Evict(Result<(), KubeError>),
    Watch(Result<WatchStream, KubeError>),
    RecordEvent(Result<(), KubeError>),
}

impl KubeCall<'_> {
    /// The trait method's name (`get`, `patch_status`, ...).
    pub fn verb(&self) -> &'static str {
        match self {
            KubeCall::Get { .. } => "get",
            KubeCall::List { .. } => "list",
            KubeCall::Create { .. } => "create",
            KubeCall::Patch { .. } => "patch",
            KubeCall::PatchStatus { .. } => "patch_status",
            KubeCall::Delete { .. } => "delete",
            KubeCall::Evict { .. } => "evict",
            KubeCall::Watch { .. } => "watch",
            KubeCall::RecordEvent { .. } => "record_event",
        }
    }

    /// The kind the call is about (pods for an eviction, the involved object's for an Event).
    pub fn kind(&self) -> &ResourceKind {
        match self {
            KubeCall::Get { kind, .. }
            | KubeCall::List { kind, .. }
            | KubeCall::Create { kind, .. }
            | KubeCall::Patch { kind, .. }
            | KubeCall::PatchStatus { kind, .. }
            | KubeCall::Delete { kind, .. }
            | KubeCall::Watch { kind, .. } => kind,
            KubeCall::Evict { .. } => &ResourceKind::POD,
            KubeCall::RecordEvent { event } => &event.involved,
        }
    }

    /// The reply of this call failing with `error` (what a layer answers instead of sending it).
    pub fn fail(&self, error: KubeError) -> KubeReply {
        match self {
            KubeCall::Get { .. } => KubeReply::Get(Err(error)),
            KubeCall::List { .. } => KubeReply::List(Err(error)),
            KubeCall::Create { .. } => KubeReply::Create(Err(error)),
            KubeCall::Patch { .. } | KubeCall::PatchStatus { .. } => KubeReply::Patch(Err(error)),
            KubeCall::Delete { .. } => KubeReply::Delete(Err(error)),
            KubeCall::Evict { .. } => KubeReply::Evict(Err(error)),
            KubeCall::Watch { .. } => KubeReply::Watch(Err(error)),
            KubeCall::RecordEvent { .. } => KubeReply::RecordEvent(Err(error)),
        }
    }

    /// Makes the call on `api`.
    pub async fn send(self, api: &dyn KubeApi) -> KubeReply {
        match self {
            KubeCall::Get { kind, key } => KubeReply::Get(api.get(kind, key).await),
            KubeCall::List { kind, options } => KubeReply::List(api.list(kind, options).await),
            KubeCall::Create { kind, object } => KubeReply::Create(api.create(kind, object).await),
            KubeCall::Patch { kind, key, patch } => {
                KubeReply::Patch(api.patch(kind, key, patch).await)
            }
            KubeCall::PatchStatus { kind, key, patch } => {
                KubeReply::Patch(api.patch_status(kind, key, patch).await)
            }
            KubeCall::Delete { kind, key, options } => {
                KubeReply::Delete(api.delete(kind, key, options).await)
            }
            KubeCall::Evict { pod, options } => KubeReply::Evict(api.evict(pod, options).await),
            KubeCall::Watch {
                kind,
                options,
                resource_version,
            } => KubeReply::Watch(api.watch(kind, options, resource_version).await),
            KubeCall::RecordEvent { event } => {
                KubeReply::RecordEvent(api.record_event(event).await)
            }
        }
    }
}

impl KubeReply {
    pub fn is_ok(&self) -> bool {
        match self {
            KubeReply::Get(r) => r.is_ok(),
            KubeReply::List(r) => r.is_ok(),
            KubeReply::Create(r) => r.is_ok(),
            KubeReply::Patch(r) => r.is_ok(),
            KubeReply::Delete(r) => r.is_ok(),
            KubeReply::Evict(r) | KubeReply::RecordEvent(r) => r.is_ok(),
            KubeReply::Watch(r) => r.is_ok(),
        }
    }

    /// The trait method the reply answers (`patch` for both patches).
    pub fn method(&self) -> &'static str {
        match self {
            KubeReply::Get(_) => "get",
            KubeReply::List(_) => "list",
            KubeReply::Create(_) => "create",
            KubeReply::Patch(_) => "patch",
            KubeReply::Delete(_) => "delete",
            KubeReply::Evict(_) => "evict",
            KubeReply::Watch(_) => "watch",
            KubeReply::RecordEvent(_) => "record_event",
        }
    }
}

/// A cross-cutting concern over the [`KubeApi`] seam: sees each call with the implementation
/// below it, and answers it.
#[async_trait]
pub trait KubeLayer: Send + Sync {
    async fn call(&self, call: KubeCall<'_>, next: &dyn KubeApi) -> KubeReply;
}

/// One call of the [`Ec2`] seam, with its arguments.
#[derive(Clone, Copy, Debug)]
pub enum Ec2Call<'a> {
    CreateFleet(&'a CreateFleetRequest),
    DescribeInstances {
        instance_ids: &'a [String],
        filters: &'a [Filter],
    },
    TerminateInstances(&'a [String]),
    CreateTags {
        resource_ids: &'a [String],
        tags: &'a BTreeMap<String, String>,
    },
    DescribeSubnets(&'a [Filter]),
    DescribeSecurityGroups(&'a [Filter]),
    DescribeImages(&'a ImageQuery),
    GetParameter(&'a str),
    CreateLaunchTemplate(&'a LaunchTemplateRequest),
    DescribeLaunchTemplates(&'a [Filter]),
    DeleteLaunchTemplate(&'a str),
    DescribeInstanceStatus(&'a [Filter]),
    DescribeCapacityReservations {
        ids: &'a [String],
        filters: &'a [Filter],
    },
}

/// The result of an [`Ec2Call`], by method.
#[derive(Clone, Debug)]
pub enum Ec2Reply {
    CreateFleet(Result<CreateFleetResponse, Ec2Error>),
    DescribeInstances(Result<Vec<Instance>, Ec2Error>),
    TerminateInstances(Result<Vec<String>, Ec2Error>),
    CreateTags(Result<(), Ec2Error>),
    DescribeSubnets(Result<Vec<Subnet>, Ec2Error>),
    DescribeSecurityGroups(Result<Vec<SecurityGroup>, Ec2Error>),
    DescribeImages(Result<Vec<Image>, Ec2Error>),
    GetParameter(Result<Option<String>, Ec2Error>),
    CreateLaunchTemplate(Result<LaunchTemplate, Ec2Error>),
    DescribeLaunchTemplates(Result<Vec<LaunchTemplate>, Ec2Error>),
    DeleteLaunchTemplate(Result<(), Ec2Error>),
    DescribeInstanceStatus(Result<Vec<InstanceStatus>, Ec2Error>),
    DescribeCapacityReservations(Result<Vec<CapacityReservation>, Ec2Error>),
}

impl Ec2Call<'_> {
    /// EC2's (and SSM's) action name (`CreateFleet`, `GetParameter`, ...).
    pub fn action(&self) -> &'static str {
        match self {
            Ec2Call::CreateFleet(_) => "CreateFleet",
            Ec2Call::DescribeInstances { .. } => "DescribeInstances",
            Ec2Call::TerminateInstances(_) => "TerminateInstances",
            Ec2Call::CreateTags { .. } => "CreateTags",
            Ec2Call::DescribeSubnets(_) => "DescribeSubnets",
            Ec2Call::DescribeSecurityGroups(_) => "DescribeSecurityGroups",
            Ec2Call::DescribeImages(_) => "DescribeImages",
            Ec2Call::GetParameter(_) => "GetParameter",
            Ec2Call::CreateLaunchTemplate(_) => "CreateLaunchTemplate",
            Ec2Call::DescribeLaunchTemplates(_) => "DescribeLaunchTemplates",
            Ec2Call::DeleteLaunchTemplate(_) => "DeleteLaunchTemplate",
            Ec2Call::DescribeInstanceStatus(_) => "DescribeInstanceStatus",
            Ec2Call::DescribeCapacityReservations { .. } => "DescribeCapacityReservations",
        }
    }

    /// The reply of this call failing with `error`.
    pub fn fail(&self, error: Ec2Error) -> Ec2Reply {
        match self {
            Ec2Call::CreateFleet(_) => Ec2Reply::CreateFleet(Err(error)),
            Ec2Call::DescribeInstances { .. } => Ec2Reply::DescribeInstances(Err(error)),
            Ec2Call::TerminateInstances(_) => Ec2Reply::TerminateInstances(Err(error)),
            Ec2Call::CreateTags { .. } => Ec2Reply::CreateTags(Err(error)),
            Ec2Call::DescribeSubnets(_) => Ec2Reply::DescribeSubnets(Err(error)),
            Ec2Call::DescribeSecurityGroups(_) => Ec2Reply::DescribeSecurityGroups(Err(error)),
            Ec2Call::DescribeImages(_) => Ec2Reply::DescribeImages(Err(error)),
            Ec2Call::GetParameter(_) => Ec2Reply::GetParameter(Err(error)),
            Ec2Call::CreateLaunchTemplate(_) => Ec2Reply::CreateLaunchTemplate(Err(error)),
            Ec2Call::DescribeLaunchTemplates(_) => Ec2Reply::DescribeLaunchTemplates(Err(error)),
            Ec2Call::DeleteLaunchTemplate(_) => Ec2Reply::DeleteLaunchTemplate(Err(error)),
            Ec2Call::DescribeInstanceStatus(_) => Ec2Reply::DescribeInstanceStatus(Err(error)),
            Ec2Call::DescribeCapacityReservations { .. } => {
                Ec2Reply::DescribeCapacityReservations(Err(error))
            }
        }
    }

    /// Makes the call on `ec2`.
    pub async fn send(self, ec2: &dyn Ec2) -> Ec2Reply {
        match self {
            Ec2Call::CreateFleet(request) => Ec2Reply::CreateFleet(ec2.create_fleet(request).await),
            Ec2Call::DescribeInstances {
                instance_ids,
                filters,
            } => Ec2Reply::DescribeInstances(ec2.describe_instances(instance_ids, filters).await),
            Ec2Call::TerminateInstances(ids) => {
                Ec2Reply::TerminateInstances(ec2.terminate_instances(ids).await)
            }
            Ec2Call::CreateTags { resource_ids, tags } => {
                Ec2Reply::CreateTags(ec2.create_tags(resource_ids, tags).await)
            }
            Ec2Call::DescribeSubnets(filters) => {
                Ec2Reply::DescribeSubnets(ec2.describe_subnets(filters).await)
            }
            Ec2Call::DescribeSecurityGroups(filters) => {
                Ec2Reply::DescribeSecurityGroups(ec2.describe_security_groups(filters).await)
            }
            Ec2Call::DescribeImages(query) => {
                Ec2Reply::DescribeImages(ec2.describe_images(query).await)
            }
            Ec2Call::GetParameter(name) => Ec2Reply::GetParameter(ec2.get_parameter(name).await),
            Ec2Call::CreateLaunchTemplate(request) => {
                Ec2Reply::CreateLaunchTemplate(ec2.create_launch_template(request).await)
            }
            Ec2Call::DescribeLaunchTemplates(filters) => {
                Ec2Reply::DescribeLaunchTemplates(ec2.describe_launch_templates(filters).await)
            }
            Ec2Call::DeleteLaunchTemplate(name) => {
                Ec2Reply::DeleteLaunchTemplate(ec2.delete_launch_template(name).await)
            }
            Ec2Call::DescribeInstanceStatus(filters) => {
                Ec2Reply::DescribeInstanceStatus(ec2.describe_instance_status(filters).await)
            }
            Ec2Call::DescribeCapacityReservations { ids, filters } => {
                Ec2Reply::DescribeCapacityReservations(
                    ec2.describe_capacity_reservations(ids, filters).await,
                )
            }
        }
    }
}

impl Ec2Reply {
    /// The action the reply answers.
    pub fn method(&self) -> &'static str {
        match self {
            Ec2Reply::CreateFleet(_) => "CreateFleet",
            Ec2Reply::DescribeInstances(_) => "DescribeInstances",
            Ec2Reply::TerminateInstances(_) => "TerminateInstances",
            Ec2Reply::CreateTags(_) => "CreateTags",
            Ec2Reply::DescribeSubnets(_) => "DescribeSubnets",
            Ec2Reply::DescribeSecurityGroups(_) => "DescribeSecurityGroups",
            Ec2Reply::DescribeImages(_) => "DescribeImages",
            Ec2Reply::GetParameter(_) => "GetParameter",
            Ec2Reply::CreateLaunchTemplate(_) => "CreateLaunchTemplate",
            Ec2Reply::DescribeLaunchTemplates(_) => "DescribeLaunchTemplates",
            Ec2Reply::DeleteLaunchTemplate(_) => "DeleteLaunchTemplate",
            Ec2Reply::DescribeInstanceStatus(_) => "DescribeInstanceStatus",
            Ec2Reply::DescribeCapacityReservations(_) => "DescribeCapacityReservations",
        }
    }
}

/// A cross-cutting concern over the [`Ec2`] seam.
#[async_trait]
pub trait Ec2Layer: Send + Sync {
    async fn call(&self, call: Ec2Call<'_>, next: &dyn Ec2) -> Ec2Reply;
}

/// One call of the [`Sqs`] seam, with its arguments.
#[derive(Clone, Copy, Debug)]
pub enum SqsCall<'a> {
    ReceiveMessages { count_max: u8, wait: Duration },
    DeleteMessage(&'a str),
}

/// The result of an [`SqsCall`], by method.
#[derive(Clone, Debug)]
pub enum SqsReply {
    ReceiveMessages(Result<Vec<Message>, SqsError>),
    DeleteMessage(Result<(), SqsError>),
}

impl SqsCall<'_> {
    /// SQS's action name (`ReceiveMessage`, `DeleteMessage`).
    pub fn action(&self) -> &'static str {
        match self {
            SqsCall::ReceiveMessages { .. } => "ReceiveMessage",
            SqsCall::DeleteMessage(_) => "DeleteMessage",
        }
    }

    /// The reply of this call failing with `error`.
    pub fn fail(&self, error: SqsError) -> SqsReply {
        match self {
            SqsCall::ReceiveMessages { .. } => SqsReply::ReceiveMessages(Err(error)),
            SqsCall::DeleteMessage(_) => SqsReply::DeleteMessage(Err(error)),
        }
    }

    /// Makes the call on `sqs`.
    pub async fn send(self, sqs: &dyn Sqs) -> SqsReply {
        match self {
            SqsCall::ReceiveMessages { count_max, wait } => {
                SqsReply::ReceiveMessages(sqs.receive_messages(count_max, wait).await)
            }
            SqsCall::DeleteMessage(handle) => {
                SqsReply::DeleteMessage(sqs.delete_message(handle).await)
            }
        }
    }
}

impl SqsReply {
    /// The action the reply answers.
    pub fn method(&self) -> &'static str {
        match self {
            SqsReply::ReceiveMessages(_) => "ReceiveMessage",
            SqsReply::DeleteMessage(_) => "DeleteMessage",
        }
    }
}

/// A cross-cutting concern over the [`Sqs`] seam.
#[async_trait]
pub trait SqsLayer: Send + Sync {
    async fn call(&self, call: SqsCall<'_>, next: &dyn Sqs) -> SqsReply;
}

#[async_trait]
impl<L: KubeLayer + ?Sized> KubeLayer for Arc<L> {
    async fn call(&self, call: KubeCall<'_>, next: &dyn KubeApi) -> KubeReply {
        (**self).call(call, next).await
    }
}

#[async_trait]
impl<L: Ec2Layer + ?Sized> Ec2Layer for Arc<L> {
    async fn call(&self, call: Ec2Call<'_>, next: &dyn Ec2) -> Ec2Reply {
        (**self).call(call, next).await
    }
}

#[async_trait]
impl<L: SqsLayer + ?Sized> SqsLayer for Arc<L> {
    async fn call(&self, call: SqsCall<'_>, next: &dyn Sqs) -> SqsReply {
        (**self).call(call, next).await
    }
}

/// A layer over a seam implementation, itself an implementation of the seam: `Layered<L, dyn
/// KubeApi>` is a [`KubeApi`] when `L` is a [`KubeLayer`], and likewise for EC2 and SQS.
pub struct Layered<L, S: ?Sized> {
    layer: L,
    inner: Arc<S>,
}

impl<L, S: ?Sized> Layered<L, S> {
    pub fn new(layer: L, inner: Arc<S>) -> Self {
        Self { layer, inner }
    }

    pub fn layer(&self) -> &L {
        &self.layer
    }
}

/// What a layer that answered a call with another method's reply gets back instead (a bug of the
/// layer, reported rather than panicked on).
fn mismatch(method: &str, replied: &str) -> String {
    format!("a seam layer answered a {method} call with a {replied} reply")
}

/// Unpacks a reply of the expected variant, or reports the layer's mismatch as `error`.
macro_rules! unpack {
    ($reply:expr, $variant:path, $method:expr, $error:expr) => {
        match $reply {
            $variant(result) => result,
            other => Err($error(mismatch($method, other.method()))),
        }
    };
}

fn kube_mismatch(message: String) -> KubeError {
    KubeError::Decode(message)
}

fn ec2_mismatch(message: String) -> Ec2Error {
    Ec2Error::InvalidRequest {
        code: "LayerReplyMismatch".into(),
        message,
    }
}

fn sqs_mismatch(message: String) -> SqsError {
    SqsError::Forbidden(message)
}

#[async_trait]
impl<L: KubeLayer> KubeApi for Layered<L, dyn KubeApi> {
    async fn get(&self, kind: &ResourceKind, key: &ObjectKey) -> Result<Option<Value>, KubeError> {
        let reply = self.layer.call(KubeCall::Get { kind, key }, &*self.inner);
        unpack!(reply.await, KubeReply::Get, "get", kube_mismatch)
    }

    async fn list(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
    ) -> Result<ObjectList, KubeError> {
        let reply = self
            .layer
            .call(KubeCall::List { kind, options }, &*self.inner);
        unpack!(reply.await, KubeReply::List, "list", kube_mismatch)
    }

    async fn create(&self, kind: &ResourceKind, object: Value) -> Result<Value, KubeError> {
        let reply = self
            .layer
            .call(KubeCall::Create { kind, object }, &*self.inner);
        unpack!(reply.await, KubeReply::Create, "create", kube_mismatch)
    }

    async fn patch(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<SharedObject, KubeError> {
        let reply = self
            .layer
            .call(KubeCall::Patch { kind, key, patch }, &*self.inner);
        unpack!(reply.await, KubeReply::Patch, "patch", kube_mismatch)
    }

    async fn patch_status(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<SharedObject, KubeError> {
        let call = KubeCall::PatchStatus { kind, key, patch };
        let reply = self.layer.call(call, &*self.inner);
        unpack!(reply.await, KubeReply::Patch, "patch_status", kube_mismatch)
    }

    async fn delete(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome, KubeError> {
        let call = KubeCall::Delete { kind, key, options };
        let reply = self.layer.call(call, &*self.inner);
        unpack!(reply.await, KubeReply::Delete, "delete", kube_mismatch)
    }

    async fn evict(&self, pod: &ObjectKey, options: &DeleteOptions) -> Result<(), KubeError> {
        let reply = self
            .layer
            .call(KubeCall::Evict { pod, options }, &*self.inner);
        unpack!(reply.await, KubeReply::Evict, "evict", kube_mismatch)
    }

    async fn watch(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
        resource_version: &str,
    ) -> Result<WatchStream, KubeError> {
        let call = KubeCall::Watch {
            kind,
            options,
            resource_version,
        };
        let reply = self.layer.call(call, &*self.inner);
        unpack!(reply.await, KubeReply::Watch, "watch", kube_mismatch)
    }

    async fn record_event(&self, event: &EventRecord) -> Result<(), KubeError> {
        let reply = self
            .layer
            .call(KubeCall::RecordEvent { event }, &*self.inner);
        unpack!(
            reply.await,
            KubeReply::RecordEvent,
            "record_event",
            kube_mismatch
        )
    }
}

#[async_trait]
impl<L: Ec2Layer> Ec2 for Layered<L, dyn Ec2> {
    async fn create_fleet(
        &self,
        request: &CreateFleetRequest,
    ) -> Result<CreateFleetResponse, Ec2Error> {
        let reply = self.layer.call(Ec2Call::CreateFleet(request), &*self.inner);
        unpack!(
            reply.await,
            Ec2Reply::CreateFleet,
            "CreateFleet",
            ec2_mismatch
        )
    }

    async fn describe_instances(
        &self,
        instance_ids: &[String],
        filters: &[Filter],
    ) -> Result<Vec<Instance>, Ec2Error> {
        let call = Ec2Call::DescribeInstances {
            instance_ids,
            filters,
        };
        let reply = self.layer.call(call, &*self.inner);
        unpack!(
            reply.await,
            Ec2Reply::DescribeInstances,
            "DescribeInstances",
            ec2_mismatch
        )
    }

    async fn terminate_instances(&self, instance_ids: &[String]) -> Result<Vec<String>, Ec2Error> {
        let call = Ec2Call::TerminateInstances(instance_ids);
        let reply = self.layer.call(call, &*self.inner);
        unpack!(
            reply.await,
            Ec2Reply::TerminateInstances,
            "TerminateInstances",
            ec2_mismatch
        )
    }

    async fn create_tags(
        &self,
        resource_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), Ec2Error> {
        let call = Ec2Call::CreateTags { resource_ids, tags };
        let reply = self.layer.call(call, &*self.inner);
        unpack!(
            reply.await,
            Ec2Reply::CreateTags,
            "CreateTags",
            ec2_mismatch
        )
    }

    async fn describe_subnets(&self, filters: &[Filter]) -> Result<Vec<Subnet>, Ec2Error> {
        let reply = self
            .layer
            .call(Ec2Call::DescribeSubnets(filters), &*self.inner);
        unpack!(
            reply.await,
            Ec2Reply::DescribeSubnets,
            "DescribeSubnets",
            ec2_mismatch
        )
    }

    async fn describe_security_groups(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<SecurityGroup>, Ec2Error> {
        let call = Ec2Call::DescribeSecurityGroups(filters);
        let reply = self.layer.call(call, &*self.inner);
        let method = "DescribeSecurityGroups";
        unpack!(
            reply.await,
            Ec2Reply::DescribeSecurityGroups,
            method,
            ec2_mismatch
        )
    }

    async fn describe_images(&self, query: &ImageQuery) -> Result<Vec<Image>, Ec2Error> {
        let reply = self
            .layer
            .call(Ec2Call::DescribeImages(query), &*self.inner);
        unpack!(
            reply.await,
            Ec2Reply::DescribeImages,
            "DescribeImages",
            ec2_mismatch
        )
    }

    async fn get_parameter(&self, name: &str) -> Result<Option<String>, Ec2Error> {
        let reply = self.layer.call(Ec2Call::GetParameter(name), &*self.inner);
        unpack!(
            reply.await,
            Ec2Reply::GetParameter,
            "GetParameter",
            ec2_mismatch
        )
    }

    async fn create_launch_template(
        &self,
        request: &LaunchTemplateRequest,
    ) -> Result<LaunchTemplate, Ec2Error> {
        let call = Ec2Call::CreateLaunchTemplate(request);
        let reply = self.layer.call(call, &*self.inner);
        let method = "CreateLaunchTemplate";
        unpack!(
            reply.await,
            Ec2Reply::CreateLaunchTemplate,
            method,
            ec2_mismatch
        )
    }

    async fn describe_launch_templates(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<LaunchTemplate>, Ec2Error> {
        let call = Ec2Call::DescribeLaunchTemplates(filters);
        let reply = self.layer.call(call, &*self.inner);
        let method = "DescribeLaunchTemplates";
        unpack!(
            reply.await,
            Ec2Reply::DescribeLaunchTemplates,
            method,
            ec2_mismatch
        )
    }

    async fn delete_launch_template(&self, name: &str) -> Result<(), Ec2Error> {
        let call = Ec2Call::DeleteLaunchTemplate(name);
        let reply = self.layer.call(call, &*self.inner);
        let method = "DeleteLaunchTemplate";
        unpack!(
            reply.await,
            Ec2Reply::DeleteLaunchTemplate,
            method,
            ec2_mismatch
        )
    }

    async fn describe_instance_status(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<InstanceStatus>, Ec2Error> {
        let call = Ec2Call::DescribeInstanceStatus(filters);
        let reply = self.layer.call(call, &*self.inner);
        let method = "DescribeInstanceStatus";
        unpack!(
            reply.await,
            Ec2Reply::DescribeInstanceStatus,
            method,
            ec2_mismatch
        )
    }

    async fn describe_capacity_reservations(
        &self,
        ids: &[String],
        filters: &[Filter],
    ) -> Result<Vec<CapacityReservation>, Ec2Error> {
        let call = Ec2Call::DescribeCapacityReservations { ids, filters };
        let reply = self.layer.call(call, &*self.inner);
        let method = "DescribeCapacityReservations";
        unpack!(
            reply.await,
            Ec2Reply::DescribeCapacityReservations,
            method,
            ec2_mismatch
        )
    }
}

#[async_trait]
impl<L: SqsLayer> Sqs for Layered<L, dyn Sqs> {
    async fn receive_messages(
        &self,
        count_max: u8,
        wait: Duration,
    ) -> Result<Vec<Message>, SqsError> {
        let call = SqsCall::ReceiveMessages { count_max, wait };
        let reply = self.layer.call(call, &*self.inner);
        unpack!(
            reply.await,
            SqsReply::ReceiveMessages,
            "ReceiveMessage",
            sqs_mismatch
        )
    }

    async fn delete_message(&self, receipt_handle: &str) -> Result<(), SqsError> {
        let call = SqsCall::DeleteMessage(receipt_handle);
        let reply = self.layer.call(call, &*self.inner);
        unpack!(
            reply.await,
            SqsReply::DeleteMessage,
            "DeleteMessage",
            sqs_mismatch
        )
    }
}
