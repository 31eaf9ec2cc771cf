//! IAM on the wire: the Query protocol (`Version=2010-05-08`), lists as `.member.N` in and
//! `<member>` out, answers wrapped in `<ActionResult>`, errors as `<ErrorResponse>` with IAM's
//! HTTP statuses (404 `NoSuchEntity`, 409 `EntityAlreadyExists`/`LimitExceeded`/`DeleteConflict`).

use std::collections::BTreeMap;

use jiff::Timestamp;
use karpenter_core::seams::InstanceProfiles;
use karpenter_core::seams::iam::{IamError, InstanceProfile, Role};

use crate::World;
use crate::wire::{Params, Reply, Xml, iso};

const NAMESPACE: &str = "https://iam.amazonaws.com/doc/2010-05-08/";

/// Most profiles one `ListInstanceProfiles` page holds (IAM's `MaxItems` cap).
pub const LIST_PAGE_SIZE_MAX: usize = 1000;

fn error(status: u16, code: &str, message: &str, rid: &str) -> Reply {
    let mut x = Xml::new();
    x.open_ns("ErrorResponse", NAMESPACE)
        .node("Error", |x| {
            x.leaf("Type", if status >= 500 { "Receiver" } else { "Sender" })
                .leaf("Code", code)
                .leaf("Message", message);
        })
        .leaf("RequestId", rid)
        .close("ErrorResponse");
    Reply::xml(status, x.finish())
}

fn seam_error(e: &IamError, rid: &str) -> Reply {
    match e {
        IamError::NotFound { code, message } => error(404, code, message, rid),
        IamError::AlreadyExists { code, message } | IamError::Conflict { code, message } => {
            error(409, code, message, rid)
        }
        IamError::Throttled(m) => error(400, "Throttling", m, rid),
        IamError::InvalidRequest { code, message } => error(400, code, message, rid),
        IamError::Unauthorized { code, message } => error(403, code, message, rid),
        IamError::Unavailable(m) => error(500, "ServiceFailure", m, rid),
    }
}

fn answer(action: &str, rid: &str, body: impl FnOnce(&mut Xml)) -> Reply {
    let mut x = Xml::new();
    let root = format!("{action}Response");
    let result = format!("{action}Result");
    x.open_ns(&root, NAMESPACE).open(&result);
    body(&mut x);
    x.close(&result)
        .node("ResponseMetadata", |x| {
            x.leaf("RequestId", rid);
        })
        .close(&root);
    Reply::xml(200, x.finish())
}

fn role_xml(x: &mut Xml, role: &Role, created: Option<Timestamp>) {
    x.leaf("Path", &role.path)
        .leaf("RoleName", &role.name)
        .leaf("RoleId", &role.role_id)
        .leaf("Arn", &role.arn)
        .leaf("CreateDate", iso(created.unwrap_or(Timestamp::UNIX_EPOCH)));
}

async fn profile_xml(x: &mut Xml, world: &World, p: &InstanceProfile) {
    let iam = &world.account.iam;
    let mut roles = Vec::new();
    for name in &p.roles {
        if let Ok(Some(role)) = iam.get_role(name).await {
            roles.push((role, iam.role_created(name)));
        }
    }
    let created = iam.profile_created(&p.name);
    x.leaf("Path", &p.path)
        .leaf("InstanceProfileName", &p.name)
        .leaf("InstanceProfileId", &p.instance_profile_id)
        .leaf("Arn", &p.arn)
        .leaf("CreateDate", iso(created.unwrap_or(Timestamp::UNIX_EPOCH)))
        .open("Roles");
    for (role, created) in &roles {
        x.node("member", |x| role_xml(x, role, *created));
    }
    x.close("Roles").open("Tags");
    for (k, v) in &p.tags {
        x.node("member", |x| {
            x.leaf("Key", k).leaf("Value", v);
        });
    }
    x.close("Tags");
}

fn required<'a>(p: &'a Params, key: &str, rid: &str) -> Result<&'a str, Reply> {
    p.get(key).ok_or_else(|| {
        error(400, "ValidationError", &format!("1 validation error detected: Value null at '{}' failed to satisfy constraint: Member must not be null", lower_first(key)), rid)
    })
}

