//! InstanceService: Instances live in the host cluster; reads come from the API's cache.

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use tonic::{Request, Response, Status};

use crate::api::chain::Authorized;
use crate::api::context::ApiContext;
use crate::api::convert;
use crate::api::paging;
use crate::api::request::host;
use crate::crd::Instance;
use crate::error::{check_name, ApiError};
use crate::host::scope::{crd_url_prefix, OutOfScope};
use crate::proto::{self, instance_service_server::InstanceService};

pub struct Instances(pub ApiContext);

impl Instances {
    fn api(&self) -> Api<Instance> {
        Api::all(self.0.tree.host().clone())
    }
}

impl Instances {
    /// The request's own fields within what Kairship may touch on the host, named as the
    /// request names them.
    /// `current` with the update applied: the request's spec merged over the Karmada spec
    /// the request does not model, the namespace kept, the checks of a new Secret and of
    /// the managed spec, the operator's cache budget kept, and the request's labels.
    async fn merge_update(
        &self,
        caller: &crate::auth::Caller,
        current: &mut Instance,
        mut spec: crate::crd::InstanceSpec,
        meta: &proto::ObjectMeta,
        keep_schedule: bool,
    ) -> Result<(), ApiError> {
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
            // What the instance set itself over its class stays so.
            new.overrides = old.overrides.clone();
            // An instance made without a namespace lives in the default one: that is the
            // namespace that cannot change (moving it would orphan its control plane).
            let default = &self.0.tree.settings().managed_namespace;
            let o = old.namespace.as_ref().unwrap_or(default);
            match &new.namespace {
                None => new.namespace = old.namespace.clone(),
                Some(n) if n != o => {
                    return Err(ApiError::invalid(
                        "instance.spec.managed_namespace",
                        format!("is {o:?} and cannot change: the control plane lives there"),
                    ))
                }
                Some(_) => {}
            }
        }
        self.check_managed_spec(&spec)?;
        // A Secret the instance already reads was checked when it was set; a new one is
        // checked now.
        if spec.external != current.spec.external {
            self.check_secret(caller, &spec).await?;
        }
        // What the API does not set survives: the cache budget the operator set, the
        // maintenance window, the guardrails, and the backup schedule when the request
        // does not name one.
        spec.cache_budget = current.spec.cache_budget.clone();
        spec.maintenance_window = current.spec.maintenance_window.clone();
        spec.hibernation = current.spec.hibernation.clone();
        if spec.class_name.is_some() && spec.class_name != current.spec.class_name {
            return Err(ApiError::invalid(
                "instance.spec.class_name",
                "is set when the instance is created; a FleetRollout of the class brings it in line",
            ));
        }
        spec.class_name = current.spec.class_name.clone();
        spec.guardrails = current.spec.guardrails.clone();
        if keep_schedule {
            spec.backup_schedule = current.spec.backup_schedule.clone();
        }
        current.spec = spec;
        if !meta.labels.is_empty() {
            current.metadata.labels = Some(meta.labels.clone().into_iter().collect());
        }
        Ok(())
    }

    fn check_scope(
        &self,
        request: Option<&proto::InstanceSpec>,
        spec: &crate::crd::InstanceSpec,
    ) -> Result<(), ApiError> {
        let settings = self.0.tree.settings();
        let scope = &settings.scope;
        let defaults = &settings.managed_defaults;
        let invalid = |e: OutOfScope| ApiError::invalid(e.field, e.message);
        if let Some(ext) = &spec.external {
            scope
                .check_kubeconfig_namespace(
                    "instance.spec.kubeconfig_secret_ref.namespace",
                    &ext.kubeconfig_secret_ref.namespace,
                )
                .map_err(invalid)?;
        }
        if let Some(ns) = spec.managed.as_ref().and_then(|m| m.namespace.as_deref()) {
            scope
                .check_managed_namespace(
                    "instance.spec.managed_namespace",
                    ns,
                    &settings.managed_namespace,
                )
                .map_err(invalid)?;
        }
        let Some(request) = request else {
            return Ok(());
        };
        let registry = defaults.image_registry.as_deref();
        if !request.image_registry.is_empty() {
            scope
                .check_image(
                    "instance.spec.image_registry",
                    &request.image_registry,
                    registry,
                )
                .map_err(invalid)?;
        }
        for (component, image) in &request.component_images {
            if !image.repository.is_empty() {
                scope
                    .check_image(
                        &format!("instance.spec.component_images[{component:?}]"),
                        &image.repository,
                        registry,
                    )
                    .map_err(invalid)?;
            }
        }
        if !request.crd_tarball_url.is_empty() {
            let own = defaults.crd_tarball_url.as_deref().map(crd_url_prefix);
            scope
                .check_crd_url(
                    "instance.spec.crd_tarball_url",
                    &request.crd_tarball_url,
                    own,
                )
                .map_err(invalid)?;
        }
        Ok(())
    }

    /// The Karmada spec the Instance will carry (defaults and earlier fields merged in),
    /// as the actors check it.
    fn check_managed_spec(&self, spec: &crate::crd::InstanceSpec) -> Result<(), ApiError> {
        let settings = self.0.tree.settings();
        if let Some(k) = spec.managed.as_ref().and_then(|m| m.karmada_spec.as_ref()) {
            settings
                .scope
                .check_karmada_spec(k, &settings.managed_defaults)
                .map_err(|e| ApiError::invalid("instance.spec", e.to_string()))?;
        }
        Ok(())
    }

    /// The caller may read the kubeconfig Secret they point Kairship at.
    async fn check_secret(
        &self,
        caller: &crate::auth::Caller,
        spec: &crate::crd::InstanceSpec,
    ) -> Result<(), ApiError> {
        let Some(ext) = &spec.external else {
            return Ok(());
        };
        let r = &ext.kubeconfig_secret_ref;
        host::require_secret_read(
            &self.0,
            caller,
            &r.namespace,
            &r.name,
            "instance.spec.kubeconfig_secret_ref",
        )
        .await
    }
}

