//! Renewing a managed instance's certificates, on request (`InstanceService.
//! RenewCertificates`) or by the leader before they expire (`--certificate-auto-renew-
//! days`): karmada-operator's leaf certificates re-signed with the same CAs and keys
//! (`crd::operator_certs`), written back to its Secret under the version that was read,
//! then every component but etcd rolled by an annotation in the Instance's Karmada spec.
//! Kairship's lifecycle applies that spec; the operator then copies the certificates into
//! its other Secrets, writes fresh kubeconfigs (Kairship's connection picks its up as the
//! instance reconnects) and updates the components, which restart on the new
//! certificates. etcd is never rolled: its data may live in an emptyDir, and it reads its
//! serving certificate for each new connection.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{json, Map, Value};

use crate::crd::operator_certs::{self, RenewError, Renewed};
use crate::crd::CertificateStatus;
use crate::host::error::{bounded, HostError};
use crate::host::karmada;

/// The annotation whose new value rolls a component.
pub const RENEWED_AT: &str = "kairship.io/certificates-renewed-at";
/// After an automatic attempt, the next waits this long (and for a fresh certificate
/// check), so a renewal the certificates do not show yet is never repeated at once.
pub const RETRY_AFTER: Duration = Duration::from_secs(3600);

#[derive(Debug, thiserror::Error)]
pub enum RenewalError {
    #[error(transparent)]
    Host(#[from] HostError),
    /// karmada-operator is running its workflow: it would write back the certificates it
    /// loaded before the renewal.
    #[error(
        "karmada-operator is applying a change to {name} (Ready: {ready}); renew once it is done"
    )]
    Busy { name: String, ready: String },
    /// A same-named `Karmada` object someone else made: not this instance's to renew.
    #[error("Karmada {ns}/{name} is not Kairship's (it lacks the label {label}={name}): Kairship renews no certificates of it", label = crate::host::scope::OWNER_LABEL)]
    NotOurs { ns: String, name: String },
    #[error("{secret}: {source}")]
    Certificates {
        secret: String,
        #[source]
        source: RenewError,
    },
}

/// What a renewal did: the leaves renewed and the components rolled.
#[derive(Debug, Clone)]
pub struct Done {
    pub secret: String,
    pub renewed: Vec<Renewed>,
    pub rolled: Vec<String>,
}

/// Renews the certificates of the managed instance `name`, whose Karmada object is in
/// `ns`; each host call bounded by `timeout`.
pub async fn renew(
    host: &kube::Client,
    ns: &str,
    name: &str,
    timeout: Duration,
) -> Result<Done, RenewalError> {
    // The operator idle first: a workflow in progress uploads the certificates it loaded
    // at its start, which would undo the renewal.
    let karmadas: Api<DynamicObject> =
        Api::namespaced_with(host.clone(), ns, &karmada::karmada_resource());
    let what = format!("Karmada {ns}/{name}");
    let karmada = bounded(&what, timeout, karmadas.get(name)).await?;
    if !karmada::owned(&karmada, name) {
        return Err(RenewalError::NotOurs {
            ns: ns.to_string(),
            name: name.to_string(),
        });
    }
    let ready = karmada.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready");
    if ready.is_none_or(|c| c["status"] != "True") {
        let ready = ready.map_or("not reported".to_string(), |c| {
            format!(
                "{} {}: {}",
                c["status"].as_str().unwrap_or_default(),
                c["reason"].as_str().unwrap_or_default(),
                c["message"].as_str().unwrap_or_default()
            )
        });
        return Err(RenewalError::Busy {
            name: name.to_string(),
            ready,
        });
    }
    let secrets: Api<Secret> = Api::namespaced(host.clone(), ns);
    let secret_name = operator_certs::secret_name(name);
    let what = format!("Secret {ns}/{secret_name}");
    let mut secret = bounded(&what, timeout, secrets.get(&secret_name)).await?;
    let data: BTreeMap<String, Vec<u8>> = secret
        .data
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    let (renewed_data, renewed) = operator_certs::renew(&data, x509_parser::time::ASN1Time::now())
        .map_err(|source| RenewalError::Certificates {
            secret: what.clone(),
            source,
        })?;
    secret.data = Some(
        renewed_data
            .into_iter()
            .map(|(k, v)| (k, ByteString(v)))
            .collect(),
    );
    // Replaced under the version read: a change meanwhile (the operator's own) is a
    // conflict to retry, never overwritten.
    let post = PostParams::default();
    let replace = secrets.replace(&secret_name, &post, &secret);
    bounded(&what, timeout, replace).await?;
    tracing::info!(instance = %name, secret = %what, renewed = renewed.len(), "certificates renewed");

    // Every component block the Karmada object has (the operator's defaults name them
    // all), but etcd; adding a block would install a component.
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
    let instances: Api<crate::crd::Instance> = Api::all(host.clone());
    let patch =
        json!({"spec": {"managed": {"karmadaSpec": {"components": Value::Object(components)}}}});
    let what = format!("instance {name:?}");
    let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
    let patched = instances.patch(name, &params, &patch);
    bounded(&what, timeout, patched).await?;
    Ok(Done {
        secret: secret_name,
        renewed,
        rolled,
    })
}

