//! The Kubernetes adapter against an in-test API server behind kube's `Client` (a
//! `tower::service_fn`): the requests each seam call sends (paths, verbs, query, content types),
//! how answers and `Status` errors map back, events as series, the QPS limit, leader election
//! over the adapter, and that every request it can send is one the RBAC table grants.

mod calls;
mod leader;
mod rbac;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use jiff::Timestamp;
use karpenter_core::seams::ManualClock;
use karpenter_kube::{ClientLimits, KubeClient};
use serde_json::{Value, json};

/// One request the server saw.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Query parameters, decoded.
    pub query: BTreeMap<String, String>,
    pub content_type: String,
    pub body: Value,
}

/// The answer of a handler: status code and body.
pub type Answer = (u16, String);

pub type Log = Arc<Mutex<Vec<Seen>>>;

fn decode_query(query: Option<&str>) -> BTreeMap<String, String> {
    let decode = |s: &str| {
        let s = s.replace('+', " ");
        let mut out = Vec::new();
        let bytes = s.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' && i + 2 < bytes.len() {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                if let Ok(b) = u8::from_str_radix(hex, 16) {
                    out.push(b);
                    i += 3;
                    continue;
                }
            }
            out.push(bytes[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).to_string()
    };
    query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// A client whose every request is logged and answered by `handler`.
pub fn client_with(
    handler: impl Fn(&Seen) -> Answer + Send + Sync + 'static,
    limits: ClientLimits,
) -> (KubeClient, Log) {
    let log: Log = Arc::default();
    let handler = Arc::new(handler);
    let seen_log = log.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let handler = handler.clone();
        let log = seen_log.clone();
        async move {
            let (parts, body) = request.into_parts();
            let bytes = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let seen = Seen {
                method: parts.method.to_string(),
                path: parts.uri.path().to_string(),
                query: decode_query(parts.uri.query()),
                content_type: parts
                    .headers
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string(),
                body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            };
            let (code, body) = handler(&seen);
            log.lock().unwrap().push(seen);
            Ok::<_, Infallible>(
                http::Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(body)))
                    .unwrap(),
            )
        }
    });
    let client = kube::Client::new(service, "default");
    let clock = Arc::new(ManualClock::new(start()));
    (KubeClient::new(client, limits, clock, "test-replica"), log)
}

/// A client answering `handler` with the default limits.
pub fn client(handler: impl Fn(&Seen) -> Answer + Send + Sync + 'static) -> (KubeClient, Log) {
    client_with(handler, ClientLimits::default())
}

pub fn start() -> Timestamp {
    "2026-11-23T12:00:00Z".parse().unwrap()
}

/// An API server `Status` failure.
pub fn status(code: u16, reason: &str, message: &str) -> Answer {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code})
        .to_string(),
    )
}

pub fn ok(body: Value) -> Answer {
    (200, body.to_string())
}

/// A minimal object of `kind` named `name`.
pub fn object(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Value {
    let mut meta = json!({"name": name, "resourceVersion": "7", "uid": format!("uid-{name}")});
    if let Some(ns) = namespace {
        meta["namespace"] = json!(ns);
    }
    json!({"apiVersion": api_version, "kind": kind, "metadata": meta})
}

pub fn requests(log: &Log) -> Vec<Seen> {
    log.lock().unwrap().clone()
}
