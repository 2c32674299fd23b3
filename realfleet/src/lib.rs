//! A real Karmada fleet as plain processes on loopback, built from upstream Go modules by
//! `scripts/real-fleet/build.sh`: one etcd (each API server under its own key prefix), a
//! host kube-apiserver, and per Karmada instance a kube-apiserver serving as
//! karmada-apiserver with Karmada's CRDs, karmada-aggregated-apiserver (Clusters, through
//! an APIService), karmada-controller-manager and karmada-scheduler, plus member clusters
//! (a kube-apiserver each, with Node objects the harness creates since no kubelet runs),
//! joined in Push mode as `karmadactl join` does.
//!
//! Used by `kairship demo --fleet real` and the real-fleet test tier. Layout:
//! [`process`] runs and stops children; [`pki`] makes certificates; [`apiserver`] starts a
//! kube-apiserver; [`karmada`] adds Karmada's components and joins members; [`members`]
//! creates Nodes and fills Deployment status; [`faults`] acts on real processes;
//! [`pull_mode`] readies an instance for `karmadactl register`;
//! [`node`] adds a kubelet-backed node to the host (`kairship demo --fleet cluster`);
//! [`dex`] runs Dex as a real OIDC provider.

pub mod apiserver;
pub mod dex;
pub mod faults;
pub mod fleet;
pub mod karmada;
pub mod members;
pub mod node;
pub mod operator;
pub mod pki;
pub mod process;
pub mod pull_mode;

pub use fleet::{FleetConfig, RealFleet};

/// Why the real fleet could not start or act.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0} is not built: run scripts/real-fleet/build.sh (it prints the bin directory), or set KAIRSHIP_REAL_BIN")]
    MissingBinary(String),
    #[error("{what} did not become ready within {secs}s; its log is {log}")]
    NotReady {
        what: String,
        secs: u64,
        log: String,
    },
    #[error("{what} exited early ({status}); its log is {log}, ending:\n{tail}")]
    Exited {
        what: String,
        status: String,
        log: String,
        tail: String,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error("{context}: {source}")]
    Kube {
        context: String,
        source: kube::Error,
    },
    #[error("certificates: {0}")]
    Pki(String),
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }

    pub fn kube(context: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let context = context.into();
        move |source| Self::Kube { context, source }
    }
}

/// Where `scripts/real-fleet/build.sh` puts the binaries (KAIRSHIP_REAL_BIN overrides).
pub fn default_bin_dir() -> std::path::PathBuf {
    if let Some(d) = std::env::var_os("KAIRSHIP_REAL_BIN") {
        return d.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| "/tmp".into());
    cache
        .join("kairship/real/k8s-v1.35.3-etcd-v3.6.7-karmada-v1.18.2")
        .join("bin")
}
