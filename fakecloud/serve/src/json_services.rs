//! The JSON services: SSM (`X-Amz-Target: AmazonSSM.*`, JSON 1.1), the Pricing API
//! (`AWSPriceListService.*`, JSON 1.1) and EKS (REST-JSON, `GET /clusters/NAME`).

use karpenter_core::seams::Ec2;
use karpenter_core::seams::Eks;
use karpenter_core::seams::eks::EksError;
use serde_json::{Value, json};

use crate::World;
use crate::wire::{Reply, epoch};

const JSON_1_1: &str = "application/x-amz-json-1.1";

/// A JSON-protocol error: `__type` is the code.
fn json_error(status: u16, code: &str, message: &str, rid: &str) -> Reply {
    Reply::json(
        status,
        JSON_1_1,
        &json!({"__type": code, "message": message}),
    )
    .header("x-amzn-RequestId", rid)
}

fn parameter_json(world: &World, name: &str, value: &str) -> Value {
    json!({
        "Name": name,
        "Type": "String",
        "Value": value,
        "Version": 1,
        "LastModifiedDate": epoch(world.account.cloud.now()),
        "ARN": format!("arn:aws:ssm:{}::parameter{name}", world.account.region()),
        "DataType": "aws:ec2:image",
    })
}

/// SSM `GetParameter` and `GetParameters` (the public AMI parameters).
pub async fn ssm(world: &World, action: &str, body: &Value, rid: &str) -> Reply {
    let cloud = &world.account.cloud;
    match action {
        "GetParameter" => {
            let Some(name) = body.get("Name").and_then(Value::as_str) else {
                return json_error(
                    400,
                    "ValidationException",
                    "1 validation error detected: Value null at 'name' failed to satisfy constraint: Member must not be null",
                    rid,
                );
            };
            match cloud.get_parameter(name).await {
                Ok(Some(value)) => Reply::json(
                    200,
                    JSON_1_1,
                    &json!({"Parameter": parameter_json(world, name, &value)}),
                ),
                Ok(None) => json_error(400, "ParameterNotFound", "", rid),
                Err(e) => ssm_fault(&e.to_string(), rid),
            }
        }
        "GetParameters" => {
            let names: Vec<String> = body
                .get("Names")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            let (mut found, mut invalid) = (Vec::new(), Vec::new());
            for name in names {
                match cloud.get_parameter(&name).await {
                    Ok(Some(value)) => found.push(parameter_json(world, &name, &value)),
                    Ok(None) => invalid.push(Value::String(name)),
                    Err(e) => return ssm_fault(&e.to_string(), rid),
                }
            }
            Reply::json(
                200,
                JSON_1_1,
                &json!({"Parameters": found, "InvalidParameters": invalid}),
            )
        }
        other => json_error(
            400,
            "InvalidAction",
            &format!("fakecloud does not serve SSM {other}"),
            rid,
        ),
    }
}

/// An injected fault of the parameter call, in SSM's words.
fn ssm_fault(text: &str, rid: &str) -> Reply {
    if text.starts_with("throttled") {
        json_error(400, "ThrottlingException", "Rate exceeded", rid)
    } else {
        json_error(500, "InternalServerError", text, rid)
    }
}

/// One price-list document of an on-demand Linux price, in the price list's shape.
fn product(region: &str, instance_type: &str, price: f64) -> String {
    let sku = format!(
        "{:016X}",
        karpenter_core::catalog::builtin::fnv1a64(format!("{region}/{instance_type}").as_bytes())
    );
    json!({
        "product": {
            "productFamily": "Compute Instance",
            "sku": sku,
            "attributes": {
                "instanceType": instance_type,
                "regionCode": region,
                "operatingSystem": "Linux",
                "tenancy": "Shared",
                "preInstalledSw": "NA",
                "capacitystatus": "Used",
                "licenseModel": "No License required",
                "servicecode": "AmazonEC2",
            },
        },
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {format!("{sku}.JRTCKXETXF"): {
            "sku": sku,
            "offerTermCode": "JRTCKXETXF",
            "priceDimensions": {format!("{sku}.JRTCKXETXF.6YS6EN2CT7"): {
                "unit": "Hrs",
                "pricePerUnit": {"USD": format!("{price:.10}")},
                "description": format!("${price} per On Demand Linux {instance_type} Instance Hour"),
            }},
        }}},
        "version": "20250601000000",
    })
    .to_string()
}

