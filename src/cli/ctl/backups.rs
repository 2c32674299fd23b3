//! `kairship ctl backups ...`: an instance's backups listed, taken (`--wait` for the
//! outcome), restored (into the same instance, or `--from` another), deleted, and its
//! schedule set.

use std::time::Duration;

use clap::Subcommand;
use serde_json::Value;

use super::{n, print, s, status, Conn, Output};
use crate::proto::{self, instance_service_client::InstanceServiceClient};
use crate::Error;

#[derive(Debug, Subcommand)]
pub enum BackupsCmd {
    /// An instance's backups, newest first.
    List {
        instance: String,
    },
    /// Back up an instance; with --wait, until it completes or fails.
    Create {
        instance: String,
        #[arg(long)]
        wait: bool,
    },
    Get {
        instance: String,
        backup: String,
    },
    Delete {
        instance: String,
        backup: String,
    },
    /// Restore a backup into INSTANCE: what is missing is created, what exists is left.
    Restore {
        instance: String,
        backup: String,
        /// The instance the backup was taken of (default: INSTANCE).
        #[arg(long)]
        from: Option<String>,
    },
    /// Back up INSTANCE every --every-minutes, keeping the newest --keep; --off stops it.
    Schedule {
        instance: String,
        #[arg(long, required_unless_present = "off")]
        every_minutes: Option<i32>,
        #[arg(long, default_value_t = 0)]
        keep: i32,
        #[arg(long, conflicts_with = "every_minutes")]
        off: bool,
    },
}

fn rows(items: &[Value]) -> Vec<Vec<String>> {
    let mut rows = vec![vec![
        "NAME".into(),
        "PHASE".into(),
        "STARTED".into(),
        "OBJECTS".into(),
        "BYTES".into(),
        "BY".into(),
        "MESSAGE".into(),
    ]];
    for b in items {
        rows.push(vec![
            s(b, "/name"),
            s(b, "/phase"),
            s(b, "/started"),
            n(b, "/objects"),
            n(b, "/sizeBytes"),
            s(b, "/requestedBy"),
            s(b, "/message"),
        ]);
    }
    rows
}

fn print_backup(out: Output, b: &proto::Backup) -> Result<(), Error> {
    print(out, "kairship.v1alpha1.Backup", b, |j| {
        rows(std::slice::from_ref(j))
    })
}

pub(crate) async fn run(conn: &Conn, out: Output, cmd: &BackupsCmd) -> Result<(), Error> {
    let mut c = InstanceServiceClient::new(conn.channel.clone());
    match cmd {
        BackupsCmd::List { instance } => {
            let r = c
                .list_backups(conn.request(proto::ListBackupsRequest {
                    name: instance.clone(),
                }))
                .await
                .map_err(status)?
                .into_inner();
            print(out, "kairship.v1alpha1.ListBackupsResponse", &r, |j| {
                rows(
                    j["backups"]
                        .as_array()
                        .map(Vec::as_slice)
                        .unwrap_or_default(),
                )
            })
        }
        BackupsCmd::Create { instance, wait } => {
            let mut b = c
                .create_backup(conn.request(proto::CreateBackupRequest {
                    name: instance.clone(),
                }))
                .await
                .map_err(status)?
                .into_inner();
            while *wait && b.phase == "Running" {
                eprintln!("{}: {}", b.name, b.message);
                tokio::time::sleep(Duration::from_secs(2)).await;
                b = get(conn, &mut c, instance, &b.name).await?;
            }
            print_backup(out, &b)?;
            match b.phase.as_str() {
                "Failed" => Err(Error::Usage(format!(
                    "backup {} failed: {}",
                    b.name, b.message
                ))),
                _ => Ok(()),
            }
        }
        BackupsCmd::Get { instance, backup } => {
            let b = get(conn, &mut c, instance, backup).await?;
            print_backup(out, &b)
        }
        BackupsCmd::Delete { instance, backup } => {
            c.delete_backup(conn.request(proto::DeleteBackupRequest {
                name: instance.clone(),
                backup: backup.clone(),
            }))
            .await
            .map_err(status)?;
            println!("backup {backup} deleted");
            Ok(())
        }
        BackupsCmd::Restore {
            instance,
            backup,
            from,
        } => {
            let r = c
                .restore_backup(conn.request_within(
                    proto::RestoreBackupRequest {
                        name: instance.clone(),
                        backup: backup.clone(),
                        source_instance: from.clone().unwrap_or_default(),
                    },
                    Duration::from_secs(600),
                ))
                .await
                .map_err(status)?
                .into_inner();
            print(out, "kairship.v1alpha1.RestoreResult", &r, |j| {
                let mut rows = vec![vec!["CREATED".into(), "EXISTING".into(), "FAILED".into()]];
                rows.push(vec![n(j, "/created"), n(j, "/existing"), n(j, "/failed")]);
                for f in j["failures"].as_array().into_iter().flatten() {
                    rows.push(vec![format!("failed: {}", f.as_str().unwrap_or_default())]);
                }
                rows
            })?;
            match r.failed {
                0 => Ok(()),
                k => Err(Error::Usage(format!("{k} objects were not restored"))),
            }
        }
        BackupsCmd::Schedule {
            instance,
            every_minutes,
            keep,
            off,
        } => {
            let mut i = c
                .get_instance(conn.request(proto::GetInstanceRequest {
                    name: instance.clone(),
                }))
                .await
                .map_err(status)?
                .into_inner();
            let spec = i.spec.get_or_insert_with(Default::default);
            spec.backup_schedule = Some(proto::BackupSchedule {
                interval_minutes: if *off { 0 } else { every_minutes.unwrap_or(0) },
                keep: *keep,
            });
            // The latest, whatever changed since the read: only the schedule is sent anew.
            if let Some(m) = i.metadata.as_mut() {
                m.resource_version.clear();
            }
            i.status = None;
            let r = c
                .update_instance(conn.request(proto::UpdateInstanceRequest { instance: Some(i) }))
                .await
                .map_err(status)?
                .into_inner();
            match r.spec.and_then(|s| s.backup_schedule) {
                Some(b) => println!(
                    "{instance}: a backup every {} minutes, the newest {} kept",
                    b.interval_minutes, b.keep
                ),
                None => println!("{instance}: no scheduled backups"),
            }
            Ok(())
        }
    }
}

async fn get(
    conn: &Conn,
    c: &mut InstanceServiceClient<tonic::transport::Channel>,
    instance: &str,
    backup: &str,
) -> Result<proto::Backup, Error> {
    Ok(c.get_backup(conn.request(proto::GetBackupRequest {
        name: instance.into(),
        backup: backup.into(),
    }))
    .await
    .map_err(status)?
    .into_inner())
}
