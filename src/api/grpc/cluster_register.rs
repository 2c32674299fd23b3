//! Pull mode, as `karmadactl token create --print-register-command` does it: a bootstrap
//! token written to the instance's `kube-system` as the caller, and the `karmadactl
//! register` command a member's administrator runs there, which deploys karmada-agent;
//! the agent then registers the Cluster (`syncMode: Pull`), which Kairship lists as any.
//! Removal (`cluster_remove`) undoes it as `karmadactl unregister` does: the agent's
//! RBAC in the instance, and, given the member's kubeconfig, the agent on the member.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::cluster_join::CLUSTER_NAMESPACE;
use crate::api::member::Member;
use crate::api::request::OnInstance;
use crate::error::ApiError;
use crate::proto;

/// Karmada's group for tokens that register clusters (`DefaultGroups`).
const TOKEN_GROUP: &str = "system:bootstrappers:karmada:default-cluster-token";
const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);
const MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
const TOKEN_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// `len` characters of `[a-z0-9]`, as bootstrap tokens are made of.
fn random_chars(len: usize) -> Result<String, ApiError> {
    use ring::rand::SecureRandom;
    let rng = ring::rand::SystemRandom::new();
    let mut out = String::with_capacity(len);
    while out.len() < len {
        let mut b = [0u8; 1];
        rng.fill(&mut b)
            .map_err(|_| ApiError::Internal("no system randomness for a token".into()))?;
        // Rejection sampling keeps the characters uniform.
        if usize::from(b[0]) < 252 {
            out.push(char::from(
                TOKEN_CHARS[usize::from(b[0]) % TOKEN_CHARS.len()],
            ));
        }
    }
    Ok(out)
}

/// kubeadm's and Karmada's public key pin of a CA: `sha256:` and the hex SHA-256 of its
/// SubjectPublicKeyInfo.
pub fn ca_cert_hash(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let digest = ring::digest::digest(&ring::digest::SHA256, cert.public_key().raw);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    Some(format!("sha256:{hex}"))
}

pub async fn create_token(
    on: &OnInstance,
    req: proto::CreateRegistrationTokenRequest,
) -> Result<proto::RegistrationToken, ApiError> {
    let ttl = match req.ttl_seconds {
        0 => DEFAULT_TTL,
        s if s > 0 && Duration::from_secs(s as u64) <= MAX_TTL => Duration::from_secs(s as u64),
        s => {
            return Err(ApiError::invalid(
                "ttl_seconds",
                format!("{s} is not between 1 and {}", MAX_TTL.as_secs()),
            ))
        }
    };
    let inputs = on.certificate_inputs().ok_or_else(|| {
        ApiError::Unavailable(format!(
            "instance {:?} is not connected yet: its endpoint and CA are not known",
            on.instance()
        ))
    })?;
    let endpoint = match req.api_endpoint.is_empty() {
        false => req.api_endpoint.clone(),
        true => inputs
            .endpoint
            .as_ref()
            .map(|u| u.to_string())
            .unwrap_or_default(),
    };
    let endpoint = endpoint.trim_end_matches('/').to_string();
    if !endpoint.starts_with("https://") {
        return Err(ApiError::invalid(
            "api_endpoint",
            format!("{endpoint:?}: karmada-agent registers over HTTPS only"),
        ));
    }
    let hashes: Vec<String> = inputs
        .roots
        .iter()
        .filter_map(|d| ca_cert_hash(d))
        .collect();
    if hashes.is_empty() {
        return Err(ApiError::FailedPrecondition(format!(
            "instance {:?}'s kubeconfig carries no CA certificate: karmada-agent could not verify the control plane",
            on.instance()
        )));
    }
    let (id, secret) = (random_chars(6)?, random_chars(16)?);
    let expires = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(ttl.as_secs() as i64))
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let description = match req.description.is_empty() {
        true => "registers a member cluster (created through Kairship)".to_string(),
        false => req.description.clone(),
    };
    let obj: Secret = serde_json::from_value(json!({
        "metadata": {"name": format!("bootstrap-token-{id}"), "namespace": "kube-system"},
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {
            "token-id": id,
            "token-secret": secret,
            "expiration": expires,
            "description": description,
            "usage-bootstrap-authentication": "true",
            "usage-bootstrap-signing": "true",
            "auth-extra-groups": TOKEN_GROUP,
        },
    }))
    .map_err(|e| ApiError::Internal(e.to_string()))?;
    let name = format!("Secret kube-system/bootstrap-token-{id}");
    on.live(&name, |client| async move {
        let api: Api<Secret> = Api::namespaced(client, "kube-system");
        api.create(&PostParams::default(), &obj).await
    })
    .await?;
    let token = format!("{id}.{secret}");
    let command = format!(
        "karmadactl register {} --token {token} --discovery-token-ca-cert-hash {}",
        endpoint.trim_start_matches("https://"),
        hashes.join(",")
    );
    Ok(proto::RegistrationToken {
        token,
        expiration: expires,
        register_command: command,
        ca_cert_hashes: hashes,
    })
}

