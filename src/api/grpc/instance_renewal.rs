//! `InstanceService.RenewCertificates`: an instance admin's renewal of a managed
//! instance's certificates (`certificates::renewal`), with Kairship's host identity
//! once the chain has authorized and audited the request.

use super::instance_components::owned_scope;
use crate::api::context::ApiContext;
use crate::certificates::renewal::{self, RenewalError};
use crate::crd::operator_certs::RenewError;
use crate::error::ApiError;
use crate::proto;

pub async fn renew(
    ctx: &ApiContext,
    req: proto::RenewCertificatesRequest,
) -> Result<proto::RenewCertificatesResponse, ApiError> {
    let instance = ctx.instance(&req.name)?;
    let (ns, _) = owned_scope(ctx, &instance).await?;
    let timeout = ctx.tree.settings().host_call_timeout;
    let done = renewal::renew(ctx.tree.host(), &ns, &req.name, timeout)
        .await
        .map_err(|e| match e {
            RenewalError::Host(h) => ApiError::from(h),
            RenewalError::Certificates {
                source: RenewError::Signing { .. },
                ..
            } => ApiError::Internal(e.to_string()),
            RenewalError::Certificates { .. }
            | RenewalError::Busy { .. }
            | RenewalError::NotOurs { .. } => ApiError::FailedPrecondition(e.to_string()),
        })?;
    Ok(proto::RenewCertificatesResponse {
        certificates: done
            .renewed
            .into_iter()
            .map(|r| proto::Certificate {
                name: format!("{}/{}.crt", done.secret, r.name),
                not_after: r.not_after,
                ..Default::default()
            })
            .collect(),
        rolled: done.rolled,
    })
}
