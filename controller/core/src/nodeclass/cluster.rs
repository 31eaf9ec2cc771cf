//! What a node needs to know to join *this* cluster: its name, the API server's endpoint, the CA
//! bundle that endpoint's certificate chains to, and the service CIDR (from which the kube-dns IP
//! follows, as EKS assigns it). Upstream reads these at startup (`CLUSTER_NAME`,
//! `CLUSTER_ENDPOINT` or DescribeCluster, the client's CA, DescribeCluster's
//! `kubernetesNetworkConfig`, Service `kube-system/kube-dns`); here they are validated once, so a
//! bad value is an error at startup rather than a fleet of nodes that never join.

use std::net::IpAddr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// The IP family of the cluster's services (and so of the kube-dns IP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum IpFamily {
    Ipv4,
    Ipv6,
}

/// A service CIDR, parsed: its network address and prefix length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cidr {
    pub network: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    /// Parses `10.100.0.0/16` or `fd00:10:96::/112`; the address must be the network's.
    pub fn parse(text: &str) -> Result<Cidr, ClusterInfoError> {
        let bad = |why: &str| ClusterInfoError::Cidr(text.to_string(), why.to_string());
        let (addr, prefix) = text
            .trim()
            .split_once('/')
            .ok_or_else(|| bad("expected ADDRESS/PREFIX"))?;
        let network: IpAddr = addr.parse().map_err(|_| bad("not an IP address"))?;
        let prefix: u8 = prefix.parse().map_err(|_| bad("prefix is not a number"))?;
        let bits = if network.is_ipv4() { 32 } else { 128 };
        if prefix > bits {
            return Err(bad("prefix longer than the address"));
        }
        let as_int = to_u128(network);
        let host_bits = u32::from(bits - prefix);
        let host_mask = if host_bits >= 128 {
            u128::MAX
        } else {
            (1u128 << host_bits) - 1
        };
        if as_int & host_mask != 0 {
            return Err(bad("host bits are set (not a network address)"));
        }
        // EKS needs room for the DNS address (.10) inside the range.
        if host_mask < 10 {
            return Err(bad("range too small to hold the cluster DNS address (.10)"));
        }
        Ok(Cidr { network, prefix })
    }

    pub fn family(&self) -> IpFamily {
        if self.network.is_ipv4() {
            IpFamily::Ipv4
        } else {
            IpFamily::Ipv6
        }
    }

    /// The kube-dns ClusterIP EKS assigns: the network address plus 10 (`10.100.0.10`,
    /// `fd00:10:96::a`).
    pub fn dns_ip(&self) -> IpAddr {
        from_u128(to_u128(self.network) + 10, self.family())
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        if ip.is_ipv4() != self.network.is_ipv4() {
            return false;
        }
        let bits = if ip.is_ipv4() { 32 } else { 128 };
        let host_bits = u32::from(bits - self.prefix);
        let shift = |v: u128| v.checked_shr(host_bits).unwrap_or(0);
        shift(to_u128(ip)) == shift(to_u128(self.network))
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn from_u128(value: u128, family: IpFamily) -> IpAddr {
    match family {
        // The value came from an IPv4 address plus 10 inside a range checked to hold it.
        IpFamily::Ipv4 => IpAddr::V4(std::net::Ipv4Addr::from(value as u32)),
        IpFamily::Ipv6 => IpAddr::V6(std::net::Ipv6Addr::from(value)),
    }
}

/// Why the cluster's join data is unusable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClusterInfoError {
    #[error("cluster name is empty")]
    EmptyName,
    #[error("cluster endpoint {0:?}: {1}")]
    Endpoint(String, String),
    #[error("cluster CA bundle: {0}")]
    CaBundle(String),
    #[error("service CIDR {0:?}: {1}")]
    Cidr(String, String),
    #[error("cluster DNS IP {0:?}: {1}")]
    Dns(String, String),
    #[error("a service CIDR or a cluster DNS IP is required (nodes need clusterDNS)")]
    NoNetwork,
}

/// The values every bootstrap format needs to join the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterInfo {
    pub name: String,
    /// `https://...` as the kubelet dials it.
    pub endpoint: String,
    /// The CA bundle, base64 of PEM, as EKS reports it and bootstrap scripts take it.
    pub ca_bundle: String,
    /// The service CIDR (nodeadm requires it); `None` when only the DNS IP was given.
    pub service_cidr: Option<Cidr>,
    /// The kube-dns ClusterIP the kubelet hands pods.
    pub dns_ip: IpAddr,
}

impl ClusterInfo {
    /// Validates the raw values. `dns` wins over the CIDR's `.10` when both are given (a cluster
    /// whose kube-dns Service was moved); it must lie in the CIDR then.
    pub fn new(
        name: &str,
        endpoint: &str,
        ca_bundle: &str,
        cidr: Option<&str>,
        dns: Option<&str>,
    ) -> Result<ClusterInfo, ClusterInfoError> {
        if name.trim().is_empty() {
            return Err(ClusterInfoError::EmptyName);
        }
        let endpoint_err = |why: &str| ClusterInfoError::Endpoint(endpoint.into(), why.into());
        let host = endpoint
            .strip_prefix("https://")
            .ok_or_else(|| endpoint_err("must start with https://"))?;
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(endpoint_err("has no host"));
        }
        let pem = STANDARD
            .decode(ca_bundle.trim())
            .map_err(|e| ClusterInfoError::CaBundle(format!("not base64: {e}")))?;
        let pem = String::from_utf8_lossy(&pem);
        if !pem.contains("-----BEGIN CERTIFICATE-----") {
            return Err(ClusterInfoError::CaBundle(
                "decodes to no PEM certificate".into(),
            ));
        }
        let service_cidr = cidr.map(Cidr::parse).transpose()?;
        let dns_ip = match (dns, &service_cidr) {
            (Some(dns), _) => {
                let ip: IpAddr = dns
                    .trim()
                    .parse()
                    .map_err(|_| ClusterInfoError::Dns(dns.into(), "not an IP address".into()))?;
                if let Some(c) = &service_cidr
                    && !c.contains(ip)
                {
                    return Err(ClusterInfoError::Dns(
                        dns.into(),
                        format!("outside the service CIDR {c}"),
                    ));
                }
                ip
            }
            (None, Some(c)) => c.dns_ip(),
            (None, None) => return Err(ClusterInfoError::NoNetwork),
        };
        Ok(ClusterInfo {
            name: name.trim().to_string(),
            endpoint: endpoint.trim_end_matches('/').to_string(),
            ca_bundle: ca_bundle.trim().to_string(),
            service_cidr,
            dns_ip,
        })
    }

    pub fn ip_family(&self) -> IpFamily {
        if self.dns_ip.is_ipv4() {
            IpFamily::Ipv4
        } else {
            IpFamily::Ipv6
        }
    }
}
