//! Server-side apply's merge of an applied configuration into the live object, and the
//! removal of fields an applier stopped applying.

use serde_json::Value;

use super::path::Elem;
use super::sets::{children, level, Level};
use crate::openapi::walk::Node;

/// Merges `config` into `live`: maps and structs field by field, keyed lists item by
/// key (new items appended), sets as a union, anything atomic replaced.
pub fn merge(live: &mut Value, config: &Value, node: Option<Node<'_>>, root: bool) {
    let l = match (root, node) {
        (true, None) => Level::Map(None),
        _ => level(config, node),
    };
    match &l {
        Level::Leaf => *live = config.clone(),
        Level::Fields(_) | Level::Map(_) => {
            let Some(target) = live.as_object_mut() else {
                *live = config.clone();
                return;
            };
            for (e, c, n) in children(config, &l) {
                let Elem::Field(k) = e else { continue };
                match target.get_mut(&k) {
                    Some(existing) => merge(existing, c, n, false),
                    None => {
                        target.insert(k, c.clone());
                    }
                }
            }
        }
        Level::Set | Level::Keyed(..) => {
            let Some(target) = live.as_array_mut() else {
                *live = config.clone();
                return;
            };
            for (e, c, n) in children(config, &l) {
                match target.iter_mut().find(|i| e.names_item(i)) {
                    Some(existing) => merge(existing, c, n, false),
                    None => target.push(c.clone()),
                }
            }
        }
    }
}

/// Removes the node at `path`; a map or list it leaves empty goes too when `drop_empty`
/// (built-in kinds omit empty maps and lists when they are written out).
pub fn remove(obj: &mut Value, path: &[Elem], drop_empty: bool) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let Some(parent) = get_mut(obj, parents) else {
        return;
    };
    match (last, parent) {
        (Elem::Field(k), Value::Object(m)) => {
            m.remove(k);
        }
        (e, Value::Array(items)) => items.retain(|i| !e.names_item(i)),
        _ => return,
    }
    let now_empty = match get_mut(obj, parents) {
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    };
    if drop_empty && now_empty && !parents.is_empty() {
        remove(obj, parents, drop_empty);
    }
}

fn get_mut<'v>(obj: &'v mut Value, path: &[Elem]) -> Option<&'v mut Value> {
    let mut cur = obj;
    for e in path {
        cur = match (e, cur) {
            (Elem::Field(k), Value::Object(m)) => m.get_mut(k)?,
            (e, Value::Array(items)) => items.iter_mut().find(|i| e.names_item(i))?,
            _ => return None,
        };
    }
    Some(cur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merges_maps_and_removes_with_empty_parents() {
        let mut live = json!({"data": {"a": "1", "b": "2"}, "x": [1]});
        merge(
            &mut live,
            &json!({"data": {"a": "9"}, "x": [2]}),
            None,
            true,
        );
        assert_eq!(live, json!({"data": {"a": "9", "b": "2"}, "x": [2]}));
        let p = |k: &str| vec![Elem::Field("data".into()), Elem::Field(k.into())];
        remove(&mut live, &p("a"), true);
        remove(&mut live, &p("b"), true);
        assert_eq!(live, json!({"x": [2]}));
    }
}
