//! Starting a simulated fleet: the host API, the static instances, then the
//! karmada-operator double and the fault admin API, which both drive the [`Fleet`] (so
//! they are wired here, not in `fleet`, which knows neither).

use tracing::info;

use crate::fleet::{loopback, Fleet, FleetConfig};
use crate::resources::Flavor;
use crate::server::ApiServer;
use crate::Error;

impl Fleet {
    pub async fn start(config: FleetConfig) -> Result<Self, Error> {
        if let Some(dir) = &config.state_dir {
            std::fs::create_dir_all(dir.join("kubeconfigs"))
                .map_err(Error::io(format!("creating {}", dir.display())))?;
        }
        let host = ApiServer::new("host", Flavor::Host, config.server.clone())?;
        host.start(loopback())
            .await
            .map_err(Error::io("binding the host API"))?;
        let fleet = Self::with_host(config.clone(), host);
        for i in 1..=config.instances {
            fleet
                .start_instance(&format!("karmada-{i}"), config.clusters, None)
                .await?;
        }
        let operator = tokio::spawn(crate::operator::run(fleet.clone()));
        let replicas = tokio::spawn(crate::components::follow_replicas(fleet.clone()));
        let (admin_addr, admin) = crate::admin::serve(fleet.clone(), config.admin_port).await?;
        fleet.attach(admin_addr, [operator, replicas, admin]);
        fleet.write_state()?;
        info!(host = %fleet.host().url(), admin = %admin_addr, instances = config.instances, "simulated fleet ready");
        Ok(fleet)
    }
}
