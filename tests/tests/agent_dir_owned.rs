//! The `dir:` target belongs to the agent. Attacked the way another local user would (the
//! tests run as root: "another user" is a directory or file chowned to uid 4242, and the
//! attacker's moves are made with plain file operations while the agent works):
//!
//! - a target directory another user owns, or that group or others may write, is refused
//!   with a message naming owner and mode, and nothing is written into it;
//! - `.drover-stage` swapped for a link to the attacker's directory while the agent
//!   applies: nothing is ever written there;
//! - a bundle file turned into a link to `/dev/zero`: the resync stays under a 64 MiB data
//!   cap (`prlimit --data`) and puts a plain file back;
//! - a file planted in `manifests/` by another user is reported (the attempt's reason)
//!   and not kept in the applied tree.

mod agent_support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agent_support::{cm, objs, snapshot, Fx};
use drover_tests::spawn::run_measured;

const OTHER_UID: u32 = 4242;

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap_or_else(|e| panic!("chown {}: {e} (the tests run as root)", path.display()));
}

#[test]
fn a_target_another_user_owns_or_others_may_write_is_refused_naming_owner_and_mode() {
    let fx = Fx::new();
    fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    let out_dir = fx.target();
    std::fs::create_dir_all(&out_dir).unwrap();
    std::fs::set_permissions(&out_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    chown(&out_dir, OTHER_UID);
    let out = fx.once(&[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("uid 4242") && out.stderr.contains("mode 755"), "names owner and mode: {}", out.stderr);
    assert!(snapshot(&out_dir).is_empty(), "nothing written into it");

    // The agent's own, but world-writable.
    chown(&out_dir, 0);
    std::fs::set_permissions(&out_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = fx.once(&[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("mode 777") && out.stderr.contains("others may write"), "{}", out.stderr);
    assert!(snapshot(&out_dir).is_empty(), "nothing written into it");

    // A path that does not exist is created private, and used.
    std::fs::remove_dir_all(&out_dir).unwrap();
    assert_eq!(fx.once(&[]).code, 0);
    assert_eq!(std::fs::metadata(&out_dir).unwrap().permissions().mode() & 0o777, 0o700);
}

/// The attacker's trap: `dir/manifests/app/<every file of the bundle>`, each a file of
/// theirs with a second link under `keep/` that stays theirs when the directory is moved.
fn trap(dir: &Path, keep: &Path, round: usize, names: &[String]) {
    let app = dir.join("manifests/app");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::create_dir_all(keep).unwrap();
    for n in names {
        let kept = keep.join(format!("{round}-{n}"));
        std::fs::write(&kept, "").unwrap();
        chown(&kept, OTHER_UID);
        let _ = std::fs::remove_file(app.join(n));
        let _ = std::fs::hard_link(&kept, app.join(n));
    }
}

#[test]
fn a_stage_swapped_for_a_link_while_the_agent_applies_is_never_written_through() {
    let fx = Fx::new();
    let many = |v: &str| (0..300).map(|i| cm("app", &format!("o{i}"), v)).collect::<Vec<_>>();
    let names: Vec<String> = (0..300).map(|i| format!("ConfigMap.core.o{i}.yaml")).collect();
    fx.push(&objs(&many("1")), 1, Some("k1"), &[]);
    assert_eq!(fx.once(&[]).code, 0);
    let (attacker, keep) = (fx.p("attacker"), fx.p("keep"));
    let stage = fx.target().join(".drover-stage");
    // The attacker swaps the stage for a link to their trap as soon as it appears.
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, stage, attacker, keep, parked) = (stop.clone(), stage.clone(), attacker.clone(), keep.clone(), fx.p("parked"));
        std::fs::create_dir_all(&parked).unwrap();
        std::thread::spawn(move || {
            let mut swaps = 0;
            trap(&attacker, &keep, swaps, &names);
            while !stop.load(Ordering::Relaxed) {
                if std::fs::symlink_metadata(&stage).is_ok_and(|m| m.is_dir()) && std::fs::rename(&stage, parked.join(swaps.to_string())).is_ok() {
                    let _ = std::os::unix::fs::symlink(&attacker, &stage);
                    swaps += 1;
                    std::thread::sleep(Duration::from_millis(200));
                    trap(&attacker, &keep, swaps, &names);
                }
            }
            swaps
        })
    };
    for v in 2..=6 {
        fx.push(&objs(&many(&v.to_string())), v, Some("k1"), &[]);
        let _ = fx.once(&["--resync", "0s"]);
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 0, "the attack never got to swap the stage");
    let leaked: Vec<String> = snapshot(&keep).into_iter().filter(|(_, data)| !data.is_empty()).map(|(p, _)| p).collect();
    assert!(leaked.is_empty(), "the agent wrote {} bundle file(s) into the attacker's files ({swaps} swaps), e.g. {:?}", leaked.len(), leaked.first());
}

#[test]
fn a_bundle_file_turned_into_a_link_to_dev_zero_keeps_a_resync_under_64_mib() {
    let fx = Fx::new();
    fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    assert_eq!(fx.once(&[]).code, 0);
    let file = fx.target().join("manifests/app/ConfigMap.core.a.yaml");
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &file).unwrap();
    let mut args = fx.agent_args(&fx.tag_ref);
    args.extend(["--once", "--resync", "0s"].map(String::from));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    // Capped at 512 MiB so that a missing bound cannot take the machine; the agent must stay
    // far below (before: it read /dev/zero until an allocation failed, at the cap).
    let (out, peak) = run_measured(512 << 20, Duration::from_secs(120), "drover-agent", &refs).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(peak < 64 << 20, "the resync peaked at {} MiB: it read through the link", peak >> 20);
    let md = std::fs::symlink_metadata(&file).unwrap();
    assert!(md.is_file(), "a plain file is back in place of the link");
    assert!(std::fs::read_to_string(&file).unwrap().contains("name: a"));
}

#[test]
fn a_file_another_user_planted_in_the_tree_is_reported_and_not_kept() {
    let fx = Fx::new();
    fx.push(&objs(&[cm("app", "a", "1")]), 1, Some("k1"), &[]);
    assert_eq!(fx.once(&[]).code, 0);
    let planted = fx.target().join("manifests/app/ConfigMap.core.planted.yaml");
    std::fs::write(&planted, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: planted, namespace: app}\n").unwrap();
    chown(&planted, OTHER_UID);
    assert_eq!(fx.once(&["--resync", "0s"]).code, 0);
    let st = fx.status();
    let reason = st["lastAttempt"]["reason"].as_str().unwrap_or("");
    assert!(reason.contains("did not write") && reason.contains("ConfigMap.core.planted.yaml") && reason.contains("uid 4242"), "{st:#}");
    assert!(std::fs::symlink_metadata(&planted).is_err(), "the planted file is not kept in the applied tree");
    assert!(fx.target().join("manifests/app/ConfigMap.core.a.yaml").is_file());
    assert_eq!(std::fs::metadata(fx.target().join("manifests/app/ConfigMap.core.a.yaml")).unwrap().uid(), 0);
}
