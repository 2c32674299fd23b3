//! The console and the OpenAPI document: the document covers every REST route of the
//! proto and the REST examples of docs/api.md; the committed `ui/openapi.json`, generated
//! client types and `ui/dist` are what the sources rebuild to; and the Playwright suite
//! (`ui/tests/`) drives Debian's Chromium against the real `kairship demo`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kairship::api::openapi;
use kairship::api::transcode::rules::rules;
use kairship_test_support::process::{self, StopOnDrop};
use serde_json::Value;

/// The UI build and the browser suite take turns: on a 2-core machine a build beside the
/// browser would eat into the suite's 15 s deadlines.
static NODE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn document() -> Value {
    openapi::document().expect("the document builds")
}

#[test]
fn every_rest_route_of_the_proto_is_in_the_document() {
    let doc = document();
    let rules = rules(kairship::proto::FILE_DESCRIPTOR_SET).expect("rules");
    assert!(rules.len() >= 25, "only {} rules", rules.len());
    for rule in &rules {
        let path = openapi::template(rule);
        let method = rule.method.as_str().to_ascii_lowercase();
        let op = &doc["paths"][&path][&method];
        assert!(
            op.is_object(),
            "{method} {path} ({}) missing",
            rule.grpc_path
        );
        let name = rule.grpc_path.rsplit('/').next().unwrap_or_default();
        assert!(
            op["operationId"]
                .as_str()
                .is_some_and(|id| id.ends_with(name)),
            "{op}"
        );
    }
    let ops: usize = doc["paths"]
        .as_object()
        .expect("paths")
        .values()
        .map(|p| p.as_object().map_or(0, |m| m.len()))
        .sum();
    assert_eq!(ops, rules.len(), "operations that no rule routes");
}

#[test]
fn schemas_are_proto3_json() {
    let doc = document();
    let schemas = &doc["components"]["schemas"];
    let spec = &schemas["kairship.v1alpha1.InstanceSpec"]["properties"];
    // lowerCamelCase names, enums by name.
    assert!(spec["kubeconfigSecretRef"]["$ref"].is_string(), "{spec}");
    assert_eq!(spec["mode"]["type"], "string");
    assert!(spec["mode"]["enum"]
        .as_array()
        .expect("enum")
        .contains(&Value::from("INSTANCE_MODE_MANAGED")));
    // int64 as strings, int32 as integers, maps as objects, repeated as arrays.
    let meta = &schemas["kairship.v1alpha1.ObjectMeta"]["properties"];
    assert_eq!(meta["generation"]["type"], "string");
    assert_eq!(meta["resourceVersion"]["type"], "string");
    assert_eq!(meta["labels"]["additionalProperties"]["type"], "string");
    let stats = &schemas["kairship.v1alpha1.InstanceStats"]["properties"];
    assert_eq!(stats["clustersReady"]["type"], "integer");
    assert_eq!(
        schemas["kairship.v1alpha1.ListInstancesResponse"]["properties"]["instances"]["type"],
        "array"
    );
    // Query parameters as REST reads them (proto names, dotted); path ones required.
    let list = &doc["paths"]["/apis/kairship.io/v1alpha1/instances/{instance}/workloads"]["get"];
    let params: Vec<&str> = list["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(
        params,
        [
            "instance",
            "namespace",
            "kind",
            "options.page_size",
            "options.page_token",
            "options.label_selector"
        ]
    );
    let create = &doc["paths"]["/apis/kairship.io/v1alpha1/instances"]["post"];
    assert_eq!(
        create["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/kairship.v1alpha1.Instance"
    );
}

/// `METHOD[/METHOD] PATH` spans in backticks and `curl -X METHOD .../PATH` lines, with
/// `...` standing for the API prefix as the README writes it.
fn readme_examples(text: &str) -> Vec<(String, String)> {
    const PREFIX: &str = "/apis/kairship.io/v1alpha1";
    let mut out = Vec::new();
    for span in text.split('`').skip(1).step_by(2) {
        let Some((methods, path)) = span.split_once(' ') else {
            continue;
        };
        let path = match path.strip_prefix("...") {
            Some(rest) => format!("{PREFIX}{rest}"),
            None => path.to_string(),
        };
        // The proxy and the webhook are served beside REST, not from the proto.
        if !path.starts_with(PREFIX) || path.contains("/proxy") || path.contains("/webhooks/") {
            continue;
        }
        for m in methods.split('/') {
            if ["GET", "POST", "PUT", "DELETE", "PATCH"].contains(&m) {
                out.push((m.to_string(), path.clone()));
            }
        }
    }
    for line in text.lines().filter(|l| l.trim_start().starts_with("curl ")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let method = words
            .iter()
            .position(|w| *w == "-X")
            .and_then(|i| words.get(i + 1))
            .map_or("GET", |m| *m);
        if let Some(url) = words.iter().find(|w| w.contains(PREFIX)) {
            let path = &url[url.find(PREFIX).unwrap_or(0)..];
            let path = path.trim_matches(|c| c == '"' || c == '\'');
            out.push((
                method.to_string(),
                path.split('?').next().unwrap_or(path).into(),
            ));
        }
    }
    out
}

/// Whether the document has `method` at a path template matching `path` (concrete
/// segments, or the template's own `{field}` names).
fn documented(doc: &Value, method: &str, path: &str) -> bool {
    let split = |p: &str| -> (Vec<String>, Option<String>) {
        let (p, verb) = match p.rsplit_once(':') {
            Some((p, v)) if !v.contains('/') => (p.to_string(), Some(v.to_string())),
            _ => (p.to_string(), None),
        };
        (p.split('/').map(String::from).collect(), verb)
    };
    let (want, want_verb) = split(path);
    doc["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .any(|(t, ops)| {
            let (have, verb) = split(t);
            ops.get(method.to_ascii_lowercase()).is_some()
                && verb == want_verb
                && have.len() == want.len()
                && have.iter().zip(&want).all(|(h, w)| {
                    h == w || (h.starts_with('{') && !w.is_empty() && !w.contains('/'))
                })
        })
}