#[tonic::async_trait]
impl InstanceService for Instances {
    async fn create_instance(
        &self,
        req: Request<proto::CreateInstanceRequest>,
    ) -> Result<Response<proto::Instance>, Status> {
        let authorized = Authorized::of(&req)?;
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
        authorized.instance(&name)?;
        let caller = authorized.caller();
        let mut spec = convert::instance_spec(inst.spec.as_ref())?;
        self.check_scope(inst.spec.as_ref(), &spec)?;
        let class = match spec.class_name.as_deref() {
            Some(c) => Some(self.0.tree.classes().get(c).ok_or_else(|| {
                ApiError::invalid(
                    "instance.spec.class_name",
                    format!("no InstanceClass {c:?} (kubectl get instanceclasses)"),
                )
            })?),
            None => None,
        };
        if let Some(m) = spec.managed.as_mut() {
            // The defaults and the class written into the Instance, so it describes
            // itself; what the request sets wins over both and stays its own.
            let defaults = &self.0.tree.settings().managed_defaults;
            let own = m
                .karmada_spec
                .take()
                .unwrap_or_else(|| serde_json::json!({}));
            let mut wanted = class
                .as_ref()
                .map_or_else(|| serde_json::json!({}), |c| c.spec.fragment());
            crate::crd::karmada_spec::merge(&mut wanted, &own);
            let full = defaults.under(&wanted)?;
            m.karmada_spec = Some(full).filter(|f| f.as_object().is_some_and(|o| !o.is_empty()));
            if class.is_some() {
                m.overrides = Some(own).filter(|o| o.as_object().is_some_and(|o| !o.is_empty()));
            }
        }
        if let Some(c) = &class {
            spec.maintenance_window = c.spec.maintenance_window.clone();
            // A class whose guardrails cannot be pushed makes no instance (its controller
            // would report the same on every one).
            crate::crd::guardrail::check(&c.spec.guardrails).map_err(|e| {
                ApiError::FailedPrecondition(format!(
                    "InstanceClass {:?}: {e}",
                    kube::ResourceExt::name_any(&**c)
                ))
            })?;
            spec.guardrails = c.spec.guardrails.clone();
        }
        self.check_managed_spec(&spec)?;
        self.check_secret(caller, &spec).await?;
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
        let visible = self.0.auth.viewer(authorized.caller());
        Ok(Response::new(convert::instance(&created, &visible)))
    }

