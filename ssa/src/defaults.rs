//! The API server's defaulting of built-in kinds (the `SetDefaults_*` functions of
//! Kubernetes 1.30's `pkg/apis/*/v1/defaults.go` for the kinds drover ships, and the
//! `+default` markers of the Go types): what a stored object holds that nobody wrote.
//! Defaults belong to no manager. What is not here is listed in docs/fake-apiserver.md.

use crate::schema::{Atom, Schema, Type};
use serde_json::{json, Map, Value};

fn obj(v: &mut Value) -> Option<&mut Map<String, Value>> {
    v.as_object_mut()
}

fn absent(m: &Map<String, Value>, k: &str) -> bool {
    m.get(k).is_none_or(Value::is_null)
}

fn set_default(m: &mut Map<String, Value>, k: &str, v: Value) {
    if absent(m, k) {
        m.insert(k.into(), v);
    }
}

/// Child map at `k`, created (as `{}`) when absent.
fn child<'a>(m: &'a mut Map<String, Value>, k: &str) -> Option<&'a mut Map<String, Value>> {
    if absent(m, k) {
        m.insert(k.into(), json!({}));
    }
    m.get_mut(k).and_then(Value::as_object_mut)
}

fn each<'a>(m: &'a mut Map<String, Value>, k: &str) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    m.get_mut(k).and_then(Value::as_array_mut).into_iter().flatten().filter_map(Value::as_object_mut)
}

/// Applies the server's defaults to `object` (a built-in kind; others are left alone
/// except for their schema's `default`s, see [`schema_defaults`]).
pub fn apply(schema: &Schema, object: &mut Value) {
    let api_version = object["apiVersion"].as_str().unwrap_or_default().to_string();
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    schema_defaults(&schema.root, object);
    let Some(o) = obj(object) else { return };
    match (api_version.as_str(), kind.as_str()) {
        ("apps/v1", "Deployment") => deployment(o),
        ("apps/v1", "StatefulSet") => stateful_set(o),
        ("apps/v1", "DaemonSet") => daemon_set(o),
        ("apps/v1", "ReplicaSet") | ("v1", "ReplicationController") => {
            if let Some(spec) = child(o, "spec") {
                set_default(spec, "replicas", json!(1));
                template(spec);
            }
        }
        ("batch/v1", "Job") => {
            if let Some(spec) = child(o, "spec") {
                job_spec(spec);
            }
        }
        ("batch/v1", "CronJob") => cron_job(o),
        ("v1", "PodTemplate") => {
            if let Some(t) = child(o, "template") {
                if let Some(spec) = child(t, "spec") {
                    pod_spec(spec);
                }
            }
        }
        ("v1", "Pod") => {
            if let Some(spec) = child(o, "spec") {
                pod_spec(spec);
                set_default(spec, "enableServiceLinks", json!(true));
            }
        }
        ("v1", "Service") => service(o),
        ("v1", "Secret") => set_default(o, "type", json!("Opaque")),
        ("v1", "Namespace") => namespace(o),
        ("v1", "PersistentVolumeClaim") => {
            if let Some(spec) = child(o, "spec") {
                set_default(spec, "volumeMode", json!("Filesystem"));
            }
        }
        ("networking.k8s.io/v1", "NetworkPolicy") => network_policy(o),
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => {
            for s in each(o, "subjects") {
                let group = match s.get("kind").and_then(Value::as_str) {
                    Some("User" | "Group") => "rbac.authorization.k8s.io",
                    _ => "",
                };
                if !group.is_empty() {
                    set_default(s, "apiGroup", json!(group));
                }
            }
        }
        ("autoscaling/v2", "HorizontalPodAutoscaler") => hpa(o),
        ("storage.k8s.io/v1", "StorageClass") => {
            set_default(o, "reclaimPolicy", json!("Delete"));
            set_default(o, "volumeBindingMode", json!("Immediate"));
        }
        ("scheduling.k8s.io/v1", "PriorityClass") => set_default(o, "preemptionPolicy", json!("PreemptLowerPriority")),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
            if let Some(spec) = child(o, "spec") {
                if absent(spec, "conversion") {
                    spec.insert("conversion".into(), json!({"strategy": "None"}));
                }
                if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
                    if absent(names, "listKind") {
                        if let Some(k) = names.get("kind").and_then(Value::as_str).filter(|k| !k.is_empty()) {
                            let lk = format!("{k}List");
                            names.insert("listKind".into(), json!(lk));
                        }
                    }
                }
            }
        }
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy") => {
            if let Some(spec) = child(o, "spec") {
                set_default(spec, "failurePolicy", json!("Fail"));
                if let Some(mc) = spec.get_mut("matchConstraints").and_then(Value::as_object_mut) {
                    set_default(mc, "matchPolicy", json!("Equivalent"));
                    set_default(mc, "namespaceSelector", json!({}));
                    set_default(mc, "objectSelector", json!({}));
                    for r in each(mc, "resourceRules") {
                        set_default(r, "scope", json!("*"));
                    }
                }
            }
        }
        ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration") => {
            let mutating = kind.starts_with("Mutating");
            for w in each(o, "webhooks") {
                webhook(w, mutating);
            }
        }
        _ => {}
    }
}

