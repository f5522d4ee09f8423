//! Ownership on one cluster shared by several drover sources, hand-made objects and other
//! tools (real binaries, real registry, kubectl for the hand-made objects, FAKE API
//! server or a real cluster):
//!
//! - an object another drover source owns is a `conflict`: not applied, not in this
//!   source's inventory, never pruned by it; its owner keeps full rights;
//! - an object made by hand (no drover label) is `adopted` on apply, and from then on
//!   pruned like any other object of the source;
//! - a Namespace that holds objects outside the inventory is not pruned (reported);
//! - the prune safety valve counts what deleting a Namespace would take with it.

mod kube_support;

use kube_support::{inventory_names, state_in, Agent, Env};

scenarios!(
    two_sources_never_take_each_others_objects,
    hand_made_object_is_adopted,
    namespace_holding_foreign_objects_is_kept,
    valve_counts_what_a_namespace_deletion_takes,
);

fn two_sources_never_take_each_others_objects(env: &Env) {
    let other = env.reg.reference("fleet/other:prod");
    let (one, two) = (Agent::with_state("one"), Agent { source: Some(other.clone()), state: Some("two".into()), namespace: None });
    env.push(&[env.namespace(), env.configmap("shared", "one", &[]), env.configmap("own1", "1", &[])], &[]);
    env.agent_ok_in(&one, &[]);

    // The second source declares the same ConfigMap.
    env.push_to(&other, &[env.configmap("shared", "two", &[]), env.configmap("own2", "2", &[])], &[]);
    env.agent_ok_in(&two, &[]);
    let attempt = env.last_attempt_in(&two);
    assert_eq!(attempt["result"], "Applied", "the rest of the bundle is applied: {attempt:#}");
    let (action, message) = Env::action(&attempt, "ConfigMap", "shared");
    assert_eq!(action, "conflict", "{attempt:#}");
    assert!(message.contains(&env.reference), "names the owner: {message}");
    assert!(attempt["reason"].as_str().unwrap().contains("owned by another drover source"), "{attempt:#}");
    assert_eq!(Env::action(&attempt, "ConfigMap", "own2").0, "created");
    let shared = env.get("configmap", "shared").unwrap();
    assert_eq!(shared["data"]["value"], "one", "not applied");
    assert_eq!(shared["metadata"]["annotations"]["drover.dev/source"], env.reference.as_str());
    let (_, inventory) = state_in(env, &env.ns, &other).expect("the second source's state");
    assert_eq!(inventory_names(&inventory), vec!["ConfigMap/own2"], "the conflicting object is not in its inventory");

    // The second source drops it: nothing to prune, the object stays.
    env.push_to(&other, &[env.configmap("own2", "2", &[])], &[]);
    env.agent_ok_in(&two, &[]);
    assert_eq!(env.last_attempt_in(&two)["pruned"], 0);
    assert_eq!(env.get("configmap", "shared").unwrap()["data"]["value"], "one");

    // Its owner still prunes it when it drops it.
    env.push(&[env.namespace(), env.configmap("own1", "1", &[])], &[]);
    env.agent_ok_in(&one, &[]);
    assert_eq!(Env::action(&env.last_attempt_in(&one), "ConfigMap", "shared").0, "deleted");
    assert!(env.get("configmap", "shared").is_none());
    assert!(env.get("configmap", "own2").is_some(), "the other source's object is untouched");
}

