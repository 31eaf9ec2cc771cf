//! IAM as the controller sees it: roles (the node role the account starts with) and instance
//! profiles it creates for an EC2NodeClass `role`, with IAM's rules: one role per profile, names
//! unique, a profile with a role cannot be deleted, paths `/` or `/a/b/`.
//!
//! Kept apart from the EC2 state (its own lock and seeded id stream): IAM is a global service
//! whose calls never touch EC2's.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use jiff::Timestamp;
use karpenter_core::seams::Clock;
use karpenter_core::seams::iam::{IamError, InstanceProfile, InstanceProfiles, Role};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Stream number of IAM's ids: apart from every stream of the EC2 state.
const IAM_ID_STREAM: u64 = 101;

/// A profile and when it was created (IAM reports `CreateDate`).
#[derive(Clone, Debug)]
struct ProfileRecord {
    profile: InstanceProfile,
    created: Timestamp,
}

#[derive(Clone, Debug)]
struct RoleRecord {
    role: Role,
    created: Timestamp,
}

struct IamState {
    roles: BTreeMap<String, RoleRecord>,
    profiles: BTreeMap<String, ProfileRecord>,
    ids: ChaCha8Rng,
    /// Errors the next calls get, by call name (`CreateInstanceProfile`), one per call.
    scripted: BTreeMap<String, Vec<IamError>>,
}

/// The fake IAM of one account.
pub struct FakeIam {
    clock: Arc<dyn Clock>,
    account_id: String,
    state: Mutex<IamState>,
}

