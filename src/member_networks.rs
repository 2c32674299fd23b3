//! Where Kairship may dial for a caller: the API server of a member cluster the caller
//! names in a kubeconfig (join, remove). Kairship runs inside the host cluster with its
//! own credentials and network position, so an address a caller chooses must not reach
//! what only Kairship can reach: loopback, link-local (cloud metadata services),
//! unspecified and multicast addresses are refused, with the networks an operator adds
//! (the host's service and pod CIDRs), unless an allowed network names them. The caller
//! learns that the address was refused, never what answered there.

use std::net::IpAddr;

use ipnet::IpNet;

/// The networks refused and allowed for member addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberNetworks {
    /// Refused besides the built-in ones (the host's service and pod networks).
    pub denied: Vec<IpNet>,
    /// Allowed even when refused otherwise (a lab whose members run on loopback).
    pub allowed: Vec<IpNet>,
}

impl MemberNetworks {
    /// Loopback allowed: the demo's and the tests' members run on 127.0.0.1.
    pub fn allowing_loopback() -> Self {
        Self {
            denied: Vec::new(),
            allowed: ["127.0.0.0/8", "::1/128"]
                .iter()
                .filter_map(|n| n.parse().ok())
                .collect(),
        }
    }

    /// Why `ip` may not be dialled, if it may not.
    pub fn refusal(&self, ip: IpAddr) -> Option<String> {
        if self.allowed.iter().any(|n| n.contains(&ip)) {
            return None;
        }
        let builtin = match ip {
            IpAddr::V4(v4) => [
                (v4.is_loopback(), "loopback"),
                (v4.is_link_local(), "link-local"),
                (v4.is_unspecified(), "unspecified"),
                (v4.is_multicast() || v4.is_broadcast(), "multicast"),
            ],
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => return self.refusal(IpAddr::V4(v4)),
                None => [
                    (v6.is_loopback(), "loopback"),
                    ((v6.segments()[0] & 0xffc0) == 0xfe80, "link-local"),
                    (v6.is_unspecified(), "unspecified"),
                    (v6.is_multicast(), "multicast"),
                ],
            },
        }
        .into_iter()
        .find_map(|(is, kind)| is.then_some(kind));
        if let Some(kind) = builtin {
            return Some(format!("{ip} is a {kind} address"));
        }
        self.denied
            .iter()
            .find(|n| n.contains(&ip))
            .map(|n| format!("{ip} is in {n}, a network member clusters may not be in here"))
    }
}

/// One CIDR of `--member-denied-cidrs` / `--member-allowed-cidrs`.
pub fn parse_cidr(c: &str) -> Result<IpNet, String> {
    c.trim()
        .parse::<IpNet>()
        .map_err(|e| format!("{c:?} is not a CIDR: {e}"))
}

/// Comma-separated CIDRs (empty entries skipped).
pub fn parse_cidrs(s: &str) -> Result<Vec<IpNet>, String> {
    s.split(',')
        .filter(|c| !c.trim().is_empty())
        .map(parse_cidr)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_refused_unless_allowed() {
        let n = MemberNetworks {
            denied: parse_cidrs("10.96.0.0/12, 10.244.0.0/16").expect("cidrs"),
            allowed: Vec::new(),
        };
        for ip in [
            "127.0.0.1",
            "169.254.169.254",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "10.96.0.1",
            "10.244.3.7",
            "224.0.0.1",
        ] {
            assert!(n.refusal(ip.parse().expect("ip")).is_some(), "{ip}");
        }
        for ip in ["10.0.0.5", "192.0.2.10", "2001:db8::1"] {
            assert_eq!(n.refusal(ip.parse().expect("ip")), None, "{ip}");
        }
        let lab = MemberNetworks::allowing_loopback();
        assert_eq!(lab.refusal("127.0.0.1".parse().expect("ip")), None);
        assert!(lab
            .refusal("169.254.169.254".parse().expect("ip"))
            .is_some());
        assert!(parse_cidrs("10.0.0.0/33").is_err());
    }
}
