//! The columns kubectl's Tables have for each cached kind, so `kubectl get` is answered
//! from the cache as the instance would print it: kube-apiserver's own printers for the
//! built-in kinds, and for Karmada's kinds the `additionalPrinterColumns` of the CRDs the
//! instance serves (read once per actor, on first use). Each cached object keeps its row.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kairship_wire::table::{builtin_columns, custom_columns, Column};
use parking_lot::Mutex;

use super::caches::Kind;

#[derive(Clone)]
pub struct Printers {
    columns: Arc<Mutex<BTreeMap<Kind, Arc<Vec<Column>>>>>,
    /// Bound of reading a CRD (`Settings::instance_call_timeout`).
    timeout: Duration,
}

impl Printers {
    pub fn new(timeout: Duration) -> Self {
        Self {
            columns: Arc::default(),
            timeout,
        }
    }

    /// `None` when the columns cannot be known (the Table then comes from the instance).
    pub async fn columns(&self, client: &kube::Client, kind: Kind) -> Option<Arc<Vec<Column>>> {
        if let Some(c) = self.columns.lock().get(&kind) {
            return Some(c.clone());
        }
        let ar = kind.resource();
        let columns = match builtin_columns(&ar.group, &ar.kind) {
            Some(c) => c,
            None if kind.is_crd() => {
                let path = format!(
                    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{}.{}",
                    ar.plural, ar.group
                );
                let req = http::Request::get(path).body(Vec::new()).ok()?;
                let crd: serde_json::Value =
                    tokio::time::timeout(self.timeout, client.request(req))
                        .await
                        .ok()?
                        .ok()?;
                let def = kairship_wire::resource::def_from_crd(&crd).ok()?;
                // The storage version comes first: the one the cache holds, or no Table here.
                if def.versions.first() != Some(&ar.version) {
                    return None;
                }
                custom_columns(&def.printer_columns)
            }
            None => return None,
        };
        let columns = Arc::new(columns);
        self.columns.lock().insert(kind, columns.clone());
        Some(columns)
    }
}
