//! RolloutService (issue 55): a fleet rollout's plan before anything moves, as
//! `rollout::findings` reads it from the Instance cache, and the `FleetRollout`s that run
//! one: started (its plan is checked first, and a blocked plan is refused unless forced),
//! listed, read, paused, resumed and aborted. Rollouts are written to the host with
//! Kairship's identity, for callers the chain let through with a role on every instance.

use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tonic::{Request, Response, Status};

use crate::api::chain::Authorized;
use crate::api::context::ApiContext;
use crate::api::request::Visible;
use crate::auth::Role;
use crate::cache::caches::Kind;
use crate::crd::{FleetRollout, FleetRolloutSpec};
use crate::error::{check_name, ApiError};
use crate::proto::{self, rollout_service_server::RolloutService};
use crate::rollout::findings::{plan_of, release_pairs, with_class, with_crd_changes};

pub struct Rollouts(pub ApiContext);

impl Rollouts {
    fn api(&self) -> Api<FleetRollout> {
        Api::all(self.0.tree.host().clone())
    }

    fn get(&self, name: &str) -> Result<std::sync::Arc<FleetRollout>, ApiError> {
        check_name("name", name)?;
        self.0
            .tree
            .rollouts()
            .store()
            .get(&kube::runtime::reflector::ObjectRef::new(name))
            .ok_or_else(|| ApiError::NotFound(format!("rollout {name:?} not found")))
    }

    /// `spec` with a class rollout's release filled in from its class.
    fn resolved(&self, spec: proto::RolloutSpec) -> Result<proto::RolloutSpec, ApiError> {
        let class = self.0.tree.classes().get(&spec.class_name);
        with_class(spec, class.as_ref().map(|c| &c.spec))
    }

    /// Each planned instance's cached objects of the CRDs its move changes, as the caller
    /// may list them there (through `api::request`, reviewed with the instance); an
    /// instance not served here, or a kind not cached or not listable, is left out.
    async fn cached_objects(
        &self,
        authorized: &Authorized,
        plan: &proto::RolloutPlan,
        changes: &crate::rollout::findings::CrdChanges,
    ) -> crate::rollout::affected::Counted {
        let mut out = crate::rollout::affected::Counted::new();
        for (instance, crd) in crate::rollout::affected::wanted(plan, changes) {
            let Some(kind) = Kind::ALL.into_iter().find(|k| {
                let r = k.resource();
                format!("{}.{}", r.plural, r.group) == crd
            }) else {
                continue;
            };
            let Ok(on) = self
                .0
                .on_instance_seen(authorized, Role::View, &instance)
                .await
            else {
                continue;
            };
            let Ok((reads, Visible::All)) = on.list(kind, "").await else {
                continue;
            };
            let Ok(store) = reads.store(kind) else {
                continue;
            };
            let objects = store
                .state()
                .iter()
                .filter_map(|o| serde_json::from_slice(o.json()).ok())
                .collect();
            out.insert((instance, crd), (kind.name().to_string(), objects));
        }
        out
    }

    /// The plan of `spec` now, with the CRD changes of the releases it moves between and,
    /// with `count_for`, what they touch in each instance as that caller may list it.
    async fn planned(
        &self,
        spec: &proto::RolloutSpec,
        count_for: Option<&Authorized>,
    ) -> Result<proto::RolloutPlan, ApiError> {
        let mut plan = plan_of(spec, &self.0.instances(), jiff::Timestamp::now())?;
        let settings = self.0.tree.settings();
        let changes = crate::rollout::crd_diff::between(
            self.0.tree.host(),
            &settings.managed_namespace,
            release_pairs(&plan),
            settings.host_call_timeout,
        )
        .await;
        with_crd_changes(&mut plan, &changes);
        // Notes only: a plan read by hand shows them, a start checks what blocks.
        if let Some(authorized) = count_for {
            let counted = self.cached_objects(authorized, &plan, &changes).await;
            crate::rollout::affected::with_affected(&mut plan, &changes, &counted);
        }
        Ok(plan)
    }

