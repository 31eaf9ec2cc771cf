//! `fakecloud serve`: the in-memory cloud over HTTP, speaking the real AWS wire protocols for
//! exactly the calls Karpenter makes, so the AWS SDK, the AWS CLI (v1 and v2) and boto3 can be
//! pointed at it (`AWS_ENDPOINT_URL=http://ADDR`).
//!
//! One endpoint serves every service; a request is routed by
//! - the path: `/fakecloud/…` is the control API ([`control`]), `GET /clusters/NAME` is EKS;
//! - the `X-Amz-Target` prefix: `AmazonSQS.` (SQS JSON), `AmazonSSM.`, `AWSPriceListService.`;
//! - the form's `Version`: `2016-11-15` EC2, `2012-11-05` SQS Query, `2010-05-08` IAM.
//!
//! The world behind it is a [`fakecloud::Account`] on the wall clock: everything the in-process
//! fake does (eventual consistency, capacity errors, spot interruptions, faults) shows on the
//! wire. [`serve`] runs the server in the current tokio runtime, so a test (or later
//! `karpenter-sim serve`) can embed it; the `fakecloud` binary wraps it.
//!
//! Modules: [`wire`] (forms, XML, shared helpers), [`ec2`], [`ec2_describe`], [`ec2_run`],
//! [`sqs`], [`iam`], [`json_services`] (SSM, Pricing, EKS), [`control`].

pub mod control;
pub mod ec2;
pub mod ec2_describe;
pub mod ec2_run;
pub mod ec2_template;
pub mod iam;
pub mod json_services;
pub mod sqs;
pub mod wire;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use fakecloud::Account;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use jiff::Timestamp;
use karpenter_core::seams::Clock;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::wire::{Params, Reply};

/// Largest request body accepted (EC2's own limit on a Query request is far lower).
pub const BODY_BYTES_MAX: usize = 10 << 20;

/// The wall clock: `fakecloud serve` runs in real time for real clients. The one place in the
/// fake's graph that reads the system time (the simulation never builds this crate).
pub struct WallClock;

impl Clock for WallClock {
    #[allow(clippy::disallowed_methods)]
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// The served world: the account, plus what the wire adds (template creation times and images,
/// ids of fleets and requests).
pub struct World {
    pub account: Account,
    templates: Mutex<BTreeMap<String, (String, Timestamp)>>,
    send_lock: tokio::sync::Mutex<()>,
    counter: AtomicU64,
    /// Every `service:Action` asked for on the wire, as IAM names them (what a policy must
    /// allow); the adapter's tests compare it with `karpenter_aws::actions::ACTIONS`.
    actions: Mutex<BTreeSet<String>>,
    /// Wire protocol (`ec2-query`, `sqs-json`, `sqs-query`, `iam-query`, `ssm-json`,
    /// `pricing-json`, `eks-rest`) -> the clients that spoke it (the user agent's first token,
    /// `aws-cli/2.9.19`): which real client exercised which protocol.
    protocols: Mutex<BTreeMap<String, BTreeSet<String>>>,
}

impl World {
    pub fn new(account: Account) -> Arc<Self> {
        Arc::new(Self {
            account,
            templates: Mutex::new(BTreeMap::new()),
            send_lock: tokio::sync::Mutex::new(()),
            counter: AtomicU64::new(0),
            actions: Mutex::new(BTreeSet::new()),
            protocols: Mutex::new(BTreeMap::new()),
        })
    }

    /// An account ready for cluster `name`, seeded with `seed`, on the wall clock.
    pub fn for_cluster(name: &str, seed: u64) -> Arc<Self> {
        Self::new(Account::for_cluster(Arc::new(WallClock), name, seed))
    }