#[test]
fn the_api_docs_rest_examples_are_in_the_document() {
    let doc = document();
    let readme = std::fs::read_to_string(root().join("docs/api.md")).expect("docs/api.md");
    let examples = readme_examples(&readme);
    assert!(examples.len() >= 8, "too few examples found: {examples:?}");
    for (method, path) in &examples {
        assert!(
            documented(&doc, method, path),
            "docs/api.md: {method} {path} is not in the document"
        );
    }
    // The check itself refuses what is not there.
    assert!(!documented(
        &doc,
        "DELETE",
        "/apis/kairship.io/v1alpha1/actors"
    ));
    assert!(!documented(
        &doc,
        "GET",
        "/apis/kairship.io/v1alpha1/instances/a:restart"
    ));
}

#[test]
fn committed_openapi_document_is_current() {
    let committed =
        std::fs::read_to_string(root().join("ui/openapi.json")).expect("ui/openapi.json");
    assert!(
        committed == openapi::document_text().expect("document"),
        "ui/openapi.json is stale: run `cargo run -- openapi > ui/openapi.json` and `cd ui && npm run gen && npm run build`"
    );
}

fn npm_bin(name: &str) -> PathBuf {
    let bin = root().join("ui/node_modules/.bin").join(name);
    assert!(
        bin.exists(),
        "{} missing: run `bash scripts/install-test-deps.sh` (npm ci in ui/)",
        bin.display()
    );
    bin
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd
        .current_dir(root().join("ui"))
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                let rel = p.strip_prefix(dir).expect("prefix").display().to_string();
                out.push((rel, std::fs::read(&p).expect("read")));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn committed_client_types_and_build_are_what_the_sources_give() {
    let _turn = NODE.lock().unwrap_or_else(|p| p.into_inner());
    let tmp = tempfile::tempdir().expect("tempdir");
    let types = tmp.path().join("api.d.ts");
    run(
        Command::new(npm_bin("openapi-typescript"))
            .arg("openapi.json")
            .arg("-o")
            .arg(&types),
        "openapi-typescript",
    );
    let committed = std::fs::read(root().join("ui/src/api.d.ts")).expect("ui/src/api.d.ts");
    assert!(
        std::fs::read(&types).expect("generated") == committed,
        "ui/src/api.d.ts is stale: run `cd ui && npm run gen`"
    );
    let out = tmp.path().join("dist");
    run(Command::new(npm_bin("tsc")).arg("--noEmit"), "tsc");
    run(
        Command::new(npm_bin("vite"))
            .args(["build", "--emptyOutDir", "--outDir"])
            .arg(&out),
        "vite build",
    );
    let (built, committed) = (files(&out), files(&root().join("ui/dist")));
    let names = |f: &[(String, Vec<u8>)]| f.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&built),
        names(&committed),
        "ui/dist is stale: run `cd ui && npm run build`"
    );
    assert!(
        built == committed,
        "ui/dist is stale: run `cd ui && npm run build`"
    );
}

const DEX_CLIENT: &str = "kairship";