impl FakeIam {
    pub fn new(clock: Arc<dyn Clock>, account_id: &str, seed: u64) -> Self {
        let mut ids = ChaCha8Rng::seed_from_u64(seed);
        ids.set_stream(IAM_ID_STREAM);
        Self {
            clock,
            account_id: account_id.to_string(),
            state: Mutex::new(IamState {
                roles: BTreeMap::new(),
                profiles: BTreeMap::new(),
                ids,
                scripted: BTreeMap::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, IamState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The roles of profile `name`, or `None` when it does not exist: what EC2 checks when a
    /// launch names the profile. Not an IAM call (no call log, no scripted errors).
    pub fn profile_roles(&self, name: &str) -> Option<Vec<String>> {
        self.lock()
            .profiles
            .get(name)
            .map(|r| r.profile.roles.clone())
    }

    /// Creates a role (what the account's CloudFormation would have made); replaces one of the
    /// same name.
    pub fn add_role(&self, name: &str, path: &str) -> Role {
        let mut state = self.lock();
        let role = Role {
            name: name.to_string(),
            role_id: unique_id(&mut state.ids, "AROA"),
            arn: format!("arn:aws:iam::{}:role{path}{name}", self.account_id),
            path: path.to_string(),
        };
        let created = self.clock.now();
        state.roles.insert(
            name.to_string(),
            RoleRecord {
                role: role.clone(),
                created,
            },
        );
        role
    }

    /// The next calls named `call` (IAM's action name) fail with these errors, in order.
    pub fn script_errors(&self, call: &str, errors: impl IntoIterator<Item = IamError>) {
        let mut state = self.lock();
        let queue = state.scripted.entry(call.to_string()).or_default();
        queue.extend(errors);
    }

    /// When a profile was created (for `CreateDate`).
    pub fn profile_created(&self, name: &str) -> Option<Timestamp> {
        self.lock().profiles.get(name).map(|r| r.created)
    }

    /// When a role was created (for `CreateDate`).
    pub fn role_created(&self, name: &str) -> Option<Timestamp> {
        self.lock().roles.get(name).map(|r| r.created)
    }

    /// Every profile, sorted by name.
    pub fn profiles(&self) -> Vec<InstanceProfile> {
        self.lock()
            .profiles
            .values()
            .map(|r| r.profile.clone())
            .collect()
    }

    /// Runs one call: a scripted error wins, else `body` on the state.
    fn call<T>(
        &self,
        name: &str,
        body: impl FnOnce(&mut IamState, Timestamp) -> Result<T, IamError>,
    ) -> Result<T, IamError> {
        let now = self.clock.now();
        let mut state = self.lock();
        if let Some(queue) = state.scripted.get_mut(name)
            && !queue.is_empty()
        {
            return Err(queue.remove(0));
        }
        body(&mut state, now)
    }
}

/// `AIPA` + 17 upper-case letters and digits, as IAM's unique ids look.
fn unique_id(rng: &mut ChaCha8Rng, prefix: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let tail: String = (0..17)
        .map(|_| ALPHABET[(rng.next_u32() % 32) as usize] as char)
        .collect();
    format!("{prefix}{tail}")
}

fn no_such_entity(kind: &str, name: &str) -> IamError {
    IamError::NotFound {
        code: "NoSuchEntity".into(),
        message: format!("The {kind} with name {name} cannot be found."),
    }
}

/// IAM's path rule: `/`, or `/` + segments each ending in `/`, printable ASCII, ≤ 512.
fn check_path(path: &str) -> Result<(), IamError> {
    let ok = path.len() <= 512
        && path.starts_with('/')
        && path.ends_with('/')
        && path.chars().all(|c| ('!'..='~').contains(&c));
    if ok {
        Ok(())
    } else {
        Err(IamError::InvalidRequest {
            code: "ValidationError".into(),
            message: format!(
                "1 validation error detected: Value '{path}' at 'path' failed to satisfy constraint: Member must satisfy regular expression pattern: (\\u002F)|(\\u002F[\\u0021-\\u007E]+\\u002F)"
            ),
        })
    }
}

/// IAM's name rule for profiles and roles: 1-128 of `[\w+=,.@-]`.
fn check_name(name: &str) -> Result<(), IamError> {
    let ok = (1..=128).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_+=,.@-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(IamError::InvalidRequest {
            code: "ValidationError".into(),
            message: format!(
                "1 validation error detected: Value '{name}' at 'instanceProfileName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]+"
            ),
        })
    }
}

#[async_trait]
impl InstanceProfiles for FakeIam {
    async fn get_instance_profile(&self, name: &str) -> Result<Option<InstanceProfile>, IamError> {
        self.call("GetInstanceProfile", |state, _| {
            Ok(state.profiles.get(name).map(|r| r.profile.clone()))
        })
    }

    async fn create_instance_profile(
        &self,
        name: &str,
        path: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<InstanceProfile, IamError> {
        check_name(name)?;
        check_path(path)?;
        let account = self.account_id.clone();
        self.call("CreateInstanceProfile", |state, now| {
            if state.profiles.contains_key(name) {
                return Err(IamError::AlreadyExists {
                    code: "EntityAlreadyExists".into(),
                    message: format!("Instance Profile {name} already exists."),
                });
            }
            let profile = InstanceProfile {
                name: name.to_string(),
                instance_profile_id: unique_id(&mut state.ids, "AIPA"),
                arn: format!("arn:aws:iam::{account}:instance-profile{path}{name}"),
                path: path.to_string(),
                roles: Vec::new(),
                tags: tags.clone(),
            };
            state.profiles.insert(
                name.to_string(),
                ProfileRecord {
                    profile: profile.clone(),
                    created: now,
                },
            );
            Ok(profile)
        })
    }

    async fn tag_instance_profile(
        &self,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<(), IamError> {
        self.call("TagInstanceProfile", |state, _| {
            let record = state
                .profiles
                .get_mut(name)
                .ok_or_else(|| no_such_entity("Instance Profile", name))?;
            record.profile.tags.extend(tags.clone());
            Ok(())
        })
    }

    async fn add_role_to_instance_profile(
        &self,
        profile: &str,
        role: &str,
    ) -> Result<(), IamError> {
        self.call("AddRoleToInstanceProfile", |state, _| {
            if !state.roles.contains_key(role) {
                return Err(no_such_entity("role", role));
            }
            let record = state
                .profiles
                .get_mut(profile)
                .ok_or_else(|| no_such_entity("Instance Profile", profile))?;
            if !record.profile.roles.is_empty() {
                return Err(IamError::Conflict {
                    code: "LimitExceeded".into(),
                    message: "Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1".into(),
                });
            }
            record.profile.roles.push(role.to_string());
            Ok(())
        })
    }

    async fn remove_role_from_instance_profile(
        &self,
        profile: &str,
        role: &str,
    ) -> Result<(), IamError> {
        self.call("RemoveRoleFromInstanceProfile", |state, _| {
            let record = state
                .profiles
                .get_mut(profile)
                .ok_or_else(|| no_such_entity("Instance Profile", profile))?;
            let before = record.profile.roles.len();
            record.profile.roles.retain(|r| r != role);
            if record.profile.roles.len() == before {
                return Err(no_such_entity("role", role));
            }
            Ok(())
        })
    }

    async fn delete_instance_profile(&self, name: &str) -> Result<(), IamError> {
        self.call("DeleteInstanceProfile", |state, _| {
            match state.profiles.get(name) {
                None => Ok(()),
                Some(record) if !record.profile.roles.is_empty() => Err(IamError::Conflict {
                    code: "DeleteConflict".into(),
                    message: "Cannot delete entity, must remove roles from instance profile first."
                        .into(),
                }),
                Some(_) => {
                    state.profiles.remove(name);
                    Ok(())
                }
            }
        })
    }

    async fn list_instance_profiles(
        &self,
        path_prefix: &str,
    ) -> Result<Vec<InstanceProfile>, IamError> {
        self.call("ListInstanceProfiles", |state, _| {
            Ok(state
                .profiles
                .values()
                .filter(|r| r.profile.path.starts_with(path_prefix))
                .map(|r| r.profile.clone())
                .collect())
        })
    }

    async fn get_role(&self, name: &str) -> Result<Option<Role>, IamError> {
        self.call("GetRole", |state, _| {
            Ok(state.roles.get(name).map(|r| r.role.clone()))
        })
    }
}
