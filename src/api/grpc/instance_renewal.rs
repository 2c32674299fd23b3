//! Renewing a managed instance's certificates (`InstanceService.RenewCertificates`):
//! karmada-operator's leaf certificates re-signed with the same CAs and keys
//! (`crd::operator_certs`), written back to its Secret under the version that was read,
//! then every component but etcd rolled by an annotation in the Instance's Karmada spec.
//! Kairship's lifecycle applies that spec; the operator then copies the certificates
//! into its other Secrets, writes fresh kubeconfigs (Kairship's connection picks its up
//! as the instance reconnects) and updates the components, which restart on the new
//! certificates. etcd is never rolled: its data may live in an emptyDir, and it reads its
//! serving certificate for each new connection. Admin on the instance; host access with
//! Kairship's identity after the chain.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{json, Map, Value};

use super::instance_components::{bounded, scope};
use crate::api::context::ApiContext;
use crate::crd::operator_certs::{self, RenewError};
use crate::error::ApiError;
use crate::proto;

/// The annotation whose new value rolls a component.
pub const RENEWED_AT: &str = "kairship.io/certificates-renewed-at";

pub async fn renew(
    ctx: &ApiContext,
    req: proto::RenewCertificatesRequest,
) -> Result<proto::RenewCertificatesResponse, ApiError> {
    let instance = ctx.instance(&req.name)?;
    let (ns, _) = scope(ctx, &instance)?;
    let host = ctx.tree.host().clone();
    let secrets: Api<Secret> = Api::namespaced(host.clone(), &ns);
    let name = operator_certs::secret_name(&req.name);
    let what = format!("Secret {ns}/{name}");
    let mut secret = bounded(ctx, &what, secrets.get(&name)).await?;
    let data: BTreeMap<String, Vec<u8>> = secret
        .data
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    let (renewed_data, renewed) = operator_certs::renew(&data, x509_parser::time::ASN1Time::now())
        .map_err(|e| match e {
            RenewError::Signing { .. } => ApiError::Internal(format!("{what}: {e}")),
            other => ApiError::FailedPrecondition(format!("{what}: {other}")),
        })?;
    secret.data = Some(
        renewed_data
            .into_iter()
            .map(|(k, v)| (k, ByteString(v)))
            .collect(),
    );
    // Replaced under the version read: a change meanwhile (the operator's own) is a
    // conflict to retry, never overwritten.
    bounded(
        ctx,
        &what,
        secrets.replace(&name, &PostParams::default(), &secret),
    )
    .await?;
    tracing::info!(instance = %req.name, secret = %what, renewed = renewed.len(), "certificates renewed");

    // Every component block the Karmada object has (the operator's defaults name them
    // all), but etcd; adding a block would install a component.
    let karmadas: Api<DynamicObject> = Api::namespaced_with(
        host.clone(),
        &ns,
        &crate::actors::instance::connect::karmada_resource(),
    );
    let karmada = bounded(
        ctx,
        &format!("Karmada {ns}/{}", req.name),
        karmadas.get(&req.name),
    )
    .await?;
    let at = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let mut components = Map::new();
    for (c, _) in karmada.data["spec"]["components"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(c, _)| c.as_str() != "etcd")
    {
        components.insert(c.clone(), json!({"annotations": {RENEWED_AT: at}}));
    }
    let rolled: Vec<String> = components.keys().cloned().collect();
    let instances: Api<crate::crd::Instance> = Api::all(host);
    let patch =
        json!({"spec": {"managed": {"karmadaSpec": {"components": Value::Object(components)}}}});
    bounded(
        ctx,
        &format!("instance {:?}", req.name),
        instances.patch(&req.name, &PatchParams::default(), &Patch::Merge(&patch)),
    )
    .await?;
    Ok(proto::RenewCertificatesResponse {
        certificates: renewed
            .into_iter()
            .map(|r| proto::Certificate {
                name: format!("{name}/{}.crt", r.name),
                not_after: r.not_after,
                ..Default::default()
            })
            .collect(),
        rolled,
    })
}
