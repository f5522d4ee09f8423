//! Shared helpers of the `sign_*` end-to-end tests: bundles pushed through
//! `drover_proto` (the same code path `drover push` uses), keys made with the real
//! `drover keygen`, and raw registry reads that do not go through drover.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use drover_proto::bundle::{assemble, BundleMeta};
use drover_proto::object::ObjectRef;
use drover_proto::{Reference, RegistryClient, RegistryOptions, Repo};
use drover_tests::{run, Out, Registry};

/// Password used for keys made by [`keygen`].
pub const PW: &str = "correct horse";

/// A current-thread runtime for the async proto calls.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// A plain-HTTP client for the test registry.
pub fn client() -> RegistryClient {
    RegistryClient::new(RegistryOptions { plain_http: true, ..Default::default() }).unwrap()
}

/// Opens the repository of a reference (registry or layout).
pub fn repo(reference: &str) -> Repo {
    Repo::open(&Reference::parse(reference).unwrap(), &client(), false).unwrap().0
}

/// The objects of a tiny bundle: one ConfigMap whose data.value is `value`.
pub fn objects(value: &str) -> BTreeMap<ObjectRef, Vec<u8>> {
    let id = ObjectRef { api_version: "v1".into(), kind: "ConfigMap".into(), namespace: Some("demo".into()), name: "settings".into() };
    let yaml = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: demo\ndata:\n  value: {value:?}\n");
    BTreeMap::from([(id, yaml.into_bytes())])
}

/// Pushes a bundle for environment `env` with `sequence` to `reg`'s `repository`,
/// tagged `tag` and `<env>-<sequence>`. Returns the digest. Unsigned.
pub fn push_bundle(reg: &Registry, repository: &str, tag: &str, env: &str, sequence: u64, value: &str) -> String {
    let meta = BundleMeta { cluster_type: "edge".into(), environment: env.into(), sequence, ..Default::default() };
    let bundle = assemble(&objects(value), &meta);
    let r = repo(&reg.reference(&format!("{repository}:{tag}")));
    let history = format!("{env}-{sequence}");
    rt().block_on(r.push_bundle(&bundle, &[tag, &history])).unwrap()
}

/// Runs `drover keygen` into `dir` with password [`PW`]; returns (private, public) paths.
pub fn keygen(dir: &Path) -> (PathBuf, PathBuf) {
    let out = run("drover", &["keygen", "--out-dir", dir.to_str().unwrap()], &[("DROVER_KEY_PASSWORD", PW)]);
    assert_eq!(out.code, 0, "keygen failed: {}", out.stderr);
    (dir.join("drover.key"), dir.join("drover.pub"))
}

/// Runs drover with the key password set and `--plain-http` appended.
pub fn drover(args: &[&str]) -> Out {
    let mut a: Vec<&str> = args.to_vec();
    a.push("--plain-http");
    run("drover", &a, &[("DROVER_KEY_PASSWORD", PW)])
}

/// `drover sign REPO@DIGEST --key KEY` for the digest `reference` names now (as a user
/// who signs the digest they built), asserting success.
pub fn sign(reference: &str, key: &Path) -> serde_json::Value {
    let (r, lookup) = Repo::open(&Reference::parse(reference).unwrap(), &client(), false).unwrap();
    let d = rt().block_on(r.resolve(&lookup.unwrap())).unwrap().expect("reference exists");
    let pinned = r.describe(&d);
    let out = drover(&["sign", &pinned, "--key", key.to_str().unwrap(), "-o", "json"]);
    assert_eq!(out.code, 0, "sign {reference} failed: {}", out.stderr);
    out.json()
}

/// `drover verify REF --key PUB... --threshold N -o json`.
pub fn verify(reference: &str, keys: &[&Path], threshold: usize) -> Out {
    let t = threshold.to_string();
    let mut a = vec!["verify", reference, "--threshold", &t, "-o", "json"];
    for k in keys {
        a.push("--trust-key");
        a.push(k.to_str().unwrap());
    }
    drover(&a)
}

