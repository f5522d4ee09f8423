//! Would a server-side apply change this object? The resync's compare: an object is
//! left alone only when drover's field manager already owns exactly the fields the apply
//! would send and every one of them holds the sent value. Anything it cannot judge
//! safely counts as a difference (the object is applied): a missed drift is a defect, an
//! extra PATCH is not.
//!
//! The field set is read the way the API server writes it for server-side apply
//! (`structured-merge-diff`'s `ToFieldSet`, encoded as `fieldsV1`): `f:<name>` for a map
//! key or struct field, `k:{"name":"x"}` for an item of an associative list (keys as
//! JSON), `v:<json>` for an item of a set list, `.` for a path that is owned itself and
//! has owned children; scalars, empty maps, atomic lists and atomic maps are leaves
//! (`{}`); `apiVersion`, `kind`, `metadata.name` and `metadata.namespace` are never
//! listed. Whether a list is atomic, a set or keyed by which fields, and whether a map is
//! atomic, is in the server's schema, which the agent does not have: it reads that shape
//! from drover's own live entry (which the server built from the schema) and then
//! requires the desired object to produce exactly that entry. A desired list that does
//! not fit the entry's shape (an item without one of the entry's key fields, e.g. a port
//! without the `protocol` the server defaulted into the key) is a difference.
//!
//! Values: a desired scalar must equal the live one exactly (JSON equality: `1000m` vs
//! `1`, `80` vs `"80"`, `1.0` vs `1` are differences); maps may hold more live keys than
//! desired (defaults, other managers' fields) because ownership already says which keys
//! are drover's; a `null`, an empty list or a `k:`/`v:` shape that does not match is a
//! difference.

use serde_json::{Map, Value};

/// Top-level and metadata fields the API server leaves out of every field set.
const IDENTITY: &[&str] = &["apiVersion", "kind"];
const META_IDENTITY: &[&str] = &["name", "namespace"];

/// True when applying `desired` (the exact apply body) with `field_manager` would change
/// nothing on `live` (the object as the API server returns it, with
/// `metadata.managedFields`).
pub fn unchanged(desired: &Value, live: &Value, field_manager: &str) -> bool {
    let Some(fields) = applied_fields(live, field_manager, desired["apiVersion"].as_str().unwrap_or_default()) else {
        return false;
    };
    let Some(mut body) = desired.as_object().cloned() else {
        return false;
    };
    for k in IDENTITY {
        body.remove(*k);
    }
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in META_IDENTITY {
            meta.remove(*k);
        }
        if meta.is_empty() {
            body.remove("metadata");
        }
    }
    same_map(&body, Some(fields), Some(live))
}

/// The `fieldsV1` of `manager`'s Apply entry (main resource, same apiVersion).
fn applied_fields<'a>(live: &'a Value, manager: &str, api_version: &str) -> Option<&'a Map<String, Value>> {
    let entries = live.pointer("/metadata/managedFields")?.as_array()?;
    let mut mine = entries.iter().filter(|e| {
        e["manager"] == manager && e["operation"] == "Apply" && e.get("subresource").is_none_or(|s| s.is_null() || s == "")
    });
    let e = mine.next()?;
    if mine.next().is_some() || e["apiVersion"] != api_version || e.get("fieldsType").is_some_and(|t| t != "FieldsV1") {
        return None;
    }
    e["fieldsV1"].as_object()
}

/// Owned children of a field-set node (everything but the `.` self marker).
fn children(node: &Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
    node.iter().filter(|(k, _)| k.as_str() != ".")
}

fn is_leaf(node: &Map<String, Value>) -> bool {
    children(node).next().is_none()
}

