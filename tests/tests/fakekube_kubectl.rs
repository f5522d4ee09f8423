//! `kubectl` (a second, independent client) against the FAKE API server: server-side
//! apply, get with label selectors, merge patch recorded under kubectl's field manager,
//! conflicts and `--force-conflicts`, server dry run, CRD then custom resource, delete.

use drover_tests::fakekube::{kubectl, FakeApiProcess, FakeApiServer};
use drover_tests::Out;
use serde_json::Value;

fn ok(out: Out, what: &str) -> Out {
    assert_eq!(
        out.code, 0,
        "{what} failed:\nstdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    out
}

const APP: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\n  namespace: shop\n  labels:\n    app: web\ndata:\n  a: \"1\"\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers: [{name: c, image: \"nginx:1\"}]\n";

fn managers(obj: &Value) -> Vec<(String, String, Value)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or("").to_string(),
                e["operation"].as_str().unwrap_or("").to_string(),
                e["fieldsV1"].clone(),
            )
        })
        .collect()
}

#[test]
fn kubectl_apply_get_patch_conflict_and_delete_against_the_binary() {
    let fake = FakeApiProcess::start(&[]);
    let k = |args: &[&str], stdin: &str| kubectl(fake.kubeconfig_path(), args, stdin);

    let out = ok(
        k(&["apply", "--server-side", "-f", "-"], APP),
        "kubectl apply --server-side",
    );
    assert!(
        out.stdout.contains("configmap/hello serverside-applied")
            && out
                .stdout
                .contains("deployment.apps/web serverside-applied"),
        "{}",
        out.stdout
    );
    let out = ok(
        k(&["get", "configmaps", "-n", "shop"], ""),
        "kubectl get configmaps",
    );
    assert!(
        out.stdout.lines().any(|l| l.starts_with("hello ")),
        "{}",
        out.stdout
    );
    assert_eq!(
        ok(
            k(
                &["get", "cm", "-n", "shop", "-l", "app=web", "-o", "name"],
                ""
            ),
            "get -l"
        )
        .stdout
        .trim(),
        "configmap/hello"
    );
    assert_eq!(
        ok(
            k(
                &["get", "cm", "-n", "shop", "-l", "app!=web", "-o", "name"],
                ""
            ),
            "get -l !="
        )
        .stdout
        .trim(),
        ""
    );
    let ready = ok(
        k(
            &[
                "get",
                "deploy",
                "web",
                "-n",
                "shop",
                "-o",
                "jsonpath={.status.readyReplicas}/{.status.observedGeneration}",
            ],
            "",
        ),
        "get deploy",
    );
    assert_eq!(ready.stdout, "2/1");

    let get_cm = || {
        ok(
            k(
                &[
                    "get",
                    "cm",
                    "hello",
                    "-n",
                    "shop",
                    "-o",
                    "json",
                    "--show-managed-fields",
                ],
                "",
            ),
            "get cm -o json",
        )
        .json()
    };
    assert_eq!(managers(&get_cm())[0].0, "kubectl");
    assert_eq!(managers(&get_cm())[0].1, "Apply");

    ok(
        k(
            &[
                "patch",
                "--type",
                "merge",
                "cm",
                "hello",
                "-n",
                "shop",
                "-p",
                r#"{"data":{"a":"2"}}"#,
            ],
            "",
        ),
        "kubectl patch --type merge",
    );
    let patched = get_cm();
    assert_eq!(patched["data"]["a"], "2");
    assert!(
        managers(&patched).contains(&(
            "kubectl-patch".into(),
            "Update".into(),
            serde_json::json!({"f:data": {"f:a": {}}})
        )),
        "{:?}",
        managers(&patched)
    );

    let conflict = k(&["apply", "--server-side", "-f", "-"], APP);
    assert_ne!(conflict.code, 0);
    assert!(
        conflict
            .stderr
            .contains("Apply failed with 1 conflict: conflict with \"kubectl-patch\" using v1"),
        "{}",
        conflict.stderr
    );
    assert!(conflict.stderr.contains(".data.a"), "{}", conflict.stderr);
    ok(
        k(
            &["apply", "--server-side", "--force-conflicts", "-f", "-"],
            APP,
        ),
        "apply --force-conflicts",
    );
    assert_eq!(get_cm()["data"]["a"], "1");

    let dry = APP.replace("a: \"1\"", "a: \"dry\"");
    ok(
        k(
            &[
                "apply",
                "--server-side",
                "--force-conflicts",
                "--dry-run=server",
                "-f",
                "-",
            ],
            &dry,
        ),
        "apply --dry-run=server",
    );
    assert_eq!(
        get_cm()["data"]["a"],
        "1",
        "a server dry run changes nothing"
    );

    let out = ok(
        k(&["delete", "cm", "hello", "-n", "shop"], ""),
        "kubectl delete",
    );
    assert!(out.stdout.contains("deleted"), "{}", out.stdout);
    let gone = k(&["get", "cm", "hello", "-n", "shop"], "");
    assert!(
        gone.code != 0 && gone.stderr.contains("configmaps \"hello\" not found"),
        "{}",
        gone.stderr
    );
}

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n";
const WIDGET: &str = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: default\nspec:\n  size: 3\n";

#[test]
fn kubectl_sees_crds_and_objects_of_the_in_process_server() {
    let fake = FakeApiServer::start();
    let k = |args: &[&str], stdin: &str| kubectl(fake.kubeconfig_path(), args, stdin);
    ok(k(&["apply", "--server-side", "-f", "-"], CRD), "apply CRD");
    ok(
        k(
            &[
                "wait",
                "--for=condition=Established",
                "crd/widgets.example.com",
                "--timeout=10s",
            ],
            "",
        ),
        "kubectl wait Established",
    );
    ok(
        k(&["apply", "--server-side", "-f", "-"], WIDGET),
        "apply Widget",
    );
    let out = ok(
        k(
            &["get", "wd", "-o", "jsonpath={.items[*].metadata.name}"],
            "",
        ),
        "get by short name",
    );
    assert_eq!(out.stdout, "w1");
    let obj = fake
        .object("example.com/v1", "Widget", Some("default"), "w1")
        .expect("stored");
    assert_eq!(obj["spec"]["size"], 3);
    assert!(
        fake.count(
            "PATCH",
            "/apis/example.com/v1/namespaces/default/widgets/w1"
        ) >= 1
    );
}
