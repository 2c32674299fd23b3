//! An instance's own steps in a `FleetRollout` (`rollout::engine::advance`): once the
//! leader's pass starts it, its backup (with Kairship's credentials, its Karmada spec
//! recorded beside it), then the change in the Instance's Karmada spec (a release, or its
//! class's spec with what the instance sets itself kept), which karmada-operator carries
//! out, then its soak once it runs it; after a failure, its Karmada spec as it was before.
//! Its entry in the rollout's status is written here, and only here after it started.

use std::sync::Arc;

use kube::api::{Api, Patch, PatchParams};
use serde_json::{json, Value};

use super::{Action, Controller, ControllerError, Next, Observed, Report, Scope};
use crate::backups::take::{self, Request};
use crate::backups::{Phase as BackupPhase, Store};
use crate::cache::traffic::Counts;
use crate::crd::{karmada_spec, FleetRollout, Instance, InstanceClassSpec, InstanceRollout};
use crate::host::rollouts::{entry_patch, TICK};
use crate::rollout::engine::{self, BackupState, Work as Step};

#[derive(Default)]
pub struct RolloutSteps {
    /// The proxy's counts when the instance's current soak began (rollout, soak start).
    soak: Option<((String, Option<String>), Counts)>,
    /// The counts at the last look while it was Upgrading: its soak counts from there,
    /// as the step to Soaking is written right after such a look.
    upgrading: Option<Counts>,
    /// A step was taken: the next waits for its requeue, not for any change.
    stepped: bool,
}

impl RolloutSteps {
    /// Why the instance fails its soak on the requests the proxy answered for it since
    /// the soak began, if it does (`engine::failed_share`).
    fn soak_failure(
        &mut self,
        rollout: &FleetRollout,
        entry: &InstanceRollout,
        now: Counts,
    ) -> Option<String> {
        if entry.step != "Soaking" {
            self.soak = None;
            self.upgrading = (entry.step == "Upgrading").then_some(now);
            return None;
        }
        let key = (
            rollout.metadata.name.clone().unwrap_or_default(),
            entry.since.clone(),
        );
        let base = match &self.soak {
            Some((k, base)) if *k == key => *base,
            // A new soak: from its last look while Upgrading, else (a new actor) from now.
            _ => self.upgrading.take().unwrap_or(now),
        };
        let Some(since) = now.since(base) else {
            // A new actor counts from zero: count from now.
            self.soak = Some((key, now));
            return None;
        };
        self.soak = Some((key, base));
        let spec = &rollout.spec;
        engine::failed_share(since, spec.max_failed_request_percent, spec.min_requests)
    }
}

impl Controller for RolloutSteps {
    const NAME: &'static str = "rollout-steps";
    const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(30);
    type Found = ();

    fn reconcile(&mut self, scope: &Scope<'_>, _: &Observed, _: &mut Report) -> Next<()> {
        // A rollout is read from the host's watch, not watched here: looked for at each tick.
        let Some((rollout, entry)) = scope.ctx.rollouts.active_for(scope.name) else {
            return Next::Wait(Action::requeue(std::time::Duration::ZERO));
        };
        if self.stepped && !scope.requeued() {
            return Next::Idle;
        }
        let soak_failure = self.soak_failure(&rollout, &entry, scope.traffic.counts());
        let Some(instance) = scope.latest() else {
            return Next::Idle;
        };
        let class = match rollout.spec.class_name.as_deref() {
            Some(c) => match scope.ctx.classes.get(c) {
                Some(c) => Some(c.spec.clone()),
                None => return Next::Idle,
            },
            None => None,
        };
        let settings = &scope.ctx.settings;
        let job = Job {
            host: scope.ctx.host.clone(),
            client: scope.client.filter(|_| scope.connected).cloned(),
            backups: settings.backup_store(&scope.ctx.host),
            defaults: settings.managed_defaults.clone(),
            host_timeout: settings.host_call_timeout,
            instance_timeout: settings.instance_call_timeout,
        };
        let change = Change {
            rollout: rollout.metadata.name.clone().unwrap_or_default(),
            version: class
                .as_ref()
                .and_then(|c| c.karmada_version.clone())
                .unwrap_or_else(|| rollout.spec.karmada_version.clone()),
            class,
        };
        self.stepped = true;
        Next::Start(Box::pin(async move {
            if let Some(why) = soak_failure {
                let name = instance.metadata.name.clone().unwrap_or_default();
                tracing::warn!(rollout = %change.rollout, reason = %why, "the instance failed its soak");
                let failed = engine::soak_failed(&entry, why, jiff::Timestamp::now());
                let written = job.write_entry(&change.rollout, &name, &failed).await;
                return written.map_err(ControllerError::Failed);
            }
            job.step(&change, &entry, instance)
                .await
                .map_err(ControllerError::Failed)
        }))
    }

    fn record(&mut self, _found: (), _: &mut Report) -> Action {
        Action::requeue(TICK)
    }
}

