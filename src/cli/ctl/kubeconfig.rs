//! `kairship ctl kubeconfig NAME`: a kubeconfig for one instance through Kairship, with
//! this client's token (unless `--no-token`), printed or written to a file only its owner
//! can read. `-o json|yaml` prints the API's whole answer instead.

use std::path::PathBuf;

use clap::Args;

use super::{print, s, status, Conn, Output};
use crate::proto;
use crate::proto::instance_service_client::InstanceServiceClient;
use crate::Error;

#[derive(Debug, Args)]
pub struct KubeconfigArgs {
    /// The instance.
    pub name: String,
    /// host (the instance's own host, the default where Kairship serves them) or path
    /// (Kairship's address with the instance's proxy path).
    #[arg(long)]
    pub form: Option<String>,
    /// Where you reach Kairship's HTTPS port (https://host[:port]); default: Kairship's
    /// --external-url, else the address this command reached it at.
    #[arg(long)]
    pub server: Option<String>,
    /// Leave the token out (add your own credentials to the user it names).
    #[arg(long)]
    pub no_token: bool,
    /// Write it to this file (created readable by you alone) instead of printing it.
    #[arg(long)]
    pub file: Option<PathBuf>,
}

pub async fn run(conn: &Conn, out: Output, a: &KubeconfigArgs) -> Result<(), Error> {
    let mut c = InstanceServiceClient::new(conn.channel.clone());
    let r = c
        .get_kubeconfig(conn.request(proto::GetKubeconfigRequest {
            name: a.name.clone(),
            include_token: !a.no_token,
            form: a.form.clone().unwrap_or_default(),
            server: a.server.clone().unwrap_or_default(),
        }))
        .await
        .map_err(status)?
        .into_inner();
    if let Some(path) = &a.file {
        kairship_wire::kubeconfig::write_atomic(path, r.kubeconfig.as_bytes()).map_err(
            |source| Error::Io {
                context: format!("writing {}", path.display()),
                source,
            },
        )?;
        let sni = match r.tls_server_name.as_str() {
            "" => String::new(),
            n => format!(", TLS server name {n}"),
        };
        eprintln!("wrote {} (server {}{sni})", path.display(), r.server);
        return Ok(());
    }
    match out {
        Output::Table => {
            print!("{}", r.kubeconfig);
            Ok(())
        }
        _ => print(out, "kairship.v1alpha1.Kubeconfig", &r, |j| {
            vec![vec![s(j, "/kubeconfig")]]
        }),
    }
}
