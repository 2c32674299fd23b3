//! Child processes with their output in a log file, stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::{Child, Command};

use crate::Error;

pub struct Proc {
    pub name: String,
    pub log: PathBuf,
    program: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
}

impl Proc {
    /// Starts `program args`, appending its stdout and stderr to `log`.
    pub fn spawn(
        name: &str,
        program: &Path,
        args: Vec<String>,
        log: PathBuf,
    ) -> Result<Self, Error> {
        if !program.is_file() {
            return Err(Error::MissingBinary(program.display().to_string()));
        }
        let mut p = Self {
            name: name.to_string(),
            log,
            program: program.to_path_buf(),
            args,
            child: None,
        };
        p.start()?;
        Ok(p)
    }

    fn start(&mut self) -> Result<(), Error> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(Error::io(format!("opening {}", self.log.display())))?;
        let err = out
            .try_clone()
            .map_err(Error::io(format!("opening {}", self.log.display())))?;
        let child = Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .kill_on_drop(true)
            .spawn()
            .map_err(Error::io(format!("starting {}", self.program.display())))?;
        self.child = Some(child);
        Ok(())
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// Fails when the process has already exited.
    pub fn check_alive(&mut self) -> Result<(), Error> {
        let Some(c) = self.child.as_mut() else {
            return Err(self.exited("stopped"));
        };
        match c.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(self.exited(&status.to_string())),
            Err(e) => Err(self.exited(&e.to_string())),
        }
    }

    fn exited(&self, status: &str) -> Error {
        Error::Exited {
            what: self.name.clone(),
            status: status.to_string(),
            log: self.log.display().to_string(),
            tail: log_tail(&self.log, 5),
        }
    }

    /// SIGKILL, as a crash would.
    pub async fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill().await;
        }
    }

    /// Starts it again with the same arguments.
    pub fn restart(&mut self) -> Result<(), Error> {
        if self.child.is_some() {
            return Ok(());
        }
        self.start()
    }

    /// SIGSTOP or SIGCONT, through kill(1): the process stays but stops answering.
    pub fn signal(&self, sig: &str) -> Result<(), Error> {
        let pid = self
            .pid()
            .ok_or_else(|| Error::Invalid(format!("{} is not running", self.name)))?;
        let status = std::process::Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(pid.to_string())
            .status()
            .map_err(Error::io("running kill"))?;
        match status.success() {
            true => Ok(()),
            false => Err(Error::Invalid(format!("kill -{sig} {pid} failed"))),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            // A stopped process must be continued to die promptly on SIGKILL's heels.
            if let Some(pid) = c.id() {
                let _ = std::process::Command::new("kill")
                    .arg("-CONT")
                    .arg(pid.to_string())
                    .stderr(Stdio::null())
                    .status();
            }
            let _ = c.start_kill();
        }
    }
}

/// A free loopback port for a child to listen on: bound, read and released, chosen below
/// the kernel's ephemeral range, so that a client connection opened between now and the
/// child's bind (a kube-apiserver's to etcd, another test's) cannot take it as its source
/// port; and never the same twice in this process.
pub fn free_port() -> Result<u16, Error> {
    use rand::Rng;
    static GIVEN: parking_lot::Mutex<std::collections::BTreeSet<u16>> =
        parking_lot::Mutex::new(std::collections::BTreeSet::new());
    let low = ephemeral_low().unwrap_or(32768);
    let (from, to) = (10_000u16, low.max(10_001));
    let mut rng = rand::rng();
    for _ in 0..200 {
        let port = rng.random_range(from..to);
        if GIVEN.lock().contains(&port) {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            GIVEN.lock().insert(port);
            return Ok(port);
        }
    }
    // A crowded machine: let the kernel choose, as before.
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(Error::io("finding a free port"))
}

/// The first port of the kernel's ephemeral range (Linux), where client sockets get theirs.
fn ephemeral_low() -> Option<u16> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

/// The last lines of a log, for an error that points at it.
pub fn log_tail(log: &Path, lines: usize) -> String {
    let Ok(text) = std::fs::read(log) else {
        return String::new();
    };
    let text = String::from_utf8_lossy(&text);
    let mut tail: Vec<&str> = text
        .lines()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .take(lines)
        .collect();
    tail.reverse();
    tail.join("\n")
}
