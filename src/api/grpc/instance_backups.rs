//! `InstanceService`'s backups (`backups`): taken and restored as the caller on the
//! instance (an admin there), kept in the host with Kairship's identity. A backup is
//! reached only through the instance it is of, and a restore from another instance needs
//! the admin role on that one too, so an admin of one instance can neither read nor
//! restore another's objects through its backups.

use tonic::Request;

use crate::api::chain::authz::Authorized;
use crate::api::context::ApiContext;
use crate::auth::Role;
use crate::backups::{archive, restore, take, BackupError, Phase};
use crate::error::{check_name, ApiError};
use crate::proto;

pub async fn create(
    ctx: &ApiContext,
    req: Request<proto::CreateBackupRequest>,
) -> Result<proto::Backup, ApiError> {
    let authorized = Authorized::of(&req)?;
    let name = &req.get_ref().name;
    let on = ctx.on_instance(&authorized, name).await?;
    let instance = ctx.instance(name)?;
    let store = store(ctx);
    let request = take::Request {
        instance: name.clone(),
        karmada_version: instance
            .status
            .as_ref()
            .and_then(|s| s.karmada_version.clone())
            .unwrap_or_default(),
        requested_by: authorized.caller().user.name.clone(),
        scheduled: false,
        keep: instance.spec.backup_schedule.as_ref().map(|s| s.keep()),
    };
    let record = take::start(store, on.acting_client()?, request, on.call_timeout()).await?;
    Ok(record.to_proto())
}

fn store(ctx: &ApiContext) -> crate::backups::Store {
    ctx.tree.settings().backup_store(ctx.tree.host())
}

pub async fn list(
    ctx: &ApiContext,
    req: proto::ListBackupsRequest,
) -> Result<proto::ListBackupsResponse, ApiError> {
    ctx.instance(&req.name)?;
    let store = store(ctx);
    let backups = store.list(&req.name).await?;
    Ok(proto::ListBackupsResponse {
        backups: backups.iter().map(|r| r.to_proto()).collect(),
    })
}

pub async fn get(
    ctx: &ApiContext,
    req: proto::GetBackupRequest,
) -> Result<proto::Backup, ApiError> {
    check_name("backup", &req.backup)?;
    let store = store(ctx);
    Ok(store.get(&req.name, &req.backup).await?.to_proto())
}

pub async fn delete(
    ctx: &ApiContext,
    req: proto::DeleteBackupRequest,
) -> Result<proto::DeleteBackupResponse, ApiError> {
    check_name("backup", &req.backup)?;
    let store = store(ctx);
    let record = store.get(&req.name, &req.backup).await?;
    if record.phase == Phase::Running {
        return Err(ApiError::FailedPrecondition(format!(
            "backup {:?} is running ({}); delete it once it is done",
            record.name, record.message
        )));
    }
    store.delete(&record).await?;
    Ok(proto::DeleteBackupResponse {})
}

pub async fn restore(
    ctx: &ApiContext,
    req: Request<proto::RestoreBackupRequest>,
) -> Result<proto::RestoreResult, ApiError> {
    let authorized = Authorized::of(&req)?;
    let r = req.get_ref();
    check_name("backup", &r.backup)?;
    let source = match r.source_instance.as_str() {
        "" => r.name.clone(),
        s => s.to_string(),
    };
    if source != r.name {
        ctx.authorize(
            authorized.caller(),
            Role::Admin,
            &source,
            "restore the backups of",
        )?;
    }
    let store = store(ctx);
    let record = store.get(&source, &r.backup).await?;
    if record.phase != Phase::Completed {
        return Err(BackupError::NotCompleted {
            backup: record.name,
            phase: record.phase,
        }
        .into());
    }
    let data = store.read_data(&record).await?;
    let entries = archive::read(&data).map_err(|why| BackupError::Corrupt {
        backup: record.name.clone(),
        why,
    })?;
    let on = ctx.on_instance(&authorized, &r.name).await?;
    let client = on.acting_client()?;
    tracing::info!(instance = %r.name, backup = %record.name, objects = entries.len(), "restoring");
    let out = restore::restore(&client, entries, on.call_timeout()).await;
    tracing::info!(
        instance = %r.name, backup = %record.name,
        created = out.created, existing = out.existing, failed = out.failed,
        "restored"
    );
    let n = |v: u64| i32::try_from(v).unwrap_or(i32::MAX);
    Ok(proto::RestoreResult {
        backup: record.name,
        created: n(out.created),
        existing: n(out.existing),
        failed: n(out.failed),
        failures: out.failures,
        resources: out.resources.into_iter().map(|(k, v)| (k, n(v))).collect(),
    })
}

/// A backup's failure as the API answers it.
impl From<BackupError> for ApiError {
    fn from(e: BackupError) -> Self {
        match e {
            BackupError::Host(h) => ApiError::from(h),
            BackupError::NotFound { .. } => ApiError::NotFound(e.to_string()),
            BackupError::Running { .. } => ApiError::AlreadyExists(e.to_string()),
            BackupError::Full { .. } => ApiError::ResourceExhausted(e.to_string()),
            BackupError::Storage { .. } => ApiError::Unavailable(e.to_string()),
            BackupError::Corrupt { .. } => ApiError::Internal(e.to_string()),
            BackupError::Instance(_) => ApiError::Unavailable(e.to_string()),
            BackupError::NoDestination { .. } | BackupError::NotCompleted { .. } => {
                ApiError::FailedPrecondition(e.to_string())
            }
        }
    }
}
