//! `drover render`: assignment by selectors, values precedence level by level, deep
//! merge / list replace / null delete, strict undefined, namespace templates, and every
//! error case (named file, non-zero exit, nothing written).

mod platform_support;

use std::path::Path;

use platform_support::*;
use serde_json::json;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn example_platform_renders_every_environment() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/platform");
    let t = tmp();
    for env in ["dev", "staging", "prod"] {
        let out = t.path().join(env);
        let o = render(&example, env, &out, &["-o", "json"]);
        assert_eq!(o.code, 0, "{env}: {}", o.stderr);
        let types: Vec<String> = o.json()["clusterTypes"].as_array().unwrap().iter().map(|c| c["clusterType"].as_str().unwrap().to_string()).collect();
        assert_eq!(types, ["cloud-gpu-inference", "cloud-standard", "edge-gpu", "edge-small"]);
        // Namespace as a service: every workload namespace gets its quota, limits, SA, policies.
        for f in [
            "_cluster/Namespace.core.vision-inspection.yaml",
            "vision-inspection/ResourceQuota.core.vision-inspection-quota.yaml",
            "vision-inspection/LimitRange.core.vision-inspection-limits.yaml",
            "vision-inspection/ServiceAccount.core.vision-inspection.yaml",
            "vision-inspection/NetworkPolicy.networking.k8s.io.default-deny.yaml",
        ] {
            assert!(out.join("edge-gpu/manifests").join(f).is_file(), "{env}: missing {f}");
        }
        // GPU inspection only on GPU factory sites.
        assert!(!out.join("edge-small/manifests/vision-inspection").exists());
    }
    let staging = object(&t.path().join("staging"), "edge-gpu", "vision-inspection/Deployment.apps.inspector.yaml");
    let args = staging["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(args.contains("defect-detector:2025.11-rc"), "override pair applies in staging: {args}");
}

#[test]
fn assignment_follows_selectors_and_environments() {
    let t = tmp();
    let root = t.path().join("p");
    base(&root);
    let w = |name: &str, spec_extra: &str| {
        (
            format!("workloads/{name}/workload.yaml"),
            format!("apiVersion: drover.dev/v1\nkind: Workload\nspec:\n  namespace: {name}\n{spec_extra}"),
            format!("workloads/{name}/templates/values.yaml"),
        )
    };
    let defs = [
        w("by-label", "  selector:\n    matchLabels: {site: cloud}\n"),
        w("by-in", "  selector:\n    matchExpressions:\n    - {key: site, operator: In, values: [factory]}\n"),
        w("by-notin", "  selector:\n    matchExpressions:\n    - {key: site, operator: NotIn, values: [factory]}\n"),
        w("by-exists", "  selector:\n    matchExpressions:\n    - {key: legacy, operator: Exists}\n"),
        w("by-absent", "  selector:\n    matchExpressions:\n    - {key: legacy, operator: DoesNotExist}\n"),
        w("prod-only", "  environments: [prod]\n  selector: {}\n"),
    ];
    for (wf, text, tf) in &defs {
        write(&root, &[(wf.as_str(), text.as_str()), (tf.as_str(), VALUES_TEMPLATE)]);
    }
    let out = t.path().join("out");
    render_ok(&root, "dev", &out);
    let has = |ct: &str, ns: &str| out.join(ct).join("manifests").join(ns).join("ConfigMap.core.values.yaml").is_file();
    let expect = [
        ("by-label", [false, true, true]),
        ("by-in", [true, false, false]),
        ("by-notin", [false, true, true]),
        ("by-exists", [false, false, true]),
        ("by-absent", [true, true, false]),
        ("prod-only", [false, false, false]),
        ("app", [true, true, true]),
    ];
    for (ns, want) in expect {
        let got = [has("edge", ns), has("cloud", ns), has("lab", ns)];
        assert_eq!(got, want, "{ns} on [edge, cloud, lab]");
    }
    render_ok(&root, "prod", &out);
    assert!(has("edge", "prod-only") && has("lab", "prod-only"));
}