/// Dex with one user in `kairship-admins` and the console (at `console`) as its public
/// client (authorization code with PKCE).
async fn start_dex(dir: &Path, console: &str) -> kairship_realfleet::dex::Dex {
    use kairship_realfleet::dex::{Client, Dex, DexConfig, User};
    let bin = kairship_realfleet::default_bin_dir();
    assert!(
        bin.join("dex").is_file(),
        "dex is missing from {}: run scripts/real-fleet/build.sh",
        bin.display()
    );
    Dex::start(DexConfig {
        bin,
        dir: dir.join("dex"),
        users: vec![User {
            email: "dana@example.com".into(),
            username: "dana".into(),
            password: kairship_realfleet::pki::token(),
            groups: vec!["kairship-admins".into()],
        }],
        clients: vec![Client {
            id: DEX_CLIENT.into(),
            secret: None,
            redirect_uris: vec![format!("{console}/ui/")],
        }],
        id_token_expiry: Duration::from_secs(3600),
        allowed_origins: vec![console.to_string()],
    })
    .await
    .expect("dex starts")
}

#[test]
fn console_in_a_real_browser_against_the_demo() {
    let _turn = NODE.lock().unwrap_or_else(|p| p.into_inner());
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "{chromium} missing: run `bash scripts/install-test-deps.sh` (Debian's chromium)"
    );
    let playwright = npm_bin("playwright");
    let dir = tempfile::tempdir().expect("tempdir");
    // Dex as the OIDC provider the console signs in with: it must know the console's
    // address (its redirect URI) before the demo starts.
    let port = kairship_realfleet::process::free_port().expect("a free port");
    let console = format!("https://127.0.0.1:{port}");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dex = rt.block_on(start_dex(dir.path(), &console));
    let mut demo = StopOnDrop(
        Command::new(env!("CARGO_BIN_EXE_kairship"))
            .args(["demo", "--grpc-addr", "127.0.0.1:0"])
            .args(["--http-addr", &format!("127.0.0.1:{port}")])
            .args([
                "--oidc-issuer-url",
                &dex.issuer,
                "--oidc-client-id",
                DEX_CLIENT,
            ])
            .args([
                "--oidc-jwks-url",
                &dex.jwks_url(),
                "--oidc-username-claim",
                "email",
            ])
            .args(["--oidc-groups-prefix", "oidc:"])
            .arg("--oidc-ca-file")
            .arg(&dex.ca_file)
            .args(["--probes-addr", "127.0.0.1:0", "--state-dir"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("kairship demo starts"),
    );
    let endpoints = dir.path().join("endpoints.json");
    rt.block_on(process::endpoints(
        &mut demo.0,
        &endpoints,
        Duration::from_secs(120),
    ))
    .unwrap_or_else(|e| panic!("kairship demo: {e}"));
    // The Dex user's group holds admin on every instance, as an IAM would bind it.
    let binding = dir.path().join("dex-admins.yaml");
    std::fs::write(
        &binding,
        "apiVersion: kairship.io/v1alpha1\nkind: InstanceRoleBinding\nmetadata: {name: dex-admins}\nspec:\n  role: admin\n  instances: [\"*\"]\n  subjects: [{kind: Group, name: \"oidc:kairship-admins\"}]\n",
    )
    .expect("write the binding");
    let host: Value =
        serde_json::from_str(&std::fs::read_to_string(&endpoints).expect("endpoints"))
            .expect("endpoints.json");
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let bound = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(host["host_kubeconfig"].as_str().expect("host_kubeconfig"))
        .args(["apply", "-f"])
        .arg(&binding)
        .output()
        .expect("kubectl");
    assert!(
        bound.status.success(),
        "{}",
        String::from_utf8_lossy(&bound.stderr)
    );
    let started = Instant::now();
    let user = &dex.users[0];
    let out = Command::new(playwright)
        .arg("test")
        .current_dir(root().join("ui"))
        .env("KAIRSHIP_STATE_DIR", dir.path())
        .env("KAIRSHIP_DEX_LOGIN", &user.email)
        .env("KAIRSHIP_DEX_PASSWORD", &user.password)
        .env("CHROMIUM", &chromium)
        .env("CONSOLE_TEST_OUT", dir.path().join("playwright"))
        // Screenshots go to the run's own directory unless asked for (to refresh docs/).
        .env(
            "CONSOLE_SCREENSHOTS",
            std::env::var_os("CONSOLE_SCREENSHOTS")
                .unwrap_or_else(|| dir.path().join("screenshots").into_os_string()),
        )
        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
        .output()
        .expect("playwright runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "the browser suite failed after {:?}:\n{stdout}\n{}",
        started.elapsed(),
        String::from_utf8_lossy(&out.stderr)
    );
}
