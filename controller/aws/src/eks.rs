//! The `Eks` seam over aws-sdk-eks: `DescribeCluster`.

use async_trait::async_trait;
use karpenter_core::seams::eks::{Cluster, Eks, EksError};

use crate::errors::SdkResultExt;

#[derive(Clone, Debug)]
pub struct AwsEks {
    client: aws_sdk_eks::Client,
}

impl AwsEks {
    pub fn new(client: aws_sdk_eks::Client) -> Self {
        Self { client }
    }
}

#[async_trait]
impl Eks for AwsEks {
    async fn describe_cluster(&self, name: &str) -> Result<Cluster, EksError> {
        let output = self
            .client
            .describe_cluster()
            .name(name)
            .send()
            .await
            .seam()?;
        let c = output
            .cluster()
            .ok_or_else(|| EksError::Unavailable("DescribeCluster answered no cluster".into()))?;
        let network = c.kubernetes_network_config();
        Ok(Cluster {
            name: c.name().unwrap_or(name).to_string(),
            arn: c.arn().unwrap_or_default().to_string(),
            endpoint: c.endpoint().unwrap_or_default().to_string(),
            certificate_authority: c
                .certificate_authority()
                .and_then(|ca| ca.data())
                .unwrap_or_default()
                .to_string(),
            version: c.version().unwrap_or_default().to_string(),
            status: c
                .status()
                .map(|s| s.as_str().to_string())
                .unwrap_or_default(),
            ip_family: network
                .and_then(|n| n.ip_family())
                .map(|f| f.as_str().to_string())
                .unwrap_or_else(|| "ipv4".into()),
            service_ipv4_cidr: network
                .and_then(|n| n.service_ipv4_cidr())
                .map(String::from),
            service_ipv6_cidr: network
                .and_then(|n| n.service_ipv6_cidr())
                .map(String::from),
        })
    }
}
