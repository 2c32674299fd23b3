//! Dex (built by `scripts/real-fleet/build.sh`) as a real OIDC provider for the identity
//! tests: an HTTPS issuer of its own CA, in-memory storage, static users with passwords and
//! groups, and the password grant (`oauth2.passwordConnector: local`) so a test can get a
//! token without a browser; the console signs in through its login page.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::pki;
use crate::process::{free_port, Proc};
use crate::Error;

/// A user Dex knows: signs in with `email` and `password`, carries `groups`.
#[derive(Debug, Clone)]
pub struct User {
    pub email: String,
    pub username: String,
    pub password: String,
    pub groups: Vec<String>,
}

/// A client of Dex: `public` clients (the console) have no secret and use PKCE.
#[derive(Debug, Clone)]
pub struct Client {
    pub id: String,
    pub secret: Option<String>,
    pub redirect_uris: Vec<String>,
}

pub struct DexConfig {
    pub bin: PathBuf,
    pub dir: PathBuf,
    pub users: Vec<User>,
    pub clients: Vec<Client>,
    /// How long ID tokens live.
    pub id_token_expiry: Duration,
    /// Origins allowed to call the token endpoint from a browser (the console).
    pub allowed_origins: Vec<String>,
}

pub struct Dex {
    /// `https://127.0.0.1:PORT/dex`
    pub issuer: String,
    pub ca_pem: String,
    pub ca_file: PathBuf,
    pub users: Vec<User>,
    pub clients: Vec<Client>,
    pub proc: Proc,
}

fn bcrypt(password: &str) -> Result<String, Error> {
    bcrypt::hash(password, 10).map_err(|e| Error::Invalid(format!("hashing a password: {e}")))
}

impl Dex {
    pub async fn start(config: DexConfig) -> Result<Self, Error> {
        let bin = config.bin.join("dex");
        if !bin.is_file() {
            return Err(Error::MissingBinary(bin.display().to_string()));
        }
        std::fs::create_dir_all(&config.dir)
            .map_err(Error::io(format!("creating {}", config.dir.display())))?;
        let port = free_port()?;
        let issuer = format!("https://127.0.0.1:{port}/dex");
        let serving = pki::serving(&config.dir, "dex")?;
        let mut passwords = Vec::new();
        for (i, u) in config.users.iter().enumerate() {
            passwords.push(json!({
                "email": u.email, "username": u.username, "hash": bcrypt(&u.password)?,
                "userID": format!("{:08}-0000-4000-8000-{:012}", i + 1, i + 1),
                "groups": u.groups,
            }));
        }
        let clients: Vec<Value> = config
            .clients
            .iter()
            .map(|c| match &c.secret {
                Some(secret) => json!({"id": c.id, "name": c.id, "secret": secret, "redirectURIs": c.redirect_uris}),
                None => json!({"id": c.id, "name": c.id, "public": true, "redirectURIs": c.redirect_uris}),
            })
            .collect();
        let settings = json!({
            "issuer": issuer,
            "storage": {"type": "memory"},
            "web": {
                "https": format!("127.0.0.1:{port}"),
                "tlsCert": serving.cert_file.display().to_string(),
                "tlsKey": serving.key_file.display().to_string(),
                "allowedOrigins": config.allowed_origins,
            },
            "oauth2": {"passwordConnector": "local", "skipApprovalScreen": true,
                       "responseTypes": ["code"], "grantTypes": ["authorization_code", "password", "refresh_token"]},
            "expiry": {"idTokens": format!("{}s", config.id_token_expiry.as_secs())},
            "enablePasswordDB": true,
            "staticPasswords": passwords,
            "staticClients": clients,
            "logger": {"level": "info"},
        });
        let file = config.dir.join("config.yaml");
        // JSON is YAML.
        std::fs::write(&file, settings.to_string())
            .map_err(Error::io(format!("writing {}", file.display())))?;
        let proc = Proc::spawn(
            "dex",
            &bin,
            vec!["serve".into(), file.display().to_string()],
            config.dir.join("dex.log"),
        )?;
        let mut dex = Self {
            issuer,
            ca_pem: serving.ca_pem,
            ca_file: serving.ca_file,
            users: config.users,
            clients: config.clients,
            proc,
        };
        dex.wait_ready(Duration::from_secs(30)).await?;
        Ok(dex)
    }

    async fn wait_ready(&mut self, within: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + within;
        loop {
            self.proc.check_alive()?;
            let discovery = format!("{}/.well-known/openid-configuration", self.issuer);
            if let Ok(v) = self.curl(&[&discovery]).await {
                if v["issuer"] == self.issuer.as_str() {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(Error::NotReady {
                    what: "dex".into(),
                    secs: within.as_secs(),
                    log: self.proc.log.display().to_string(),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The JWKS address, for `--oidc-jwks-url`.
    pub fn jwks_url(&self) -> String {
        format!("{}/keys", self.issuer)
    }

    /// An ID token for `user` through the password grant of `client`.
    pub async fn password_token(&self, client: &str, user: &User) -> Result<String, Error> {
        let c = self
            .clients
            .iter()
            .find(|c| c.id == client)
            .ok_or_else(|| Error::Invalid(format!("dex has no client {client:?}")))?;
        let token = format!("{}/token", self.issuer);
        let mut args = vec![
            "-X".to_string(),
            "POST".into(),
            token,
            "--data-urlencode".into(),
            "grant_type=password".into(),
            "--data-urlencode".into(),
            format!("username={}", user.email),
            "--data-urlencode".into(),
            format!("password={}", user.password),
            "--data-urlencode".into(),
            "scope=openid email profile groups".into(),
            "--data-urlencode".into(),
            format!("client_id={}", c.id),
        ];
        if let Some(secret) = &c.secret {
            args.extend(["--data-urlencode".into(), format!("client_secret={secret}")]);
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let answer = self.curl(&refs).await?;
        answer["id_token"]
            .as_str()
            .map(String::from)
            .ok_or_else(|| Error::Invalid(format!("dex gave no id_token: {answer}")))
    }

    /// A JSON answer from Dex over HTTPS with its CA (curl: this is test tooling).
    async fn curl(&self, args: &[&str]) -> Result<Value, Error> {
        let out = tokio::time::timeout(
            Duration::from_secs(10),
            tokio::process::Command::new("curl")
                .args(["-sS", "--max-time", "8", "--cacert"])
                .arg(&self.ca_file)
                .args(args)
                .output(),
        )
        .await
        .map_err(|_| Error::Invalid("dex did not answer within 10 s".into()))?
        .map_err(Error::io("running curl"))?;
        serde_json::from_slice(&out.stdout).map_err(|e| {
            Error::Invalid(format!(
                "dex answered {}: {e} ({})",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        })
    }
}
