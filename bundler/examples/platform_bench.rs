//! Platform bench: generates a synthetic fleet and measures render + build.
//!
//! ```text
//! cargo run --release -p drover-bundler --example platform_bench -- gen DIR [WORKLOADS] [TYPES]
//! /usr/bin/time -v target/release/examples/platform_bench run DIR ENV
//! ```
//! `gen` writes a platform with WORKLOADS workloads (default 20), each with four
//! templates, five namespace templates, TYPES cluster types (default 300) with labels,
//! values and per-workload values, three environments and some overrides.
//! `run` loads it, renders every cluster type and assembles every bundle (all in
//! memory, in parallel), printing the time of each phase.

use std::path::Path;
use std::time::Instant;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn gen(root: &Path, workloads: usize, types: usize) {
    write(root, "fleet.yaml", "apiVersion: drover.dev/v1\nkind: Fleet\nspec:\n  environments: [dev, staging, prod]\n");
    for e in ["dev", "staging", "prod"] {
        write(
            root,
            &format!("environments/{e}.yaml"),
            &format!("apiVersion: drover.dev/v1\nkind: Environment\nmetadata: {{name: {e}}}\nvalues:\n  logLevel: info\n  imageTag: \"1.0.{}\"\n", e.len()),
        );
    }
    let sites = ["factory", "cloud", "store"];
    for t in 0..types {
        let site = sites[t % 3];
        let gpu = t % 5 == 0;
        write(
            root,
            &format!("cluster-types/ct-{t:03}.yaml"),
            &format!(
                "apiVersion: drover.dev/v1\nkind: ClusterType\nmetadata:\n  labels: {{site: {site}, gpu: \"{gpu}\", region: r{}}}\nvalues:\n  replicas: {}\n  quota: {{cpu: \"{}\", memory: {}Gi}}\nworkloads:\n  w00: {{extra: {{slot: {t}}}}}\n",
                t % 12,
                1 + t % 4,
                4 + t % 32,
                8 + t % 64
            ),
        );
        if t % 10 == 0 {
            write(root, &format!("overrides/prod/ct-{t:03}.yaml"), "values:\n  replicas: 5\n");
        }
    }
    write(root, "namespace/ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {{ namespace }}\n  labels: {drover.dev/workload: {{ workload.name }}}\n");
    write(
        root,
        "namespace/quota.yaml",
        "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: quota, namespace: {{ namespace }}}\nspec:\n  hard: {requests.cpu: \"{{ values.quota.cpu }}\", requests.memory: {{ values.quota.memory }}}\n---\napiVersion: v1\nkind: LimitRange\nmetadata: {name: limits, namespace: {{ namespace }}}\nspec:\n  limits:\n  - type: Container\n    default: {cpu: 500m, memory: 256Mi}\n",
    );
    write(root, "namespace/sa.yaml", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: {{ workload.name }}, namespace: {{ namespace }}}\n");
    write(
        root,
        "namespace/netpol.yaml",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: default-deny, namespace: {{ namespace }}}\nspec:\n  podSelector: {}\n  policyTypes: [Ingress, Egress]\n",
    );
    for w in 0..workloads {
        let name = format!("w{w:02}");
        let selector = match w % 4 {
            0 | 1 => "{}".to_string(),
            2 => "\n    matchExpressions:\n    - {key: site, operator: In, values: [factory, cloud, store]}".to_string(),
            _ => "\n    matchExpressions:\n    - {key: region, operator: Exists}".to_string(),
        };
        write(
            root,
            &format!("workloads/{name}/workload.yaml"),
            &format!("apiVersion: drover.dev/v1\nkind: Workload\nspec:\n  namespace: ns-{name}\n  selector: {selector}\nvalues:\n  image: registry.example.com/team/{name}\n  port: {}\n  env: {{A: \"1\", B: \"2\", C: \"3\"}}\n  extra: {{slot: 0}}\n", 8000 + w),
        );
        write(
            root,
            &format!("workloads/{name}/templates/deploy.yaml"),
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ workload.name }}\n  namespace: {{ namespace }}\n  labels: {app: {{ workload.name }}, type: {{ clusterType.name }}}\nspec:\n  replicas: {{ values.replicas }}\n  selector:\n    matchLabels: {app: {{ workload.name }}}\n  template:\n    metadata:\n      labels: {app: {{ workload.name }}}\n    spec:\n      serviceAccountName: {{ workload.name }}\n      containers:\n      - name: main\n        image: {{ values.image }}:{{ values.imageTag }}\n        args: [\"--log-level={{ values.logLevel }}\", \"--slot={{ values.extra.slot }}\"]\n        ports: [{containerPort: {{ values.port }}}]\n        env:\n{% for k, v in values.env|items %}\n        - {name: {{ k }}, value: \"{{ v }}\"}\n{% endfor %}\n",
        );
        write(
            root,
            &format!("workloads/{name}/templates/svc.yaml"),
            "apiVersion: v1\nkind: Service\nmetadata: {name: {{ workload.name }}, namespace: {{ namespace }}}\nspec:\n  selector: {app: {{ workload.name }}}\n  ports: [{port: 80, targetPort: {{ values.port }}}]\n",
        );
        write(
            root,
            &format!("workloads/{name}/templates/cm.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ workload.name }}-config, namespace: {{ namespace }}}\ndata:\n  values.json: {{ values | tojson | tojson }}\n",
        );
        write(
            root,
            &format!("workloads/{name}/templates/hpa.yaml"),
            "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: {{ workload.name }}, namespace: {{ namespace }}}\nspec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: {{ workload.name }}}\n  minReplicas: {{ values.replicas }}\n  maxReplicas: {{ values.replicas * 4 }}\n",
        );
    }
}

fn run(root: &Path, env: &str) {
    let t0 = Instant::now();
    let p = drover_bundler::platform::Platform::load(root).unwrap_or_else(|e| panic!("{e}"));
    let t1 = Instant::now();
    let rendered = p.render(env, None).unwrap_or_else(|e| panic!("{e}"));
    let t2 = Instant::now();
    let bundles = drover_bundler::platform::par_map(&rendered, |t| {
        let meta = drover_proto::bundle::BundleMeta { cluster_type: t.name.clone(), environment: env.into(), sequence: 1, ..Default::default() };
        let b = drover_proto::bundle::assemble(&t.objects, &meta);
        (b.digest, b.layer.len())
    });
    let t3 = Instant::now();
    let objects: usize = rendered.iter().map(|t| t.objects.len()).sum();
    let layer_bytes: usize = bundles.iter().map(|b| b.1).sum();
    let assigned: usize = rendered.iter().map(|t| t.workloads.len()).sum();
    println!("cluster types: {}, workloads: {}, workload renders: {assigned}, objects: {objects}, layer bytes (gzip): {layer_bytes}", rendered.len(), p.workloads.len());
    println!(
        "load {:.3} s, render {:.3} s, build {:.3} s, total {:.3} s (threads: {})",
        (t1 - t0).as_secs_f64(),
        (t2 - t1).as_secs_f64(),
        (t3 - t2).as_secs_f64(),
        (t3 - t0).as_secs_f64(),
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("gen") => {
            let dir = Path::new(&args[2]);
            let w = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(20);
            let t = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(300);
            gen(dir, w, t);
            println!("wrote {} ({w} workloads x {t} cluster types)", dir.display());
        }
        Some("run") => run(Path::new(&args[2]), args.get(3).map(String::as_str).unwrap_or("prod")),
        _ => eprintln!("usage: platform_bench gen DIR [WORKLOADS] [TYPES] | run DIR [ENV]"),
    }
}
