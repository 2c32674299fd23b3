//! Kubeconfigs handed to Kairship (an instance's Secret, a member a caller joins): where
//! one lives, reading it from its Secret, and refusing what would run or read anything
//! inside Kairship.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::config::Kubeconfig;

/// Where the instance's kubeconfig lives (the Secret Kairship itself connects with).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeconfigSource {
    pub namespace: String,
    pub name: String,
    pub key: String,
}

/// A kubeconfig handed to Kairship (an instance's Secret, a member a caller joins):
/// self-contained credentials only. Exec plugins and auth providers would run commands
/// inside Kairship, and file paths would read Kairship's own files, on behalf of whoever
/// wrote the kubeconfig. `for_what` names its use in refusals ("an instance").
pub fn parse_kubeconfig(text: &str, for_what: &str) -> Result<Kubeconfig, String> {
    // Never the parser's words: they quote the value, which may be any Secret's content.
    let kc = Kubeconfig::from_yaml(text)
        .map_err(|_| "invalid kubeconfig: the value is not a kubeconfig document".to_string())?;
    let refuse = |what: &str, name: &str| {
        Err(format!(
            "kubeconfig {what} {name:?} is not allowed for {for_what}: use inline data (a token or *-data fields)"
        ))
    };
    for c in &kc.clusters {
        if c.cluster
            .as_ref()
            .is_some_and(|c| c.certificate_authority.is_some())
        {
            return refuse("cluster with a certificate-authority file", &c.name);
        }
    }
    for a in &kc.auth_infos {
        let Some(info) = &a.auth_info else { continue };
        if info.exec.is_some() {
            return refuse("user with an exec plugin", &a.name);
        }
        if info.auth_provider.is_some() {
            return refuse("user with an auth-provider", &a.name);
        }
        if info.client_certificate.is_some() || info.client_key.is_some() {
            return refuse("user with client-certificate/client-key files", &a.name);
        }
        if info.token_file.is_some() {
            return refuse("user with a tokenFile", &a.name);
        }
    }
    Ok(kc)
}

/// An error's own words without what it quotes after the first colon (a context's name,
/// bytes of a certificate): the Secret's content stays out of statuses and logs.
pub fn without_detail(e: &dyn std::fmt::Display) -> String {
    let text = e.to_string();
    text.split(": ").next().unwrap_or_default().to_string()
}

/// The value under `key` of Secret `ns/name` on the host, bounded by `timeout`.
pub async fn secret_value(
    host: &kube::Client,
    timeout: Duration,
    ns: &str,
    name: &str,
    key: &str,
) -> Result<Vec<u8>, String> {
    let secrets: Api<Secret> = Api::namespaced(host.clone(), ns);
    let secret = tokio::time::timeout(timeout, secrets.get_opt(name))
        .await
        .map_err(|_| "the host API did not answer in time".to_string())?
        .map_err(|e| format!("reading secret {ns}/{name}: {e}"))?
        .ok_or_else(|| format!("kubeconfig secret {ns}/{name} not found"))?;
    secret
        .data
        .and_then(|mut d| d.remove(key))
        .map(|b| b.0)
        .ok_or_else(|| format!("secret {ns}/{name} has no key {key:?}"))
}