    /// Sets `paused` or `aborted` on the rollout; the leader's next pass acts on it.
    async fn set(&self, name: &str, field: &str, value: bool) -> Result<proto::Rollout, ApiError> {
        // Checked on the cached rollout and applied only to that version of it (409
        // otherwise): a cache a moment behind an abort must not let a resume through. After
        // a conflict, checked once more when the cache has caught up.
        let mut conflicted: Option<Option<String>> = None;
        loop {
            if let Some(version) = &conflicted {
                self.newer_than(name, version.as_deref()).await;
            }
            let current = self.get(name)?;
            if current.spec.aborted && field != "aborted" {
                return Err(ApiError::FailedPrecondition(format!(
                    "rollout {name:?} was aborted; start a new one"
                )));
            }
            let mut patch = json!({"spec": {field: value}});
            // An abort applies whatever changed meanwhile.
            if field != "aborted" {
                patch["metadata"] = json!({"resourceVersion": current.metadata.resource_version});
            }
            let (api, params, patch) = (self.api(), PatchParams::default(), Patch::Merge(&patch));
            match self.host_call(api.patch(name, &params, &patch), name).await {
                Err(ApiError::Aborted(_)) if conflicted.is_none() => {
                    conflicted = Some(current.metadata.resource_version.clone());
                }
                r => return r.map(|updated| to_proto(&updated)),
            }
        }
    }

    /// Until the cache holds a version of the rollout other than `version`, at most the
    /// host call timeout.
    async fn newer_than(&self, name: &str, version: Option<&str>) {
        let newer = async {
            while self
                .get(name)
                .is_ok_and(|now| now.metadata.resource_version.as_deref() == version)
            {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        };
        let _ = tokio::time::timeout(self.0.tree.settings().host_call_timeout, newer).await;
    }

    async fn host_call<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, kube::Error>>,
        name: &str,
    ) -> Result<T, ApiError> {
        let timeout = self.0.tree.settings().host_call_timeout;
        match tokio::time::timeout(timeout, call).await {
            Ok(r) => r.map_err(|e| ApiError::from_kube(e, &format!("rollout {name:?}"))),
            Err(_) => Err(ApiError::Unavailable(format!(
                "the host did not answer within {timeout:?}"
            ))),
        }
    }
}

/// An alert name as Prometheus allows it (a metric name), or such a prefix ending in `*`.
fn check_alert_name(name: &str) -> Result<(), &'static str> {
    let bare = name.strip_suffix('*').unwrap_or(name);
    let ok = bare.chars().enumerate().all(|(i, c)| {
        c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit())
    });
    match ok && !bare.is_empty() && bare.len() <= 200 {
        true => Ok(()),
        false => Err("an alert name ([a-zA-Z_:][a-zA-Z0-9_:]*, at most 200 characters), or such a prefix ending in *"),
    }
}

