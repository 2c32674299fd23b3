//! Kubernetes' protobuf encoding, decoded for the objects kubectl's typed `create`
//! subcommands send (kubectl 1.33 and later send protobuf there): ConfigMaps, Secrets,
//! Namespaces, ServiceAccounts, Services, Pods, Deployments, Jobs and RBAC objects. The
//! field numbers are those of the Kubernetes API's `generated.proto` files; a field this
//! table does not know fails the request naming it rather than being dropped.
//!
//! A body is `k8s\0` followed by a `runtime.Unknown` message: the object's apiVersion
//! and kind, and its own message as bytes.

use base64::Engine;
use serde_json::{Map, Value};

use kairship_wire::status::{ApiError, ApiResult};

const MAGIC: &[u8] = b"k8s\0";

mod messages;

use messages::{kind_desc, Desc, Field, Ty};
use Ty::*;

/// Decodes a protobuf request body into the object's JSON form.
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    let unknown = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| ApiError::bad_request("protobuf body without the k8s\\0 prefix"))?;
    let mut type_meta = (String::new(), String::new());
    let mut raw: &[u8] = &[];
    for item in Reader(unknown) {
        let (n, wire) = item?;
        match (n, wire) {
            (1, Wire::Len(b)) => {
                for item in Reader(b) {
                    match item? {
                        (1, Wire::Len(s)) => type_meta.0 = utf8(s)?,
                        (2, Wire::Len(s)) => type_meta.1 = utf8(s)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Len(b)) => raw = b,
            _ => {}
        }
    }
    let (api_version, kind) = type_meta;
    let desc = kind_desc(&api_version, &kind).ok_or_else(|| {
        ApiError::unsupported_media_type(&format!(
            "application/vnd.kubernetes.protobuf for {kind} ({api_version}); send JSON"
        ))
    })?;
    let mut obj = message(raw, desc)?;
    obj.insert("apiVersion".into(), api_version.into());
    obj.insert("kind".into(), kind.into());
    Ok(Value::Object(obj))
}

enum Wire<'a> {
    Varint(u64),
    Len(&'a [u8]),
    Fixed,
}

/// The fields of one message, in order.
struct Reader<'a>(&'a [u8]);

impl<'a> Iterator for Reader<'a> {
    type Item = ApiResult<(u32, Wire<'a>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        Some(self.read())
    }
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> ApiResult<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self.0.split_first().ok_or_else(truncated)?;
            self.0 = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(truncated())
    }

    fn take(&mut self, n: usize) -> ApiResult<&'a [u8]> {
        if self.0.len() < n {
            return Err(truncated());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn read(&mut self) -> ApiResult<(u32, Wire<'a>)> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| truncated())?;
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Wire::Fixed
            }
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| truncated())?;
                Wire::Len(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Wire::Fixed
            }
            t => {
                return Err(ApiError::bad_request(format!(
                    "protobuf body: unsupported wire type {t}"
                )))
            }
        };
        Ok((number, wire))
    }
}

fn truncated() -> ApiError {
    ApiError::bad_request("protobuf body is truncated")
}

fn utf8(b: &[u8]) -> ApiResult<String> {
    String::from_utf8(b.to_vec())
        .map_err(|_| ApiError::bad_request("protobuf body: a string is not UTF-8"))
}

fn message(b: &[u8], desc: &Desc) -> ApiResult<Map<String, Value>> {
    let mut out = Map::new();
    for item in Reader(b) {
        let (n, wire) = item?;
        let Some(Field(_, name, ty, repeated, keep_zero)) = desc.fields.iter().find(|fd| fd.0 == n)
        else {
            return Err(ApiError::bad_request(format!(
                "the simulator does not decode protobuf field {n} of {}; send JSON",
                desc.name
            )));
        };
        let value = scalar_or_message(*ty, wire, &mut out, name)?;
        let Some(value) = value else { continue };
        if *repeated {
            let list = out.entry(*name).or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(a) = list {
                a.push(value);
            }
        } else if *keep_zero || !is_zero(&value) {
            out.insert((*name).into(), value);
        }
    }
    Ok(out)
}

