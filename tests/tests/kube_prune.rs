//! Prune on the kube target end to end (real binaries, real registry, FAKE API server or
//! a real cluster): objects the new bundle lacks are deleted when they are ours;
//! `drover.dev/prune: disabled` keeps one; an object another source took over is
//! refused; the ratio safety valve refuses mass deletion unless the bundle opts in; a
//! 422 on one object fails the attempt, leaves the others applied and prunes nothing.

mod kube_support;

use drover_tests::fakekube::ErrorRule;
use kube_support::Env;

scenarios!(prune_deletes_only_what_is_ours, prune_refused_over_the_ratio, an_invalid_object_fails_alone_and_the_rest_is_pruned);

fn prune_deletes_only_what_is_ours(env: &Env) {
    let keep = [("drover.dev/prune", "disabled")];
    let v1 = vec![
        env.namespace(),
        env.configmap("a", "1", &[]),
        env.configmap("b", "1", &[]),
        env.configmap("c", "1", &[]),
        env.configmap("kept", "1", &keep),
        env.configmap("moved", "1", &[]),
        env.deployment("web", "nginx:1.27"),
    ];
    env.push(&v1, &[]);
    env.agent_ok(&[]);
    // Another drover source now owns "moved".
    env.kubectl_ok(&["annotate", "configmap", "moved", "-n", &env.ns, "--overwrite", "drover.dev/source=registry.example/other:prod"]);
    // v2 drops b, kept and moved: 3 of 7 inventory objects, under the 0.5 ratio.
    env.push(&[env.namespace(), env.configmap("a", "1", &[]), env.configmap("c", "1", &[]), env.deployment("web", "nginx:1.27")], &[]);
    env.agent_ok(&[]);
    let attempt = env.last_attempt();
    assert_eq!(attempt["result"], "Applied", "{attempt:#}");
    assert_eq!(attempt["pruned"], 1, "{attempt:#}");
    assert_eq!(Env::action(&attempt, "ConfigMap", "b").0, "deleted");
    let (action, why) = Env::action(&attempt, "ConfigMap", "kept");
    assert_eq!(action, "kept");
    assert!(why.contains("drover.dev/prune"), "{why}");
    let (action, why) = Env::action(&attempt, "ConfigMap", "moved");
    assert_eq!(action, "refused");
    assert!(why.contains("registry.example/other:prod"), "{why}");
    assert!(env.get("configmap", "b").is_none(), "b is pruned");
    assert!(env.get("configmap", "kept").is_some(), "prune: disabled keeps it");
    assert!(env.get("configmap", "moved").is_some(), "the other source's object stays");
    assert!(env.get("configmap", "a").is_some() && env.get("deployment", "web").is_some());
}

fn prune_refused_over_the_ratio(env: &Env) {
    let names = ["a", "b", "c", "d"];
    let mut v1 = vec![env.namespace()];
    v1.extend(names.iter().map(|n| env.configmap(n, "1", &[])));
    env.push(&v1, &[]);
    env.agent_ok(&[]);
    // v2 keeps only the namespace: 4 of 5 objects would go, over --max-prune-ratio 0.5.
    env.push(&[env.namespace()], &[]);
    env.agent(&[]);
    let attempt = env.last_attempt();
    assert_eq!(attempt["pruneRefused"], true, "{attempt:#}");
    assert_eq!(attempt["pruned"], 0, "{attempt:#}");
    assert!(attempt["reason"].as_str().unwrap().contains("prune refused"), "{attempt:#}");
    for n in names {
        assert!(env.get("configmap", n).is_some(), "{n} must survive a refused prune");
    }
    // Still refused on the next poll: the objects stay in the inventory.
    env.agent(&[]);
    assert_eq!(env.last_attempt()["pruneRefused"], true);
    // A bundle that opts in (--allow-mass-prune) is allowed to delete them.
    env.push(&[env.namespace()], &["--allow-mass-prune"]);
    env.agent_ok(&[]);
    let attempt = env.last_attempt();
    assert_eq!(attempt["pruned"], 4, "{attempt:#}");
    for n in names {
        assert!(env.get("configmap", n).is_none(), "{n} is pruned after the opt-in");
    }
}

/// One object the server refuses is that object's failure (issue 36): the rest of the
/// bundle is applied and what it dropped is pruned; the object is named, health Degraded.
fn an_invalid_object_fails_alone_and_the_rest_is_pruned(env: &Env) {
    env.push(&[env.namespace(), env.configmap("a", "1", &[]), env.configmap("b", "1", &[]), env.configmap("c", "1", &[])], &[]);
    env.agent_ok(&[]);
    if let Some(fake) = env.cluster.fake_server() {
        // The fake does not validate Services: answer as a real server does for port 70000.
        let path = format!("/api/v1/namespaces/{}/services/bad", env.ns);
        fake.inject(
            ErrorRule::new("PATCH", &path, 422, "Service \"bad\" is invalid: spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive")
                .reason("Invalid")
                .times(10),
        );
    }
    // v2: a changed, b dropped (prune candidate), c kept, a new good object and a bad Service.
    env.push(&[env.namespace(), env.configmap("a", "2", &[]), env.configmap("c", "1", &[]), env.configmap("new", "n", &[]), env.service("bad", 70000)], &[]);
    let out = env.agent(&[]);
    assert_eq!(out.code, 1, "a 422 fails the attempt:\n{}", out.stderr);
    let attempt = env.last_attempt();
    assert_eq!(attempt["result"], "Failed", "{attempt:#}");
    let (action, message) = Env::action(&attempt, "Service", "bad");
    assert_eq!(action, "failed");
    assert!(message.contains("422") && message.contains("70000"), "the server's message is recorded: {message}");
    assert_eq!(env.get("configmap", "a").unwrap()["data"]["value"], "2", "the others are applied");
    assert!(env.get("configmap", "new").is_some());
    assert!(env.get("configmap", "b").is_none(), "the dropped object is pruned beside the failed one");
    assert_eq!(attempt["pruned"], 1, "{attempt:#}");
    assert!(env.get("service", "bad").is_none());
    assert!(attempt["reason"].as_str().unwrap().contains("1 object(s) failed, the rest was applied: Service"), "{attempt:#}");
    let st = env.status();
    assert_eq!(st["health"], "Degraded", "never Healthy beside a failed object: {st:#}");
}