/// The FleetRollout a start request asks for, its fields checked.
fn spec_of(req: &proto::StartRolloutRequest) -> Result<FleetRolloutSpec, ApiError> {
    let spec = req.spec.clone().unwrap_or_default();
    let options = req.options.clone().unwrap_or_default();
    if spec.class_name.is_empty() {
        crate::crd::karmada_spec::check_version("spec.karmada_version", &spec.karmada_version)?;
    } else {
        check_name("spec.class_name", &spec.class_name)?;
    }
    for (name, value) in [
        ("options.soak_seconds", options.soak_seconds),
        (
            "options.progress_deadline_seconds",
            options.progress_deadline_seconds,
        ),
    ] {
        if value > 7 * 24 * 3600 {
            return Err(ApiError::invalid(name, "at most a week (604800)"));
        }
    }
    if options.max_failed_request_percent > 100 {
        return Err(ApiError::invalid(
            "options.max_failed_request_percent",
            "a percentage, at most 100",
        ));
    }
    let mut out: FleetRolloutSpec =
        serde_json::from_value(json!({"karmadaVersion": spec.karmada_version}))
            .map_err(|e| ApiError::Internal(e.to_string()))?;
    out.match_labels = spec.match_labels.into_iter().collect();
    out.canary = spec.canary;
    out.percentages = spec.percentages;
    out.groups = spec.groups.into_iter().map(|g| g.instances).collect();
    out.ignore_windows = spec.ignore_windows;
    out.class_name = Some(spec.class_name).filter(|c| !c.is_empty());
    out.force = options.force;
    if options.max_unavailable > 0 {
        out.max_unavailable = options.max_unavailable;
    }
    if options.soak_seconds > 0 {
        out.soak_seconds = options.soak_seconds;
    }
    if options.progress_deadline_seconds > 0 {
        out.progress_deadline_seconds = options.progress_deadline_seconds;
    }
    if options.max_failed_request_percent > 0 {
        out.max_failed_request_percent = options.max_failed_request_percent;
    }
    if options.min_requests > 0 {
        out.min_requests = options.min_requests;
    }
    if options.halt_on_alerts.len() > 64 {
        return Err(ApiError::invalid(
            "options.halt_on_alerts",
            "at most 64 names",
        ));
    }
    for (i, name) in options.halt_on_alerts.iter().enumerate() {
        check_alert_name(name)
            .map_err(|why| ApiError::invalid(format!("options.halt_on_alerts[{i}]"), why))?;
    }
    out.halt_on_alerts = match (options.halt_on_no_alerts, options.halt_on_alerts.is_empty()) {
        (true, true) => Vec::new(),
        (true, false) => {
            return Err(ApiError::invalid(
                "options.halt_on_no_alerts",
                "conflicts with options.halt_on_alerts",
            ))
        }
        (false, true) => out.halt_on_alerts,
        (false, false) => options.halt_on_alerts.clone(),
    };
    Ok(out)
}

fn to_proto(r: &FleetRollout) -> proto::Rollout {
    let status = r.status.clone().unwrap_or_default();
    let entry = |n: &String| {
        let e = status.instances.get(n).cloned().unwrap_or_default();
        proto::RolloutInstance {
            name: n.clone(),
            step: e.step,
            since: e.since.unwrap_or_default(),
            reason: e.reason.unwrap_or_default(),
            from_version: e.from_version.unwrap_or_default(),
            backup: e.backup.unwrap_or_default(),
        }
    };
    let s = &r.spec;
    proto::Rollout {
        name: r.metadata.name.clone().unwrap_or_default(),
        spec: Some(crate::rollout::findings::spec_of(s)),
        options: Some(proto::RolloutOptions {
            max_unavailable: s.max_unavailable,
            soak_seconds: s.soak_seconds,
            progress_deadline_seconds: s.progress_deadline_seconds,
            force: s.force,
            max_failed_request_percent: s.max_failed_request_percent,
            min_requests: s.min_requests,
            halt_on_alerts: s.halt_on_alerts.clone(),
            halt_on_no_alerts: s.halt_on_alerts.is_empty(),
        }),
        paused: s.paused,
        aborted: s.aborted,
        phase: match status.phase.is_empty() {
            true => "Planned".into(),
            false => status.phase.clone(),
        },
        reason: status.reason.clone(),
        waves: status
            .waves
            .iter()
            .map(|w| proto::RolloutWave {
                instances: w.iter().map(entry).collect(),
            })
            .collect(),
        created: r
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
    }
}

#[tonic::async_trait]
impl RolloutService for Rollouts {
    async fn plan_rollout(
        &self,
        req: Request<proto::PlanRolloutRequest>,
    ) -> Result<Response<proto::RolloutPlan>, Status> {
        // The chain let a caller with a role on every instance through.
        let authorized = Authorized::of(&req)?.clone();
        let spec = self.resolved(req.into_inner().spec.unwrap_or_default())?;
        let plan = self.planned(&spec, Some(&authorized)).await?;
        Ok(Response::new(plan))
    }