#[test]
fn values_precedence_level_by_level() {
    let t = tmp();
    let root = t.path().join("p");
    base(&root);
    let out = t.path().join("out");
    let x = |out: &Path| values(out, "edge", "app")["x"].clone();
    render_ok(&root, "dev", &out);
    assert_eq!(x(&out), json!("defaults"));
    // Each step adds a higher level; the highest one present wins.
    let steps: [(&str, &str, &str); 6] = [
        ("environments/dev.yaml", "apiVersion: drover.dev/v1\nkind: Environment\nmetadata: {name: dev}\nvalues: {x: env}\n", "env"),
        (
            "environments/dev.yaml",
            "apiVersion: drover.dev/v1\nkind: Environment\nmetadata: {name: dev}\nvalues: {x: env}\nworkloads:\n  app: {x: env-workload}\n",
            "env-workload",
        ),
        (
            "cluster-types/edge.yaml",
            "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  labels: {site: factory, gpu: \"true\"}\nvalues: {x: type}\n",
            "type",
        ),
        (
            "cluster-types/edge.yaml",
            "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  labels: {site: factory, gpu: \"true\"}\nvalues: {x: type}\nworkloads:\n  app: {x: type-workload}\n",
            "type-workload",
        ),
        ("overrides/dev/edge.yaml", "values: {x: override}\n", "override"),
        ("overrides/dev/edge.yaml", "values: {x: override}\nworkloads:\n  app: {x: override-workload}\n", "override-workload"),
    ];
    for (file, text, want) in steps {
        write(&root, &[(file, text)]);
        render_ok(&root, "dev", &out);
        assert_eq!(x(&out), json!(want), "after writing {file}");
        // Other cluster types and environments are untouched by type/override levels.
        assert_ne!(values(&out, "cloud", "app")["x"], json!("type"));
    }
    render_ok(&root, "staging", &out);
    assert_eq!(x(&out), json!("type-workload"), "the dev environment and dev override do not leak into staging");
}

#[test]
fn maps_merge_deeply_lists_replace_null_deletes() {
    let t = tmp();
    let root = t.path().join("p");
    base(&root);
    write(
        &root,
        &[
            (
                "workloads/app/workload.yaml",
                "apiVersion: drover.dev/v1\nkind: Workload\nspec:\n  namespace: app\n  selector: {}\nvalues:\n  m: {a: 1, b: 2, list: [1, 2, 3], gone: yes-now, deep: {k: v, z: 1}}\n  top: 1\n",
            ),
            (
                "environments/dev.yaml",
                "apiVersion: drover.dev/v1\nkind: Environment\nmetadata: {name: dev}\nvalues:\n  m: {b: 20, list: [9], gone: null, deep: {z: 2}}\n  top: null\n",
            ),
        ],
    );
    let out = t.path().join("out");
    render_ok(&root, "dev", &out);
    assert_eq!(values(&out, "cloud", "app"), json!({"m": {"a": 1, "b": 20, "list": [9], "deep": {"k": "v", "z": 2}}}));
}

#[test]
fn strict_undefined_names_file_and_line_and_writes_nothing() {
    let t = tmp();
    let root = t.path().join("p");
    base(&root);
    // `is defined` and `default` are allowed on undefined values.
    write(
        &root,
        &[(
            "workloads/app/templates/ok.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\n  namespace: {{ namespace }}\ndata:\n{% if values.nope is defined %}\n  nope: yes\n{% endif %}\n  d: {{ values.nope | default(\"fallback\") }}\n",
        )],
    );
    let out = t.path().join("out");
    render_ok(&root, "dev", &out);
    assert_eq!(object(&out, "edge", "app/ConfigMap.core.ok.yaml")["data"], json!({"d": "fallback"}));
    write(
        &root,
        &[("workloads/app/templates/bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\n  namespace: app\ndata:\n  v: \"{{ values.missing }}\"\n")],
    );
    let fresh = t.path().join("fresh");
    let o = render(&root, "dev", &fresh, &[]);
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("workloads/app/templates/bad.yaml:7"), "{}", o.stderr);
    assert!(o.stderr.contains("undefined"), "{}", o.stderr);
    assert!(!fresh.exists(), "nothing written on error");
    // An existing output is left as it was, even with --force.
    let before = files(&out);
    let o = render(&root, "dev", &out, &["--force"]);
    assert_ne!(o.code, 0);
    assert_eq!(files(&out), before);
}

#[test]
fn namespace_templates_are_stamped_per_workload_in_its_namespace() {
    let t = tmp();
    let root = t.path().join("p");
    base(&root);
    write(
        &root,
        &[
            (
                "namespace/ns.yaml",
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {{ namespace }}\n---\napiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: quota\n  namespace: {{ namespace }}\n  labels: {owner: {{ workload.name }}, type: {{ clusterType.name }}}\nspec:\n  hard: {cpu: \"{{ values.cpu | default(2) }}\"}\n",
            ),
            ("workloads/gpu/workload.yaml", "apiVersion: drover.dev/v1\nkind: Workload\nspec:\n  namespace: gpu-jobs\n  selector:\n    matchLabels: {gpu: \"true\"}\nvalues: {cpu: 16}\n"),
        ],
    );
    let out = t.path().join("out");
    render_ok(&root, "dev", &out);
    assert_eq!(
        files(&out.join("edge")),
        [
            "manifests/_cluster/Namespace.core.app.yaml",
            "manifests/_cluster/Namespace.core.gpu-jobs.yaml",
            "manifests/app/ConfigMap.core.values.yaml",
            "manifests/app/ResourceQuota.core.quota.yaml",
            "manifests/gpu-jobs/ResourceQuota.core.quota.yaml",
        ]
    );
    let q = object(&out, "edge", "gpu-jobs/ResourceQuota.core.quota.yaml");
    assert_eq!(q["metadata"]["labels"], json!({"owner": "gpu", "type": "edge"}));
    assert_eq!(q["spec"]["hard"]["cpu"], json!("16"));
    assert_eq!(files(&out.join("cloud")).len(), 3, "gpu is not assigned to cloud");
    // Two workloads sharing a namespace cannot both get the namespace templates.
    write(&root, &[("workloads/gpu/workload.yaml", "apiVersion: drover.dev/v1\nkind: Workload\nspec:\n  namespace: app\n  selector: {}\n")]);
    let o = render(&root, "dev", &t.path().join("x"), &[]);
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("both use namespace app"), "{}", o.stderr);
}

