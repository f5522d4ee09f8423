//! Impersonation and RBAC, the way the real API server enforces them for a request that
//! carries `Impersonate-User` (and `Impersonate-Group`) headers. Requests without them
//! stay unrestricted: that is the cluster admin the kubeconfig stands for.
//!
//! - The impersonated user gets the groups the real server gives it: the ones named in
//!   `Impersonate-Group`, or for `system:serviceaccount:NS:NAME` without any,
//!   `system:serviceaccounts` and `system:serviceaccounts:NS`; always
//!   `system:authenticated`. `system:masters` may do anything.
//! - Resource requests are authorised from the Roles, ClusterRoles, RoleBindings and
//!   ClusterRoleBindings in the store: verbs, apiGroups, resources (`res/sub` for a
//!   subresource, `*`), resourceNames; a RoleBinding grants only inside its namespace;
//!   subjects `User`, `Group` and `ServiceAccount` (namespace defaulted to the binding's).
//! - A server-side apply that creates the object also needs `create` (as the real
//!   server's patch handler checks).
//! - Discovery and other non-resource paths are allowed (the real `system:discovery`
//!   binding for `system:authenticated`).
//! - Denials are 403 `Forbidden` with the real message:
//!   `configmaps "x" is forbidden: User "system:serviceaccount:a:b" cannot patch resource
//!   "configmaps" in API group "" in the namespace "a"`.
//!
//! Not modelled: aggregated ClusterRoles, the escalation check on creating bindings, the
//! authorisation of the impersonation itself (the admin may impersonate anyone).

use super::routes::Target;
use super::status::ApiError;
use super::store::{key, State};
use axum::http::{HeaderMap, Method};
use serde_json::{json, Value};

const RBAC: &str = "rbac.authorization.k8s.io";

/// Who a request acts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// User name.
    pub name: String,
    /// Groups.
    pub groups: Vec<String>,
}

/// The impersonated user of a request, if it names one.
pub fn impersonated(headers: &HeaderMap) -> Option<User> {
    let name = headers.get("impersonate-user")?.to_str().ok()?.to_string();
    let mut groups: Vec<String> = headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    if groups.is_empty() {
        if let Some(ns) = name.strip_prefix("system:serviceaccount:").and_then(|r| r.split_once(':')).map(|(ns, _)| ns) {
            groups = vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{ns}")];
        }
    }
    groups.push("system:authenticated".into());
    Some(User { name, groups })
}

/// What one request asks to do.
#[derive(Debug, Clone)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: String,
    /// API group.
    pub group: String,
    /// Plural resource.
    pub resource: String,
    /// Subresource (`status`) or empty.
    pub subresource: String,
    /// Namespace or empty.
    pub namespace: String,
    /// Object name or empty.
    pub name: String,
}

/// The RBAC verb of a request.
pub fn verb(method: &Method, named: bool, watch: bool) -> &'static str {
    match (method.as_str(), named) {
        ("GET", _) if watch => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

/// Authorises a resource request (`t`) when it is impersonated; Ok for the admin.
pub(crate) fn check(state: &State, headers: &HeaderMap, method: &Method, t: &Target, watch: bool, apply: bool) -> Result<(), ApiError> {
    let Some(user) = impersonated(headers) else {
        return Ok(());
    };
    let mut attrs = Attributes {
        verb: verb(method, t.name.is_some(), watch).to_string(),
        group: t.res.group.clone(),
        resource: t.res.plural.clone(),
        subresource: t.sub.clone().unwrap_or_default(),
        namespace: t.ns.clone().unwrap_or_default(),
        name: t.name.clone().unwrap_or_default(),
    };
    authorize(state, &user, &attrs)?;
    let creates = apply && t.name.as_deref().is_some_and(|n| !state.objects.contains_key(&key(&t.res, t.ns.as_deref(), n)));
    if creates {
        attrs.verb = "create".into();
        authorize(state, &user, &attrs)?;
    }
    Ok(())
}

/// Ok when a binding grants `attrs` to `user`, else the real 403.
pub fn authorize(state: &State, user: &User, attrs: &Attributes) -> Result<(), ApiError> {
    if user.groups.iter().any(|g| g == "system:masters") || allowed(state, user, attrs) {
        return Ok(());
    }
    Err(forbidden(user, attrs))
}

fn objects<'a>(state: &'a State, plural: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    state.objects.iter().filter(move |(k, _)| k.0 == RBAC && k.1 == plural).map(|(_, v)| v)
}

fn allowed(state: &State, user: &User, attrs: &Attributes) -> bool {
    let cluster = objects(state, "clusterrolebindings")
        .filter(|b| binds(b, user, ""))
        .filter_map(|b| role_rules(state, b, ""))
        .any(|rules| rules_allow(&rules, attrs));
    if cluster || attrs.namespace.is_empty() {
        return cluster;
    }
    objects(state, "rolebindings")
        .filter(|b| b["metadata"]["namespace"].as_str() == Some(attrs.namespace.as_str()))
        .filter(|b| binds(b, user, &attrs.namespace))
        .filter_map(|b| role_rules(state, b, &attrs.namespace))
        .any(|rules| rules_allow(&rules, attrs))
}

