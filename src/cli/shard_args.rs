//! The flags of `kairship run` about sharding: whether instances are shared out across
//! the replicas, how a replica is reached by its peers, and the bounds of forwarding and
//! handoff. The shard Leases use the leader Lease's namespace and timings.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::api::forward::ForwardConfig;
use crate::host::shards::ShardConfig;
use crate::Error;

#[derive(Debug, Args, Clone)]
pub struct ShardArgs {
    /// Share the instances out across the replicas: each replica holds a Lease of its own
    /// (`kairship-shard-<replica>`) and runs only the instances rendezvous hashing gives it
    /// over the live ones, recorded on each Instance (`kairship.io/owner`); a request for
    /// an instance another replica runs is passed to it, and fleet search and the actor
    /// tree are gathered from every replica. A stopping replica hands its instances over
    /// before its listeners close. One replica alone owns every instance. On by default
    /// for `--role all`; `--shards=false` runs every instance on every replica.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub shards: Option<bool>,
    /// Where peers reach this replica's HTTPS port; by default `https://$POD_IP:<port of
    /// --http-addr>` (the chart passes the pod's IP), else the --http-addr itself. An
    /// `https://host:port` address: peers dial nothing else.
    #[arg(long, value_parser = crate::host::shards::peer_address)]
    pub shard_address: Option<String>,
    /// PEM of the CA that signed the replicas' serving certificate: peers are trusted only
    /// with a certificate it signed. By default the CA certificates that follow the serving
    /// one in --tls-cert-file; without either, a sharded replica does not start.
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
    /// before 503; by default twice the Lease duration plus two seconds (a dead replica's
    /// instances wait out its Lease, then for their new owners to record them).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub handoff_wait_secs: Option<u64>,
}

impl ShardArgs {
    /// Whether this replica shards: as told, else when it serves the API and runs
    /// instances (`--role all`), where a peer can be passed requests.
    pub fn enabled(&self, serves_and_runs: bool) -> bool {
        self.shards.unwrap_or(serves_and_runs)
    }

    /// The shard Leases' configuration, when sharded (`on`).
    pub fn shards(
        &self,
        on: bool,
        namespace: &str,
        replica: &str,
        identity: &str,
        lease: (Duration, Duration, Duration),
        http_addr: std::net::SocketAddr,
    ) -> Option<ShardConfig> {
        let (lease_duration, renew_deadline, retry_period) = lease;
        on.then(|| ShardConfig {
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

    /// How this replica forwards to its peers, when sharded (`on`); `serving_chain` is its
    /// own serving certificate chain (PEM), whose first DNS name is the default server
    /// name and whose CA certificates are the default peer CA.
    pub fn forward(
        &self,
        on: bool,
        serving_chain: Option<&[u8]>,
        lease_duration: Duration,
    ) -> Result<Option<ForwardConfig>, Error> {
        if !on {
            return Ok(None);
        }
        let ca_pem =
            match (&self.peer_ca_file, serving_chain.and_then(chain_ca)) {
                (Some(ca), _) => std::fs::read_to_string(ca)
                    .map_err(|e| Error::Usage(format!("--peer-ca-file {}: {e}", ca.display())))?,
                (None, Some(ca)) => ca,
                (None, None) => return Err(Error::Usage(
                    "sharding is on (the default for --role all) but there is no CA to verify the \
                 other replicas with: --tls-cert-file has no CA certificate after the serving one. \
                 Pass --peer-ca-file (the CA that signed the replicas' serving certificate, \
                 cert-manager's ca.crt), append the CA to --tls-cert-file, or pass \
                 --shards=false to run every instance on this replica"
                        .into(),
                )),
            };
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
            handoff_wait: self.handoff_wait_secs.map_or(
                ForwardConfig::default_handoff_wait(lease_duration),
                Duration::from_secs,
            ),
        }))
    }
}

/// The CA certificates (basic constraints CA) that follow the first certificate of a PEM
/// chain, as PEM: where a serving chain carries its CA, peers are verified with it.
pub(crate) fn chain_ca(pem: &[u8]) -> Option<String> {
    let mut out = String::new();
    for (i, block) in x509_parser::pem::Pem::iter_from_buffer(pem).enumerate() {
        let block = block.ok()?;
        if i == 0 || block.label != "CERTIFICATE" {
            continue;
        }
        let Ok(cert) = block.parse_x509() else {
            continue;
        };
        if cert.is_ca() {
            out.push_str(&kairship_wire::tls::pem_certificate(&block.contents));
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The first DNS subject alternative name of the first certificate in `pem`.
fn first_dns_name(pem: &[u8]) -> Option<String> {
    dns_names(pem).into_iter().next()
}

/// The DNS subject alternative names of the first certificate in `pem`.
pub(crate) fn dns_names(pem: &[u8]) -> Vec<String> {
    let Ok((_, block)) = x509_parser::pem::parse_x509_pem(pem) else {
        return Vec::new();
    };
    let Ok(cert) = block.parse_x509() else {
        return Vec::new();
    };
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
            _ => None,
        })
        .collect()
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

    #[test]
    fn the_peer_ca_defaults_to_the_ca_after_the_serving_certificate() {
        let cert = kairship_wire::tls::generate("kairship").expect("cert");
        // The serving certificate alone: no CA to verify peers with.
        assert_eq!(chain_ca(cert.cert_pem.as_bytes()), None);
        let chain = format!("{}{}", cert.cert_pem, cert.ca_pem);
        let ca = chain_ca(chain.as_bytes()).expect("the CA after the serving one");
        let (_, parsed) = x509_parser::pem::parse_x509_pem(ca.as_bytes()).expect("PEM");
        let (_, given) = x509_parser::pem::parse_x509_pem(cert.ca_pem.as_bytes()).expect("PEM");
        assert_eq!(parsed.contents, given.contents, "the same certificate");
        let args = ShardArgs {
            shards: None,
            shard_address: None,
            peer_ca_file: None,
            peer_server_name: None,
            forward_timeout_secs: 10,
            handoff_wait_secs: None,
        };
        assert!(args.enabled(true) && !args.enabled(false));
        let leaf_only = args.forward(
            true,
            Some(cert.cert_pem.as_bytes()),
            Duration::from_secs(15),
        );
        assert!(
            matches!(&leaf_only, Err(Error::Usage(m)) if m.contains("--peer-ca-file") && m.contains("--shards=false")),
            "{leaf_only:?}"
        );
        let forward = args
            .forward(true, Some(chain.as_bytes()), Duration::from_secs(15))
            .expect("configured")
            .expect("sharded");
        assert_eq!(forward.server_name, "localhost");
        assert!(args
            .forward(false, None, Duration::from_secs(15))
            .expect("off")
            .is_none());
    }
}