/// One field's value; maps add their entry to `out` themselves (and answer `None`).
fn scalar_or_message(
    ty: Ty,
    wire: Wire<'_>,
    out: &mut Map<String, Value>,
    name: &str,
) -> ApiResult<Option<Value>> {
    let wrong = || {
        ApiError::bad_request(format!(
            "protobuf body: field {name} has the wrong wire type"
        ))
    };
    Ok(Some(match (ty, wire) {
        (Str, Wire::Len(b)) => Value::String(utf8(b)?),
        (Bool, Wire::Varint(v)) => Value::Bool(v != 0),
        // Two's complement: int32 and int64 are written as 64-bit varints.
        (Int, Wire::Varint(v)) => Value::from(v as i64),
        (Msg(d), Wire::Len(b)) => Value::Object(message(b, d)?),
        (Time, Wire::Len(b)) => time(b)?,
        (IntOrString, Wire::Len(b)) => int_or_string(b)?,
        (Skip, _) => return Ok(None),
        (MapStr | MapBytes | MapQuantity, Wire::Len(b)) => {
            let (mut key, mut value) = (String::new(), Value::Null);
            for item in Reader(b) {
                match (item?, ty) {
                    ((1, Wire::Len(k)), _) => key = utf8(k)?,
                    ((2, Wire::Len(v)), MapStr) => value = Value::String(utf8(v)?),
                    ((2, Wire::Len(v)), MapBytes) => {
                        value = Value::String(base64::engine::general_purpose::STANDARD.encode(v))
                    }
                    ((2, Wire::Len(v)), _) => value = quantity(v)?,
                    _ => {}
                }
            }
            if value.is_null() {
                value = Value::String(String::new());
            }
            let map = out.entry(name).or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(m) = map {
                m.insert(key, value);
            }
            return Ok(None);
        }
        _ => return Err(wrong()),
    }))
}

/// A Go zero value, which the JSON form leaves out (`omitempty`).
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
    }
}

fn time(b: &[u8]) -> ApiResult<Value> {
    let mut seconds = 0i64;
    for item in Reader(b) {
        if let (1, Wire::Varint(v)) = item? {
            seconds = v as i64;
        }
    }
    if seconds == 0 {
        return Ok(Value::Null);
    }
    let t = jiff::Timestamp::from_second(seconds)
        .map_err(|_| ApiError::bad_request("protobuf body: a time is out of range"))?;
    Ok(Value::String(t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()))
}

fn int_or_string(b: &[u8]) -> ApiResult<Value> {
    let (mut is_string, mut int, mut string) = (false, 0i64, String::new());
    for item in Reader(b) {
        match item? {
            (1, Wire::Varint(t)) => is_string = t == 1,
            (2, Wire::Varint(v)) => int = v as i64,
            (3, Wire::Len(s)) => string = utf8(s)?,
            _ => {}
        }
    }
    Ok(match is_string {
        true => Value::String(string),
        false => Value::from(int),
    })
}

fn quantity(b: &[u8]) -> ApiResult<Value> {
    let mut s = String::new();
    for item in Reader(b) {
        if let (1, Wire::Len(v)) = item? {
            s = utf8(v)?;
        }
    }
    Ok(Value::String(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![
            u8::try_from((n << 3) | 2).unwrap_or(0),
            u8::try_from(payload.len()).unwrap_or(0),
        ];
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn decodes_a_config_map_as_kubectl_sends_it() {
        let meta = [field(1, b"web"), field(3, b"")].concat();
        let entry = [field(1, b"a"), field(2, b"1")].concat();
        let raw = [field(1, &meta), field(2, &entry)].concat();
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        let v = decode(&body).expect("decodes");
        assert_eq!(
            v,
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"}, "data": {"a": "1"}})
        );
        let unknown = [field(1, &meta), field(9, b"x")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &unknown)].concat();
        let e = decode(&body).expect_err("unknown field");
        assert!(e.message.contains("field 9 of ConfigMap"), "{}", e.message);
    }
}
