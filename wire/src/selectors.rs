//! Label and field selectors with the syntax kube-apiserver accepts.

use serde_json::Value;

use crate::status::{ApiError, ApiResult};

#[derive(Debug, Clone, PartialEq)]
enum Req {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed `labelSelector`; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<Req>);

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 317
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

impl LabelSelector {
    pub fn parse(s: &str) -> ApiResult<Self> {
        let bad = |part: &str, why: &str| {
            ApiError::bad_request(format!(
                "unable to parse requirement: labelSelector {part:?}: {why}"
            ))
        };
        let mut reqs = Vec::new();
        for part in split_top(s)
            .into_iter()
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let req = if let Some(k) = part.strip_prefix('!') {
                Req::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                Req::NotEq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==") {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('=') {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, rest)) = split_set_op(part, " notin ") {
                Req::NotIn(
                    k,
                    parse_set(rest).ok_or_else(|| bad(part, "expected a set like (a,b)"))?,
                )
            } else if let Some((k, rest)) = split_set_op(part, " in ") {
                Req::In(
                    k,
                    parse_set(rest).ok_or_else(|| bad(part, "expected a set like (a,b)"))?,
                )
            } else {
                Req::Exists(part.to_string())
            };
            let (key, values): (&str, Vec<&str>) = match &req {
                Req::Eq(k, v) | Req::NotEq(k, v) => (k, vec![v.as_str()]),
                Req::In(k, vs) | Req::NotIn(k, vs) => (k, vs.iter().map(String::as_str).collect()),
                Req::Exists(k) | Req::NotExists(k) => (k, vec![]),
            };
            if !valid_key(key) {
                return Err(bad(part, "invalid label key"));
            }
            if let Some(v) = values.iter().find(|v| !valid_value(v)) {
                return Err(bad(part, &format!("invalid label value {v:?}")));
            }
            reqs.push(req);
        }
        Ok(Self(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A label every selected object has with one value (`k=v`, `k==v`, `k in (v)`), for
    /// a store that indexes objects by label to start from.
    pub fn required_label(&self) -> Option<(&str, &str)> {
        self.0.iter().find_map(|r| match r {
            Req::Eq(k, v) => Some((k.as_str(), v.as_str())),
            Req::In(k, vs) if vs.len() == 1 => Some((k.as_str(), vs[0].as_str())),
            _ => None,
        })
    }

    /// Whether an object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.get("metadata").and_then(|m| m.get("labels"));
        self.matches_labels(|k| labels.and_then(|l| l.get(k)).and_then(Value::as_str))
    }

    /// Whether labels read by `get` match, for callers holding typed objects.
    pub fn matches_labels<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::NotEq(k, v) => get(k) != Some(v.as_str()),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Req::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
        })
    }
}

fn split_set_op(part: &str, op: &str) -> Option<(String, String)> {
    let i = part.find(op)?;
    Some((
        part[..i].trim().to_string(),
        part[i + op.len()..].trim().to_string(),
    ))
}

fn parse_set(s: String) -> Option<Vec<String>> {
    let inner = s.strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

/// A parsed `fieldSelector` over `metadata.name` and `metadata.namespace`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    pub fn parse(s: &str) -> ApiResult<Self> {
        let mut reqs = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, eq, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: {part:?}; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            if field != "metadata.name" && field != "metadata.namespace" {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field} (supported: metadata.name, metadata.namespace)"
                )));
            }
            reqs.push((field.to_string(), eq, value.trim().to_string()));
        }
        Ok(Self(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, obj: &Value) -> bool {
        let meta = obj.get("metadata");
        self.matches_metadata(|key| meta.and_then(|m| m.get(key)).and_then(Value::as_str))
    }

    /// Whether metadata fields (`name`, `namespace`) read by `get` match.
    pub fn matches_metadata<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|(field, eq, value)| {
            let actual = get(field.trim_start_matches("metadata.")).unwrap_or("");
            (actual == value) == *eq
        })
    }

    /// The single name an equality selector pins, which lets a list skip a full scan.
    pub fn pinned_name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(f, eq, _)| f == "metadata.name" && *eq)
            .map(|(_, _, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns1", "labels": labels}})
    }

    #[test]
    fn label_selector_operators() {
        let o = obj(json!({"app": "nginx", "tier": "web"}));
        for (sel, want) in [
            ("app=nginx", true),
            ("app==nginx,tier=web", true),
            ("app!=nginx", false),
            ("app in (nginx, redis)", true),
            ("app notin (nginx)", false),
            ("tier", true),
            ("!tier", false),
            ("missing notin (x)", true),
            ("", true),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).expect(sel).matches(&o),
                want,
                "{sel}"
            );
        }
    }

    #[test]
    fn label_selector_rejects_garbage() {
        assert!(LabelSelector::parse("app in nginx").is_err());
        assert!(LabelSelector::parse("a b=c").is_err());
        assert!(LabelSelector::parse("app=bad value!").is_err());
    }

    #[test]
    fn field_selector_name_and_namespace() {
        let o = obj(json!({}));
        assert!(
            FieldSelector::parse("metadata.name=a,metadata.namespace=ns1")
                .expect("ok")
                .matches(&o)
        );
        assert!(!FieldSelector::parse("metadata.namespace!=ns1")
            .expect("ok")
            .matches(&o));
        assert_eq!(
            FieldSelector::parse("metadata.name=a")
                .expect("ok")
                .pinned_name(),
            Some("a")
        );
        let err = FieldSelector::parse("spec.nodeName=x").expect_err("unsupported");
        assert!(err.message.contains("spec.nodeName"));
    }
}