    fn next(&self) -> u64 {
        self.counter.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn request_id(&self) -> String {
        wire::request_id(self.next())
    }

    /// `fleet-` and a UUID.
    pub fn fleet_id(&self) -> String {
        format!("fleet-{}", wire::request_id(self.next() | (1 << 40)))
    }

    /// `PREFIX-` and 17 hex digits, unique in this server.
    pub fn hex_id(&self, prefix: &str) -> String {
        let n = self.next();
        let hash = karpenter_core::catalog::builtin::fnv1a64(format!("{prefix}/{n}").as_bytes());
        format!("{prefix}-{:017x}", hash)
    }

    /// The `service:Action`s clients asked for so far (`ec2:CreateFleet`, `sqs:ReceiveMessage`,
    /// ...), sorted; actions the server does not serve included.
    pub fn actions_called(&self) -> Vec<String> {
        let actions = self.actions.lock().unwrap_or_else(|p| p.into_inner());
        actions.iter().cloned().collect()
    }

    /// Protocol -> the clients (user agents' first tokens) that spoke it so far.
    pub fn protocols_spoken(&self) -> BTreeMap<String, BTreeSet<String>> {
        self.protocols
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn spoke(&self, protocol: &str, user_agent: &str) {
        let client = user_agent.split_whitespace().next().unwrap_or("unknown");
        let mut protocols = self.protocols.lock().unwrap_or_else(|p| p.into_inner());
        protocols
            .entry(protocol.to_string())
            .or_default()
            .insert(client.to_string());
    }

    fn record(&self, service: &str, action: &str) {
        let mut actions = self.actions.lock().unwrap_or_else(|p| p.into_inner());
        actions.insert(format!("{service}:{action}"));
    }

    fn lock_templates(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (String, Timestamp)>> {
        self.templates.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn remember_template(&self, name: &str, image: &str) {
        let now = self.account.cloud.now();
        self.lock_templates()
            .insert(name.to_string(), (image.to_string(), now));
    }

    pub fn template_image(&self, name: &str) -> Option<String> {
        self.lock_templates()
            .get(name)
            .map(|(image, _)| image.clone())
    }

    pub fn template_created(&self, name: &str) -> Option<Timestamp> {
        self.lock_templates().get(name).map(|(_, created)| *created)
    }

    /// Sends `body` to the interruption queue; the new message's id, or `None` if the queue
    /// dropped it (deleted or full).
    pub async fn send(&self, body: &str) -> Option<String> {
        let _one_at_a_time = self.send_lock.lock().await;
        let cloud = &self.account.cloud;
        let before = cloud.sent_messages().last().map(|m| m.message_id.clone());
        let depth = cloud.queue_depth();
        cloud.inject_message(body);
        let after = cloud.sent_messages().last().map(|m| m.message_id.clone());
        (after != before && cloud.queue_depth() > depth)
            .then_some(after)
            .flatten()
    }
}

/// A running server.
pub struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Server {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`, what `AWS_ENDPOINT_URL` should be.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting connections and waits for the accept loop to end.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

/// Serves `world` on `addr` (port 0 picks a free port) in the current tokio runtime.
pub async fn serve(world: Arc<World>, addr: SocketAddr) -> std::io::Result<Server> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let (stop, mut stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = &mut stopped => break,
                accepted = listener.accept() => accepted,
            };
            let Ok((stream, _)) = accepted else { continue };
            let world = world.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let world = world.clone();
                    async move {
                        Ok::<_, std::convert::Infallible>(respond(&world, request, addr).await)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(Server {
        addr,
        stop: Some(stop),
        task,
    })
}

async fn respond(
    world: &World,
    request: Request<Incoming>,
    addr: SocketAddr,
) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let reply = match Limited::new(body, BODY_BYTES_MAX).collect().await {
        Ok(body) => route(world, &parts, &body.to_bytes(), addr).await,
        Err(e) => Reply::text(
            413,
            format!("request body unreadable or over {BODY_BYTES_MAX} bytes: {e}"),
        ),
    };
    let mut response = Response::builder()
        .status(reply.status)
        .header("content-type", reply.content_type)
        .header("x-amzn-requestid", world.request_id());
    for (name, value) in &reply.headers {
        response = response.header(name.as_str(), value.as_str());
    }
    response
        .body(Full::new(Bytes::from(reply.body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::from_static(b"bad response header"))))
}

async fn route(
    world: &World,
    parts: &hyper::http::request::Parts,
    body: &[u8],
    addr: SocketAddr,
) -> Reply {
    let rid = world.request_id();
    let host = parts
        .headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .map(String::from)
        .unwrap_or_else(|| addr.to_string());
    let path = parts.uri.path();
    let user_agent = parts
        .headers
        .get("user-agent")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("unknown");
    if let Some(rest) = path.strip_prefix("/fakecloud") {
        return control::handle(world, parts.method.as_str(), rest, body, &host);
    }
    if let Some(name) = path.strip_prefix("/clusters/")
        && parts.method == hyper::Method::GET
    {
        world.record("eks", "DescribeCluster");
        world.spoke("eks-rest", user_agent);
        return json_services::eks(world, name.trim_end_matches('/'), &rid).await;
    }
    if let Some(target) = parts
        .headers
        .get("x-amz-target")
        .and_then(|t| t.to_str().ok())
    {
        let json: serde_json::Value =
            serde_json::from_slice(body).unwrap_or(serde_json::Value::Null);
        let (service, action) = target.split_once('.').unwrap_or((target, ""));
        let iam_service = match service {
            "AmazonSQS" => "sqs",
            "AmazonSSM" => "ssm",
            "AWSPriceListService" => "pricing",
            other => other,
        };
        world.record(iam_service, action);
        world.spoke(&format!("{iam_service}-json"), user_agent);
        return match service {
            "AmazonSQS" => {
                sqs::handle(
                    world,
                    sqs::Protocol::Json,
                    action,
                    &sqs::Input::Json(json),
                    &host,
                    &rid,
                )
                .await
            }
            "AmazonSSM" => json_services::ssm(world, action, &json, &rid).await,
            "AWSPriceListService" => json_services::pricing(world, action, &json, &rid),
            _ => Reply::text(
                400,
                format!("fakecloud does not serve X-Amz-Target {target}"),
            ),
        };
    }
    let params = Params::parse(body);
    let action = params.get("Action").unwrap_or_default().to_string();
    let service = match params.get("Version") {
        Some("2016-11-15") => "ec2",
        Some("2012-11-05") => "sqs",
        Some("2010-05-08") => "iam",
        _ => "unknown",
    };
    world.record(service, &action);
    world.spoke(&format!("{service}-query"), user_agent);
    match params.get("Version") {
        Some("2016-11-15") => ec2_action(world, &action, &params, &rid).await,
        Some("2012-11-05") => {
            sqs::handle(
                world,
                sqs::Protocol::Query,
                &action,
                &sqs::Input::Query(params.clone()),
                &host,
                &rid,
            )
            .await
        }
        Some("2010-05-08") => iam::handle(world, &action, &params, &rid).await,
        _ => Reply::text(
            400,
            format!(
                "fakecloud cannot route {} {path}: no X-Amz-Target and no known form Version",
                parts.method
            ),
        ),
    }
}

async fn ec2_action(world: &World, action: &str, p: &Params, rid: &str) -> Reply {
    match action {
        "CreateFleet" => ec2::create_fleet(world, p, rid).await,
        "RunInstances" => ec2_run::run_instances(world, p, rid).await,
        "DescribeInstances" => ec2::describe_instances(world, p, rid).await,
        "DescribeInstanceStatus" => ec2::describe_instance_status(world, p, rid).await,
        "DescribeCapacityReservations" => ec2::describe_capacity_reservations(world, p, rid).await,
        "TerminateInstances" => ec2::terminate_instances(world, p, rid).await,
        "CreateTags" => ec2::create_tags(world, p, rid).await,
        "CreateLaunchTemplate" => ec2::create_launch_template(world, p, rid).await,
        "DeleteLaunchTemplate" => ec2::delete_launch_template(world, p, rid).await,
        "DescribeLaunchTemplates" => ec2_describe::describe_launch_templates(world, p, rid).await,
        "DescribeSubnets" => ec2_describe::describe_subnets(world, p, rid).await,
        "DescribeSecurityGroups" => ec2_describe::describe_security_groups(world, p, rid).await,
        "DescribeImages" => ec2_describe::describe_images(world, p, rid).await,
        "DescribeInstanceTypes" => ec2_describe::describe_instance_types(world, p, rid).await,
        "DescribeAvailabilityZones" => {
            ec2_describe::describe_availability_zones(world, p, rid).await
        }
        "DescribeInstanceTypeOfferings" => {
            ec2_describe::describe_instance_type_offerings(world, p, rid).await
        }
        "DescribeSpotPriceHistory" => {
            ec2_describe::describe_spot_price_history(world, p, rid).await
        }
        other => ec2::error(
            400,
            "InvalidAction",
            &format!(
                "The action {other} is not valid for this web service (fakecloud serves the calls Karpenter makes)."
            ),
            rid,
        ),
    }
}
