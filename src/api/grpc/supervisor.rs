//! SupervisorService: the actor tree, restarting an instance actor, the current leader,
//! and an instance's controllers.

use tonic::{Request, Response, Status};

use crate::actors::instance::InstanceMsg;
use crate::actors::supervision::ActorSnapshot;
use crate::actors::tree::TreeError;
use crate::api::chain::Authorized;
use crate::api::context::ApiContext;
use crate::api::forward::peers;
use crate::error::{check_name, ApiError};
use crate::proto::{
    self, supervisor_service_client::SupervisorServiceClient,
    supervisor_service_server::SupervisorService,
};

pub struct Supervisor(pub ApiContext);

/// How long an instance actor may take to say how its controllers stand.
const VIEW_TIMEOUT_MS: u64 = 2000;

fn snapshot(a: &ActorSnapshot, replica: &str) -> proto::ActorSnapshot {
    proto::ActorSnapshot {
        replica: replica.to_string(),
        name: a.name.clone(),
        parent: a.parent.clone(),
        state: a.state.as_str().to_string(),
        restart_count: i32::try_from(a.restart_count).unwrap_or(i32::MAX),
        requested_restarts: i32::try_from(a.requested_restarts).unwrap_or(i32::MAX),
        last_error: a.last_error.clone().unwrap_or_default(),
        uptime_seconds: i64::try_from(a.uptime.as_secs()).unwrap_or(i64::MAX),
        instance: a.instance.clone().unwrap_or_default(),
    }
}

/// Whether `instance`'s actor is this replica's to show: always unsharded; sharded, when
/// it is recorded here (or nowhere yet), since its owner shows it otherwise.
fn runs_here(
    ctx: &ApiContext,
    shards: Option<&crate::host::shards::Shards>,
    instance: &str,
) -> bool {
    let Some(shards) = shards else {
        return true;
    };
    let recorded = ctx
        .instance(instance)
        .ok()
        .and_then(|i| crate::host::shards::handoff::recorded(&i).map(str::to_string));
    recorded.is_none_or(|r| r == shards.me() || !shards.live().contains(&r))
}

fn tree_error(e: TreeError) -> ApiError {
    match e {
        TreeError::NotFound(m) => ApiError::NotFound(m),
        other => ApiError::Unavailable(other.to_string()),
    }
}

#[tonic::async_trait]
impl SupervisorService for Supervisor {
    async fn list_actors(
        &self,
        req: Request<proto::ListActorsRequest>,
    ) -> Result<Response<proto::ListActorsResponse>, Status> {
        let authorized = Authorized::of(&req)?;
        let forwarded = req
            .metadata()
            .contains_key(crate::api::forward::FORWARDED_BY_NAME);
        let caller = authorized.caller();
        let visible = self.0.auth.viewer(caller);
        // The root and manager speak for every instance: shown to those who see all.
        let everything = self.0.auth.sees_all(caller);
        let me = self.0.tree.identity();
        let shards = self.0.tree.shards();
        let actors = self.0.tree.actors().await.map_err(tree_error)?;
        let mut out: Vec<proto::ActorSnapshot> = actors
            .iter()
            .filter(|a| match &a.instance {
                Some(i) => visible(i) && runs_here(&self.0, shards, i),
                None => everything,
            })
            .map(|a| snapshot(a, me))
            .collect();
        // Sharded: each peer lists the actors it runs, as the caller sees them.
        if let (Some(shards), Some(forwarder), false) = (shards, &self.0.forwarder, forwarded) {
            let credential = authorized.credential().header();
            let answers = peers::each(forwarder, peers::live(shards), |_, channel| async move {
                let call = peers::request(proto::ListActorsRequest {}, credential, shards.me())?;
                SupervisorServiceClient::new(channel)
                    .list_actors(call)
                    .await
                    .map(|r| r.into_inner().actors)
                    .map_err(|s| s.message().to_string())
            })
            .await;
            for (replica, answer) in answers {
                match answer {
                    Ok(actors) => out.extend(actors),
                    Err(why) => {
                        tracing::warn!(replica = %replica, error = %why, "a peer did not list its actors")
                    }
                }
            }
        }
        Ok(Response::new(proto::ListActorsResponse { actors: out }))
    }