    async fn start_rollout(
        &self,
        req: Request<proto::StartRolloutRequest>,
    ) -> Result<Response<proto::Rollout>, Status> {
        let authorized = Authorized::of(&req)?;
        let by = authorized.caller().user.name.clone();
        let req = req.into_inner();
        check_name("name", &req.name)?;
        let spec = spec_of(&req)?;
        // Refused now rather than Blocked later: the caller reads why at once.
        let wanted = self.resolved(req.spec.clone().unwrap_or_default())?;
        let plan = self.planned(&wanted, None).await?;
        if plan.waves.is_empty() {
            return Err(
                ApiError::FailedPrecondition("the selector picks no instance".into()).into(),
            );
        }
        if plan.blocked > 0 && !spec.force {
            let blocked: Vec<String> = plan
                .waves
                .iter()
                .flat_map(|w| &w.instances)
                .filter(|i| !i.blocking.is_empty())
                .map(|i| format!("{}: {}", i.name, i.blocking.join("; ")))
                .collect();
            return Err(ApiError::FailedPrecondition(format!(
                "{} instance(s) cannot take the change (options.force leaves them out): {}",
                blocked.len(),
                blocked.join(" | ")
            ))
            .into());
        }
        let mut rollout = FleetRollout::new(&req.name, spec);
        rollout.metadata.annotations =
            Some([("kairship.io/started-by".to_string(), by.clone())].into());
        let created = self
            .host_call(
                self.api().create(&PostParams::default(), &rollout),
                &req.name,
            )
            .await?;
        tracing::info!(rollout = %req.name, by = %by, version = %created.spec.karmada_version, "rollout started");
        Ok(Response::new(to_proto(&created)))
    }

    async fn list_rollouts(
        &self,
        req: Request<proto::ListRolloutsRequest>,
    ) -> Result<Response<proto::ListRolloutsResponse>, Status> {
        Authorized::of(&req)?;
        let mut all = self.0.tree.rollouts().store().state();
        all.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        Ok(Response::new(proto::ListRolloutsResponse {
            rollouts: all.iter().map(|r| to_proto(r)).collect(),
        }))
    }

    async fn get_rollout(
        &self,
        req: Request<proto::RolloutName>,
    ) -> Result<Response<proto::Rollout>, Status> {
        Authorized::of(&req)?;
        let rollout = self.get(&req.get_ref().name)?;
        Ok(Response::new(to_proto(&rollout)))
    }

    async fn pause_rollout(
        &self,
        req: Request<proto::RolloutName>,
    ) -> Result<Response<proto::Rollout>, Status> {
        Authorized::of(&req)?;
        Ok(Response::new(
            self.set(&req.get_ref().name, "paused", true).await?,
        ))
    }

    async fn resume_rollout(
        &self,
        req: Request<proto::RolloutName>,
    ) -> Result<Response<proto::Rollout>, Status> {
        Authorized::of(&req)?;
        Ok(Response::new(
            self.set(&req.get_ref().name, "paused", false).await?,
        ))
    }

    async fn abort_rollout(
        &self,
        req: Request<proto::RolloutName>,
    ) -> Result<Response<proto::Rollout>, Status> {
        Authorized::of(&req)?;
        Ok(Response::new(
            self.set(&req.get_ref().name, "aborted", true).await?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alert_names_are_metric_names_or_prefixes() {
        for ok in ["KairshipInstanceDegraded", "team:slo_burn", "Team*", "_x1"] {
            assert!(check_alert_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "*", "1Team", "a b", "Team**", "x{y}"] {
            assert!(check_alert_name(bad).is_err(), "{bad}");
        }
    }
}
