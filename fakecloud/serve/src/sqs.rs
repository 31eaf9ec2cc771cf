//! SQS on the wire, in both protocols real clients speak: JSON 1.0 (`X-Amz-Target:
//! AmazonSQS.*`, the SDKs and botocore today) and the older Query protocol (`Action=...&
//! Version=2012-11-05`, e.g. the AWS CLI v2 Debian ships). One queue: the cluster's
//! interruption queue, at `http://HOST/ACCOUNT/NAME`.
//!
//! Errors come in each protocol's shape: JSON `__type` plus the legacy code in the
//! `x-amzn-query-error` header, or a Query `<ErrorResponse>`.

use std::time::Duration;

use karpenter_core::seams::Sqs;
use karpenter_core::seams::sqs::{Message, RECEIVE_COUNT_MAX, SqsError};
use serde_json::{Value, json};

use crate::World;
use crate::wire::{Params, Reply, Xml, code_and_message, md5_hex};

const QUERY_NAMESPACE: &str = "http://queue.amazonaws.com/doc/2012-11-05/";
const JSON_TYPE: &str = "application/x-amz-json-1.0";

/// Which protocol a request came in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Json,
    Query,
}

/// One SQS error: (JSON type, legacy Query code, Sender/Receiver, HTTP status, message).
struct SqsFault {
    json_type: &'static str,
    query_code: String,
    fault: &'static str,
    status: u16,
    message: String,
}

fn fault(json_type: &'static str, query_code: &str, status: u16, message: &str) -> SqsFault {
    SqsFault {
        json_type,
        query_code: query_code.to_string(),
        fault: if status >= 500 { "Receiver" } else { "Sender" },
        status,
        message: message.to_string(),
    }
}

fn from_seam(e: &SqsError) -> SqsFault {
    match e {
        SqsError::QueueDoesNotExist(m) => fault(
            "QueueDoesNotExist",
            "AWS.SimpleQueueService.NonExistentQueue",
            400,
            m,
        ),
        SqsError::InvalidReceiptHandle(m) => {
            fault("ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", 400, m)
        }
        SqsError::Throttled(m) => fault("RequestThrottled", "RequestThrottled", 400, m),
        SqsError::Forbidden(m) => fault("AccessDeniedException", "AccessDenied", 403, m),
        SqsError::Unavailable(text) => {
            let (code, message) = code_and_message(text, "InternalError");
            if code == "ServiceUnavailable" {
                fault("ServiceUnavailable", "ServiceUnavailable", 503, &message)
            } else {
                fault("InternalError", "InternalError", 500, &message)
            }
        }
    }
}

fn invalid(message: &str) -> SqsFault {
    fault(
        "InvalidParameterValue",
        "InvalidParameterValue",
        400,
        message,
    )
}

fn error_reply(protocol: Protocol, f: &SqsFault, rid: &str) -> Reply {
    match protocol {
        Protocol::Json => Reply::json(
            f.status,
            JSON_TYPE,
            &json!({"__type": format!("com.amazonaws.sqs#{}", f.json_type), "message": f.message}),
        )
        .header(
            "x-amzn-query-error",
            &format!("{};{}", f.query_code, f.fault),
        )
        .header("x-amzn-RequestId", rid),
        Protocol::Query => {
            let mut x = Xml::new();
            x.open_ns("ErrorResponse", QUERY_NAMESPACE)
                .node("Error", |x| {
                    x.leaf("Type", f.fault)
                        .leaf("Code", &f.query_code)
                        .leaf("Message", &f.message)
                        .open("Detail")
                        .close("Detail");
                })
                .leaf("RequestId", rid)
                .close("ErrorResponse");
            Reply::xml(f.status, x.finish())
        }
    }
}

/// One request's parameters, whichever protocol carried them.
pub enum Input {
    Json(Value),
    Query(Params),
}

impl Input {
    fn str(&self, json_key: &str) -> Option<String> {
        match self {
            Input::Json(v) => v.get(json_key)?.as_str().map(String::from),
            Input::Query(p) => p.get(json_key).map(String::from),
        }
    }