    async fn get_instance(
        &self,
        req: Request<proto::GetInstanceRequest>,
    ) -> Result<Response<proto::Instance>, Status> {
        let authorized = Authorized::of(&req)?;
        let name = req.into_inner().name;
        check_name("name", &name)?;
        authorized.instance(&name)?;
        let inst = self.0.instance(&name)?;
        let visible = self.0.auth.viewer(authorized.caller());
        Ok(Response::new(convert::instance(&inst, &visible)))
    }

    async fn list_instances(
        &self,
        req: Request<proto::ListInstancesRequest>,
    ) -> Result<Response<proto::ListInstancesResponse>, Status> {
        let authorized = Authorized::of(&req)?;
        let visible = self.0.auth.viewer(authorized.caller());
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
                    convert::instance(&i, &visible),
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
        let authorized = Authorized::of(&req)?;
        let inst = req
            .into_inner()
            .instance
            .ok_or_else(|| ApiError::invalid("instance", "is required"))?;
        let meta = inst.metadata.unwrap_or_default();
        check_name("instance.metadata.name", &meta.name)?;
        authorized.instance(&meta.name)?;
        let spec = convert::instance_spec(inst.spec.as_ref())?;
        self.check_scope(inst.spec.as_ref(), &spec)?;
        let what = format!("instance {:?}", meta.name);
        // An explicit resourceVersion is a precondition (a conflict is the caller's to
        // resolve); none means "the latest": the merged spec is patched in whole without
        // one, so the status written meanwhile (every few seconds) cannot conflict.
        let mut current = self.0.host_call(&what, self.api().get(&meta.name)).await?;
        let keep_schedule = inst
            .spec
            .as_ref()
            .is_none_or(|s| s.backup_schedule.is_none());
        self.merge_update(
            authorized.caller(),
            &mut current,
            spec,
            &meta,
            keep_schedule,
        )
        .await?;
        let name = current.metadata.name.clone().unwrap_or_default();
        let spec = serde_json::to_value(&current.spec)
            .map_err(|e| ApiError::Internal(format!("encoding the spec: {e}")))?;
        let mut ops = Vec::new();
        if !meta.resource_version.is_empty() {
            ops.push(serde_json::json!({"op": "replace", "path": "/metadata/resourceVersion", "value": meta.resource_version}));
        }
        ops.push(serde_json::json!({"op": "replace", "path": "/spec", "value": spec}));
        if !meta.labels.is_empty() {
            ops.push(serde_json::json!({"op": "add", "path": "/metadata/labels", "value": current.metadata.labels}));
        }
        let patch: json_patch::Patch = serde_json::from_value(serde_json::Value::Array(ops))
            .map_err(|e| ApiError::Internal(format!("building the patch: {e}")))?;
        let (api, params, patch) = (self.api(), PatchParams::default(), Patch::Json::<()>(patch));
        let updated = self
            .0
            .host_call(&what, api.patch(&name, &params, &patch))
            .await?;
        let visible = self.0.auth.viewer(authorized.caller());
        Ok(Response::new(convert::instance(&updated, &visible)))
    }

    async fn delete_instance(
        &self,
        req: Request<proto::DeleteInstanceRequest>,
    ) -> Result<Response<proto::DeleteInstanceResponse>, Status> {
        let authorized = Authorized::of(&req)?;
        let name = req.into_inner().name;
        check_name("name", &name)?;
        authorized.instance(&name)?;
        self.0
            .host_call(
                &format!("instance {name:?}"),
                self.api().delete(&name, &DeleteParams::default()),
            )
            .await?;
        Ok(Response::new(proto::DeleteInstanceResponse {}))
    }

    async fn list_components(
        &self,
        req: Request<proto::ListComponentsRequest>,
    ) -> Result<Response<proto::ListComponentsResponse>, Status> {
        on_instance_named(&req, &req.get_ref().name)?;
        let r = super::instance_components::list(&self.0, req.into_inner()).await?;
        Ok(Response::new(r))
    }

    async fn restart_component(
        &self,
        req: Request<proto::RestartComponentRequest>,
    ) -> Result<Response<proto::Component>, Status> {
        on_instance_named(&req, &req.get_ref().name)?;
        let r = super::instance_components::restart(&self.0, req.into_inner()).await?;
        Ok(Response::new(r))
    }

