//! `drover verify REPO:CHANNEL` tells the gate's truth (issue 33): it exits 0 only when an
//! agent with the same keys and threshold would apply what the channel's tag names, and
//! every refusal — `verify`'s and the agent's — names the next step as a command the
//! operator can run as written (after putting their key files in for KEY and PUB). The
//! registry is written the way an operator's tag copy or an attacker does it (raw HTTP).

mod agent_support;

use agent_support::{cm, objs, Fx};
use drover_tests::{rawreg, run, Out};

fn drover(args: &[&str]) -> Out {
    let mut a = args.to_vec();
    a.push("--plain-http");
    run("drover", &a, agent_support::ENV)
}

/// The first backquoted `drover ...` command in `message`.
fn next_step(message: &str) -> String {
    let start = message.find("`drover ").unwrap_or_else(|| panic!("no `drover ...` next step in: {message}"));
    let rest = &message[start + 1..];
    rest[..rest.find('`').expect("closing backquote")].to_string()
}

/// Runs the command `step` names as written, its placeholders KEY and PUB replaced by
/// key files (what the operator does).
fn follow(step: &str, key: &str, public: &str) -> Out {
    let words: Vec<String> = step
        .split_whitespace()
        .skip(1)
        .map(|w| match w {
            "KEY" => key.to_string(),
            "PUB" => public.to_string(),
            w => w.to_string(),
        })
        .collect();
    assert!(!words.iter().any(|w| w.contains("...") || w.contains('…')), "the step is runnable as written: {step}");
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    drover(&refs)
}

#[test]
fn verify_of_a_channel_tag_copied_without_a_statement_exits_1_and_names_the_promote() {
    let fx = Fx::new();
    let ring0 = fx.reg.reference("fleet/edge:prod-ring0");
    let ring1 = fx.reg.reference("fleet/edge:prod-ring1");
    let digest = fx.push_at(&ring0, "edge", &objs(&[cm("demo", "a", "1")]), 41, Some("k1"), &[]);
    // A tag copy (the registry UI, `crane tag`, a script): prod-ring1 names the bundle, no
    // statement places it there.
    let (bytes, media_type) = rawreg::manifest(&fx.reg.addr, "fleet/edge", "prod-ring0").unwrap();
    rawreg::put_manifest(&fx.reg.addr, "fleet/edge", "prod-ring1", &bytes, &media_type);

    let k1 = fx.pubkey("k1");
    let out = drover(&["verify", &ring1, "--trust-key", &k1]);
    assert_eq!(out.code, 1, "an agent following prod-ring1 refuses it, so verify fails:\n{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("prod-ring1") && out.stderr.contains("statement"), "names the channel and its statement: {}", out.stderr);
    let j = drover(&["-o", "json", "verify", &ring1, "--trust-key", &k1]);
    assert_eq!(j.code, 1);
    let j = j.json();
    assert_eq!(j["satisfied"], true, "the bundle's own signatures are fine: {j:#}");
    assert_eq!(j["channel"]["placed"], false, "{j:#}");
    assert_eq!(j["accepted"], false, "{j:#}");

    // The agent agrees.
    let agent = fx.once_from(&ring1, &[]);
    assert_eq!(agent.code, 1, "{}", agent.stderr);
    let reason = fx.status()["lastAttempt"]["reason"].as_str().unwrap().to_string();

    // Bundle-only verification by digest, and the channel the bundle was placed on, pass.
    assert_eq!(drover(&["verify", &fx.reg.reference(&format!("fleet/edge@{digest}")), "--trust-key", &k1]).code, 0);
    assert_eq!(drover(&["verify", &ring0, "--trust-key", &k1]).code, 0);

    // Both name the same next step: the promote that places exactly this digest.
    let step = next_step(&out.stderr);
    assert_eq!(next_step(&reason), step, "the agent and verify name the same step:\n{reason}\n{}", out.stderr);
    assert!(step.starts_with("drover promote ") && step.contains(&digest) && step.contains(" prod-ring1 "), "{step}");
    let done = follow(&step, &fx.key("k1"), &k1);
    assert_eq!(done.code, 0, "the step runs as written: {}", done.stderr);
    let out = drover(&["verify", &ring1, "--trust-key", &k1]);
    assert_eq!(out.code, 0, "placed now: {}", out.stderr);
    assert_eq!(fx.once_from(&ring1, &[]).code, 0, "and the agent applies it");
}

#[test]
fn a_statement_short_of_the_threshold_names_the_sign_command_in_verify_and_the_agent() {
    let fx = Fx::new();
    let prod = fx.tag_ref.clone();
    // The first approver publishes with k1 (bundle and statement signed by k1); the
    // second signs the digest only.
    let digest = fx.push(&objs(&[cm("demo", "a", "1")]), 41, Some("k1"), &[]);
    fx.sign(&digest, "k2");
    let (k1, k2) = (fx.pubkey("k1"), fx.pubkey("k2"));

    let out = drover(&["verify", &prod, "--trust-key", &k1, "--trust-key", &k2, "--threshold", "2"]);
    assert_eq!(out.code, 1, "the bundle has 2 of 2, the placement 1 of 2: agents refuse it\n{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("2 of 2"), "the bundle's count is still shown: {}", out.stdout);
    assert!(out.stderr.contains("1 of 2"), "{}", out.stderr);
    let step = next_step(&out.stderr);
    assert!(step.starts_with("drover sign ") && step.contains(&prod), "{step}");

    let agent = fx.once_trusting(&prod, &["k1", "k2"], &["--threshold", "2"]);
    assert_eq!(agent.code, 1, "{}", agent.stderr);
    let st = fx.status();
    assert_eq!(st["lastAttempt"]["result"], "Rejected", "{st:#}");
    let reason = st["lastAttempt"]["reason"].as_str().unwrap();
    assert!(reason.contains("1 of 2"), "{reason}");
    assert_eq!(next_step(reason), step, "the agent names the same `drover sign`: {reason}");

    // The second approver runs it as written: the statement is countersigned.
    let done = follow(&step, &fx.key("k2"), &k1);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(drover(&["verify", &prod, "--trust-key", &k1, "--trust-key", &k2, "--threshold", "2"]).code, 0);
    let agent = fx.once_trusting(&prod, &["k1", "k2"], &["--threshold", "2"]);
    assert_eq!(agent.code, 0, "{}", agent.stderr);
    assert_eq!(fx.status()["appliedDigest"].as_str(), Some(digest.as_str()));
}
