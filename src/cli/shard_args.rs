//! The flags of `kairship run` about sharding: whether instances are shared out across
//! the replicas, how a replica is reached by its peers, and the bounds of forwarding and
//! handoff. The shard Leases use the leader Lease's namespace and timings.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::actors::shards::ShardConfig;
use crate::api::forward::ForwardConfig;
use crate::Error;

#[derive(Debug, Args, Clone)]
pub struct ShardArgs {
    /// Share the instances out across the replicas: each replica holds a Lease of its own
    /// (`kairship-shard-<replica>`) and runs only the instances rendezvous hashing gives it
    /// over the live ones, recorded on each Instance (`kairship.io/owner`); a request for
    /// an instance another replica runs is passed to it, and fleet search and the actor
    /// tree are gathered from every replica. A stopping replica hands its instances over
    /// before its listeners close.
    #[arg(long)]
    pub shards: bool,
    /// Where peers reach this replica's HTTPS port; by default `https://$POD_IP:<port of
    /// --http-addr>` (the chart passes the pod's IP), else the --http-addr itself. An
    /// `https://host:port` address: peers dial nothing else.
    #[arg(long, value_parser = crate::actors::shards::peer_address)]
    pub shard_address: Option<String>,
    /// PEM of the CA that signed the replicas' serving certificate: peers are trusted only
    /// with a certificate it signed. Required with --shards.
    #[arg(long)]
    pub peer_ca_file: Option<PathBuf>,
    /// The name the replicas' serving certificate is for (the Service's DNS name), checked
    /// whatever address a peer is dialled at; by default the certificate's first DNS name.
    #[arg(long)]
    pub peer_server_name: Option<String>,
    /// Seconds a peer may take to answer a forwarded request's head.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=300))]
    pub forward_timeout_secs: u64,
    /// Seconds a request for an instance that is changing hands waits for its new owner
    /// before 503; by default the Lease duration plus two seconds, the longest a dead
    /// replica's instances wait.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub handoff_wait_secs: Option<u64>,
}

impl ShardArgs {
    /// The shard Leases' configuration, when sharded.
    pub fn shards(
        &self,
        namespace: &str,
        replica: &str,
        identity: &str,
        lease: (Duration, Duration, Duration),
        http_addr: std::net::SocketAddr,
    ) -> Option<ShardConfig> {
        let (lease_duration, renew_deadline, retry_period) = lease;
        self.shards.then(|| ShardConfig {
            lease_duration,
            renew_deadline,
            retry_period,
            address: Some(self.address(http_addr)),
            ..ShardConfig::new(namespace, replica, identity)
        })
    }

    fn address(&self, http_addr: std::net::SocketAddr) -> String {
        if let Some(a) = &self.shard_address {
            return a.clone();
        }
        match std::env::var("POD_IP").ok().filter(|ip| !ip.is_empty()) {
            Some(ip) if ip.contains(':') => format!("https://[{ip}]:{}", http_addr.port()),
            Some(ip) => format!("https://{ip}:{}", http_addr.port()),
            None => format!("https://{http_addr}"),
        }
    }

    /// How this replica forwards to its peers, when sharded; `serving_chain` is its own
    /// serving certificate chain (PEM), whose first DNS name is the default server name.
    pub fn forward(
        &self,
        serving_chain: Option<&[u8]>,
        lease_duration: Duration,
    ) -> Result<Option<ForwardConfig>, Error> {
        if !self.shards {
            return Ok(None);
        }
        let ca = self.peer_ca_file.as_ref().ok_or_else(|| {
            Error::Usage("--shards needs --peer-ca-file (the CA of the replicas' serving certificate), so replicas can pass requests to each other".into())
        })?;
        let ca_pem = std::fs::read_to_string(ca)
            .map_err(|e| Error::Usage(format!("--peer-ca-file {}: {e}", ca.display())))?;
        let server_name = match (&self.peer_server_name, serving_chain) {
            (Some(n), _) => n.clone(),
            (None, Some(pem)) => first_dns_name(pem).ok_or_else(|| {
                Error::Usage(
                    "--peer-server-name is needed: the serving certificate names no DNS name"
                        .into(),
                )
            })?,
            (None, None) => {
                return Err(Error::Usage(
                    "--peer-server-name is needed without --tls-cert-file".into(),
                ))
            }
        };
        Ok(Some(ForwardConfig {
            ca_pem,
            server_name,
            head_timeout: Duration::from_secs(self.forward_timeout_secs),
            handoff_wait: self
                .handoff_wait_secs
                .map_or(lease_duration + Duration::from_secs(2), Duration::from_secs),
        }))
    }
}

/// The first DNS subject alternative name of the first certificate in `pem`.
fn first_dns_name(pem: &[u8]) -> Option<String> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem).ok()?;
    let cert = block.parse_x509().ok()?;
    let san = cert.subject_alternative_name().ok()??;
    san.value.general_names.iter().find_map(|n| match n {
        x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peer_server_name_defaults_to_the_serving_certificates_first_dns_name() {
        let cert = kairship_wire::tls::generate("kairship").expect("cert");
        assert_eq!(
            first_dns_name(cert.cert_pem.as_bytes()).as_deref(),
            Some("localhost")
        );
        assert_eq!(first_dns_name(b"not a certificate"), None);
    }
}
