//! AccessService: the caller as Kairship sees them (name, groups, roles), so a client can
//! offer only what the API would allow.

use tonic::{Request, Response, Status};

use crate::api::chain::Authorized;
use crate::api::context::ApiContext;
use crate::proto::{self, access_service_server::AccessService};

pub struct Access(pub ApiContext);

#[tonic::async_trait]
impl AccessService for Access {
    async fn get_caller(
        &self,
        req: Request<proto::GetCallerRequest>,
    ) -> Result<Response<proto::Caller>, Status> {
        let authorized = Authorized::of(&req)?;
        let caller = authorized.caller();
        let auth = &self.0.auth;
        let fleet_role = auth.role_on_all(caller);
        let mut roles: Vec<proto::InstanceRole> = self
            .0
            .instances()
            .iter()
            .filter_map(|i| {
                let name = i.metadata.name.clone()?;
                let role = auth.role_on(caller, &name)?;
                Some(proto::InstanceRole {
                    instance: name,
                    role: role.as_str().to_string(),
                })
            })
            .collect();
        roles.sort_by(|a, b| a.instance.cmp(&b.instance));
        Ok(Response::new(proto::Caller {
            name: caller.user.name.clone(),
            groups: caller.user.groups.clone(),
            fleet_role: fleet_role
                .map(|r| r.as_str().to_string())
                .unwrap_or_default(),
            roles,
        }))
    }
}