/// GETs a manifest straight from the registry API (not through drover).
pub fn raw_manifest(reg: &Registry, repository: &str, lookup: &str) -> Option<(Vec<u8>, String)> {
    rt().block_on(async {
        let url = format!("http://{}/v2/{repository}/manifests/{lookup}", reg.addr);
        let res = reqwest::Client::new()
            .get(url)
            .header(
                "Accept",
                "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json",
            )
            .send()
            .await
            .unwrap();
        if res.status().as_u16() == 404 {
            return None;
        }
        assert!(res.status().is_success(), "GET manifest {lookup}: {}", res.status());
        let ct = res.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
        Some((res.bytes().await.unwrap().to_vec(), ct))
    })
}

/// GETs a blob straight from the registry API.
pub fn raw_blob(reg: &Registry, repository: &str, digest: &str) -> Vec<u8> {
    rt().block_on(async {
        let url = format!("http://{}/v2/{repository}/blobs/{digest}", reg.addr);
        let res = reqwest::Client::new().get(url).send().await.unwrap();
        assert!(res.status().is_success(), "GET blob {digest}: {}", res.status());
        res.bytes().await.unwrap().to_vec()
    })
}

/// The tags of a repository, straight from the registry API.
pub fn raw_tags(reg: &Registry, repository: &str) -> Vec<String> {
    rt().block_on(async {
        let url = format!("http://{}/v2/{repository}/tags/list", reg.addr);
        let res = reqwest::Client::new().get(url).send().await.unwrap();
        if res.status().as_u16() == 404 {
            return vec![];
        }
        let v: serde_json::Value = res.json().await.unwrap();
        let mut t: Vec<String> =
            v["tags"].as_array().map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect()).unwrap_or_default();
        t.sort();
        t
    })
}

/// The `.sig` tag of a digest.
pub fn sig_tag(digest: &str) -> String {
    drover_proto::digest::signature_tag(digest)
}

/// The signature manifest of `digest` as JSON (None when absent).
pub fn sig_manifest(reg: &Registry, repository: &str, digest: &str) -> Option<serde_json::Value> {
    raw_manifest(reg, repository, &sig_tag(digest)).map(|(b, _)| serde_json::from_slice(&b).unwrap())
}

/// A loopback HTTP proxy in front of the registry that records every request
/// (`METHOD PATH`), to count what a command really fetches.
pub struct CountingProxy {
    /// `127.0.0.1:PORT` of the proxy.
    pub addr: String,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _rt: tokio::runtime::Runtime,
}

impl CountingProxy {
    /// Starts a proxy forwarding to `upstream` (`127.0.0.1:PORT`).
    pub fn start(upstream: &str) -> CountingProxy {
        use axum::body::Body;
        use axum::extract::{Request, State};
        use axum::response::Response;
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        let state = (upstream.to_string(), http, log.clone());
        type St = (String, reqwest::Client, std::sync::Arc<std::sync::Mutex<Vec<String>>>);
        async fn forward(State((up, http, log)): State<St>, req: Request) -> Response {
            let method = req.method().clone();
            let pq = req.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
            log.lock().unwrap().push(format!("{method} {}", req.uri().path()));
            let mut out = http.request(method, format!("http://{up}{pq}"));
            for (k, v) in req.headers() {
                if k != "host" {
                    out = out.header(k, v);
                }
            }
            let body = axum::body::to_bytes(req.into_body(), usize::MAX).await.unwrap();
            let res = out.body(body).send().await.unwrap();
            let mut b = Response::builder().status(res.status().as_u16());
            for (k, v) in res.headers() {
                b = b.header(k, v);
            }
            b.body(Body::from(res.bytes().await.unwrap())).unwrap()
        }
        let app = axum::Router::new().fallback(forward).with_state(state);
        rt.spawn(async move { axum::serve(listener, app).await.unwrap() });
        CountingProxy { addr, log, _rt: rt }
    }

    /// Requests seen so far, then forgets them.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }
}
