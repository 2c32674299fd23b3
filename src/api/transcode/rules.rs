//! The REST mapping read from the `google.api.http` annotations of the API's own
//! descriptors (the grpc-gateway idea), so REST follows the proto without per-method code.

use http::Method;
use prost_reflect::{DescriptorPool, MessageDescriptor, Value};

#[derive(Debug, Clone, PartialEq)]
pub enum Segment {
    Literal(String),
    /// A path variable bound to a (possibly nested) request field.
    Field(String),
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub method: Method,
    pub segments: Vec<Segment>,
    /// Custom verb after `:` in the last segment, as in `{name}:restart`.
    pub verb: Option<String>,
    /// `*` for the whole body, a field name, or empty for none.
    pub body: String,
    /// `/package.Service/Method`.
    pub grpc_path: String,
    pub input: MessageDescriptor,
    pub output: MessageDescriptor,
    /// The method answers with a stream of messages (REST: one JSON object per line).
    pub streaming: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    #[error("decoding the API descriptors: {0}")]
    Descriptor(#[from] prost_reflect::DescriptorError),
    #[error("the descriptors lack google.api.http")]
    NoAnnotation,
    #[error("{method}: bad path template {template:?}")]
    Template { method: String, template: String },
}

fn parse_template(template: &str) -> Option<(Vec<Segment>, Option<String>)> {
    let path = template.strip_prefix('/')?;
    let (path, verb) = match path.rsplit_once(':') {
        // A ':' after the last '/' is a custom verb.
        Some((p, v)) if !v.contains('/') && !v.contains('}') => (p, Some(v.to_string())),
        _ => (path, None),
    };
    let segments = path
        .split('/')
        .map(
            |s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(field) => Segment::Field(field.to_string()),
                None => Segment::Literal(s.to_string()),
            },
        )
        .collect();
    Some((segments, verb))
}

/// Every REST rule of every service in `pool`.
pub fn rules(descriptor_set: &[u8]) -> Result<Vec<Rule>, RuleError> {
    let pool = DescriptorPool::decode(descriptor_set)?;
    let http = pool
        .get_extension_by_name("google.api.http")
        .ok_or(RuleError::NoAnnotation)?;
    let mut out = Vec::new();
    for service in pool.services() {
        for m in service.methods() {
            let options = m.options();
            let Value::Message(rule) = options.get_extension(&http).into_owned() else {
                continue;
            };
            let text = |name: &str| {
                rule.get_field_by_name(name)
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default()
            };
            let (method, template) = ["get", "post", "put", "delete", "patch"]
                .iter()
                .map(|verb| (verb, text(verb)))
                .find(|(_, t)| !t.is_empty())
                .map(|(verb, t)| (verb.to_uppercase(), t))
                .unwrap_or_default();
            if template.is_empty() {
                continue;
            }
            let (segments, verb) =
                parse_template(&template).ok_or_else(|| RuleError::Template {
                    method: m.full_name().into(),
                    template: template.clone(),
                })?;
            out.push(Rule {
                method: Method::from_bytes(method.as_bytes()).unwrap_or(Method::GET),
                segments,
                verb,
                body: text("body"),
                grpc_path: format!("/{}/{}", service.full_name(), m.name()),
                input: m.input(),
                output: m.output(),
                streaming: m.is_server_streaming(),
            });
        }
    }
    Ok(out)
}

impl Rule {
    /// Path variables when `path` matches this rule.
    pub fn matches(&self, method: &Method, path: &str) -> Option<Vec<(String, String)>> {
        if *method != self.method {
            return None;
        }
        let path = path.strip_prefix('/')?;
        let (path, verb) = match (&self.verb, path.rsplit_once(':')) {
            (Some(_), Some((p, v))) if !v.contains('/') => (p, Some(v)),
            _ => (path, None),
        };
        if verb != self.verb.as_deref() {
            return None;
        }
        let parts: Vec<&str> = path.split('/').collect();
        if parts.len() != self.segments.len() {
            return None;
        }
        let mut vars = Vec::new();
        for (seg, part) in self.segments.iter().zip(parts) {
            match seg {
                Segment::Literal(l) if l == part => {}
                Segment::Literal(_) => return None,
                Segment::Field(f) if !part.is_empty() => {
                    vars.push((f.clone(), percent_decode(part)))
                }
                Segment::Field(_) => return None,
            }
        }
        Some(vars)
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        // On bytes: a `%` before a multi-byte character is no escape (and no char boundary).
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = |b: u8| char::from(b).to_digit(16);
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by fuzz/rest_transcode: `%` before a multi-byte character split it.
    #[test]
    fn percent_before_a_multibyte_character_is_kept_as_is() {
        assert_eq!(percent_decode("a%\u{e9}b"), "a%\u{e9}b");
        assert_eq!(percent_decode("%?%d%m%aa"), "%?%d%m\u{fffd}");
        assert_eq!(percent_decode("team%2Da"), "team-a");
        assert_eq!(percent_decode("100%"), "100%");
        let rules = rules(crate::proto::FILE_DESCRIPTOR_SET).expect("rules");
        let path = "/apis/kairship.io/v1alpha1/instances/x%\u{e9}";
        let hit = rules.iter().find_map(|r| r.matches(&Method::GET, path));
        assert_eq!(
            hit,
            Some(vec![("name".to_string(), "x%\u{e9}".to_string())])
        );
    }

    #[test]
    fn reads_the_pinned_paths_from_the_descriptors() {
        let rules = rules(crate::proto::FILE_DESCRIPTOR_SET).expect("rules");
        let find = |m: Method, p: &str| {
            rules
                .iter()
                .find_map(|r| r.matches(&m, p).map(|v| (r.grpc_path.clone(), v)))
        };
        let (path, vars) = find(Method::GET, "/apis/kairship.io/v1alpha1/instances/prod-eu")
            .expect("get instance");
        assert_eq!(path, "/kairship.v1alpha1.InstanceService/GetInstance");
        assert_eq!(vars, vec![("name".to_string(), "prod-eu".to_string())]);
        assert_eq!(
            find(Method::GET, "/apis/kairship.io/v1alpha1/instances")
                .expect("list")
                .0,
            "/kairship.v1alpha1.InstanceService/ListInstances"
        );
        assert_eq!(
            find(Method::GET, "/apis/kairship.io/v1alpha1/instances/a/stats")
                .expect("stats")
                .0,
            "/kairship.v1alpha1.InstanceService/GetInstanceStats"
        );
        assert_eq!(
            find(
                Method::POST,
                "/apis/kairship.io/v1alpha1/instances/a:restart"
            )
            .expect("restart")
            .0,
            "/kairship.v1alpha1.SupervisorService/RestartInstance"
        );
        assert_eq!(
            find(Method::GET, "/apis/kairship.io/v1alpha1/actors")
                .expect("actors")
                .0,
            "/kairship.v1alpha1.SupervisorService/ListActors"
        );
        assert!(find(Method::DELETE, "/apis/kairship.io/v1alpha1/actors").is_none());
        // A GET never reaches the restart verb (the name "a:restart" then fails validation).
        assert_ne!(
            find(
                Method::GET,
                "/apis/kairship.io/v1alpha1/instances/a:restart"
            )
            .map(|f| f.0)
            .as_deref(),
            Some("/kairship.v1alpha1.SupervisorService/RestartInstance")
        );
    }
}
