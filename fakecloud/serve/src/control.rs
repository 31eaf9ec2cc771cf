//! The control API: a small JSON API beside the AWS protocols, under `/fakecloud/`, to inject
//! what a test or a playground needs (faults, capacity errors, spot interruptions, AMI releases,
//! raw queue messages) and to read what happened (the call log).
//!
//! | request | body | effect |
//! |---|---|---|
//! | `GET /fakecloud/` | | endpoint, region, account, cluster, queue URL, node role |
//! | `GET /fakecloud/calls` | | the call log, one line per call |
//! | `GET /fakecloud/protocols` | | wire protocol -> the clients (user agents) that spoke it |
//! | `POST /fakecloud/faults` | `{"operation":"CreateFleet","script":["Throttle","InternalError","Unavailable","LostResponse","Pass",{"latencyMs":500}]}` | the next calls of the operation get these, in order |
//! | `POST /fakecloud/faults` | `{"operation":"DescribeInstances","rates":{"throttleRate":0.5,"internalErrorRate":0,"unavailableRate":0,"lostResponseRate":0,"latencyMsMin":0,"latencyMsMax":0}}` | standing random rates (`operation` omitted: every operation) |
//! | `POST /fakecloud/faults/clear` | | no faults |
//! | `POST /fakecloud/capacity` | `{"instanceType":"m5.large","zone":"us-west-2a","capacityType":"spot","units":0}` | the pool's free capacity (0: `InsufficientInstanceCapacity`) |
//! | `POST /fakecloud/spot-interruptions` | `{"instanceId":"i-…"}` or `{"instanceType":"m5.large","zone":"us-west-2a"}` | interruption warnings now, reclaims two minutes later |
//! | `POST /fakecloud/ami-releases` | `{"family":"al2023","release":"v20250701"}` | a new release: images, SSM parameters moved |
//! | `POST /fakecloud/messages` | `{"body":"…"}` | a raw message into the interruption queue |
//! | `POST /fakecloud/capacity-reservations` | `{"instanceType":"m5.large","zone":"us-west-2a","count":2}` (optional `"matchCriteria":"open"`, `"capacityBlockEnd":"2026-…Z"`, `"interruptible":true`, `"endDate":"…"`, `"tags":{…}`) | a capacity reservation now; answers its id |
//! | `POST /fakecloud/capacity-reservations/cancel` | `{"id":"cr-…"}` | cancels it (its instances run on as on-demand) |
//! | `POST /fakecloud/capacity-reservations/interrupt` | `{"id":"cr-…","count":1}` | an interruptible reservation's owner takes instances back: warnings now, reclaim two minutes later |
//!
//! Answers are JSON; a bad request is 400 with `{"error": "…"}`.

use fakecloud::{AmiFamily, Fake, Fault, FaultRates, Operation, Pool};
use karpenter_core::catalog::CapacityType;
use serde_json::{Value, json};
use strum::VariantArray;

use crate::World;
use crate::wire::Reply;

fn ok(body: Value) -> Reply {
    Reply::json(200, "application/json", &body)
}

fn bad(message: impl Into<String>) -> Reply {
    Reply::json(400, "application/json", &json!({"error": message.into()}))
}

fn operation(name: &str) -> Result<Operation, Reply> {
    name.parse::<Operation>().map_err(|_| {
        let names: Vec<&'static str> = Operation::VARIANTS.iter().map(|op| op.into()).collect();
        bad(format!("unknown operation {name:?}; one of {names:?}"))
    })
}

fn fault(v: &Value) -> Result<Fault, Reply> {
    if let Some(ms) = v.get("latencyMs").and_then(Value::as_u64) {
        return Ok(Fault::LatencyMs(ms));
    }
    match v.as_str() {
        Some("Pass") => Ok(Fault::Pass),
        Some("Throttle") => Ok(Fault::Throttle),
        Some("InternalError") => Ok(Fault::InternalError),
        Some("Unavailable") => Ok(Fault::Unavailable),
        Some("LostResponse") => Ok(Fault::LostResponse),
        _ => Err(bad(format!(
            "unknown fault {v}: Pass, Throttle, InternalError, Unavailable, LostResponse or {{\"latencyMs\": N}}"
        ))),
    }
}

fn rates(v: &Value) -> FaultRates {
    let f = |k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let u = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    FaultRates {
        throttle_rate: f("throttleRate"),
        internal_error_rate: f("internalErrorRate"),
        unavailable_rate: f("unavailableRate"),
        lost_response_rate: f("lostResponseRate"),
        latency_ms_min: u("latencyMsMin"),
        latency_ms_max: u("latencyMsMax"),
    }
}

fn string<'a>(body: &'a Value, key: &str) -> Result<&'a str, Reply> {
    body.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("missing string field {key:?}")))
}

