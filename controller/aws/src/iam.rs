//! The `InstanceProfiles` seam over aws-sdk-iam.
//!
//! IAM answers a missing entity with `NoSuchEntity`; the seam's reads turn that into `None` and
//! its delete into success, as the contract says.

use std::collections::BTreeMap;

use async_trait::async_trait;
use aws_sdk_iam::types::Tag;
use karpenter_core::seams::iam::{IamError, InstanceProfile, InstanceProfiles, Role};

use crate::errors::{Class, Failure, SdkResultExt, failure};

/// The IAM client (a global service: one endpoint for every region of a partition).
#[derive(Clone, Debug)]
pub struct AwsIam {
    client: aws_sdk_iam::Client,
}

impl AwsIam {
    pub fn new(client: aws_sdk_iam::Client) -> Self {
        Self { client }
    }
}

fn profile(p: &aws_sdk_iam::types::InstanceProfile) -> InstanceProfile {
    InstanceProfile {
        name: p.instance_profile_name().to_string(),
        instance_profile_id: p.instance_profile_id().to_string(),
        arn: p.arn().to_string(),
        path: p.path().to_string(),
        roles: p
            .roles()
            .iter()
            .map(|r| r.role_name().to_string())
            .collect(),
        tags: p
            .tags()
            .iter()
            .map(|t| (t.key().to_string(), t.value().to_string()))
            .collect(),
    }
}

fn sdk_tags(tags: &BTreeMap<String, String>) -> Result<Vec<Tag>, IamError> {
    tags.iter()
        .map(|(k, v)| {
            Tag::builder()
                .key(k)
                .value(v)
                .build()
                .map_err(|e| IamError::InvalidRequest {
                    code: "InvalidInput".into(),
                    message: e.to_string(),
                })
        })
        .collect()
}

/// `Ok(None)` for `NoSuchEntity`, the error otherwise.
fn absent<T>(failure: Failure) -> Result<Option<T>, IamError> {
    if failure.class == Class::NotFound {
        Ok(None)
    } else {
        Err(failure.into())
    }
}

#[async_trait]
impl InstanceProfiles for AwsIam {
    async fn get_instance_profile(&self, name: &str) -> Result<Option<InstanceProfile>, IamError> {
        match self
            .client
            .get_instance_profile()
            .instance_profile_name(name)
            .send()
            .await
        {
            Ok(output) => Ok(output.instance_profile().map(profile)),
            Err(error) => absent(failure(error)),
        }
    }

    async fn create_instance_profile(
        &self,
        name: &str,
        path: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<InstanceProfile, IamError> {
        let output = self
            .client
            .create_instance_profile()
            .instance_profile_name(name)
            .path(path)
            .set_tags(Some(sdk_tags(tags)?))
            .send()
            .await
            .seam()?;
        output.instance_profile().map(profile).ok_or_else(|| {
            IamError::Unavailable("CreateInstanceProfile answered no profile".into())
        })
    }

    async fn tag_instance_profile(
        &self,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<(), IamError> {
        self.client
            .tag_instance_profile()
            .instance_profile_name(name)
            .set_tags(Some(sdk_tags(tags)?))
            .send()
            .await
            .seam()?;
        Ok(())
    }

    async fn add_role_to_instance_profile(
        &self,
        profile: &str,
        role: &str,
    ) -> Result<(), IamError> {
        self.client
            .add_role_to_instance_profile()
            .instance_profile_name(profile)
            .role_name(role)
            .send()
            .await
            .seam()?;
        Ok(())
    }

    async fn remove_role_from_instance_profile(
        &self,
        profile: &str,
        role: &str,
    ) -> Result<(), IamError> {
        self.client
            .remove_role_from_instance_profile()
            .instance_profile_name(profile)
            .role_name(role)
            .send()
            .await
            .seam()?;
        Ok(())
    }

    async fn delete_instance_profile(&self, name: &str) -> Result<(), IamError> {
        match self
            .client
            .delete_instance_profile()
            .instance_profile_name(name)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(error) => absent::<()>(failure(error)).map(|_| ()),
        }
    }

    async fn list_instance_profiles(
        &self,
        path_prefix: &str,
    ) -> Result<Vec<InstanceProfile>, IamError> {
        let pages: Vec<_> = self
            .client
            .list_instance_profiles()
            .path_prefix(path_prefix)
            .into_paginator()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .seam()?;
        let mut profiles: Vec<InstanceProfile> = pages
            .iter()
            .flat_map(|p| p.instance_profiles())
            .map(profile)
            .collect();
        profiles.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(profiles)
    }

    async fn get_role(&self, name: &str) -> Result<Option<Role>, IamError> {
        match self.client.get_role().role_name(name).send().await {
            Ok(output) => Ok(output.role().map(|r| Role {
                name: r.role_name().to_string(),
                role_id: r.role_id().to_string(),
                arn: r.arn().to_string(),
                path: r.path().to_string(),
            })),
            Err(error) => absent(failure(error)),
        }
    }
}