/// The `+default` values of the schema (built-in markers and CRD `default`s): an absent
/// field with a default gets it, in every struct the object holds.
pub fn schema_defaults(ty: &Type, value: &mut Value) {
    match ty.atom(Some(value)) {
        Atom::Map(m) => {
            let Some(o) = value.as_object_mut() else { return };
            if let Some(s) = &m.strukt {
                for f in &s.fields {
                    if let Some(d) = &f.default {
                        if absent(o, &f.name) && !is_zero(d) {
                            o.insert(f.name.clone(), d.clone());
                        }
                    }
                }
            }
            for (k, v) in o.iter_mut() {
                schema_defaults(&m.child(k).0, v);
            }
        }
        Atom::List(elem, _) => {
            for v in value.as_array_mut().into_iter().flatten() {
                schema_defaults(&elem, v);
            }
        }
        Atom::Scalar(_) => {}
    }
}

fn is_zero(v: &Value) -> bool {
    matches!(v, Value::Null | Value::Bool(false)) || v.as_str() == Some("") || v.as_f64() == Some(0.0)
}

fn template(spec: &mut Map<String, Value>) {
    if let Some(t) = child(spec, "template") {
        if let Some(ps) = child(t, "spec") {
            pod_spec(ps);
        }
    }
}

fn deployment(o: &mut Map<String, Value>) {
    let Some(spec) = child(o, "spec") else { return };
    set_default(spec, "replicas", json!(1));
    if let Some(strategy) = child(spec, "strategy") {
        set_default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type") == Some(&json!("RollingUpdate")) {
            if let Some(ru) = child(strategy, "rollingUpdate") {
                set_default(ru, "maxUnavailable", json!("25%"));
                set_default(ru, "maxSurge", json!("25%"));
            }
        }
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    template(spec);
}