    async fn restart_instance(
        &self,
        req: Request<proto::RestartInstanceRequest>,
    ) -> Result<Response<proto::RestartInstanceResponse>, Status> {
        let authorized = Authorized::of(&req)?;
        let name = req.into_inner().name;
        check_name("name", &name)?;
        authorized.instance(&name)?;
        self.0.instance(&name)?;
        // Every replica restarts its actor when the Instance's restart annotation changes;
        // this one restarts at once.
        let stamp = jiff::Timestamp::now().to_string();
        let patch = serde_json::json!({"metadata": {"annotations": {crate::crd::RESTART_ANNOTATION: stamp}}});
        let instances: kube::Api<crate::crd::Instance> = kube::Api::all(self.0.tree.host().clone());
        let (params, patch) = (
            kube::api::PatchParams::default(),
            kube::api::Patch::Merge(&patch),
        );
        let write = instances.patch(&name, &params, &patch);
        self.0
            .host_call(&format!("instance {name:?}"), write)
            .await?;
        self.0
            .tree
            .restart_instance_stamped(&name, Some(stamp))
            .await
            .map_err(tree_error)?;
        let actor = self
            .0
            .tree
            .actors()
            .await
            .map_err(tree_error)?
            .into_iter()
            .find(|a| a.instance.as_deref() == Some(name.as_str()));
        Ok(Response::new(proto::RestartInstanceResponse {
            actor: actor.as_ref().map(|a| snapshot(a, self.0.tree.identity())),
        }))
    }

    async fn list_controllers(
        &self,
        req: Request<proto::ListControllersRequest>,
    ) -> Result<Response<proto::ListControllersResponse>, Status> {
        let authorized = Authorized::of(&req)?;
        let name = req.into_inner().name;
        check_name("name", &name)?;
        authorized.instance(&name)?;
        self.0.instance(&name)?;
        let unavailable = |why: String| ApiError::Unavailable(format!("instance {name:?}: {why}"));
        let actor = self.0.tree.instance(&name).await.map_err(tree_error)?;
        let actor = actor.ok_or_else(|| {
            unavailable("no actor runs it on this replica (paused, or restarting)".into())
        })?;
        let view = ractor::call_t!(actor, InstanceMsg::View, VIEW_TIMEOUT_MS)
            .map_err(|e| unavailable(format!("its actor did not answer: {e}")))?;
        let now = jiff::Timestamp::now();
        let controllers = crate::controllers::TABLE
            .iter()
            .map(|entry| {
                let seen = view.controllers.iter().find(|c| c.name == entry.name);
                let succeeded = seen
                    .and_then(|c| c.succeeded_ago)
                    .and_then(|ago| jiff::SignedDuration::try_from(ago).ok())
                    .and_then(|ago| now.checked_sub(ago).ok());
                proto::ControllerStatus {
                    name: entry.name.to_string(),
                    description: entry.about.to_string(),
                    leader_only: entry.leader_only,
                    enabled: seen.is_some(),
                    active: seen.is_some_and(|c| c.active),
                    in_flight: seen.is_some_and(|c| c.in_flight),
                    failures: seen.map_or(0, |c| i32::try_from(c.failures).unwrap_or(i32::MAX)),
                    last_succeeded: succeeded
                        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
                        .unwrap_or_default(),
                    last_error: seen.and_then(|c| c.last_error.clone()).unwrap_or_default(),
                }
            })
            .collect();
        Ok(Response::new(proto::ListControllersResponse {
            replica: self.0.tree.identity().to_string(),
            controllers,
        }))
    }

    async fn get_leader(
        &self,
        req: Request<proto::GetLeaderRequest>,
    ) -> Result<Response<proto::Leader>, Status> {
        Authorized::of(&req)?;
        let leadership = self.0.tree.leadership();
        let (holder, renew) = leadership.holder();
        Ok(Response::new(proto::Leader {
            is_self: leadership.is_leader(),
            holder_identity: holder.unwrap_or_default(),
            renew_time: renew.unwrap_or_default(),
        }))
    }
}