/// One desired value at a path: `node` is drover's field-set node there (None when it
/// owns nothing there), `live` the live value there.
fn same(desired: &Value, node: Option<&Map<String, Value>>, live: Option<&Value>) -> bool {
    match desired {
        Value::Object(m) if m.is_empty() => node.is_some_and(is_leaf) && live.is_some_and(Value::is_object),
        Value::Object(m) => match node {
            // An atomic map (e.g. a LabelSelector) is one owned leaf.
            Some(n) if is_leaf(n) => live.is_some_and(|l| contains(desired, l)),
            _ => same_map(m, node, live),
        },
        Value::Array(items) => match (node, live.and_then(Value::as_array)) {
            (Some(n), Some(l)) => same_list(items, n, l),
            _ => false,
        },
        Value::Null => false,
        scalar => node.is_some_and(is_leaf) && live == Some(scalar),
    }
}

/// A desired map whose children are owned one by one: every owned child is desired and
/// every desired child is the same.
fn same_map(desired: &Map<String, Value>, node: Option<&Map<String, Value>>, live: Option<&Value>) -> bool {
    let Some(live) = live.and_then(Value::as_object) else {
        return false;
    };
    let empty = Map::new();
    let node = node.unwrap_or(&empty);
    let owned_all_desired = children(node).all(|(k, _)| k.strip_prefix("f:").is_some_and(|f| desired.contains_key(f)));
    owned_all_desired && desired.iter().all(|(k, v)| same(v, node.get(&format!("f:{k}")).and_then(Value::as_object), live.get(k)))
}

/// A desired list against drover's node for it: a leaf is an atomic list (compared item
/// by item), `v:` children a set of scalars, `k:` children an associative list.
fn same_list(desired: &[Value], node: &Map<String, Value>, live: &[Value]) -> bool {
    if desired.is_empty() {
        return is_leaf(node) && live.is_empty();
    }
    if is_leaf(node) {
        return desired.len() == live.len() && desired.iter().zip(live).all(|(d, l)| contains(d, l));
    }
    let owned: Vec<(&String, &Value)> = children(node).collect();
    if owned.len() != desired.len() {
        return false;
    }
    if owned.iter().all(|(k, _)| k.starts_with("v:")) {
        return same_set(desired, &owned, live);
    }
    if owned.iter().all(|(k, _)| k.starts_with("k:")) {
        return same_keyed(desired, &owned, live);
    }
    false
}

/// A set list: each desired scalar owned as `v:<json>` and present live (no duplicates).
fn same_set(desired: &[Value], owned: &[(&String, &Value)], live: &[Value]) -> bool {
    let values: Vec<Value> = owned.iter().filter_map(|(k, _)| serde_json::from_str(&k[2..]).ok()).collect();
    desired.iter().enumerate().all(|(i, d)| !d.is_object() && !d.is_array() && !desired[..i].contains(d) && values.contains(d) && live.contains(d))
}

/// An associative list: each desired item owned as `k:{keys}` (its own values of exactly
/// those key fields), the same item by item, and in the same order live.
fn same_keyed(desired: &[Value], owned: &[(&String, &Value)], live: &[Value]) -> bool {
    let keys: Vec<Option<Map<String, Value>>> = owned.iter().map(|(k, _)| serde_json::from_str(&k[2..]).ok()).collect();
    let matches = |key: &Map<String, Value>, item: &Value| key.iter().all(|(f, v)| item.get(f) == Some(v));
    let mut used = vec![false; owned.len()];
    let mut last_live = None;
    for d in desired {
        let Some(dm) = d.as_object() else { return false };
        let found: Vec<usize> = keys.iter().enumerate().filter(|(_, k)| k.as_ref().is_some_and(|k| matches(k, d))).map(|(i, _)| i).collect();
        let [i] = found[..] else { return false };
        if used[i] {
            return false;
        }
        used[i] = true;
        let key = keys[i].as_ref().expect("matched");
        let at: Vec<usize> = live.iter().enumerate().filter(|(_, l)| matches(key, l)).map(|(j, _)| j).collect();
        let [j] = at[..] else { return false };
        if last_live.is_some_and(|p| j <= p) {
            return false;
        }
        last_live = Some(j);
        if !same_map(dm, owned[i].1.as_object(), Some(&live[j])) {
            return false;
        }
    }
    true
}

