//! An instance's own steps in a `FleetRollout` (`rollout::engine::advance`): once the
//! leader's pass starts it, its backup (with Kairship's credentials), then its new release
//! in the Instance's Karmada spec (karmada-operator carries it out), then its soak once it
//! runs the release; after a failure, its old release back. Its entry in the rollout's
//! status is written here, and only here after it started.

use std::sync::Arc;

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::{Controller, Scope, Work};
use crate::actors::instance::status::Observed;
use crate::backups::take::{self, Request};
use crate::backups::{Phase as BackupPhase, Store};
use crate::crd::{karmada_spec, FleetRollout, Instance, InstanceRollout};
use crate::rollout::engine::{self, BackupState, Work as Step};
use crate::rollout::store::{entry_patch, TICK};

#[derive(Default)]
pub struct RolloutSteps;

impl Controller for RolloutSteps {
    const NAME: &'static str = "rollout-steps";
    const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(30);
    type Found = ();

    fn reconcile(&mut self, scope: &Scope<'_>, _observed: &mut Observed) -> Option<Work<()>> {
        let (rollout, target, entry) = scope.ctx.rollouts.active_for(scope.name)?;
        if !scope.due(Self::NAME, TICK) {
            return None;
        }
        let instance = scope.latest()?;
        let settings = &scope.ctx.settings;
        let job = Job {
            host: scope.ctx.host.clone(),
            client: scope.client.filter(|_| scope.connected).cloned(),
            backups: settings.backup_store(&scope.ctx.host),
            defaults: settings.managed_defaults.clone(),
            host_timeout: settings.host_call_timeout,
            instance_timeout: settings.instance_call_timeout,
        };
        Some(Box::pin(async move {
            job.step(&rollout, &target, &entry, instance).await
        }))
    }

    fn record(&mut self, _found: (), _observed: &mut Observed) {}
}

/// What one step needs, owned by its task.
struct Job {
    host: kube::Client,
    client: Option<kube::Client>,
    backups: Store,
    defaults: karmada_spec::Defaults,
    host_timeout: std::time::Duration,
    instance_timeout: std::time::Duration,
}

impl Job {
    async fn step(
        &self,
        rollout: &str,
        target: &str,
        entry: &InstanceRollout,
        instance: Arc<Instance>,
    ) -> Result<(), String> {
        let name = instance.metadata.name.clone().unwrap_or_default();
        let backup = match (entry.step.as_str(), entry.backup.as_deref()) {
            ("BackingUp", Some(b)) => Some(self.backup_state(&name, b).await),
            _ => None,
        };
        let now = jiff::Timestamp::now();
        let (next, work) = engine::advance(entry, target, &instance, backup.as_ref(), now);
        match work {
            Step::Nothing => {}
            Step::Backup => {
                let client = self
                    .client
                    .clone()
                    .ok_or("the instance is not connected; its backup waits")?;
                let req = Request {
                    instance: name.clone(),
                    karmada_version: entry.from_version.clone().unwrap_or_default(),
                    requested_by: format!("kairship (rollout {rollout})"),
                    scheduled: false,
                    keep: None,
                };
                let record = take::start(self.backups.clone(), client, req, self.instance_timeout)
                    .await
                    .map_err(|e| format!("starting its backup: {e}"))?;
                tracing::info!(rollout, backup = %record.name, "backup before the rollout's change started");
                let mut started = entry.clone();
                started.backup = Some(record.name);
                self.write_entry(rollout, &name, &started).await?;
            }
            Step::SetVersion(v) => self.set_version(&instance, &v).await?,
        }
        if let Some(e) = next {
            tracing::info!(rollout, step = %e.step, "rollout step");
            self.write_entry(rollout, &name, &e).await?;
        }
        Ok(())
    }

    async fn backup_state(&self, instance: &str, backup: &str) -> BackupState {
        match self.backups.get(instance, backup).await {
            Ok(r) => match r.phase {
                BackupPhase::Running => BackupState::Running,
                BackupPhase::Completed => BackupState::Completed(r.name),
                BackupPhase::Failed => BackupState::Failed(r.message),
            },
            Err(e) => BackupState::Failed(e.to_string()),
        }
    }

    /// Puts `version` into the Instance's Karmada spec, unless it asks for it already.
    async fn set_version(&self, instance: &Instance, version: &str) -> Result<(), String> {
        let name = instance.metadata.name.as_deref().unwrap_or_default();
        let own = instance
            .spec
            .managed
            .as_ref()
            .and_then(|m| m.karmada_spec.clone())
            .unwrap_or_else(|| json!({}));
        let mut change = karmada_spec::for_version(version);
        if karmada_spec::contains(&own, &change) {
            return Ok(());
        }
        self.defaults.follow_version(&own, &mut change);
        let patch = json!({"spec": {"managed": {"karmadaSpec": change}}});
        let api: Api<Instance> = Api::all(self.host.clone());
        tracing::info!(version, "setting the instance's release for its rollout");
        self.host_call(api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)))
            .await
            .map(drop)
    }

    async fn write_entry(
        &self,
        rollout: &str,
        instance: &str,
        entry: &InstanceRollout,
    ) -> Result<(), String> {
        let api: Api<FleetRollout> = Api::all(self.host.clone());
        let patch = entry_patch(instance, entry);
        self.host_call(api.patch_status(rollout, &PatchParams::default(), &Patch::Merge(&patch)))
            .await
            .map(drop)
    }

    async fn host_call<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, String> {
        match tokio::time::timeout(self.host_timeout, call).await {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(_) => Err(format!(
                "no answer from the host in {:?}",
                self.host_timeout
            )),
        }
    }
}
