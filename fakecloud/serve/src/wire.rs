//! The pieces every protocol shares: form parameters with AWS's list conventions, a small XML
//! writer with escaping, AWS timestamps, request ids, and one reply type.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use jiff::Timestamp;
use karpenter_core::seams::ec2::Filter;

/// A reply before it becomes an HTTP response.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn xml(status: u16, body: String) -> Self {
        Self {
            status,
            content_type: "text/xml;charset=UTF-8",
            headers: Vec::new(),
            body: format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{body}"),
        }
    }

    pub fn json(status: u16, content_type: &'static str, body: &serde_json::Value) -> Self {
        Self {
            status,
            content_type,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }

    pub fn text(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            content_type: "text/plain; charset=utf-8",
            headers: Vec::new(),
            body: body.into(),
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
}

/// Form parameters of a Query-protocol request (EC2, SQS Query, IAM).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Params(BTreeMap<String, String>);

impl Params {
    pub fn parse(body: &[u8]) -> Self {
        Self(
            form_urlencoded::parse(body)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    pub fn from_map(map: BTreeMap<String, String>) -> Self {
        Self(map)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn flag(&self, key: &str) -> bool {
        self.get(key)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    pub fn int(&self, key: &str) -> Option<i64> {
        self.get(key).and_then(|v| v.parse().ok())
    }

    /// The members `PREFIX.1`, `PREFIX.2`, ... in index order, each as the parameters below it
    /// (`PREFIX.N.Rest` becomes `Rest`; a scalar `PREFIX.N` becomes the key `""`).
    pub fn members(&self, prefix: &str) -> Vec<Params> {
        let mut by_index: BTreeMap<u32, BTreeMap<String, String>> = BTreeMap::new();
        let lead = format!("{prefix}.");
        for (key, value) in &self.0 {
            let Some(rest) = key.strip_prefix(&lead) else {
                continue;
            };
            let (index, tail) = rest.split_once('.').unwrap_or((rest, ""));
            let Ok(index) = index.parse::<u32>() else {
                continue;
            };
            by_index
                .entry(index)
                .or_default()
                .insert(tail.to_string(), value.clone());
        }
        by_index.into_values().map(Params).collect()
    }

    /// The parameters below `PREFIX.` (a structure, not a list).
    pub fn nested(&self, prefix: &str) -> Params {
        let lead = format!("{prefix}.");
        Params(
            self.0
                .iter()
                .filter_map(|(k, v)| Some((k.strip_prefix(&lead)?.to_string(), v.clone())))
                .collect(),
        )
    }

    /// The scalar members of a list: `InstanceId.1`, `InstanceId.2`, ...
    pub fn list(&self, prefix: &str) -> Vec<String> {
        self.members(prefix)
            .into_iter()
            .filter_map(|m| m.get("").map(String::from))
            .collect()
    }

    /// EC2 filters: `Filter.N.Name` and `Filter.N.Value.M`.
    pub fn filters(&self) -> Vec<Filter> {
        self.members("Filter")
            .into_iter()
            .filter_map(|m| {
                Some(Filter {
                    name: m.get("Name")?.to_string(),
                    values: m.list("Value"),
                })
            })
            .collect()
    }

    /// Key/value pairs under `PREFIX.N.Key` and `PREFIX.N.Value`.
    pub fn tags(&self, prefix: &str) -> BTreeMap<String, String> {
        self.members(prefix)
            .into_iter()
            .filter_map(|m| {
                Some((
                    m.get("Key")?.to_string(),
                    m.get("Value").unwrap_or("").to_string(),
                ))
            })
            .collect()
    }
}

/// XML text with `&`, `<`, `>`, `"`, `'` escaped, and the control characters XML 1.0 allows
/// (tab, newline, carriage return) as character references so they survive parsing.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\r' => out.push_str("&#xD;"),
            c => out.push(c),
        }
    }
    out
}

/// A small XML writer: `open`/`close` elements, `leaf` text elements (escaped).
#[derive(Default)]
pub struct Xml {
    out: String,
}

impl Xml {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn open(&mut self, name: &str) -> &mut Self {
        let _ = write!(self.out, "<{name}>");
        self
    }

    pub fn open_ns(&mut self, name: &str, namespace: &str) -> &mut Self {
        let _ = write!(self.out, "<{name} xmlns=\"{namespace}\">");
        self
    }

    pub fn close(&mut self, name: &str) -> &mut Self {
        let _ = write!(self.out, "</{name}>");
        self
    }

    pub fn leaf(&mut self, name: &str, text: impl AsRef<str>) -> &mut Self {
        let _ = write!(self.out, "<{name}>{}</{name}>", escape(text.as_ref()));
        self
    }

    /// Escaped text inside the current element.
    pub fn text(&mut self, text: impl AsRef<str>) -> &mut Self {
        self.out.push_str(&escape(text.as_ref()));
        self
    }

    /// Already-written XML, as is.
    pub fn raw(&mut self, xml: &str) -> &mut Self {
        self.out.push_str(xml);
        self
    }

    /// A leaf only when there is a value.
    pub fn maybe(&mut self, name: &str, text: Option<impl AsRef<str>>) -> &mut Self {
        if let Some(text) = text {
            self.leaf(name, text);
        }
        self
    }

    /// `<name>` with children written by `body`, then `</name>`.
    pub fn node(&mut self, name: &str, body: impl FnOnce(&mut Xml)) -> &mut Self {
        self.open(name);
        body(self);
        self.close(name)
    }

    /// An EC2 list: `<name><item>…</item>…</name>`.
    pub fn items<T>(
        &mut self,
        name: &str,
        items: impl IntoIterator<Item = T>,
        mut each: impl FnMut(&mut Xml, T),
    ) -> &mut Self {
        self.open(name);
        for item in items {
            self.open("item");
            each(self, item);
            self.close("item");
        }
        self.close(name)
    }

    /// EC2's `<tagSet>`.
    pub fn tag_set(&mut self, tags: &BTreeMap<String, String>) -> &mut Self {
        self.items("tagSet", tags, |x, (k, v)| {
            x.leaf("key", k).leaf("value", v);
        })
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// AWS's timestamp text: `2025-06-01T12:00:00.000Z`.
pub fn iso(time: Timestamp) -> String {
    time.strftime("%Y-%m-%dT%H:%M:%S.%3fZ").to_string()
}

/// Epoch seconds as the JSON protocols carry timestamps.
pub fn epoch(time: Timestamp) -> serde_json::Value {
    serde_json::json!(time.as_millisecond() as f64 / 1000.0)
}

/// A request id in UUID form, from a counter: unique per server, reproducible per run.
pub fn request_id(n: u64) -> String {
    format!(
        "{:08x}-0000-4000-8000-{:012x}",
        n >> 32,
        n & 0xffff_ffff_ffff
    )
}

/// MD5 of `body`'s UTF-8 bytes, in hex (SQS's `MD5OfBody`).
pub fn md5_hex(body: &str) -> String {
    use md5::{Digest, Md5};
    let digest = Md5::digest(body.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A `Code: message` text (how the fake's seam errors carry AWS's code) split into its parts;
/// `fallback` is the code when the text has none.
pub fn code_and_message(text: &str, fallback: &str) -> (String, String) {
    match text.split_once(": ") {
        Some((code, message))
            if !code.is_empty() && code.chars().all(|c| c.is_ascii_alphanumeric() || c == '.') =>
        {
            (code.to_string(), message.to_string())
        }
        _ => (fallback.to_string(), text.to_string()),
    }
}
