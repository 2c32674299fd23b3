//! Reads on a member cluster through Karmada's cluster proxy
//! (`/apis/cluster.karmada.io/v1alpha1/clusters/{cluster}/proxy/...`), as the caller: Karmada
//! impersonates them on the member, whose RBAC decides.

use serde_json::Value;

use crate::api::request::OnInstance;
use crate::error::ApiError;

/// The instance path that reaches `rest` (`/api/v1/...`) on `cluster`.
pub fn path(cluster: &str, rest: &str) -> String {
    format!("/apis/cluster.karmada.io/v1alpha1/clusters/{cluster}/proxy{rest}")
}

/// A JSON GET of `rest` on `cluster` as the caller, bounded by the instance call timeout;
/// errors name `what`.
pub async fn get(
    on: &OnInstance,
    cluster: &str,
    rest: &str,
    what: &str,
) -> Result<Value, ApiError> {
    let path = path(cluster, rest);
    on.live(what, |client| async move {
        let req = http::Request::get(path)
            .body(Vec::new())
            .map_err(kube::Error::HttpError)?;
        client.request::<Value>(req).await
    })
    .await
}