fn lower_first(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_ascii_lowercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// Renders a profile answer (the content needs async role lookups, so it is built first).
async fn profile_answer(world: &World, action: &str, p: &InstanceProfile, rid: &str) -> Reply {
    let mut inner = Xml::new();
    profile_xml(&mut inner, world, p).await;
    let inner = inner.finish();
    answer(action, rid, |x| {
        x.open("InstanceProfile")
            .raw(&inner)
            .close("InstanceProfile");
    })
}

/// Answers one IAM action.
pub async fn handle(world: &World, action: &str, p: &Params, rid: &str) -> Reply {
    match run(world, action, p, rid).await {
        Ok(reply) | Err(reply) => reply,
    }
}

async fn run(world: &World, action: &str, p: &Params, rid: &str) -> Result<Reply, Reply> {
    let iam = &world.account.iam;
    let fail = |e: IamError| seam_error(&e, rid);
    let tags: BTreeMap<String, String> = p.tags("Tags.member");
    Ok(match action {
        "GetInstanceProfile" => {
            let name = required(p, "InstanceProfileName", rid)?;
            match iam.get_instance_profile(name).await.map_err(fail)? {
                Some(profile) => profile_answer(world, action, &profile, rid).await,
                None => error(
                    404,
                    "NoSuchEntity",
                    &format!("Instance Profile {name} cannot be found."),
                    rid,
                ),
            }
        }
        "CreateInstanceProfile" => {
            let name = required(p, "InstanceProfileName", rid)?;
            let path = p.get("Path").unwrap_or("/");
            let profile = iam
                .create_instance_profile(name, path, &tags)
                .await
                .map_err(fail)?;
            profile_answer(world, action, &profile, rid).await
        }
        "TagInstanceProfile" => {
            iam.tag_instance_profile(required(p, "InstanceProfileName", rid)?, &tags)
                .await
                .map_err(fail)?;
            answer(action, rid, |_| {})
        }
        "AddRoleToInstanceProfile" => {
            let (profile, role) = (
                required(p, "InstanceProfileName", rid)?,
                required(p, "RoleName", rid)?,
            );
            iam.add_role_to_instance_profile(profile, role)
                .await
                .map_err(fail)?;
            answer(action, rid, |_| {})
        }
        "RemoveRoleFromInstanceProfile" => {
            let (profile, role) = (
                required(p, "InstanceProfileName", rid)?,
                required(p, "RoleName", rid)?,
            );
            iam.remove_role_from_instance_profile(profile, role)
                .await
                .map_err(fail)?;
            answer(action, rid, |_| {})
        }
        "DeleteInstanceProfile" => {
            let name = required(p, "InstanceProfileName", rid)?;
            // IAM answers a missing profile with NoSuchEntity (the seam calls that success).
            if iam
                .get_instance_profile(name)
                .await
                .map_err(fail)?
                .is_none()
            {
                return Err(error(
                    404,
                    "NoSuchEntity",
                    &format!("Instance Profile {name} cannot be found."),
                    rid,
                ));
            }
            iam.delete_instance_profile(name).await.map_err(fail)?;
            answer(action, rid, |_| {})
        }
        "ListInstanceProfiles" => list_instance_profiles(world, p, rid).await?,
        "GetRole" => {
            let name = required(p, "RoleName", rid)?;
            match iam.get_role(name).await.map_err(fail)? {
                Some(role) => {
                    let created = iam.role_created(name);
                    answer(action, rid, |x| {
                        x.node("Role", |x| role_xml(x, &role, created));
                    })
                }
                None => error(
                    404,
                    "NoSuchEntity",
                    &format!("The role with name {name} cannot be found."),
                    rid,
                ),
            }
        }
        other => error(
            400,
            "InvalidAction",
            &format!("fakecloud does not serve IAM {other}"),
            rid,
        ),
    })
}

async fn list_instance_profiles(world: &World, p: &Params, rid: &str) -> Result<Reply, Reply> {
    let prefix = p.get("PathPrefix").unwrap_or("/");
    let all = world
        .account
        .iam
        .list_instance_profiles(prefix)
        .await
        .map_err(|e| seam_error(&e, rid))?;
    let size = match p.int("MaxItems") {
        Some(n) if n < 1 || n > LIST_PAGE_SIZE_MAX as i64 => {
            return Err(error(
                400,
                "ValidationError",
                "1 validation error detected: Value at 'maxItems' failed to satisfy constraint: Member must have value between 1 and 1000",
                rid,
            ));
        }
        Some(n) => n as usize,
        None => 100,
    };
    let start = p
        .get("Marker")
        .and_then(|m| m.parse::<usize>().ok())
        .unwrap_or(0)
        .min(all.len());
    let end = (start + size).min(all.len());
    let mut body = Xml::new();
    body.open("InstanceProfiles");
    for profile in &all[start..end] {
        let mut inner = Xml::new();
        profile_xml(&mut inner, world, profile).await;
        body.open("member").raw(&inner.finish()).close("member");
    }
    body.close("InstanceProfiles")
        .leaf("IsTruncated", (end < all.len()).to_string());
    if end < all.len() {
        body.leaf("Marker", end.to_string());
    }
    let body = body.finish();
    Ok(answer("ListInstanceProfiles", rid, |x| {
        x.raw(&body);
    }))
}