#[test]
fn partials_are_included_by_path_relative_to_the_platform() {
    let t = tmp();
    let root = t.path().join("p");
    base(&root);
    write(
        &root,
        &[
            ("workloads/app/templates/_labels.j2", "{% macro labels(w) %}{app: {{ w.name }}, ns: {{ w.namespace }}}{% endmacro %}"),
            (
                "workloads/app/templates/svc.yaml",
                "{% import 'workloads/app/templates/_labels.j2' as h %}\napiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: {{ namespace }}\n  labels: {{ h.labels(workload) }}\n",
            ),
        ],
    );
    let out = t.path().join("out");
    render_ok(&root, "dev", &out);
    assert_eq!(object(&out, "edge", "app/Service.core.s.yaml")["metadata"]["labels"], json!({"app": "app", "ns": "app"}));
    assert!(!out.join("edge/manifests/app").read_dir().unwrap().any(|e| e.unwrap().file_name().to_string_lossy().contains("labels")));
}

/// Writes `files` over a fresh base platform, renders dev, expects failure mentioning each of `want`.
fn expect_error(files_: &[(&str, &str)], want: &[&str]) {
    let t = tmp();
    let root = t.path().join("p");
    base(&root);
    write(&root, files_);
    let out = t.path().join("out");
    let o = render(&root, "dev", &out, &[]);
    assert_ne!(o.code, 0, "expected failure for {files_:?}");
    for w in want {
        assert!(o.stderr.contains(w), "stderr lacks {w:?}:\n{}", o.stderr);
    }
    assert!(!out.exists(), "nothing may be written on error");
}

#[test]
fn unknown_fields_are_errors_naming_file_and_field() {
    expect_error(
        &[("fleet.yaml", "apiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  enviroments: [dev]\n")],
        &["fleet.yaml", "unknown field `enviroments`"],
    );
    expect_error(
        &[("workloads/app/workload.yaml", "apiVersion: drover.dev/v1\nkind: Workload\nspec:\n  namespace: app\n  selector: {}\n  replicas: 3\n")],
        &["workloads/app/workload.yaml", "unknown field `replicas`"],
    );
    expect_error(
        &[("cluster-types/edge.yaml", "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  lables: {a: b}\n")],
        &["cluster-types/edge.yaml", "unknown field `lables`"],
    );
    expect_error(&[("overrides/dev/edge.yaml", "valuess: {}\n")], &["overrides/dev/edge.yaml", "unknown field `valuess`"]);
    expect_error(
        &[("workloads/app/workload.yaml", "apiVersion: drover.dev/v1\nkind: Workload\nspec:\n  namespace: app\n  selector:\n    matchExpressions:\n    - {key: a, operator: Has}\n")],
        &["workloads/app/workload.yaml", "unknown variant `Has`"],
    );
}

#[test]
fn definition_errors_name_the_file() {
    expect_error(
        &[("cluster-types/drover-releases.yaml", "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata: {}\n")],
        &["cluster-types/drover-releases.yaml", "reserved"],
    );
    expect_error(&[("environments/dev.yaml", "apiVersion: drover.dev/v1\nkind: Environment\nmetadata: {name: dev}\nworkloads:\n  ap: {x: 1}\n")], &["environments/dev.yaml", "workloads.ap"]);
    expect_error(&[("overrides/qa/edge.yaml", "values: {}\n")], &["overrides/qa", "\"qa\" is not an environment"]);
    expect_error(&[("overrides/dev/nope.yaml", "values: {}\n")], &["overrides/dev/nope.yaml", "no cluster type \"nope\""]);
    expect_error(
        &[("workloads/app/workload.yaml", "apiVersion: drover.dev/v1\nkind: Workload\nspec:\n  namespace: app\n  selector:\n    matchExpressions:\n    - {key: a, operator: In}\n")],
        &["workloads/app/workload.yaml", "needs at least one value"],
    );
    expect_error(&[("workloads/app/templates/syntax.yaml", "a: {{ values.x \n")], &["workloads/app/templates/syntax.yaml:1", "syntax error"]);
    let t = tmp();
    let root = t.path().join("p");
    base(&root);
    let o = render(&root, "qa", &t.path().join("out"), &[]);
    assert!(o.code != 0 && o.stderr.contains("unknown environment \"qa\""), "{}", o.stderr);
    let o = render(&root, "dev", &t.path().join("out"), &["--cluster-type", "nope"]);
    assert!(o.code != 0 && o.stderr.contains("unknown cluster type \"nope\""), "{}", o.stderr);
}