/// Whether the leaves in `certificates` (as the certificate check read them) call for an
/// automatic renewal: the first of the operator's leaves expires within `window` of `now`.
pub fn due(
    certificates: &[CertificateStatus],
    name: &str,
    window: Duration,
    now: jiff::Timestamp,
) -> bool {
    let secret = operator_certs::secret_name(name);
    certificates.iter().any(|c| {
        let leaf = c
            .name
            .strip_prefix(&format!("{secret}/"))
            .and_then(|k| k.strip_suffix(".crt"));
        leaf.is_some_and(|l| operator_certs::LEAVES.iter().any(|(n, _)| *n == l))
            && c.not_after.parse::<jiff::Timestamp>().is_ok_and(|at| {
                at.as_second() - now.as_second()
                    < i64::try_from(window.as_secs()).unwrap_or(i64::MAX)
            })
    })
}

/// Whether `instance`'s Karmada spec says its certificates were renewed within
/// [`RECHECK_FOR`] (its components are rolling onto them: the certificate check runs every
/// [`RECHECK_EVERY`] meanwhile, so the new serving certificate shows soon).
pub fn recently_renewed(instance: &crate::crd::Instance, now: jiff::Timestamp) -> bool {
    let spec = instance
        .spec
        .managed
        .as_ref()
        .and_then(|m| m.karmada_spec.as_ref());
    spec.and_then(|s| s["components"].as_object())
        .into_iter()
        .flatten()
        .filter_map(|(_, c)| c["annotations"][RENEWED_AT].as_str())
        .filter_map(|t| t.parse::<jiff::Timestamp>().ok())
        .any(|t| now.as_second() - t.as_second() < RECHECK_FOR.as_secs() as i64)
}

/// How long after a renewal the certificates are read every [`RECHECK_EVERY`].
pub const RECHECK_FOR: Duration = Duration::from_secs(900);
pub const RECHECK_EVERY: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_operators_leaves_near_expiry_call_for_a_renewal() {
        let now: jiff::Timestamp = "2026-11-26T00:00:00Z".parse().expect("time");
        let cert = |name: &str, after: &str| CertificateStatus {
            name: name.into(),
            subject: String::new(),
            not_before: None,
            not_after: after.into(),
        };
        let window = Duration::from_secs(30 * 86_400);
        let soon = "2026-12-10T00:00:00Z";
        let later = "2027-11-01T00:00:00Z";
        assert!(due(
            &[cert("team-a-karmada-cert/apiserver.crt", soon)],
            "team-a",
            window,
            now
        ));
        assert!(!due(
            &[cert("team-a-karmada-cert/apiserver.crt", later)],
            "team-a",
            window,
            now
        ));
        // A CA (not renewed here), the kubeconfig's, another instance's: not ours to renew.
        assert!(!due(
            &[cert("team-a-karmada-cert/ca.crt", soon)],
            "team-a",
            window,
            now
        ));
        assert!(!due(
            &[cert("kubeconfig client", soon)],
            "team-a",
            window,
            now
        ));
        assert!(!due(
            &[cert("team-b-karmada-cert/apiserver.crt", soon)],
            "team-a",
            window,
            now
        ));
    }
}
