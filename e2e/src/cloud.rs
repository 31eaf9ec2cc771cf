//! The fake cloud beside the cluster: its control API (`/fakecloud/...`: spot interruptions, AMI
//! releases) and EC2's DescribeInstances, over one-shot HTTP/1.0 requests (no client library:
//! the suite talks to a plain-http test endpoint only).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;

use crate::{E2eError, Outcome};

/// The fake cloud at one endpoint.
#[derive(Clone, Debug)]
pub struct Cloud {
    /// `host:port`.
    addr: String,
}

impl Cloud {
    /// `endpoint` is `http://host:port` (or `host:port`).
    pub fn new(endpoint: String) -> Self {
        let addr = endpoint
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        Self { addr }
    }

    /// POSTs `body` to the control API's `path` (below `/fakecloud`); its JSON answer.
    pub async fn control(&self, path: &str, body: &Value) -> Outcome<Value> {
        let addr = self.addr.clone();
        let path = format!("/fakecloud{path}");
        let body = body.to_string();
        let request_path = path.clone();
        let answer = tokio::task::spawn_blocking(move || {
            http(&addr, "POST", &request_path, "application/json", &body)
        })
        .await
        .map_err(|e| E2eError::Cloud(e.to_string()))??;
        serde_json::from_str(&answer).map_err(|e| E2eError::Cloud(format!("{path}: {e}")))
    }

    /// The state of instance `id` (`pending`, `running`, `shutting-down`, `terminated`, ...), or
    /// `None` when EC2 no longer lists it.
    pub async fn instance_state(&self, id: &str) -> Outcome<Option<String>> {
        let addr = self.addr.clone();
        let body = format!("Action=DescribeInstances&Version=2016-11-15&InstanceId.1={id}");
        let answer = tokio::task::spawn_blocking(move || {
            http(
                &addr,
                "POST",
                "/",
                "application/x-www-form-urlencoded",
                &body,
            )
        })
        .await
        .map_err(|e| E2eError::Cloud(e.to_string()));
        let xml = match answer? {
            Ok(xml) => xml,
            // An id EC2 no longer knows answers InvalidInstanceID.NotFound.
            Err(E2eError::Cloud(e)) if e.contains("InvalidInstanceID") => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(xml
            .split("<instanceState>")
            .nth(1)
            .and_then(|s| s.split("<name>").nth(1))
            .and_then(|s| s.split("</name>").next())
            .map(String::from))
    }
}

/// The EC2 instance id of a `providerID` (`aws:///us-west-2a/i-0abc`).
pub fn instance_id(provider_id: &str) -> Option<&str> {
    provider_id
        .rsplit('/')
        .next()
        .filter(|id| id.starts_with("i-"))
}

/// One HTTP/1.0 request; the body of a 2xx answer, else an error with the answer.
fn http(addr: &str, method: &str, path: &str, content_type: &str, body: &str) -> Outcome<String> {
    let cloud = |e: String| E2eError::Cloud(format!("{method} {path}: {e}"));
    let mut stream = TcpStream::connect(addr).map_err(|e| cloud(e.to_string()))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .map_err(|e| cloud(e.to_string()))?;
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| cloud(e.to_string()))?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(|e| cloud(e.to_string()))?;
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| cloud("no HTTP answer".into()))?;
    let ok = head
        .split_whitespace()
        .nth(1)
        .is_some_and(|status| status.starts_with('2'));
    if ok {
        Ok(body.to_string())
    } else {
        Err(cloud(format!("{head}\n{body}")))
    }
}