#[test]
fn rendered_output_errors_name_the_template() {
    let tpl = "workloads/app/templates/t.yaml";
    // YAML errors in the rendered output.
    expect_error(&[(tpl, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y, namespace: app\ndata: [\n")], &[tpl, "invalid YAML"]);
    // Missing apiVersion, kind, metadata.name.
    expect_error(&[(tpl, "kind: ConfigMap\nmetadata: {name: a, namespace: app}\n")], &[tpl, "apiVersion"]);
    expect_error(&[(tpl, "apiVersion: v1\nmetadata: {name: a, namespace: app}\n")], &[tpl, "kind"]);
    expect_error(&[(tpl, "apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: app}\n")], &[tpl, "metadata.name"]);
    // Objects in another namespace than their workload's.
    expect_error(&[(tpl, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: kube-system}\n")], &[tpl, "namespace kube-system", "workload app"]);
    // The same object from two workloads: both templates named.
    expect_error(
        &[
            ("workloads/other/workload.yaml", "apiVersion: drover.dev/v1\nkind: Workload\nspec:\n  namespace: other\n  selector: {}\n"),
            ("workloads/other/templates/crb.yaml", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: shared}\n"),
            (tpl, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: shared}\n"),
        ],
        &["defined twice", "workloads/app/templates/t.yaml", "workloads/other/templates/crb.yaml"],
    );
}

#[test]
fn out_dir_rules_and_single_cluster_type() {
    let t = tmp();
    let root = t.path().join("p");
    base(&root);
    let out = t.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("keep.txt"), "mine").unwrap();
    let o = render(&root, "dev", &out, &[]);
    assert!(o.code != 0 && o.stderr.contains("--force"), "{}", o.stderr);
    assert_eq!(std::fs::read_to_string(out.join("keep.txt")).unwrap(), "mine");
    let o = render(&root, "dev", &out, &["--force", "--cluster-type", "lab"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(files(&out), ["lab/manifests/app/ConfigMap.core.values.yaml"]);
}

/// Objects that would fight a controller the same bundle sets up (issue 24): a
/// Deployment's `spec.replicas` under an HPA, an aggregated ClusterRole's `rules`. `drover
/// build` (and render, publish) warns naming both objects; `--strict` refuses. The
/// example platform has none (its HPA owns the model server's replicas).
#[test]
fn fights_between_objects_are_warned_and_strict_refuses() {
    let t = tmp();
    let dir = t.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("app.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  replicas: 3\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: c, image: nginx}]}\n---\n\
apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: web, namespace: shop}\nspec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n  maxReplicas: 10\n---\n\
apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: monitoring-view}\naggregationRule:\n  clusterRoleSelectors: [{matchLabels: {rbac.example.com/aggregate-to-monitoring: \"true\"}}]\nrules: []\n",
    )
    .unwrap();
    let out_dir = format!("oci:{}", t.path().join("layout").display());
    let args = ["build", dir.to_str().unwrap(), "--out", out_dir.as_str(), "--sequence", "1"];
    let o = drover_tests::run("drover", &args, &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("HorizontalPodAutoscaler shop/web scales Deployment shop/web") && o.stderr.contains("spec.replicas (3)"), "{}", o.stderr);
    assert!(o.stderr.contains("ClusterRole monitoring-view has an aggregationRule and also sets rules"), "{}", o.stderr);
    let strict_out = t.path().join("layout-strict");
    let strict_arg = format!("oci:{}", strict_out.display());
    let o = drover_tests::run("drover", &["build", dir.to_str().unwrap(), "--out", strict_arg.as_str(), "--sequence", "1", "--strict"], &[]);
    assert_ne!(o.code, 0, "{}", o.stdout);
    assert!(o.stderr.contains("--strict"), "{}", o.stderr);
    assert!(!strict_out.exists(), "nothing written under --strict");

    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/platform");
    for env in ["dev", "staging", "prod"] {
        let o = render(&example, env, &t.path().join(format!("r-{env}")), &["--strict"]);
        assert_eq!(o.code, 0, "the example platform has no fight ({env}): {}", o.stderr);
    }
}
