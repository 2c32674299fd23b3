//! `kairship ctl instances certificates NAME`: the certificates an instance is reached
//! with and when each expires, the first to expire first; `renew-certificates NAME`
//! renews a managed instance's leaf certificates and rolls its components onto them.

use super::{print, s, status, Conn, Output};
use crate::proto::{self, instance_service_client::InstanceServiceClient};
use crate::Error;

pub(crate) async fn list(conn: &Conn, out: Output, name: &str) -> Result<(), Error> {
    let mut c = InstanceServiceClient::new(conn.channel.clone());
    let r = c
        .get_instance(conn.request(proto::GetInstanceRequest { name: name.into() }))
        .await
        .map_err(status)?
        .into_inner();
    let certs = r.status.map(|s| s.certificates).unwrap_or_default();
    let msg = proto::InstanceStatus {
        certificates: certs,
        ..Default::default()
    };
    print(out, "kairship.v1alpha1.InstanceStatus", &msg, |j| {
        let now = jiff::Timestamp::now().as_second();
        let mut rows = vec![vec![
            "CERTIFICATE".into(),
            "SUBJECT".into(),
            "NOT AFTER".into(),
            "DAYS LEFT".into(),
        ]];
        for c in j["certificates"].as_array().into_iter().flatten() {
            let after = s(c, "/notAfter");
            let left = after
                .parse::<jiff::Timestamp>()
                .map(|t| ((t.as_second() - now) / 86_400).to_string())
                .unwrap_or_default();
            rows.push(vec![s(c, "/name"), s(c, "/subject"), after, left]);
        }
        rows
    })
}

pub(crate) async fn renew(conn: &Conn, out: Output, name: &str) -> Result<(), Error> {
    let mut c = InstanceServiceClient::new(conn.channel.clone());
    let r = c
        .renew_certificates(conn.request(proto::RenewCertificatesRequest { name: name.into() }))
        .await
        .map_err(status)?
        .into_inner();
    print(
        out,
        "kairship.v1alpha1.RenewCertificatesResponse",
        &r,
        |j| {
            let mut rows = vec![vec!["RENEWED".into(), "NOT AFTER".into()]];
            for c in j["certificates"].as_array().into_iter().flatten() {
                rows.push(vec![s(c, "/name"), s(c, "/notAfter")]);
            }
            let rolled: Vec<String> = j["rolled"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(String::from))
                .collect();
            rows.push(vec![format!(
            "rolling onto them: {} (karmada-operator applies the change; the instance shows Upgrading meanwhile)",
            rolled.join(", ")
        )]);
            rows
        },
    )
}
