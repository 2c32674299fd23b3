//! PolicyService: PropagationPolicies and OverridePolicies, namespaced and cluster-scoped.

use kube::api::DynamicObject;
use serde_json::Value;
use tonic::{Request, Response, Status};

use super::on_instance;
use crate::api::context::ApiContext;
use crate::api::convert;
use crate::api::request::Verb;
use crate::api::{objects, paging};
use crate::cache::caches::Kind;
use crate::error::{check_name, ApiError};
use crate::proto::{self, policy_service_server::PolicyService};

pub struct Policies(pub ApiContext);

pub fn policy(kind: Kind, o: &DynamicObject) -> proto::Policy {
    let d = &o.data;
    let s = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    proto::Policy {
        metadata: Some(convert::meta(&o.metadata)),
        kind: kind.resource().kind,
        resource_selectors: d
            .pointer("/spec/resourceSelectors")
            .and_then(Value::as_array)
            .map(|sel| {
                sel.iter()
                    .map(|r| proto::ResourceSelector {
                        api_version: s(r, "apiVersion"),
                        kind: s(r, "kind"),
                        namespace: s(r, "namespace"),
                        name: s(r, "name"),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        cluster_names: d
            .pointer("/spec/placement/clusterAffinity/clusterNames")
            .and_then(Value::as_array)
            .map(|n| {
                n.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        priority: d
            .pointer("/spec/priority")
            .and_then(Value::as_i64)
            .and_then(|p| i32::try_from(p).ok())
            .unwrap_or_default(),
        object_json: convert::object_json(o),
    }
}

#[tonic::async_trait]
impl PolicyService for Policies {
    async fn list_policies(
        &self,
        req: Request<proto::ListPoliciesRequest>,
    ) -> Result<Response<proto::ListPoliciesResponse>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let req = req.into_inner();
        let (items, filtered, _) = objects::cached(
            &on,
            &req.kind,
            &Kind::POLICIES,
            &req.namespace,
            req.options.as_ref(),
        )
        .await?;
        let page = paging::paginate(items, req.options.as_ref())?;
        Ok(Response::new(proto::ListPoliciesResponse {
            policies: page
                .items
                .iter()
                .map(|(k, o)| Ok(policy(*k, &objects::decoded(o)?)))
                .collect::<Result<_, ApiError>>()?,
            next_page_token: page.next_page_token,
            filtered,
        }))
    }

    async fn get_policy(
        &self,
        req: Request<proto::GetPolicyRequest>,
    ) -> Result<Response<proto::Policy>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let req = req.into_inner();
        let kind = objects::kind("kind", &req.kind, &Kind::POLICIES)?;
        check_name("name", &req.name)?;
        let namespace = match kind.namespaced() {
            true => {
                check_name("namespace", &req.namespace)?;
                Some(req.namespace.as_str())
            }
            false => None,
        };
        let reads = on.read(Verb::Get, kind, namespace, Some(&req.name)).await?;
        let o = reads
            .store(kind)?
            .get(namespace, &req.name)
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "{} {:?} not found in instance {:?}",
                    req.kind, req.name, req.instance
                ))
            })?;
        Ok(Response::new(policy(kind, &objects::decoded(&o)?)))
    }

    async fn create_policy(
        &self,
        req: Request<proto::CreatePolicyRequest>,
    ) -> Result<Response<proto::Policy>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let req = req.into_inner();
        let (kind, obj) = objects::parse(&req.object_json, &Kind::POLICIES)?;
        Ok(Response::new(policy(
            kind,
            &objects::create(&on, kind, &obj).await?,
        )))
    }

    async fn update_policy(
        &self,
        req: Request<proto::UpdatePolicyRequest>,
    ) -> Result<Response<proto::Policy>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let req = req.into_inner();
        let (kind, obj) = objects::parse(&req.object_json, &Kind::POLICIES)?;
        Ok(Response::new(policy(
            kind,
            &objects::replace(&on, kind, &obj).await?,
        )))
    }

    async fn delete_policy(
        &self,
        req: Request<proto::DeletePolicyRequest>,
    ) -> Result<Response<proto::DeletePolicyResponse>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let req = req.into_inner();
        let kind = objects::kind("kind", &req.kind, &Kind::POLICIES)?;
        check_name("name", &req.name)?;
        objects::delete(
            &on,
            kind,
            Some(req.namespace.as_str()).filter(|n| !n.is_empty()),
            &req.name,
        )
        .await?;
        Ok(Response::new(proto::DeletePolicyResponse {}))
    }
}