fn stateful_set(o: &mut Map<String, Value>) {
    let Some(spec) = child(o, "spec") else { return };
    set_default(spec, "replicas", json!(1));
    set_default(spec, "podManagementPolicy", json!("OrderedReady"));
    if let Some(us) = child(spec, "updateStrategy") {
        set_default(us, "type", json!("RollingUpdate"));
        if us.get("type") == Some(&json!("RollingUpdate")) {
            if let Some(ru) = child(us, "rollingUpdate") {
                set_default(ru, "partition", json!(0));
            }
        }
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    if let Some(p) = child(spec, "persistentVolumeClaimRetentionPolicy") {
        set_default(p, "whenDeleted", json!("Retain"));
        set_default(p, "whenScaled", json!("Retain"));
    }
    for pvc in each(spec, "volumeClaimTemplates") {
        if let Some(ps) = child(pvc, "spec") {
            set_default(ps, "volumeMode", json!("Filesystem"));
        }
        if let Some(st) = child(pvc, "status") {
            set_default(st, "phase", json!("Pending"));
        }
    }
    template(spec);
}

fn daemon_set(o: &mut Map<String, Value>) {
    let Some(spec) = child(o, "spec") else { return };
    if let Some(us) = child(spec, "updateStrategy") {
        set_default(us, "type", json!("RollingUpdate"));
        if us.get("type") == Some(&json!("RollingUpdate")) {
            if let Some(ru) = child(us, "rollingUpdate") {
                set_default(ru, "maxUnavailable", json!(1));
                set_default(ru, "maxSurge", json!(0));
            }
        }
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    template(spec);
}

fn job_spec(spec: &mut Map<String, Value>) {
    if absent(spec, "completions") && absent(spec, "parallelism") {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    set_default(spec, "parallelism", json!(1));
    set_default(spec, "backoffLimit", json!(6));
    set_default(spec, "completionMode", json!("NonIndexed"));
    set_default(spec, "suspend", json!(false));
    set_default(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
    template(spec);
}

fn cron_job(o: &mut Map<String, Value>) {
    let Some(spec) = child(o, "spec") else { return };
    set_default(spec, "concurrencyPolicy", json!("Allow"));
    set_default(spec, "suspend", json!(false));
    set_default(spec, "successfulJobsHistoryLimit", json!(3));
    set_default(spec, "failedJobsHistoryLimit", json!(1));
    if let Some(jt) = child(spec, "jobTemplate") {
        if let Some(js) = child(jt, "spec") {
            job_spec(js);
        }
    }
}

/// `SetDefaults_PodSpec` and what it defaults below it.
fn pod_spec(ps: &mut Map<String, Value>) {
    set_default(ps, "dnsPolicy", json!("ClusterFirst"));
    set_default(ps, "restartPolicy", json!("Always"));
    set_default(ps, "terminationGracePeriodSeconds", json!(30));
    set_default(ps, "securityContext", json!({}));
    set_default(ps, "schedulerName", json!("default-scheduler"));
    let host_network = ps.get("hostNetwork") == Some(&json!(true));
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for c in each(ps, list) {
            container(c, host_network);
        }
    }
    for v in each(ps, "volumes") {
        volume(v);
    }
}

fn container(c: &mut Map<String, Value>, host_network: bool) {
    if absent(c, "imagePullPolicy") {
        let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
        let tag = image.rsplit('/').next().unwrap_or_default();
        let latest = !image.contains('@') && (!tag.contains(':') || tag.ends_with(":latest"));
        c.insert("imagePullPolicy".into(), json!(if latest { "Always" } else { "IfNotPresent" }));
    }
    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "terminationMessagePolicy", json!("File"));
    for p in each(c, "ports") {
        set_default(p, "protocol", json!("TCP"));
        if host_network && absent(p, "hostPort") {
            if let Some(cp) = p.get("containerPort").cloned() {
                p.insert("hostPort".into(), cp);
            }
        }
    }
    for e in each(c, "env") {
        if let Some(fr) = e.get_mut("valueFrom").and_then(Value::as_object_mut).and_then(|vf| vf.get_mut("fieldRef")).and_then(Value::as_object_mut) {
            set_default(fr, "apiVersion", json!("v1"));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).and_then(Value::as_object_mut) {
            set_default(p, "timeoutSeconds", json!(1));
            set_default(p, "periodSeconds", json!(10));
            set_default(p, "successThreshold", json!(1));
            set_default(p, "failureThreshold", json!(3));
            if let Some(h) = p.get_mut("httpGet").and_then(Value::as_object_mut) {
                set_default(h, "path", json!("/"));
                set_default(h, "scheme", json!("HTTP"));
            }
            if let Some(g) = p.get_mut("grpc").and_then(Value::as_object_mut) {
                set_default(g, "service", json!(""));
            }
        }
    }
    if let Some(lc) = c.get_mut("lifecycle").and_then(Value::as_object_mut) {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = lc.get_mut(hook).and_then(Value::as_object_mut).and_then(|h| h.get_mut("httpGet")).and_then(Value::as_object_mut) {
                set_default(h, "path", json!("/"));
                set_default(h, "scheme", json!("HTTP"));
            }
        }
    }
}

fn volume(v: &mut Map<String, Value>) {
    const SOURCES: &[&str] = &["hostPath", "emptyDir", "secret", "configMap", "persistentVolumeClaim", "projected", "downwardAPI", "csi", "ephemeral", "nfs", "image"];
    if !v.keys().any(|k| k != "name" && (SOURCES.contains(&k.as_str()) || k.ends_with("Disk") || k.ends_with("Volume"))) {
        v.insert("emptyDir".into(), json!({}));
    }
    for src in ["configMap", "secret", "projected", "downwardAPI"] {
        if let Some(s) = v.get_mut(src).and_then(Value::as_object_mut) {
            set_default(s, "defaultMode", json!(420));
        }
    }
    if let Some(h) = v.get_mut("hostPath").and_then(Value::as_object_mut) {
        set_default(h, "type", json!(""));
    }
    // Inside atomic lists (downward API items, projected sources): the server's defaults
    // are part of the value drover owns.
    let field_refs = |items: Option<&mut Value>| {
        for item in items.and_then(Value::as_array_mut).into_iter().flatten() {
            if let Some(fr) = item.get_mut("fieldRef").and_then(Value::as_object_mut) {
                set_default(fr, "apiVersion", json!("v1"));
            }
        }
    };
    field_refs(v.get_mut("downwardAPI").and_then(|d| d.get_mut("items")));
    for src in v.get_mut("projected").and_then(|p| p.get_mut("sources")).and_then(Value::as_array_mut).into_iter().flatten() {
        field_refs(src.get_mut("downwardAPI").and_then(|d| d.get_mut("items")));
        if let Some(t) = src.get_mut("serviceAccountToken").and_then(Value::as_object_mut) {
            set_default(t, "expirationSeconds", json!(3600));
        }
    }
}

fn service(o: &mut Map<String, Value>) {
    let name_hash = o.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str).map(|n| n.bytes().fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32))).unwrap_or(0);
    let Some(spec) = child(o, "spec") else { return };
    set_default(spec, "type", json!("ClusterIP"));
    set_default(spec, "sessionAffinity", json!("None"));
    let ty = spec.get("type").and_then(Value::as_str).unwrap_or("ClusterIP").to_string();
    for p in each(spec, "ports") {
        set_default(p, "protocol", json!("TCP"));
        if absent(p, "targetPort") {
            if let Some(port) = p.get("port").cloned() {
                p.insert("targetPort".into(), port);
            }
        }
    }
    if ty != "ExternalName" {
        set_default(spec, "internalTrafficPolicy", json!("Cluster"));
        if absent(spec, "clusterIP") {
            let ip = format!("10.96.{}.{}", (name_hash >> 8) % 250 + 1, name_hash % 250 + 2);
            spec.insert("clusterIP".into(), json!(ip));
        }
        if absent(spec, "clusterIPs") {
            let ip = spec["clusterIP"].clone();
            spec.insert("clusterIPs".into(), json!([ip]));
        }
        set_default(spec, "ipFamilies", json!(["IPv4"]));
        set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
    }
    if ty == "NodePort" || ty == "LoadBalancer" {
        set_default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if ty == "LoadBalancer" {
        set_default(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    if let Some(st) = child(o, "status") {
        set_default(st, "loadBalancer", json!({}));
    }
}

fn namespace(o: &mut Map<String, Value>) {
    let name = o.get("metadata").and_then(|m| m.get("name")).cloned();
    if let (Some(name), Some(meta)) = (name, child(o, "metadata")) {
        if let Some(labels) = child(meta, "labels") {
            labels.insert("kubernetes.io/metadata.name".into(), name);
        }
    }
    if let Some(spec) = child(o, "spec") {
        set_default(spec, "finalizers", json!(["kubernetes"]));
    }
    if let Some(st) = child(o, "status") {
        set_default(st, "phase", json!("Active"));
    }
}

fn network_policy(o: &mut Map<String, Value>) {
    let Some(spec) = child(o, "spec") else { return };
    for dir in ["ingress", "egress"] {
        for rule in each(spec, dir) {
            for p in each(rule, "ports") {
                set_default(p, "protocol", json!("TCP"));
            }
        }
    }
    if absent(spec, "policyTypes") || spec["policyTypes"].as_array().is_some_and(Vec::is_empty) {
        let mut types = vec![json!("Ingress")];
        if spec.get("egress").and_then(Value::as_array).is_some_and(|e| !e.is_empty()) {
            types.push(json!("Egress"));
        }
        spec.insert("policyTypes".into(), Value::Array(types));
    }
}

fn hpa(o: &mut Map<String, Value>) {
    let Some(spec) = child(o, "spec") else { return };
    set_default(spec, "minReplicas", json!(1));
    if spec.get("metrics").and_then(Value::as_array).is_none_or(Vec::is_empty) {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    let Some(b) = spec.get_mut("behavior").and_then(Value::as_object_mut) else { return };
    let up = json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
        "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]});
    let down = json!({"stabilizationWindowSeconds": 300, "selectPolicy": "Max",
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]});
    for (k, d) in [("scaleUp", up), ("scaleDown", down)] {
        let rules = child(b, k).expect("map");
        for (f, v) in d.as_object().expect("map") {
            set_default(rules, f, v.clone());
        }
    }
}

fn webhook(w: &mut Map<String, Value>, mutating: bool) {
    set_default(w, "failurePolicy", json!("Fail"));
    set_default(w, "matchPolicy", json!("Equivalent"));
    set_default(w, "namespaceSelector", json!({}));
    set_default(w, "objectSelector", json!({}));
    set_default(w, "timeoutSeconds", json!(10));
    if mutating {
        set_default(w, "reinvocationPolicy", json!("Never"));
    }
    for r in each(w, "rules") {
        set_default(r, "scope", json!("*"));
    }
    if let Some(s) = w.get_mut("clientConfig").and_then(Value::as_object_mut).and_then(|c| c.get_mut("service")).and_then(Value::as_object_mut) {
        set_default(s, "port", json!(443));
    }
}
