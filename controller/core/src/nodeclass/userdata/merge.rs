//! Merging the user's `spec.userData` with Karpenter's bootstrap, as upstream does for the
//! MIME-based families (AL2023, AL2): the user's MIME archive is read and its parts kept in order;
//! user data that is not MIME becomes one part (a NodeConfig if it is a YAML mapping, a shell
//! script otherwise); Karpenter's part comes last. The archive is written with the boundary `//`.

use super::UserDataError;

/// The boundary upstream writes (`multipart/mixed; boundary="//"`).
pub const BOUNDARY: &str = "//";
/// nodeadm's content type for a `NodeConfig` part.
pub const CONTENT_TYPE_NODECONFIG: &str = "application/node.eks.aws";
/// cloud-init's content type for a shell script part.
pub const CONTENT_TYPE_SHELL: &str = "text/x-shellscript; charset=\"us-ascii\"";

/// One part of a MIME multipart archive: its `Content-Type` header value and its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub content_type: String,
    pub content: String,
}

/// Whether `text` is a MIME document (upstream checks the first header).
pub fn is_mime(text: &str) -> bool {
    let text = text.trim_start();
    text.starts_with("MIME-Version:") || text.starts_with("Content-Type:")
}

/// The parts of a MIME multipart archive, in order. An archive without a boundary or without
/// parts is an error (upstream refuses it too).
pub fn parse(text: &str) -> Result<Vec<Part>, UserDataError> {
    let text = text.replace("\r\n", "\n");
    let (headers, body) = text
        .split_once("\n\n")
        .ok_or_else(|| UserDataError::Mime("no blank line after the MIME headers".into()))?;
    let boundary = boundary_of(headers)
        .ok_or_else(|| UserDataError::Mime("no multipart boundary in Content-Type".into()))?;
    let open = format!("--{boundary}");
    let close = format!("--{boundary}--");
    let mut parts = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    let mut closed = false;
    for line in body.lines() {
        if line.trim_end() == close {
            if let Some(lines) = current.take() {
                parts.push(part_of(&lines)?);
            }
            closed = true;
            break;
        }
        if line.trim_end() == open {
            if let Some(lines) = current.take() {
                parts.push(part_of(&lines)?);
            }
            current = Some(Vec::new());
        } else if let Some(lines) = current.as_mut() {
            lines.push(line);
        }
    }
    if !closed {
        return Err(UserDataError::Mime(format!(
            "archive not closed with {close}"
        )));
    }
    if parts.is_empty() {
        return Err(UserDataError::Mime("archive has no parts".into()));
    }
    Ok(parts)
}

/// The `boundary=` parameter of the top-level Content-Type header.
pub fn boundary_of(headers: &str) -> Option<String> {
    let content_type = headers
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("content-type:"))?;
    let (_, rest) = content_type.split_once("boundary=")?;
    let value = rest.trim().trim_start_matches('"');
    let value = value.split(['"', ';']).next().unwrap_or_default().trim();
    (!value.is_empty()).then(|| value.to_string())
}

fn part_of(lines: &[&str]) -> Result<Part, UserDataError> {
    let blank = lines
        .iter()
        .position(|l| l.trim().is_empty())
        .ok_or_else(|| UserDataError::Mime("a part has no blank line after its headers".into()))?;
    let content_type = lines[..blank]
        .iter()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| "text/plain".into());
    let mut content = lines[blank + 1..].join("\n");
    content.push('\n');
    Ok(Part {
        content_type,
        content,
    })
}

/// The user's user data as parts: a MIME archive's parts, or one part whose type is detected.
pub fn user_parts(user_data: Option<&str>) -> Result<Vec<Part>, UserDataError> {
    let Some(text) = user_data.filter(|t| !t.trim().is_empty()) else {
        return Ok(Vec::new());
    };
    if is_mime(text) {
        return parse(text);
    }
    let content_type = if serde_yaml::from_str::<serde_yaml::Mapping>(text).is_ok() {
        CONTENT_TYPE_NODECONFIG
    } else {
        CONTENT_TYPE_SHELL
    };
    Ok(vec![Part {
        content_type: content_type.into(),
        content: text.to_string(),
    }])
}

/// The archive of `parts`, as upstream serialises it.
pub fn serialize(parts: &[Part]) -> String {
    let mut out =
        format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    for part in parts {
        out.push_str(&format!(
            "--{BOUNDARY}\nContent-Type: {}\n\n",
            part.content_type
        ));
        out.push_str(&part.content);
        if !part.content.ends_with('\n') {
            out.push('\n');
        }
    }
    out.push_str(&format!("--{BOUNDARY}--\n"));
    out
}
