//! Tables of stored objects, with the columns the wire crate knows for their kind.

use kairship_wire::table::{columns_for, render};
use serde_json::Value;

use crate::resources::ResourceDef;
use crate::store::StoredObject;

pub use kairship_wire::table::wanted;

/// A Table of stored objects of `def`.
pub fn table(
    def: &ResourceDef,
    objs: &[&StoredObject],
    with_columns: bool,
    list_meta: Value,
) -> Value {
    let values: Vec<&Value> = objs.iter().map(|o| &o.value).collect();
    render(&columns_for(def), &values, with_columns, list_meta)
}
