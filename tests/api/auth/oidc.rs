//! OIDC JWTs: verified against the provider's keys (inline, from a file or an HTTPS
//! URL), and bad key sources refusing to start.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oidc_tokens_are_verified_and_bad_sources_refuse_to_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (key, rogue) = (signer("k1"), signer("k1"));
    let api = start(dir.path(), &json!({"keys": [key.jwk]})).await;
    let mut inst = InstanceServiceClient::new(api.channel.clone());
    let get = |token: String| {
        with(
            &token,
            GetInstanceRequest {
                name: "karmada-2".into(),
            },
        )
    };

    // A good token: user from `sub`, groups from `groups` (sre may view karmada-2).
    let good = jwt(&key, "k1", claims("sam@example.test", AUDIENCE, 600));
    inst.get_instance(get(good)).await.expect("a valid JWT");
    let expired = jwt(&key, "k1", claims("sam", AUDIENCE, -3600));
    let wrong_aud = jwt(&key, "k1", claims("sam", "someone-else", 600));
    let forged = jwt(&rogue, "k1", claims("sam", AUDIENCE, 600));
    let unknown_kid = jwt(&key, "k9", claims("sam", AUDIENCE, 600));
    let mut early = claims("sam", AUDIENCE, 7200);
    early["nbf"] = json!(now() + 3600);
    let not_yet = jwt(&key, "k1", early);
    let mut other = claims("sam", AUDIENCE, 600);
    other["iss"] = json!("https://evil.example.test");
    let wrong_iss = jwt(&key, "k1", other);
    for (what, token) in [
        ("expired", expired),
        ("wrong audience", wrong_aud),
        ("wrongly signed", forged),
        ("unknown key", unknown_kid),
        ("not yet valid", not_yet),
        ("wrong issuer", wrong_iss),
    ] {
        let s = inst.get_instance(get(token)).await.expect_err(what);
        assert_eq!(s.code(), Code::Unauthenticated, "{what}: {s:?}");
    }

    // Startup refuses unreadable or invalid sources, naming them.
    let host = api.env.host.clone();
    let good = config(dir.path(), &json!({"keys": [key.jwk]}));
    let refused = |c: AuthConfig| {
        let host = host.clone();
        async move {
            Auth::new(&c, host)
                .await
                .err()
                .map(|e| e.to_string())
                .expect("refused")
        }
    };
    let e = refused(AuthConfig {
        token_file: Some(dir.path().join("missing.csv")),
        ..good.clone()
    })
    .await;
    assert!(e.contains("missing.csv"), "{e}");
    let bad_csv = write(dir.path(), "bad.csv", "only-a-token\n");
    let e = refused(AuthConfig {
        token_file: Some(bad_csv),
        ..good.clone()
    })
    .await;
    assert!(e.contains("line 1"), "{e}");
    let mut bad_oidc = good.clone();
    if let Some(o) = bad_oidc.oidc.as_mut() {
        o.jwks = JwksSource::File(write(dir.path(), "bad-jwks.json", "{\"keys\": 3}"));
    }
    let e = refused(bad_oidc).await;
    assert!(e.contains("bad-jwks.json"), "{e}");
    let e = refused(AuthConfig {
        webhook_secret_file: Some(dir.path().join("nope.secret")),
        ..good.clone()
    })
    .await;
    assert!(e.contains("nope.secret"), "{e}");
    let e = refused(AuthConfig {
        token_file: None,
        oidc: None,
        ..good.clone()
    })
    .await;
    assert!(e.contains("no authentication source"), "{e}");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwks_from_an_https_url() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = signer("url-key");
    let jwks = json!({"keys": [key.jwk]});
    let cert = kairship_wire::tls::generate("idp").expect("cert");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("https://{}/jwks", listener.local_addr().expect("addr"));
    let body = jwks.to_string();
    let app = axum::Router::new().route("/jwks", axum::routing::get(move || async move { body }));
    let (stop, mut rx) = tokio::sync::watch::channel(false);
    tokio::spawn(kairship::api::serve::serve(
        listener,
        Some(cert.server_config.clone()),
        app,
        Default::default(),
        None,
        async move {
            let _ = rx.changed().await;
        },
    ));
    let ca = write(dir.path(), "idp-ca.pem", &cert.ca_pem);
    let sim = crate::common::Sim::start(0).await;
    let host = sim.client("host").await;
    let oidc = |ca_file: Option<PathBuf>| AuthConfig {
        oidc: Some(OidcConfig {
            issuer: ISSUER.into(),
            audience: AUDIENCE.into(),
            jwks: JwksSource::Url {
                url: url.clone(),
                ca_file,
            },
            username_claim: "sub".into(),
            groups_claim: "groups".into(),
            // kube-apiserver's default: the issuer before the name.
            username_prefix: None,
            groups_prefix: "idp:".into(),
        }),
        ..Default::default()
    };
    let auth = Auth::new(&oidc(Some(ca)), host.clone())
        .await
        .expect("JWKS fetched");
    let token = jwt(&key, "url-key", claims("uma", AUDIENCE, 600));
    let caller = auth
        .authenticate(Some(&format!("Bearer {token}")))
        .expect("verified");
    assert_eq!(caller.user.name, format!("{ISSUER}#uma"));
    assert!(caller.user.groups.contains(&"idp:sre".to_string()));
    // Without the provider's CA the certificate is not trusted: refuse to start.
    let e = Auth::new(&oidc(None), host).await.err().expect("untrusted");
    assert!(e.to_string().contains(&url), "{e}");
    let _ = stop.send(true);
    sim.fleet.shutdown();
}

/// As kube-apiserver: with the `email` claim as the username, a token whose provider says
/// the email is not verified is refused (one that does not say is trusted as it is).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unverified_email_is_no_username() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = signer("email-key");
    let jwks = write(
        dir.path(),
        "jwks.json",
        &json!({"keys": [key.jwk]}).to_string(),
    );
    let sim = crate::common::Sim::start(0).await;
    let host = sim.client("host").await;
    let config = AuthConfig {
        oidc: Some(OidcConfig {
            issuer: ISSUER.into(),
            audience: AUDIENCE.into(),
            jwks: JwksSource::File(jwks),
            username_claim: "email".into(),
            groups_claim: "groups".into(),
            username_prefix: None,
            groups_prefix: String::new(),
        }),
        ..Default::default()
    };
    let auth = Auth::new(&config, host).await.expect("auth");
    let token = |verified: Option<bool>| {
        let mut c = claims("u-1", AUDIENCE, 600);
        c["email"] = json!("mel@example.com");
        if let Some(v) = verified {
            c["email_verified"] = json!(v);
        }
        format!("Bearer {}", jwt(&key, "email-key", c))
    };
    // Only an email the provider says it verified: one it does not vouch for may be
    // anyone's claim.
    assert!(auth.authenticate(Some(&token(Some(false)))).is_err());
    assert!(auth.authenticate(Some(&token(None))).is_err());
    let caller = auth
        .authenticate(Some(&token(Some(true))))
        .expect("a verified email");
    assert_eq!(caller.user.name, "mel@example.com");
    sim.fleet.shutdown();
}