/// Pricing `GetProducts` for `AmazonEC2`: the fake's on-demand prices, filtered by
/// `TERM_MATCH` on the product attributes.
pub fn pricing(world: &World, action: &str, body: &Value, rid: &str) -> Reply {
    if action != "GetProducts" {
        return json_error(
            400,
            "InvalidAction",
            &format!("fakecloud does not serve Pricing {action}"),
            rid,
        );
    }
    if body.get("ServiceCode").and_then(Value::as_str) != Some("AmazonEC2") {
        return Reply::json(
            200,
            JSON_1_1,
            &json!({"FormatVersion": "aws_v1", "PriceList": []}),
        );
    }
    let region = world.account.region();
    let filters: Vec<(String, String)> = body
        .get("Filters")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| {
                    Some((
                        f.get("Field")?.as_str()?.to_string(),
                        f.get("Value")?.as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    let documents: Vec<String> = world
        .account
        .cloud
        .on_demand_price_list()
        .into_iter()
        .map(|(t, price)| product(&region, &t, price))
        .filter(|doc| {
            let doc: Value = serde_json::from_str(doc).unwrap_or_default();
            filters.iter().all(|(field, value)| {
                let have = doc
                    .pointer(&format!("/product/attributes/{field}"))
                    .and_then(Value::as_str)
                    .or_else(|| {
                        doc.pointer(&format!("/product/{field}"))
                            .and_then(Value::as_str)
                    });
                have.is_some_and(|h| h.eq_ignore_ascii_case(value))
            })
        })
        .collect();
    let size = body
        .get("MaxResults")
        .and_then(Value::as_u64)
        .unwrap_or(100)
        .clamp(1, 100) as usize;
    let start = body
        .get("NextToken")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<usize>().ok())
        .unwrap_or(0)
        .min(documents.len());
    let end = (start + size).min(documents.len());
    let mut answer = json!({"FormatVersion": "aws_v1", "PriceList": documents[start..end]});
    if end < documents.len() {
        answer["NextToken"] = Value::String(end.to_string());
    }
    Reply::json(200, JSON_1_1, &answer)
}

/// EKS `DescribeCluster` (`GET /clusters/NAME`).
pub async fn eks(world: &World, name: &str, rid: &str) -> Reply {
    let eks = &world.account.eks;
    match eks.describe_cluster(name).await {
        Ok(c) => {
            let created = eks.created(name).map(epoch).unwrap_or(json!(0));
            let mut network = json!({"ipFamily": c.ip_family});
            if let Some(cidr) = &c.service_ipv4_cidr {
                network["serviceIpv4Cidr"] = json!(cidr);
            }
            if let Some(cidr) = &c.service_ipv6_cidr {
                network["serviceIpv6Cidr"] = json!(cidr);
            }
            let cluster = json!({"cluster": {
                "name": c.name, "arn": c.arn, "createdAt": created, "version": c.version,
                "endpoint": c.endpoint, "status": c.status, "platformVersion": "eks.1",
                "roleArn": format!("arn:aws:iam::{}:role/{}-cluster", world.account.account_id(), c.name),
                "certificateAuthority": {"data": c.certificate_authority},
                "kubernetesNetworkConfig": network,
                "resourcesVpcConfig": {"vpcId": crate::ec2::vpc_id(&world.account), "endpointPublicAccess": true, "endpointPrivateAccess": true},
                "tags": {},
            }});
            Reply::json(200, "application/json", &cluster).header("x-amzn-RequestId", rid)
        }
        Err(EksError::NotFound { code, message }) => Reply::json(
            404,
            "application/json",
            &json!({"message": message, "clusterName": name}),
        )
        .header("x-amzn-ErrorType", &code)
        .header("x-amzn-RequestId", rid),
        Err(e) => Reply::json(500, "application/json", &json!({"message": e.to_string()}))
            .header("x-amzn-ErrorType", "ServerException")
            .header("x-amzn-RequestId", rid),
    }
}
