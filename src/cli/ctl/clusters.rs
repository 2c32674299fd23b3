//! `kairship ctl cordon|uncordon INSTANCE CLUSTER`: as `karmadactl cordon`, through
//! Kairship's ClusterService.

use super::{print, s, status, Conn, Output};
use crate::proto::{self, cluster_service_client::ClusterServiceClient};
use crate::Error;

pub(crate) async fn cordon(
    conn: &Conn,
    out: Output,
    instance: &str,
    cluster: &str,
    on: bool,
) -> Result<(), Error> {
    let mut c = ClusterServiceClient::new(conn.channel.clone());
    let req = conn.request(proto::CordonClusterRequest {
        instance: instance.into(),
        name: cluster.into(),
    });
    let r = if on {
        c.cordon_cluster(req).await
    } else {
        c.uncordon_cluster(req).await
    }
    .map_err(status)?
    .into_inner();
    print(out, "kairship.v1alpha1.Cluster", &r, |j| {
        let taints: Vec<String> = j["taints"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| format!("{}={}:{}", s(t, "/key"), s(t, "/value"), s(t, "/effect")))
            .collect();
        vec![
            vec!["CLUSTER".into(), "UNSCHEDULABLE".into(), "TAINTS".into()],
            vec![
                s(j, "/metadata/name"),
                (j["unschedulable"] == true).to_string(),
                taints.join(","),
            ],
        ]
    })
}