/// Does binding `b` (in `namespace`, empty for a ClusterRoleBinding) name `user`?
fn binds(b: &Value, user: &User, namespace: &str) -> bool {
    b["subjects"].as_array().into_iter().flatten().any(|s| {
        let name = s["name"].as_str().unwrap_or_default();
        match s["kind"].as_str().unwrap_or_default() {
            "User" => user.name == name,
            "Group" => user.groups.iter().any(|g| g == name),
            "ServiceAccount" => {
                let ns = s["namespace"].as_str().filter(|n| !n.is_empty()).unwrap_or(namespace);
                !ns.is_empty() && user.name == format!("system:serviceaccount:{ns}:{name}")
            }
            _ => false,
        }
    })
}

/// The rules of the role binding `b` refers to (None when the role does not exist).
fn role_rules(state: &State, b: &Value, namespace: &str) -> Option<Vec<Value>> {
    let name = b["roleRef"]["name"].as_str()?;
    let (plural, ns) = match b["roleRef"]["kind"].as_str()? {
        "ClusterRole" => ("clusterroles", ""),
        "Role" if !namespace.is_empty() => ("roles", namespace),
        _ => return None,
    };
    let role = state.objects.get(&(RBAC.to_string(), plural.to_string(), ns.to_string(), name.to_string()))?;
    Some(role["rules"].as_array().cloned().unwrap_or_default())
}

fn has(list: &Value, want: &str) -> bool {
    list.as_array().into_iter().flatten().filter_map(Value::as_str).any(|v| v == "*" || v == want)
}

fn rules_allow(rules: &[Value], a: &Attributes) -> bool {
    let combined = if a.subresource.is_empty() { a.resource.clone() } else { format!("{}/{}", a.resource, a.subresource) };
    rules.iter().any(|r| {
        let resource_ok = r["resources"].as_array().into_iter().flatten().filter_map(Value::as_str).any(|v| {
            v == "*" || v == combined || (!a.subresource.is_empty() && v == format!("*/{}", a.subresource))
        });
        let names = r["resourceNames"].as_array().filter(|n| !n.is_empty());
        let name_ok = names.is_none_or(|n| n.iter().any(|v| v.as_str() == Some(a.name.as_str())) && !a.name.is_empty());
        has(&r["verbs"], &a.verb) && has(&r["apiGroups"], &a.group) && resource_ok && name_ok
    })
}

/// The real server's 403: `<resource>[.<group>] "<name>" is forbidden: User "<user>"
/// cannot <verb> resource "<resource>" in API group "<group>" in the namespace "<ns>"`
/// (or `at the cluster scope`).
pub fn forbidden(user: &User, a: &Attributes) -> ApiError {
    let resource = if a.subresource.is_empty() { a.resource.clone() } else { format!("{}/{}", a.resource, a.subresource) };
    let scope = if a.namespace.is_empty() { "at the cluster scope".to_string() } else { format!("in the namespace \"{}\"", a.namespace) };
    let why = format!("User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}", user.name, a.verb, a.group);
    let qualified = if a.group.is_empty() { a.resource.clone() } else { format!("{}.{}", a.resource, a.group) };
    let message = if a.name.is_empty() { format!("{qualified} is forbidden: {why}") } else { format!("{qualified} \"{}\" is forbidden: {why}", a.name) };
    let mut e = ApiError::new(403, "Forbidden", message);
    e.details = Some(json!({"name": a.name, "group": a.group, "kind": a.resource}));
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(verb: &str, resource: &str, ns: &str, name: &str) -> Attributes {
        Attributes { verb: verb.into(), group: String::new(), resource: resource.into(), subresource: String::new(), namespace: ns.into(), name: name.into() }
    }

    #[test]
    fn rules_and_message() {
        let rules = vec![json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "patch"]})];
        assert!(rules_allow(&rules, &attrs("patch", "configmaps", "a", "x")));
        assert!(!rules_allow(&rules, &attrs("delete", "configmaps", "a", "x")));
        assert!(!rules_allow(&rules, &attrs("get", "secrets", "a", "x")));
        let mut status = attrs("get", "configmaps", "a", "x");
        status.subresource = "status".into();
        assert!(!rules_allow(&rules, &status), "configmaps does not cover configmaps/status");
        let named = vec![json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"], "resourceNames": ["x"]})];
        assert!(rules_allow(&named, &attrs("get", "configmaps", "a", "x")));
        assert!(!rules_allow(&named, &attrs("list", "configmaps", "a", "")));
        let user = User { name: "system:serviceaccount:a:b".into(), groups: vec![] };
        let mut crb = attrs("patch", "clusterrolebindings", "", "pwn");
        crb.group = RBAC.into();
        assert_eq!(
            forbidden(&user, &crb).message,
            "clusterrolebindings.rbac.authorization.k8s.io \"pwn\" is forbidden: User \"system:serviceaccount:a:b\" cannot patch resource \"clusterrolebindings\" in API group \"rbac.authorization.k8s.io\" at the cluster scope"
        );
        assert_eq!(
            forbidden(&user, &attrs("list", "configmaps", "a", "")).message,
            "configmaps is forbidden: User \"system:serviceaccount:a:b\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"a\""
        );
    }

    #[test]
    fn service_account_groups() {
        let mut h = HeaderMap::new();
        h.insert("impersonate-user", "system:serviceaccount:team-a:deployer".parse().unwrap());
        let u = impersonated(&h).unwrap();
        assert_eq!(u.groups, vec!["system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"]);
        assert!(impersonated(&HeaderMap::new()).is_none());
    }
}
