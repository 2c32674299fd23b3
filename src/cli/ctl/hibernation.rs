//! `kairship ctl instances hibernate|wake NAME [--wait]`: the command is recorded at once
//! (the leader acts on its next pass); `--wait` follows the instance until it is
//! hibernated, or running again, printing each state it passes through.

use std::time::{Duration, Instant};

use crate::proto;
use crate::proto::instance_service_client::InstanceServiceClient;
use crate::Error;

use super::{status, Conn};

/// How long `--wait` follows the instance.
const WAIT_AT_MOST: Duration = Duration::from_secs(600);

/// The instance as the command left it, or (`wait`) as it is once the command is done.
pub async fn run(
    conn: &Conn,
    name: &str,
    hibernate: bool,
    wait: bool,
) -> Result<proto::Instance, Error> {
    let mut c = InstanceServiceClient::new(conn.channel.clone());
    let r = match hibernate {
        true => c
            .hibernate_instance(conn.request(proto::HibernateInstanceRequest { name: name.into() }))
            .await
            .map_err(status)?,
        false => c
            .wake_instance(conn.request(proto::WakeInstanceRequest { name: name.into() }))
            .await
            .map_err(status)?,
    }
    .into_inner();
    if !wait {
        return Ok(r);
    }
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let i = c
            .get_instance(conn.request(proto::GetInstanceRequest { name: name.into() }))
            .await
            .map_err(status)?
            .into_inner();
        let s = i.status.clone().unwrap_or_default();
        let h = s.hibernation.clone().unwrap_or_default();
        let now = format!("{} ({}): {}", h.state, s.phase, h.reason);
        if now != last {
            eprintln!("{:>5.1}s  {now}", started.elapsed().as_secs_f64());
            last = now;
        }
        let done = match hibernate {
            true => h.state == "Hibernated",
            false => h.state == "Awake" && s.phase == "Running",
        };
        if done {
            return Ok(i);
        }
        if started.elapsed() > WAIT_AT_MOST {
            return Err(Error::Usage(format!(
                "instance {name} is not {} after {WAIT_AT_MOST:?}; it is {last}",
                if hibernate { "hibernated" } else { "running" }
            )));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
