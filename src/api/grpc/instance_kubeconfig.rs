//! `InstanceService.GetKubeconfig`: a kubeconfig for one instance through Kairship, made
//! by `api::kubeconfigs` from where the request reached Kairship.

use tonic::Request;

use crate::api::chain::audit::Record;
use crate::api::chain::Authorized;
use crate::api::context::ApiContext;
use crate::api::kubeconfigs::{Ask, Reached};
use crate::error::{check_name, ApiError};
use crate::proto;

pub fn get(
    ctx: &ApiContext,
    req: Request<proto::GetKubeconfigRequest>,
) -> Result<proto::Kubeconfig, ApiError> {
    let authorized = Authorized::of(&req)?;
    let reached = req.extensions().get::<Reached>().cloned();
    // The token the chain authenticated this request with: the caller's own.
    let token = req
        .metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(crate::auth::bearer)
        .map(str::to_string);
    let record = req.extensions().get::<Record>().cloned();
    let r = req.into_inner();
    if r.include_token {
        // A credential handed out is audited whatever the outcome, as a write is.
        if let Some(record) = &record {
            record.update(|f| f.writes = true);
        }
    }
    check_name("name", &r.name)?;
    authorized.instance(&r.name)?;
    ctx.instance(&r.name)?;
    let ask = Ask {
        instance: &r.name,
        form: &r.form,
        server: &r.server,
        token: token.as_deref().filter(|_| r.include_token),
    };
    let issued = ctx.kubeconfigs.issue(&ask, reached.as_ref())?;
    // One line per value, as kubectl writes them (no folded base64).
    let mut options = serde_saphyr::SerializerOptions::default();
    options.prefer_block_scalars = false;
    let kubeconfig = serde_saphyr::to_string_with_options(&issued.config, options)
        .map_err(|e| ApiError::Internal(format!("writing the kubeconfig: {e}")))?;
    let has_token = ask.token.is_some();
    tracing::info!(instance = %r.name, form = issued.form.as_str(), server = %issued.server, has_token, "kubeconfig handed out");
    Ok(proto::Kubeconfig {
        kubeconfig,
        server: issued.server,
        tls_server_name: issued.tls_server_name.unwrap_or_default(),
        form: issued.form.as_str().to_string(),
        has_token,
        has_ca: ctx.kubeconfigs.ca_pem.is_some(),
    })
}
