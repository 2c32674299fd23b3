//! The Cluster `proxy` subresource as karmada-aggregated-apiserver serves it:
//! `/apis/cluster.karmada.io/v1alpha1/clusters/{name}/proxy/{member API path}` reads the
//! member cluster's own objects (GET only: get and list).

use axum::body::Body;
use http::{Method, Request, Response, StatusCode};

use super::resource::{list_response, Query};
use super::{json_response, ApiServer};
use kairship_wire::routes::{self, Route};
use kairship_wire::status::{ApiError, ApiResult};

impl ApiServer {
    pub(super) fn cluster_proxy(
        &self,
        req: &Request<Body>,
        cluster: &str,
        path: &str,
    ) -> ApiResult<Response<Body>> {
        let members = self
            .members
            .read()
            .clone()
            .ok_or_else(|| ApiError::path_not_found(req.uri().path()))?;
        let clusters = self
            .store
            .lookup("cluster.karmada.io", "v1alpha1", "clusters")
            .ok_or_else(|| ApiError::path_not_found(req.uri().path()))?;
        let cluster_def = clusters.clone();
        self.store.get(&cluster_def, None, cluster)?;
        if req.method() != Method::GET {
            return Err(ApiError::method_not_allowed(req.method().as_str()));
        }
        let member = members.store(cluster)?;
        match routes::parse(path) {
            Route::Version => Ok(json_response(StatusCode::OK, &super::discovery::version())),
            Route::Resource(rp) => {
                let def = member
                    .lookup(&rp.group, &rp.version, &rp.plural)
                    .ok_or_else(|| ApiError::path_not_found(path))?;
                let api_version = def.api_version(&rp.version);
                let ns = rp.namespace.as_deref();
                match rp.name.as_deref() {
                    Some(name) => Ok(super::bytes_response(
                        StatusCode::OK,
                        member.get(&def, ns, name)?.render(&api_version),
                    )),
                    None => {
                        let q = Query::parse(req.uri().query().unwrap_or(""))?;
                        let page = member.list(&def, &q.filter(ns)?, None, None)?;
                        Ok(list_response(
                            &def,
                            &api_version,
                            page.items.iter().map(|o| &**o),
                            page.rv,
                            None,
                            None,
                        ))
                    }
                }
            }
            _ => Err(ApiError::path_not_found(path)),
        }
    }
}