/// `desired` is in `live`: equal scalars, maps whose desired keys are all in the live
/// map (recursively), lists of the same length item by item.
fn contains(desired: &Value, live: &Value) -> bool {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => d.iter().all(|(k, v)| l.get(k).is_some_and(|lv| contains(v, lv))),
        (Value::Array(d), Value::Array(l)) => d.len() == l.len() && d.iter().zip(l).all(|(a, b)| contains(a, b)),
        (Value::Null, _) => false,
        (d, l) => d == l,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with_entry(mut live: Value, fields: Value) -> Value {
        live["metadata"]["managedFields"] = json!([
            {"manager": "kubectl", "operation": "Update", "apiVersion": live["apiVersion"], "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {"f:note": {}}}}},
            {"manager": "drover", "operation": "Apply", "apiVersion": live["apiVersion"], "fieldsType": "FieldsV1", "fieldsV1": fields},
        ]);
        live
    }

    fn configmap() -> (Value, Value) {
        let desired = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n", "labels": {"app": "x"}}, "data": {"a": "1", "b": "2"}});
        let mut live = desired.clone();
        live["metadata"]["resourceVersion"] = json!("7");
        live["metadata"]["annotations"] = json!({"note": "someone else's"});
        let fields = json!({"f:metadata": {"f:labels": {"f:app": {}}}, "f:data": {"f:a": {}, "f:b": {}}});
        (desired, with_entry(live, fields))
    }

    #[test]
    fn configmap_same_and_each_kind_of_drift() {
        let (desired, live) = configmap();
        assert!(unchanged(&desired, &live, "drover"));
        assert!(!unchanged(&desired, &live, "other-manager"), "another manager's entry does not vouch");
        let mut v = live.clone();
        v["data"]["a"] = json!("tampered");
        assert!(!unchanged(&desired, &v, "drover"), "changed value");
        let mut v = live.clone();
        v["metadata"]["labels"].as_object_mut().unwrap().remove("app");
        assert!(!unchanged(&desired, &v, "drover"), "removed label");
        let mut v = live.clone();
        v["metadata"]["managedFields"][1]["fieldsV1"]["f:data"].as_object_mut().unwrap().remove("f:b");
        assert!(!unchanged(&desired, &v, "drover"), "value right, field no longer drover's");
        let mut v = live.clone();
        v["metadata"]["managedFields"][1]["fieldsV1"]["f:data"]["f:gone"] = json!({});
        v["data"]["gone"] = json!("x");
        assert!(!unchanged(&desired, &v, "drover"), "drover still owns a field it no longer applies");
        let mut v = live.clone();
        v["data"]["extra"] = json!("someone else's");
        assert!(unchanged(&desired, &v, "drover"), "a key drover does not own is not drover's business");
        let mut v = live.clone();
        v["metadata"]["managedFields"][1]["apiVersion"] = json!("v2");
        assert!(!unchanged(&desired, &v, "drover"), "an entry of another apiVersion is not compared");
        let mut v = live;
        v["metadata"].as_object_mut().unwrap().remove("managedFields");
        assert!(!unchanged(&desired, &v, "drover"), "no entry: apply");
    }

    #[test]
    fn values_that_cannot_be_compared_are_applied() {
        let (mut desired, mut live) = configmap();
        desired["data"]["a"] = json!(1);
        assert!(!unchanged(&desired, &live, "drover"), "1 vs \"1\"");
        let (mut desired, _) = configmap();
        desired["data"]["a"] = Value::Null;
        assert!(!unchanged(&desired, &live, "drover"), "null");
        let (desired, _) = configmap();
        live["data"]["a"] = json!("1000m");
        assert!(!unchanged(&desired, &live, "drover"));
    }

    /// A Deployment as a real API server stores it: defaults added, an associative list
    /// of containers keyed by name, ports keyed by (containerPort, protocol), an atomic
    /// selector, a set list of finalizers.
    fn deployment(port: Value) -> (Value, Value) {
        let desired = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "n", "finalizers": ["a.example/x"]},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                    {"name": "main", "image": "nginx:1.27", "ports": [port]},
                    {"name": "side", "image": "busybox", "resources": {"limits": {"cpu": "500m"}}},
                ]}}}
        });
        let mut live = desired.clone();
        live["metadata"]["generation"] = json!(3);
        live["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
        live["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] = json!("TCP");
        live["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
        live["spec"]["strategy"] = json!({"type": "RollingUpdate"});
        live["status"] = json!({"replicas": 2});
        let fields = json!({
            "f:metadata": {"f:finalizers": {".": {}, "v:\"a.example/x\"": {}}},
            "f:spec": {"f:replicas": {}, "f:selector": {},
                "f:template": {"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"f:containers": {
                    "k:{\"name\":\"main\"}": {".": {}, "f:image": {}, "f:name": {}, "f:ports": {
                        "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:protocol": {}}}},
                    "k:{\"name\":\"side\"}": {".": {}, "f:image": {}, "f:name": {}, "f:resources": {"f:limits": {"f:cpu": {}}}},
                }}}}
        });
        (desired.clone(), with_entry(live, fields))
    }

    #[test]
    fn real_server_encoding_of_lists_and_atomic_maps() {
        let (desired, live) = deployment(json!({"containerPort": 80, "protocol": "TCP"}));
        assert!(unchanged(&desired, &live, "drover"), "keyed lists, set list, atomic selector, defaults");
        let mut v = live.clone();
        v["spec"]["replicas"] = json!(5);
        assert!(!unchanged(&desired, &v, "drover"), "scaled");
        let mut v = live.clone();
        v["spec"]["template"]["spec"]["containers"][1]["image"] = json!("busybox:evil");
        assert!(!unchanged(&desired, &v, "drover"), "a container's image");
        let mut v = live.clone();
        v["spec"]["template"]["spec"]["containers"].as_array_mut().unwrap().swap(0, 1);
        assert!(!unchanged(&desired, &v, "drover"), "order of the containers");
        let mut v = live.clone();
        v["spec"]["selector"]["matchLabels"]["app"] = json!("other");
        assert!(!unchanged(&desired, &v, "drover"), "atomic map value");
        let mut v = live.clone();
        v["metadata"]["finalizers"] = json!([]);
        assert!(!unchanged(&desired, &v, "drover"), "set item gone");
        let mut v = live.clone();
        v["spec"]["template"]["spec"]["containers"].as_array_mut().unwrap().push(json!({"name": "injected", "image": "x"}));
        assert!(unchanged(&desired, &v, "drover"), "another manager's container is not drover's field");
        let mut v = live;
        let c = v.pointer_mut("/metadata/managedFields/1/fieldsV1/f:spec/f:template/f:spec/f:containers").unwrap().as_object_mut().unwrap();
        c.remove("k:{\"name\":\"side\"}");
        assert!(!unchanged(&desired, &v, "drover"), "a container no longer drover's");
    }

    #[test]
    fn a_key_field_the_server_defaulted_is_a_difference() {
        // The port omits protocol; the server's key has protocol "TCP": not comparable.
        let (desired, live) = deployment(json!({"containerPort": 80}));
        assert!(!unchanged(&desired, &live, "drover"));
    }

    #[test]
    fn fake_server_encoding_atomic_lists() {
        let desired = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "n"}, "spec": {"ports": [{"port": 80}], "selector": {"app": "s"}, "extra": {}}});
        let fields = json!({"f:spec": {"f:ports": {}, "f:selector": {"f:app": {}}, "f:extra": {}}});
        let live = with_entry(desired.clone(), fields);
        assert!(unchanged(&desired, &live, "drover"));
        let mut v = live.clone();
        v["spec"]["ports"] = json!([{"port": 80}, {"port": 81}]);
        assert!(!unchanged(&desired, &v, "drover"), "atomic list length");
        let mut v = live;
        v["spec"]["extra"] = json!("not a map");
        assert!(!unchanged(&desired, &v, "drover"), "empty map replaced");
    }
}
