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
                match (
                    rp.subresource.as_deref(),
                    rp.plural.as_str(),
                    rp.name.as_deref(),
                ) {
                    (Some("log"), "pods", Some(name)) => {
                        let pod = member.get(&def, ns, name)?;
                        return pod_log(&pod.value, &format!("in cluster {cluster}"), req);
                    }
                    // Other subresources (exec, attach, portforward, ...) need a kubelet.
                    (Some(_), _, _) => return Err(ApiError::path_not_found(path)),
                    _ => {}
                }
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

/// A Pod's log as its kubelet would serve it, for the simulator's containers, which run
/// nothing: one line saying so. A container is needed when the Pod has several, and must
/// be one of them, as kube-apiserver answers.
pub(super) fn pod_log(
    pod: &serde_json::Value,
    place: &str,
    req: &Request<Body>,
) -> ApiResult<Response<Body>> {
    let query: Vec<(String, String)> = serde_urlencoded::from_str(req.uri().query().unwrap_or(""))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let container = query
        .iter()
        .find(|(k, _)| k == "container")
        .map(|(_, v)| v.as_str());
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let names: Vec<&str> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    let container = match (container, names.as_slice()) {
        (Some(c), _) if names.contains(&c) => c,
        (Some(c), _) => {
            return Err(ApiError::bad_request(format!(
                "container {c} is not valid for pod {name}"
            )))
        }
        (None, [only]) => only,
        (None, _) => {
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                names.join(" ")
            )))
        }
    };
    let started = pod["status"]["startTime"].as_str().unwrap_or_default();
    let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    let text = format!(
        "{started} container {container} of pod {name} started on {node} {place} (simulated: it runs no process and writes nothing more)\n"
    );
    let mut r = Response::new(Body::from(text));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    Ok(r)
}