    async fn renew_certificates(
        &self,
        req: Request<proto::RenewCertificatesRequest>,
    ) -> Result<Response<proto::RenewCertificatesResponse>, Status> {
        on_instance_named(&req, &req.get_ref().name)?;
        let r = super::instance_renewal::renew(&self.0, req.into_inner()).await?;
        Ok(Response::new(r))
    }

    async fn hibernate_instance(
        &self,
        req: Request<proto::HibernateInstanceRequest>,
    ) -> Result<Response<proto::Instance>, Status> {
        on_instance_named(&req, &req.get_ref().name)?;
        let visible = self.0.auth.viewer(Authorized::of(&req)?.caller());
        let name = req.into_inner().name;
        let r = super::instance_hibernation::command(&self.0, &name, true, &visible).await?;
        Ok(Response::new(r))
    }

    async fn wake_instance(
        &self,
        req: Request<proto::WakeInstanceRequest>,
    ) -> Result<Response<proto::Instance>, Status> {
        on_instance_named(&req, &req.get_ref().name)?;
        let visible = self.0.auth.viewer(Authorized::of(&req)?.caller());
        let name = req.into_inner().name;
        let r = super::instance_hibernation::command(&self.0, &name, false, &visible).await?;
        Ok(Response::new(r))
    }

    async fn create_backup(
        &self,
        req: Request<proto::CreateBackupRequest>,
    ) -> Result<Response<proto::Backup>, Status> {
        on_instance_named(&req, &req.get_ref().name)?;
        Ok(Response::new(
            super::instance_backups::create(&self.0, req).await?,
        ))
    }

    async fn list_backups(
        &self,
        req: Request<proto::ListBackupsRequest>,
    ) -> Result<Response<proto::ListBackupsResponse>, Status> {
        on_instance_named(&req, &req.get_ref().name)?;
        let r = super::instance_backups::list(&self.0, req.into_inner()).await?;
        Ok(Response::new(r))
    }

    async fn get_backup(
        &self,
        req: Request<proto::GetBackupRequest>,
    ) -> Result<Response<proto::Backup>, Status> {
        on_instance_named(&req, &req.get_ref().name)?;
        let r = super::instance_backups::get(&self.0, req.into_inner()).await?;
        Ok(Response::new(r))
    }

    async fn delete_backup(
        &self,
        req: Request<proto::DeleteBackupRequest>,
    ) -> Result<Response<proto::DeleteBackupResponse>, Status> {
        on_instance_named(&req, &req.get_ref().name)?;
        let r = super::instance_backups::delete(&self.0, req.into_inner()).await?;
        Ok(Response::new(r))
    }

    async fn restore_backup(
        &self,
        req: Request<proto::RestoreBackupRequest>,
    ) -> Result<Response<proto::RestoreResult>, Status> {
        on_instance_named(&req, &req.get_ref().name)?;
        Ok(Response::new(
            super::instance_backups::restore(&self.0, req).await?,
        ))
    }

    type GetComponentLogsStream = super::log_stream::LogStream;

    async fn get_component_logs(
        &self,
        req: Request<proto::GetComponentLogsRequest>,
    ) -> Result<Response<Self::GetComponentLogsStream>, Status> {
        on_instance_named(&req, &req.get_ref().name)?;
        let drain = self.0.drain.clone();
        let closing = async move { drain.closing().await };
        let r = super::instance_components::logs(&self.0, req.into_inner(), closing).await?;
        Ok(Response::new(r))
    }

    async fn get_kubeconfig(
        &self,
        req: Request<proto::GetKubeconfigRequest>,
    ) -> Result<Response<proto::Kubeconfig>, Status> {
        Ok(Response::new(super::instance_kubeconfig::get(
            &self.0, req,
        )?))
    }

    async fn get_instance_stats(
        &self,
        req: Request<proto::GetInstanceStatsRequest>,
    ) -> Result<Response<proto::InstanceStats>, Status> {
        let authorized = Authorized::of(&req)?;
        let name = req.into_inner().name;
        check_name("name", &name)?;
        authorized.instance(&name)?;
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

/// The chain authorized `req` on instance `name` (a component call acts on the host with
/// Kairship's identity, so this is where the instance it names is held to the decision).
fn on_instance_named<T>(req: &Request<T>, name: &str) -> Result<(), ApiError> {
    check_name("name", name)?;
    Authorized::of(req)?.instance(name)?;
    Ok(())
}