/// Answers one control request (`path` below `/fakecloud`).
pub fn handle(world: &World, method: &str, path: &str, body: &[u8], host: &str) -> Reply {
    let body: Value = if body.is_empty() {
        Value::Null
    } else {
        match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => return bad(format!("body is not JSON: {e}")),
        }
    };
    let result = match (method, path.trim_end_matches('/')) {
        ("GET", "") => Ok(info(world, host)),
        ("GET", "/calls") => Ok(Reply::text(200, world.account.cloud.render_calls())),
        ("GET", "/protocols") => Ok(ok(json!(world.protocols_spoken()))),
        ("POST", "/faults") => faults(world, &body),
        ("POST", "/faults/clear") => {
            world.account.cloud.clear_faults();
            Ok(ok(json!({})))
        }
        ("POST", "/capacity") => capacity(world, &body),
        ("POST", "/spot-interruptions") => spot_interruptions(world, &body),
        ("POST", "/ami-releases") => ami_release(world, &body),
        ("POST", "/capacity-reservations") => create_reservation(world, &body),
        ("POST", "/capacity-reservations/cancel") => string(&body, "id").map(|id| {
            let cancelled = world.account.cloud.cancel_capacity_reservation(id);
            ok(json!({"cancelled": cancelled}))
        }),
        ("POST", "/capacity-reservations/interrupt") => string(&body, "id").map(|id| {
            let count = body.get("count").and_then(Value::as_u64).unwrap_or(1);
            let warned = world
                .account
                .cloud
                .interrupt_capacity_reservation(id, usize::try_from(count).unwrap_or(usize::MAX));
            ok(json!({"warned": warned}))
        }),
        ("POST", "/messages") => string(&body, "body").map(|b| {
            world.account.cloud.inject_message(b);
            ok(json!({}))
        }),
        _ => Err(Reply::json(
            404,
            "application/json",
            &json!({"error": format!("no control endpoint {method} /fakecloud{path}")}),
        )),
    };
    result.unwrap_or_else(|reply| reply)
}

fn info(world: &World, host: &str) -> Reply {
    let a = &world.account;
    ok(json!({
        "endpoint": format!("http://{host}"),
        "region": a.region(),
        "accountId": a.account_id(),
        "cluster": a.cluster_name,
        "queueUrl": format!("http://{host}/{}/{}", a.account_id(), a.queue_name()),
        "nodeRole": fakecloud::node_role_name(&a.cluster_name),
    }))
}

fn faults(world: &World, body: &Value) -> Result<Reply, Reply> {
    let cloud = &world.account.cloud;
    let op = body
        .get("operation")
        .and_then(Value::as_str)
        .map(operation)
        .transpose()?;
    if let Some(script) = body.get("script").and_then(Value::as_array) {
        let op = op.ok_or_else(|| bad("a script needs an operation"))?;
        let script = script.iter().map(fault).collect::<Result<Vec<_>, _>>()?;
        cloud.script_faults(op, script);
    } else if let Some(r) = body.get("rates") {
        match op {
            Some(op) => cloud.set_fault_rates(op, rates(r)),
            None => cloud.set_fault_rates_all(rates(r)),
        }
    } else {
        return Err(bad("give \"script\" or \"rates\""));
    }
    Ok(ok(json!({})))
}

fn capacity(world: &World, body: &Value) -> Result<Reply, Reply> {
    let capacity_type = CapacityType::from_label(string(body, "capacityType")?)
        .ok_or_else(|| bad("capacityType is spot, on-demand or reserved"))?;
    let pool = Pool::new(
        string(body, "instanceType")?,
        string(body, "zone")?,
        capacity_type,
    );
    let units = body
        .get("units")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("missing number field \"units\""))?;
    if world
        .account
        .cloud
        .set_pool_capacity(&pool, u32::try_from(units).unwrap_or(u32::MAX))
    {
        Ok(ok(json!({"pool": pool.to_string(), "units": units})))
    } else {
        Err(bad(format!("no such pool: {pool}")))
    }
}

fn create_reservation(world: &World, body: &Value) -> Result<Reply, Reply> {
    let count = body
        .get("count")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("missing number field \"count\""))?;
    let mut spec = fakecloud::ReservationSpec::new(
        string(body, "instanceType")?,
        string(body, "zone")?,
        u32::try_from(count).unwrap_or(u32::MAX),
    );
    let time = |key: &str| -> Result<Option<jiff::Timestamp>, Reply> {
        body.get(key)
            .and_then(Value::as_str)
            .map(|t| t.parse().map_err(|e| bad(format!("{key}: {e}"))))
            .transpose()
    };
    match body.get("matchCriteria").and_then(Value::as_str) {
        None | Some("targeted") => {}
        Some("open") => spec = spec.open(),
        Some(other) => return Err(bad(format!("matchCriteria {other:?}: open or targeted"))),
    }
    if let Some(end) = time("capacityBlockEnd")? {
        spec = spec.capacity_block(end);
    }
    if let Some(end) = time("endDate")? {
        spec = spec.ending(end);
    }
    if body.get("interruptible").and_then(Value::as_bool) == Some(true) {
        spec = spec.interruptible();
    }
    for (key, value) in body
        .get("tags")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        spec = spec.tag(key, value.as_str().unwrap_or_default());
    }
    let id = world.account.cloud.create_capacity_reservation(spec);
    Ok(ok(json!({"id": id})))
}

fn spot_interruptions(world: &World, body: &Value) -> Result<Reply, Reply> {
    let cloud = &world.account.cloud;
    let warned: Vec<String> = if let Some(id) = body.get("instanceId").and_then(Value::as_str) {
        if cloud.interrupt_spot(id) {
            vec![id.to_string()]
        } else {
            Vec::new()
        }
    } else {
        let pool = Pool::new(
            string(body, "instanceType")?,
            string(body, "zone")?,
            CapacityType::Spot,
        );
        cloud.interrupt_spot_pool(&pool)
    };
    Ok(ok(json!({"interrupted": warned})))
}

fn ami_release(world: &World, body: &Value) -> Result<Reply, Reply> {
    let family = match string(body, "family")? {
        "al2023" => AmiFamily::Al2023,
        "al2" => AmiFamily::Al2,
        "bottlerocket" => AmiFamily::Bottlerocket,
        other => {
            return Err(bad(format!(
                "unknown AMI family {other:?}: al2023, al2 or bottlerocket"
            )));
        }
    };
    let ids = world
        .account
        .cloud
        .publish_ami(family, string(body, "release")?);
    Ok(ok(json!({"imageIds": ids})))
}
