//! The Cluster `proxy` subresource as karmada-aggregated-apiserver serves it:
//! `/apis/cluster.karmada.io/v1alpha1/clusters/{name}/proxy/{member API path}` reads the
//! member cluster's own objects (GET only: get and list), as the caller: Karmada's proxy
//! impersonates the caller on the member, so the member's own RBAC decides.

use axum::body::Body;
use http::{Method, Request, Response, StatusCode};

use super::resource::{list_response, Query};
use super::{json_response, ApiServer};
use crate::rbac;
use kairship_wire::routes::{self, Route};
use kairship_wire::status::{ApiError, ApiResult};

impl ApiServer {
    pub(super) fn cluster_proxy(
        &self,
        req: &Request<Body>,
        cluster: &str,
        path: &str,
        who: &rbac::Identity,
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
        let route = routes::parse(path);
        let watch = Query::parse(req.uri().query().unwrap_or(""))?.flag("watch");
        let attrs = rbac::attributes(req.method(), path, &route, watch);
        if rbac::authorize(&member, who, &attrs).is_none() {
            return Err(rbac::forbidden(who, &attrs));
        }
        match route {
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