    fn int(&self, key: &str) -> Option<i64> {
        match self {
            Input::Json(v) => v.get(key)?.as_i64(),
            Input::Query(p) => p.int(key),
        }
    }

    /// A list: JSON array, or Query `KEY.N`.
    fn list(&self, key: &str) -> Vec<String> {
        match self {
            Input::Json(v) => v
                .get(key)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
            Input::Query(p) => p.list(key),
        }
    }
}

fn ok_reply(
    protocol: Protocol,
    action: &str,
    rid: &str,
    json: Value,
    xml: impl FnOnce(&mut Xml),
) -> Reply {
    match protocol {
        Protocol::Json => Reply::json(200, JSON_TYPE, &json).header("x-amzn-RequestId", rid),
        Protocol::Query => {
            let mut x = Xml::new();
            let root = format!("{action}Response");
            let result = format!("{action}Result");
            x.open_ns(&root, QUERY_NAMESPACE).open(&result);
            xml(&mut x);
            x.close(&result)
                .node("ResponseMetadata", |x| {
                    x.leaf("RequestId", rid);
                })
                .close(&root);
            Reply::xml(200, x.finish())
        }
    }
}

/// Answers one SQS action.
pub async fn handle(
    world: &World,
    protocol: Protocol,
    action: &str,
    input: &Input,
    host: &str,
    rid: &str,
) -> Reply {
    let result = match action {
        "GetQueueUrl" => get_queue_url(world, protocol, input, host, rid),
        "ReceiveMessage" => receive_message(world, protocol, input, rid).await,
        "DeleteMessage" => delete_message(world, protocol, input, rid).await,
        "SendMessage" => send_message(world, protocol, input, rid).await,
        other => Err(fault(
            "UnsupportedOperation",
            "AWS.SimpleQueueService.UnsupportedOperation",
            400,
            &format!("fakecloud does not serve SQS {other}"),
        )),
    };
    result.unwrap_or_else(|f| error_reply(protocol, &f, rid))
}

/// The queue a `QueueUrl` names must be the cluster's (any host: clients may reach the fake by
/// another name).
fn check_queue(world: &World, input: &Input) -> Result<(), SqsFault> {
    let url = input
        .str("QueueUrl")
        .ok_or_else(|| invalid("The request must contain the parameter QueueUrl."))?;
    let path = format!(
        "/{}/{}",
        world.account.account_id(),
        world.account.queue_name()
    );
    if url.ends_with(&path) {
        Ok(())
    } else {
        Err(from_seam(&SqsError::QueueDoesNotExist(
            "The specified queue does not exist.".into(),
        )))
    }
}

fn get_queue_url(
    world: &World,
    protocol: Protocol,
    input: &Input,
    host: &str,
    rid: &str,
) -> Result<Reply, SqsFault> {
    let name = input
        .str("QueueName")
        .ok_or_else(|| invalid("The request must contain the parameter QueueName."))?;
    if name != world.account.queue_name() {
        return Err(from_seam(&SqsError::QueueDoesNotExist(
            "The specified queue does not exist.".into(),
        )));
    }
    let url = format!("http://{host}/{}/{name}", world.account.account_id());
    Ok(ok_reply(
        protocol,
        "GetQueueUrl",
        rid,
        json!({"QueueUrl": url}),
        |x| {
            x.leaf("QueueUrl", &url);
        },
    ))
}

/// The system attributes a receive asked for (`AttributeNames`, the newer
/// `MessageSystemAttributeNames`, Query's `AttributeName.N`), of those the fake knows.
fn wanted_attributes(input: &Input) -> Vec<&'static str> {
    let mut names = input.list("AttributeNames");
    names.extend(input.list("MessageSystemAttributeNames"));
    names.extend(input.list("AttributeName"));
    names.extend(input.list("MessageSystemAttributeName"));
    ["SentTimestamp", "SenderId"]
        .into_iter()
        .filter(|known| names.iter().any(|n| n == "All" || n == known))
        .collect()
}

