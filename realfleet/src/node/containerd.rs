//! Debian's containerd and runc in the node's network namespace, with every directory
//! (content store, snapshots, runc state, pod network namespaces, CNI state) under the
//! node directory, and images imported from OCI archives since no registry is reachable.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{net, system_binary};
use crate::process::Proc;
use crate::Error;

pub const PAUSE_IMAGE: &str = "kairship.local/pause:1.0";

pub struct Containerd {
    pub proc: Proc,
    pub socket: PathBuf,
}

fn config(dir: &Path, runc: &Path) -> String {
    let d = dir.display();
    format!(
        r#"version = 2
root = "{d}/containerd/root"
state = "{d}/containerd/state"
oom_score = 0

[grpc]
  address = "{d}/containerd/containerd.sock"

[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # This machine's root lacks CAP_SYS_RESOURCE: never lower a process's oom_score_adj
  # below the runtime's own (as kind does), or runc fails to start containers.
  restrict_oom_score_adj = true
  # Pod network namespaces under the node directory, so the janitor finds them.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  disable_apparmor = true

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        Root = "{d}/runc"
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni}"
    conf_dir = "{d}/cni/net.d"
"#,
        runc = runc.display(),
        cni = CNI_BIN,
    )
}

/// Debian's containernetworking-plugins.
pub const CNI_BIN: &str = "/usr/lib/cni";

/// The pod network: one bridge, addresses from host-local (state under the node
/// directory), a default route through the bridge.
fn cni_conflist(dir: &Path) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "kairship-node",
        "plugins": [{
            "type": "bridge",
            "bridge": net::BRIDGE,
            "isGateway": true,
            // Pods talk only to the machine and each other; the machine routes back.
            "ipMasq": false,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": net::POD_CIDR, "gateway": net::POD_GATEWAY.to_string()}]],
                "routes": [{"dst": "0.0.0.0/0"}],
                "dataDir": dir.join("cni/ipam").display().to_string(),
            },
        }],
    })
    .to_string()
}

impl Containerd {
    pub async fn start(dir: &Path) -> Result<Self, Error> {
        let runc = system_binary("runc", "runc")?;
        let containerd = system_binary("containerd", "containerd")?;
        for b in ["bridge", "host-local", "loopback"] {
            if !Path::new(CNI_BIN).join(b).is_file() {
                return Err(Error::Invalid(format!(
                    "the CNI plugin {b} is missing from {CNI_BIN}: apt-get install containernetworking-plugins"
                )));
            }
        }
        for sub in ["containerd", "cni/net.d", "cni/ipam", "runc"] {
            let p = dir.join(sub);
            std::fs::create_dir_all(&p).map_err(Error::io(format!("creating {}", p.display())))?;
        }
        let write = |path: PathBuf, text: String| {
            std::fs::write(&path, text).map_err(Error::io(format!("writing {}", path.display())))
        };
        let conf = dir.join("containerd/config.toml");
        write(conf.clone(), config(dir, &runc))?;
        write(
            dir.join("cni/net.d/10-kairship.conflist"),
            cni_conflist(dir),
        )?;
        let socket = dir.join("containerd/containerd.sock");
        let proc = Proc::spawn(
            "containerd",
            &system_binary("nsenter", "util-linux")?,
            vec![
                format!("--net={}", net::netns_path()),
                containerd.display().to_string(),
                format!("--config={}", conf.display()),
                "--log-level=warn".into(),
            ],
            dir.join("containerd.log"),
        )?;
        let mut me = Self { proc, socket };
        me.wait_ready(Duration::from_secs(30)).await?;
        Ok(me)
    }

    async fn wait_ready(&mut self, within: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + within;
        loop {
            self.proc.check_alive()?;
            if self.socket.exists() && self.ctr(&["version"]).await.is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::NotReady {
                    what: "containerd".into(),
                    secs: within.as_secs(),
                    log: self.proc.log.display().to_string(),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// `ctr` against this containerd, in kubelet's namespace; its output on success.
    pub async fn ctr(&self, args: &[&str]) -> Result<String, Error> {
        let ctr = system_binary("ctr", "containerd")?;
        let out = tokio::time::timeout(
            Duration::from_secs(120),
            tokio::process::Command::new(&ctr)
                .arg(format!("--address={}", self.socket.display()))
                .args(["--namespace", "k8s.io"])
                .args(args)
                .output(),
        )
        .await
        .map_err(|_| Error::Invalid(format!("ctr {} took over 2 minutes", args.join(" "))))?
        .map_err(Error::io(format!("running ctr {}", args.join(" "))))?;
        if !out.status.success() {
            return Err(Error::Invalid(format!(
                "ctr {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Imports an OCI archive (`scripts/image/oci.py`), unpacked for the CRI snapshotter.
    pub async fn import(&self, archive: &Path) -> Result<(), Error> {
        if !archive.is_file() {
            return Err(Error::MissingBinary(archive.display().to_string()));
        }
        self.ctr(&["images", "import", &archive.display().to_string()])
            .await
            .map(|_| ())
    }

    /// Gives an imported image a second name (a new tag of the same bits).
    pub async fn tag(&self, from: &str, to: &str) -> Result<(), Error> {
        self.ctr(&["images", "tag", "--force", from, to])
            .await
            .map(|_| ())
    }
}