/// What the rollout changes.
struct Change {
    rollout: String,
    /// The release the instance moves to.
    version: String,
    /// A class rollout's class: its spec goes in too.
    class: Option<InstanceClassSpec>,
}

impl Change {
    /// The Karmada spec `instance` has with the change made.
    fn wanted(&self, instance: &Instance, defaults: &karmada_spec::Defaults) -> Value {
        let managed = instance.spec.managed.as_ref();
        let own = karmada_spec_of(instance);
        let mut change = match &self.class {
            // The class's spec, what the instance sets itself over it.
            Some(c) => {
                let mut change = c.fragment();
                if let Some(o) = managed.and_then(|m| m.overrides.as_ref()) {
                    karmada_spec::merge(&mut change, o);
                }
                change
            }
            None => karmada_spec::for_version(&self.version),
        };
        // A CRD tarball Kairship's defaults chose moves with the release, or the new
        // components would run against the old release's CRDs (karmada #6776).
        defaults.follow_version(&own, &mut change);
        let mut out = own;
        karmada_spec::merge(&mut out, &change);
        out
    }
}

fn karmada_spec_of(instance: &Instance) -> Value {
    instance
        .spec
        .managed
        .as_ref()
        .and_then(|m| m.karmada_spec.clone())
        .unwrap_or_else(|| json!({}))
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
        change: &Change,
        entry: &InstanceRollout,
        instance: Arc<Instance>,
    ) -> Result<(), String> {
        let rollout = change.rollout.as_str();
        let name = instance.metadata.name.clone().unwrap_or_default();
        let by = format!("kairship (rollout {rollout})");
        let backup = match (entry.step.as_str(), entry.backup.as_deref()) {
            ("BackingUp", Some(b)) => Some(self.backup_state(&name, b, &by, entry).await),
            _ => None,
        };
        let now_spec = karmada_spec_of(&instance);
        let wanted = change.wanted(&instance, &self.defaults);
        let before = entry.from_spec.clone();
        // A class rollout moves the class's guardrails too; a version rollout leaves them.
        let now_guardrails = &instance.spec.guardrails;
        let wanted_guardrails = change.class.as_ref().map(|c| &c.guardrails);
        let guardrails_before = entry.from_guardrails.as_ref();
        let in_spec = match entry.step.as_str() {
            "Failed" => {
                before.as_ref().is_none_or(|b| *b == now_spec)
                    && guardrails_before.is_none_or(|g| g == now_guardrails)
            }
            _ => wanted == now_spec && wanted_guardrails.is_none_or(|g| g == now_guardrails),
        };
        let now = jiff::Timestamp::now();
        let (next, work) = engine::advance(
            entry,
            &change.version,
            &instance,
            backup.as_ref(),
            in_spec,
            now,
        );
        match work {
            Step::Nothing => {}
            Step::Backup => {
                let record = match self.started_backup(&name, &by, entry).await {
                    // Started before a restart that came before its entry was written:
                    // taken up, not taken twice (one abandoned is taken again).
                    Some(r) => r,
                    None => {
                        let client = self
                            .client
                            .clone()
                            .ok_or("the instance is not connected; its backup waits")?;
                        let req = Request {
                            instance: name.clone(),
                            karmada_version: entry.from_version.clone().unwrap_or_default(),
                            requested_by: by,
                            scheduled: false,
                            keep: None,
                        };
                        take::start(self.backups.clone(), client, req, self.instance_timeout)
                            .await
                            .map_err(|e| format!("starting its backup: {e}"))?
                    }
                };
                tracing::info!(rollout, backup = %record.name, "backup before the rollout's change started");
                let mut started = entry.clone();
                started.backup = Some(record.name);
                started.from_spec = Some(now_spec);
                started.from_guardrails = Some(now_guardrails.clone());
                self.write_entry(rollout, &name, &started).await?;
            }
            Step::Change => {
                tracing::info!(rollout, version = %change.version, "making the rollout's change");
                self.set_spec(&name, &wanted, wanted_guardrails).await?;
            }
            Step::Restore => {
                let Some(before) = before else {
                    return Ok(());
                };
                tracing::info!(
                    rollout,
                    "putting the Karmada spec and guardrails from before the change back"
                );
                self.set_spec(&name, &before, guardrails_before).await?;
            }
        }
        if let Some(e) = next {
            tracing::info!(rollout, step = %e.step, "rollout step");
            self.write_entry(rollout, &name, &e).await?;
        }
        Ok(())
    }

    /// The backup this rollout already started for `instance` in its current step (by
    /// the rollout, since the step began) and still running or completed, if any.
    async fn started_backup(
        &self,
        instance: &str,
        by: &str,
        entry: &InstanceRollout,
    ) -> Option<crate::backups::Record> {
        self.step_backups(instance, by, entry)
            .await
            .into_iter()
            .filter(|r| r.phase != BackupPhase::Failed)
            .max_by(|a, b| a.started.cmp(&b.started))
    }

    /// Every backup this rollout started for `instance` since its current step began.
    async fn step_backups(
        &self,
        instance: &str,
        by: &str,
        entry: &InstanceRollout,
    ) -> Vec<crate::backups::Record> {
        let Some(since) = entry
            .since
            .as_deref()
            .and_then(|s| s.parse::<jiff::Timestamp>().ok())
        else {
            return Vec::new();
        };
        let listed = self.backups.list(instance).await.unwrap_or_default();
        listed
            .into_iter()
            .filter(|r| r.requested_by == by)
            .filter(|r| {
                r.started
                    .parse::<jiff::Timestamp>()
                    .is_ok_and(|t| t.as_second() >= since.as_second())
            })
            .collect()
    }

    async fn backup_state(
        &self,
        instance: &str,
        backup: &str,
        by: &str,
        entry: &InstanceRollout,
    ) -> BackupState {
        match self.backups.get(instance, backup).await {
            Ok(r) => match r.phase {
                BackupPhase::Running => BackupState::Running,
                BackupPhase::Completed => BackupState::Completed(r.name),
                BackupPhase::Failed if r.abandoned => {
                    let step = self.step_backups(instance, by, entry).await;
                    BackupState::Abandoned {
                        why: r.message,
                        tries: step.iter().filter(|b| b.abandoned).count().max(1),
                    }
                }
                BackupPhase::Failed => BackupState::Failed(r.message),
            },
            Err(e) => BackupState::Failed(e.to_string()),
        }
    }

    /// Replaces the Instance's Karmada spec with `spec` and, when given, its guardrails,
    /// in one write (one restart of its actor). A JSON patch: fields the change added are
    /// removed again on a restore.
    async fn set_spec(
        &self,
        name: &str,
        spec: &Value,
        guardrails: Option<&Vec<Value>>,
    ) -> Result<(), String> {
        let mut ops =
            vec![json!({"op": "add", "path": "/spec/managed/karmadaSpec", "value": spec})];
        if let Some(g) = guardrails {
            ops.push(json!({"op": "add", "path": "/spec/guardrails", "value": g}));
        }
        let patch: json_patch::Patch =
            serde_json::from_value(Value::Array(ops)).map_err(|e| e.to_string())?;
        let api: Api<Instance> = Api::all(self.host.clone());
        let (params, patch) = (PatchParams::default(), Patch::Json::<()>(patch));
        self.host_call(api.patch(name, &params, &patch))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_class_rollout_moves_the_default_crd_tarball_with_the_release() {
        let defaults = karmada_spec::Defaults {
            crd_tarball_url: Some("http://kairship/karmada-crds/{version}/crds.tar.gz".into()),
            ..Default::default()
        };
        let mut own = karmada_spec::for_version("v1.17.1");
        karmada_spec::merge(
            &mut own,
            &json!({"crdTarball": {"httpSource": {"url": "http://kairship/karmada-crds/v1.17.1/crds.tar.gz"}}}),
        );
        let mut instance: Instance = serde_json::from_value(json!({
            "apiVersion": "kairship.io/v1alpha1", "kind": "Instance", "metadata": {"name": "a"},
            "spec": {"mode": "Managed", "managed": {"karmadaSpec": own}}}))
        .expect("an Instance");
        let class = InstanceClassSpec {
            karmada_version: Some("v1.18.2".into()),
            ..Default::default()
        };
        let change = Change {
            rollout: "r".into(),
            version: "v1.18.2".into(),
            class: Some(class),
        };
        let wanted = change.wanted(&instance, &defaults);
        assert_eq!(
            karmada_spec::crd_tarball_of(&wanted).as_deref(),
            Some("http://kairship/karmada-crds/v1.18.2/crds.tar.gz")
        );
        assert_eq!(
            karmada_spec::version_of(&wanted).as_deref(),
            Some("v1.18.2")
        );
        // A URL the instance set itself stays.
        if let Some(m) = instance.spec.managed.as_mut() {
            m.karmada_spec = Some(
                json!({"components": {"karmadaScheduler": {"imageTag": "v1.17.1"}},
                "crdTarball": {"httpSource": {"url": "https://mirror/crds.tar.gz"}}}),
            );
        }
        let wanted = change.wanted(&instance, &defaults);
        assert_eq!(
            karmada_spec::crd_tarball_of(&wanted).as_deref(),
            Some("https://mirror/crds.tar.gz")
        );
    }
}

#[cfg(test)]
mod host_tests {
    use super::*;
    use crate::controllers::testing::{context, fresh, instance, mock, Look};

    #[tokio::test]
    async fn without_a_rollout_it_looks_again_at_each_tick_and_calls_nothing() {
        let (host, calls) = mock(|_| None);
        let look = Look::new(
            instance("team-a"),
            context(host.clone(), Default::default()),
        )
        .connected(host);
        let (observed, mut report) = fresh();
        let next = RolloutSteps::default().reconcile(&look.scope(), &observed, &mut report);
        assert!(matches!(
            next,
            Next::Wait(a) if a == Action::requeue(std::time::Duration::ZERO)
        ));
        assert!(
            calls.writes().is_empty(),
            "only the context's watches were listed: {:?}",
            calls.all()
        );
    }
}