/// Where `karmadactl register` deploys karmada-agent on the member (its default).
const AGENT_NAMESPACE: &str = "karmada-system";
const AGENT: &str = "karmada-agent";

/// What `karmadactl register` writes in the instance for cluster `name`'s agent
/// (Karmada's `register.GenerateRBACResources`): (kind, namespace, name).
fn agent_rbac(name: &str) -> [(&'static str, Option<String>, String); 6] {
    let role = |suffix: &str| format!("system:karmada:{name}:agent{suffix}");
    let secrets = Some(CLUSTER_NAMESPACE.to_string());
    let works = Some(format!("karmada-es-{name}"));
    [
        ("ClusterRoleBinding", None, role("")),
        ("ClusterRole", None, role("")),
        ("RoleBinding", secrets.clone(), role("-secret")),
        ("Role", secrets, role("-secret")),
        ("RoleBinding", works.clone(), role("-work")),
        ("Role", works, role("-work")),
    ]
}

fn described(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Removes cluster `name`'s agent RBAC from the instance, as the caller; what was there.
/// Without it the agent could register the Cluster again.
pub async fn remove_agent_rbac(on: &OnInstance, name: &str) -> Result<Vec<String>, ApiError> {
    let mut removed = Vec::new();
    for (kind, namespace, object) in agent_rbac(name) {
        let what = described(kind, namespace.as_deref(), &object);
        let res = kube::discovery::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            kind,
        ));
        let call = format!("delete {what}");
        let deleted = on
            .live(&call, |client| async move {
                let api: Api<kube::api::DynamicObject> = match &namespace {
                    Some(ns) => Api::namespaced_with(client, ns, &res),
                    None => Api::all_with(client, &res),
                };
                api.delete(&object, &Default::default()).await
            })
            .await;
        match deleted {
            Ok(_) => removed.push(what),
            Err(ApiError::NotFound(_)) | Err(ApiError::Missing(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}

/// How long removal gives a Pull member's agent to take away what its Works put on the
/// member (`karmadactl unregister`'s default wait).
const WORKS_WAIT: Duration = Duration::from_secs(60);

/// Deletes cluster `name`'s Works while its execution namespace still exists, and waits
/// for its agent to remove what they put on the member and release them, as `karmadactl
/// unregister` does before deleting the Cluster: once Karmada deletes that namespace, its
/// Roles go first, the agent's right to update Works there with them, and the Works stay
/// stuck. Works Karmada makes again meanwhile are deleted again; the names of those left
/// after the wait are returned.
pub async fn drain_works(on: &OnInstance, name: &str) -> Result<Vec<String>, ApiError> {
    let deadline = std::time::Instant::now() + WORKS_WAIT;
    let namespace = format!("karmada-es-{name}");
    loop {
        let works = super::beside::works_of(on, name).await?.items;
        if works.is_empty() {
            return Ok(Vec::new());
        }
        if std::time::Instant::now() > deadline {
            return Ok(works
                .iter()
                .filter_map(|w| w.metadata.name.clone())
                .collect());
        }
        for work in works
            .iter()
            .filter(|w| w.metadata.deletion_timestamp.is_none())
        {
            let Some(work) = work.metadata.name.clone() else {
                continue;
            };
            let ns = namespace.clone();
            let call = format!("delete Work {ns}/{work}");
            let deleted = on
                .live(&call, |client| async move {
                    let res = super::beside::work_resource();
                    let api: Api<kube::api::DynamicObject> =
                        Api::namespaced_with(client, &ns, &res);
                    api.delete(&work, &Default::default()).await
                })
                .await;
            match deleted {
                Ok(_) | Err(ApiError::NotFound(_)) | Err(ApiError::Missing(_)) => {}
                Err(e) => return Err(e),
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// What `karmadactl register` puts on the member for its agent, all at `v1`:
/// (group, kind, namespace, name).
fn agent_objects() -> [(
    &'static str,
    &'static str,
    Option<&'static str>,
    &'static str,
); 5] {
    const RBAC: &str = "rbac.authorization.k8s.io";
    [
        ("apps", "Deployment", Some(AGENT_NAMESPACE), AGENT),
        (RBAC, "ClusterRoleBinding", None, AGENT),
        (RBAC, "ClusterRole", None, AGENT),
        (
            "",
            "ServiceAccount",
            Some(AGENT_NAMESPACE),
            "karmada-agent-sa",
        ),
        ("", "Secret", Some(AGENT_NAMESPACE), "karmada-kubeconfig"),
    ]
}

/// What a Pull member keeps when its kubeconfig was not given, for its administrator.
pub fn agent_left() -> Vec<String> {
    agent_objects()
        .iter()
        .map(|(_, kind, ns, n)| described(kind, *ns, n))
        .collect()
}

/// The cluster the member's karmada-agent registers (`--cluster-name`), if it runs one.
pub async fn agent_cluster(member: &Member) -> Result<Option<String>, ApiError> {
    let api: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(member.client.clone(), AGENT_NAMESPACE);
    let call = format!("get deployment {AGENT_NAMESPACE}/{AGENT}");
    let Some(agent) = member.call_unless_missing(&call, api.get(AGENT)).await? else {
        return Ok(None);
    };
    let args = agent
        .spec
        .and_then(|s| s.template.spec)
        .map(|p| p.containers)
        .unwrap_or_default()
        .into_iter()
        .flat_map(|c| {
            c.command
                .unwrap_or_default()
                .into_iter()
                .chain(c.args.unwrap_or_default())
        })
        .find_map(|a| a.strip_prefix("--cluster-name=").map(String::from));
    Ok(Some(args.unwrap_or_default()))
}

/// Removes karmada-agent and what `karmadactl register` created for it on the member
/// (not its namespace, which `karmadactl unregister` keeps too); what was there.
pub async fn remove_agent(member: &Member) -> Result<Vec<String>, ApiError> {
    let mut removed = Vec::new();
    for (group, kind, ns, name) in agent_objects() {
        let what = described(kind, ns, name);
        let res = kube::discovery::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            group, "v1", kind,
        ));
        let client = member.client.clone();
        let api: Api<kube::api::DynamicObject> = match ns {
            Some(ns) => Api::namespaced_with(client, ns, &res),
            None => Api::all_with(client, &res),
        };
        if delete_on(member, &api, name, &what).await? {
            removed.push(what);
        }
    }
    Ok(removed)
}

/// Deletes `name` on the member; whether it was there.
pub(super) async fn delete_on<K>(
    member: &Member,
    api: &Api<K>,
    name: &str,
    what: &str,
) -> Result<bool, ApiError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let call = format!("delete {what}");
    Ok(member
        .call_unless_missing(
            &call,
            api.delete(name, &kube::api::DeleteParams::background()),
        )
        .await?
        .is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_rbac_is_what_karmadactl_register_writes() {
        let names: Vec<String> = agent_rbac("edge")
            .iter()
            .map(|(k, ns, n)| described(k, ns.as_deref(), n))
            .collect();
        assert_eq!(
            names,
            [
                "ClusterRoleBinding system:karmada:edge:agent",
                "ClusterRole system:karmada:edge:agent",
                "RoleBinding karmada-cluster/system:karmada:edge:agent-secret",
                "Role karmada-cluster/system:karmada:edge:agent-secret",
                "RoleBinding karmada-es-edge/system:karmada:edge:agent-work",
                "Role karmada-es-edge/system:karmada:edge:agent-work",
            ]
        );
    }

    #[test]
    fn tokens_are_made_of_lowercase_letters_and_digits() {
        let t = random_chars(16).expect("randomness");
        assert_eq!(t.len(), 16);
        assert!(t.bytes().all(|b| TOKEN_CHARS.contains(&b)), "{t}");
        assert_ne!(t, random_chars(16).expect("randomness"));
    }

    #[test]
    fn the_pin_is_the_hash_of_the_public_key() {
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(Vec::<String>::new())
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        let pin = ca_cert_hash(cert.der()).expect("a pin");
        use rcgen::PublicKeyData;
        let spki = ring::digest::digest(&ring::digest::SHA256, &key.subject_public_key_info());
        let hex: String = spki.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(pin, format!("sha256:{hex}"));
    }
}
