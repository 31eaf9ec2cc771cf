//! Launch templates: created, described and deleted by name, and read by `CreateFleet` for the
//! image and user data an instance boots with.

use std::collections::BTreeMap;

use jiff::Timestamp;
use karpenter_core::seams::ec2::{Ec2Error, Filter, LaunchTemplate, LaunchTemplateRequest};
use rand_chacha::ChaCha8Rng;

use crate::filters;
use crate::rng::resource_id;

#[derive(Clone, Debug)]
pub(crate) struct TemplateRecord {
    pub template: LaunchTemplate,
    pub request: LaunchTemplateRequest,
    /// When it was created or last named by a `CreateFleet` (what the simulation's
    /// `launch-templates-collected` invariant measures disuse from).
    pub last_used: Timestamp,
}

/// Launch templates by name (names are unique in an account and region).
#[derive(Clone, Debug, Default)]
pub(crate) struct Templates {
    by_name: BTreeMap<String, TemplateRecord>,
}

impl Templates {
    pub fn create(
        &mut self,
        request: &LaunchTemplateRequest,
        rng: &mut ChaCha8Rng,
        now: Timestamp,
    ) -> Result<LaunchTemplate, Ec2Error> {
        let name_ok = (3..=128).contains(&request.name.len())
            && request
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "().-/_".contains(c));
        if !name_ok {
            return Err(Ec2Error::InvalidRequest {
                code: "InvalidLaunchTemplateName.MalformedException".into(),
                message: format!("Launch template name {:?} is malformed", request.name),
            });
        }
        if self.by_name.contains_key(&request.name) {
            return Err(Ec2Error::InvalidRequest {
                code: "InvalidLaunchTemplateName.AlreadyExistsException".into(),
                message: format!("Launch template name already in use: {}", request.name),
            });
        }
        let template = LaunchTemplate {
            launch_template_id: resource_id(rng, "lt"),
            launch_template_name: request.name.clone(),
            tags: request.tags.clone(),
        };
        self.by_name.insert(
            request.name.clone(),
            TemplateRecord {
                template: template.clone(),
                request: request.clone(),
                last_used: now,
            },
        );
        Ok(template)
    }

    /// Sorted by id, as the seam promises.
    pub fn describe(&self, filters: &[Filter]) -> Result<Vec<LaunchTemplate>, Ec2Error> {
        filters::check(filters, &["launch-template-name", "launch-template-id"])?;
        let mut found: Vec<LaunchTemplate> = self
            .by_name
            .values()
            .map(|r| &r.template)
            .filter(|t| {
                filters::matches(filters, &t.tags, |name| match name {
                    "launch-template-name" => vec![t.launch_template_name.clone()],
                    "launch-template-id" => vec![t.launch_template_id.clone()],
                    _ => Vec::new(),
                })
            })
            .cloned()
            .collect();
        found.sort_by(|a, b| a.launch_template_id.cmp(&b.launch_template_id));
        Ok(found)
    }

    pub fn delete(&mut self, name: &str) -> bool {
        self.by_name.remove(name).is_some()
    }

    /// Every template's request, by name.
    pub fn requests(&self) -> Vec<karpenter_core::seams::ec2::LaunchTemplateRequest> {
        self.by_name.values().map(|r| r.request.clone()).collect()
    }

    pub fn get(&self, name: &str) -> Option<&TemplateRecord> {
        self.by_name.get(name)
    }

    /// A `CreateFleet` named `name` at `now`.
    pub fn mark_used(&mut self, name: &str, now: Timestamp) {
        if let Some(record) = self.by_name.get_mut(name) {
            record.last_used = now;
        }
    }

    /// Every template with when it was last used (created or named by a `CreateFleet`), by name.
    pub fn uses(&self) -> Vec<(LaunchTemplate, Timestamp)> {
        self.by_name
            .values()
            .map(|r| (r.template.clone(), r.last_used))
            .collect()
    }
}