async fn receive_message(
    world: &World,
    protocol: Protocol,
    input: &Input,
    rid: &str,
) -> Result<Reply, SqsFault> {
    check_queue(world, input)?;
    let count = input.int("MaxNumberOfMessages").unwrap_or(1);
    if !(1..=i64::from(RECEIVE_COUNT_MAX)).contains(&count) {
        return Err(invalid(&format!(
            "Value {count} for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided."
        )));
    }
    let wait = input.int("WaitTimeSeconds").unwrap_or(0);
    if !(0..=20).contains(&wait) {
        return Err(invalid(&format!(
            "Value {wait} for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided."
        )));
    }
    let messages = world
        .account
        .cloud
        .receive_messages(count as u8, Duration::from_secs(wait as u64))
        .await
        .map_err(|e| from_seam(&e))?;
    let attributes = wanted_attributes(input);
    let sent = world.account.cloud.sent_messages();
    let attribute_values = |m: &Message| -> Vec<(&'static str, String)> {
        attributes
            .iter()
            .filter_map(|name| match *name {
                "SentTimestamp" => sent
                    .iter()
                    .rev()
                    .find(|s| s.message_id == m.message_id)
                    .map(|s| (*name, s.time.as_millisecond().to_string())),
                "SenderId" => Some((*name, world.account.account_id())),
                _ => None,
            })
            .collect()
    };
    let json_messages: Vec<Value> = messages
        .iter()
        .map(|m| {
            let mut v = json!({"MessageId": m.message_id, "ReceiptHandle": m.receipt_handle, "MD5OfBody": md5_hex(&m.body), "Body": m.body});
            let attrs = attribute_values(m);
            if !attrs.is_empty() {
                v["Attributes"] = attrs.into_iter().map(|(k, v)| (k.to_string(), Value::String(v))).collect();
            }
            v
        })
        .collect();
    let json = if json_messages.is_empty() {
        json!({})
    } else {
        json!({"Messages": json_messages})
    };
    Ok(ok_reply(protocol, "ReceiveMessage", rid, json, |x| {
        for m in &messages {
            x.node("Message", |x| {
                x.leaf("MessageId", &m.message_id)
                    .leaf("ReceiptHandle", &m.receipt_handle)
                    .leaf("MD5OfBody", md5_hex(&m.body))
                    .leaf("Body", &m.body);
                for (name, value) in attribute_values(m) {
                    x.node("Attribute", |x| {
                        x.leaf("Name", name).leaf("Value", value);
                    });
                }
            });
        }
    }))
}

async fn delete_message(
    world: &World,
    protocol: Protocol,
    input: &Input,
    rid: &str,
) -> Result<Reply, SqsFault> {
    check_queue(world, input)?;
    let handle = input
        .str("ReceiptHandle")
        .ok_or_else(|| invalid("The request must contain the parameter ReceiptHandle."))?;
    world
        .account
        .cloud
        .delete_message(&handle)
        .await
        .map_err(|e| from_seam(&e))?;
    Ok(ok_reply(protocol, "DeleteMessage", rid, json!({}), |_| {}))
}

async fn send_message(
    world: &World,
    protocol: Protocol,
    input: &Input,
    rid: &str,
) -> Result<Reply, SqsFault> {
    check_queue(world, input)?;
    let body = input
        .str("MessageBody")
        .ok_or_else(|| invalid("The request must contain the parameter MessageBody."))?;
    if body.is_empty() {
        return Err(invalid(
            "The request must contain the parameter MessageBody.",
        ));
    }
    let message_id = world.send(&body).await.ok_or_else(|| {
        from_seam(&SqsError::QueueDoesNotExist(
            "The specified queue does not exist.".into(),
        ))
    })?;
    let md5 = md5_hex(&body);
    Ok(ok_reply(
        protocol,
        "SendMessage",
        rid,
        json!({"MessageId": message_id, "MD5OfMessageBody": md5}),
        |x| {
            x.leaf("MessageId", &message_id)
                .leaf("MD5OfMessageBody", &md5);
        },
    ))
}