fn hand_made_object_is_adopted(env: &Env) {
    env.kubectl_apply(&format!("{}---\n{}", env.namespace(), env.configmap("legacy", "by-hand", &[])));
    // Made by hand with a server-side apply under drover's own field manager, without
    // drover's label: its only managed-fields entry is drover's apply, yet drover never
    // made it (the apply that finds it answers 200, not 201).
    let by_ssa = env.kubectl(&["apply", "--server-side", "--field-manager", "drover", "-f", "-"], &env.configmap("hand-ssa", "by-hand", &[]));
    assert_eq!(by_ssa.code, 0, "{}", by_ssa.stderr);
    env.push(&[env.namespace(), env.configmap("legacy", "managed", &[]), env.configmap("hand-ssa", "managed", &[]), env.configmap("other", "1", &[])], &[]);
    env.agent_ok(&[]);
    let attempt = env.last_attempt();
    let (action, message) = Env::action(&attempt, "ConfigMap", "legacy");
    assert_eq!(action, "adopted", "{attempt:#}");
    assert!(message.contains("made by hand or by another tool") && message.contains("prunes it"), "{message}");
    assert_eq!(Env::action(&attempt, "ConfigMap", "hand-ssa").0, "adopted", "not created: it existed before this apply: {attempt:#}");
    assert_eq!(Env::action(&attempt, "ConfigMap", "other").0, "created");
    assert_eq!(Env::action(&attempt, "Namespace", &env.ns).0, "adopted");
    let legacy = env.get("configmap", "legacy").unwrap();
    assert_eq!(legacy["data"]["value"], "managed");
    assert_eq!(legacy["metadata"]["labels"]["app.kubernetes.io/managed-by"], "drover");
    // A second apply: it is ours now.
    env.agent_ok(&[]);
    assert_eq!(Env::action(&env.last_attempt(), "ConfigMap", "legacy").0, "unchanged");
    // Adopted objects are pruned like the others when a bundle drops them.
    env.push(&[env.namespace(), env.configmap("other", "1", &[])], &[]);
    env.agent_ok(&[]);
    assert_eq!(Env::action(&env.last_attempt(), "ConfigMap", "legacy").0, "deleted");
}

fn namespace_holding_foreign_objects_is_kept(env: &Env) {
    let app = env.extra_namespace("app");
    let ns_doc = |n: &str| format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {n}\n");
    let cm_in = |n: &str, name: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {n}\ndata:\n  value: \"1\"\n");
    let stay = vec![env.namespace(), env.configmap("x", "1", &[]), env.configmap("y", "1", &[]), env.configmap("z", "1", &[])];
    let mut v1 = stay.clone();
    v1.extend([ns_doc(&app), cm_in(&app, "a")]);
    env.push(&v1, &[]);
    env.agent_ok(&[]);
    // Someone else puts an object into the Namespace.
    env.kubectl_apply(&cm_in(&app, "hand"));
    // The next bundle drops the Namespace and its object: 2 of 6.
    env.push(&stay, &[]);
    env.agent_ok(&[]);
    let attempt = env.last_attempt();
    assert_eq!(Env::action(&attempt, "ConfigMap", "a").0, "deleted", "{attempt:#}");
    let (action, message) = Env::action(&attempt, "Namespace", &app);
    assert_eq!(action, "refused", "{attempt:#}");
    assert!(message.contains("outside this source's inventory") && message.contains(&format!("ConfigMap {app}/hand")), "{message}");
    assert!(attempt["reason"].as_str().unwrap().contains(&format!("ConfigMap {app}/hand")), "reported: {attempt:#}");
    assert!(env.get_in(&app, "configmap", "hand").is_some(), "the foreign object survives");
    assert!(env.kubectl(&["get", "namespace", &app], "").code == 0, "the Namespace is kept");
    // It stays in the inventory: once the foreign object is gone, the Namespace is pruned.
    env.kubectl_ok(&["delete", "configmap", "hand", "-n", &app]);
    env.agent_ok(&[]);
    assert_eq!(Env::action(&env.last_attempt(), "Namespace", &app).0, "deleted", "{:#}", env.last_attempt());
}

fn valve_counts_what_a_namespace_deletion_takes(env: &Env) {
    let app = env.extra_namespace("app");
    let cm_in = |name: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {app}\ndata:\n  value: \"1\"\n");
    let mut kept = vec![env.namespace(), env.configmap("x", "1", &[]), env.configmap("y", "1", &[])];
    kept.extend(["a", "b", "c"].iter().map(|n| cm_in(n)));
    let mut v1 = kept.clone();
    v1.push(format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {app}\n"));
    env.push(&v1, &[]);
    env.agent_ok(&[]);
    // The next bundle drops only the Namespace (1 of 7 objects), but deleting it would
    // take a, b and c with it: 4 of 7, over --max-prune-ratio 0.5.
    env.push(&kept, &[]);
    env.agent_ok(&[]);
    let attempt = env.last_attempt();
    assert_eq!(attempt["pruneRefused"], true, "{attempt:#}");
    let reason = attempt["reason"].as_str().unwrap();
    assert!(reason.contains("would delete 4 (including 3 inside the Namespaces it would delete) of 7"), "{reason}");
    assert!(env.kubectl(&["get", "namespace", &app], "").code == 0, "the Namespace is kept");
    for n in ["a", "b", "c"] {
        assert!(env.get_in(&app, "configmap", n).is_some(), "{n} survives");
    }
}
