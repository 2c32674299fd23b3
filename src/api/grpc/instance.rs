//! InstanceService: Instances live in the host cluster; reads come from the API's cache.

use kube::api::{Api, DeleteParams, PostParams};
use tonic::{Request, Response, Status};

use crate::api::context::ApiContext;
use crate::api::convert;
use crate::api::paging;
use crate::auth::Role;
use crate::crd::Instance;
use crate::error::{check_name, ApiError};
use crate::proto::{self, instance_service_server::InstanceService};

pub struct Instances(pub ApiContext);

impl Instances {
    fn api(&self) -> Api<Instance> {
        Api::all(self.0.tree.host().clone())
    }
}

#[tonic::async_trait]
impl InstanceService for Instances {
    async fn create_instance(
        &self,
        req: Request<proto::CreateInstanceRequest>,
    ) -> Result<Response<proto::Instance>, Status> {
        let caller = self.0.caller(req.metadata())?;
        let inst = req
            .into_inner()
            .instance
            .ok_or_else(|| ApiError::invalid("instance", "is required"))?;
        let name = inst
            .metadata
            .as_ref()
            .map(|m| m.name.clone())
            .unwrap_or_default();
        check_name("instance.metadata.name", &name)?;
        self.0
            .authorize(&caller, Role::Admin, &name, "create instances")?;
        let mut spec = convert::instance_spec(inst.spec.as_ref())?;
        if let Some(m) = spec.managed.as_mut() {
            // The defaults written into the Instance, so it describes itself.
            let defaults = &self.0.tree.settings().managed_defaults;
            let own = m
                .karmada_spec
                .take()
                .unwrap_or_else(|| serde_json::json!({}));
            let full = defaults.under(&own)?;
            m.karmada_spec = Some(full).filter(|f| f.as_object().is_some_and(|o| !o.is_empty()));
        }
        let mut obj = Instance::new(&name, spec);
        obj.metadata.labels = inst
            .metadata
            .map(|m| m.labels.into_iter().collect())
            .filter(|l: &std::collections::BTreeMap<_, _>| !l.is_empty());
        let created = self
            .0
            .host_call(
                &format!("instance {name:?}"),
                self.api().create(&PostParams::default(), &obj),
            )
            .await?;
        Ok(Response::new(convert::instance(&created)))
    }

    async fn get_instance(
        &self,
        req: Request<proto::GetInstanceRequest>,
    ) -> Result<Response<proto::Instance>, Status> {
        let caller = self.0.caller(req.metadata())?;
        let name = req.into_inner().name;
        check_name("name", &name)?;
        self.0
            .authorize(&caller, Role::View, &name, "get instances")?;
        let inst = self.0.instance(&name)?;
        Ok(Response::new(convert::instance(&inst)))
    }

    async fn list_instances(
        &self,
        req: Request<proto::ListInstancesRequest>,
    ) -> Result<Response<proto::ListInstancesResponse>, Status> {
        let caller = self.0.caller(req.metadata())?;
        let visible = self.0.auth.viewer(&caller);
        let opts = req.into_inner().options;
        let sel = paging::selector(opts.as_ref())?;
        let items = self
            .0
            .instances()
            .into_iter()
            .filter(|i| visible(i.metadata.name.as_deref().unwrap_or_default()))
            .filter(|i| paging::labels_match(&sel, i.metadata.labels.as_ref()))
            .map(|i| {
                (
                    i.metadata.name.clone().unwrap_or_default(),
                    convert::instance(&i),
                )
            })
            .collect();
        let page = paging::paginate(items, opts.as_ref())?;
        Ok(Response::new(proto::ListInstancesResponse {
            instances: page.items,
            next_page_token: page.next_page_token,
        }))
    }

    async fn update_instance(
        &self,
        req: Request<proto::UpdateInstanceRequest>,
    ) -> Result<Response<proto::Instance>, Status> {
        let caller = self.0.caller(req.metadata())?;
        let inst = req
            .into_inner()
            .instance
            .ok_or_else(|| ApiError::invalid("instance", "is required"))?;
        let meta = inst.metadata.unwrap_or_default();
        check_name("instance.metadata.name", &meta.name)?;
        self.0
            .authorize(&caller, Role::Admin, &meta.name, "update instances")?;
        let spec = convert::instance_spec(inst.spec.as_ref())?;
        let what = format!("instance {:?}", meta.name);
        let mut current = self.0.host_call(&what, self.api().get(&meta.name)).await?;
        // An explicit resourceVersion is a precondition; none means "the latest".
        if !meta.resource_version.is_empty() {
            current.metadata.resource_version = Some(meta.resource_version);
        }
        // Merge: what the request does not model (the rest of the Karmada spec) survives.
        let mut spec = spec;
        if let (Some(old), Some(new)) = (current.spec.managed.as_ref(), spec.managed.as_mut()) {
            let mut merged = old
                .karmada_spec
                .clone()
                .unwrap_or_else(|| serde_json::json!({}));
            if let Some(change) = new.karmada_spec.as_mut() {
                let defaults = &self.0.tree.settings().managed_defaults;
                defaults.follow_version(&merged, change);
                crate::crd::karmada_spec::merge(&mut merged, change);
            }
            new.karmada_spec =
                Some(merged).filter(|m| m.as_object().is_some_and(|o| !o.is_empty()));
            if new.namespace.is_none() {
                new.namespace = old.namespace.clone();
            }
        }
        current.spec = spec;
        if !meta.labels.is_empty() {
            current.metadata.labels = Some(meta.labels.into_iter().collect());
        }
        let updated = self
            .0
            .host_call(
                &what,
                self.api().replace(
                    &current.metadata.name.clone().unwrap_or_default(),
                    &PostParams::default(),
                    &current,
                ),
            )
            .await?;
        Ok(Response::new(convert::instance(&updated)))
    }

    async fn delete_instance(
        &self,
        req: Request<proto::DeleteInstanceRequest>,
    ) -> Result<Response<proto::DeleteInstanceResponse>, Status> {
        let caller = self.0.caller(req.metadata())?;
        let name = req.into_inner().name;
        check_name("name", &name)?;
        self.0
            .authorize(&caller, Role::Admin, &name, "delete instances")?;
        self.0
            .host_call(
                &format!("instance {name:?}"),
                self.api().delete(&name, &DeleteParams::default()),
            )
            .await?;
        Ok(Response::new(proto::DeleteInstanceResponse {}))
    }

    async fn get_instance_stats(
        &self,
        req: Request<proto::GetInstanceStatsRequest>,
    ) -> Result<Response<proto::InstanceStats>, Status> {
        let caller = self.0.caller(req.metadata())?;
        let name = req.into_inner().name;
        check_name("name", &name)?;
        self.0
            .authorize(&caller, Role::View, &name, "get instance stats")?;
        let inst = self.0.instance(&name)?;
        let status = inst.status.as_ref();
        let stats = status.and_then(|s| s.stats.as_ref()).ok_or_else(|| {
            ApiError::Unavailable(format!(
                "instance {name:?} has no stats yet (phase {:?})",
                status.map(|s| s.phase).unwrap_or_default()
            ))
        })?;
        Ok(Response::new(convert::stats(
            stats,
            status.and_then(|s| s.last_sync_time.as_deref()),
        )))
    }
}
