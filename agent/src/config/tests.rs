//! Unit tests of the agent's settings: flags over the config file, named errors.

use super::*;

#[test]
fn unknown_field_is_named() {
    let e = serde_yaml_ng::from_str::<ConfigLayer>("sourse: x\n").unwrap_err().to_string();
    assert!(e.contains("sourse"), "{e}");
}

#[test]
fn flags_win_and_key_required() {
    let file = ConfigLayer {
        source: Some("r.example/a:prod".into()),
        target: Some("dir:/tmp/x".into()),
        state_dir: Some("/tmp/s".into()),
        interval: Some("1m".into()),
        ..Default::default()
    };
    assert!(Settings::merge(ConfigLayer::default(), file.clone()).is_err());
    let flags = ConfigLayer { trust_keys: Some(vec!["k.pub".into()]), interval: Some("5s".into()), ..Default::default() };
    let s = Settings::merge(flags, file).unwrap();
    assert_eq!(s.sources[0].interval, Duration::from_secs(5));
    assert_eq!(s.target, TargetSpec::Dir("/tmp/x".into()));
    assert_eq!(s.sources[0].report, None, "no cluster name: no reports");
    assert_eq!((s.sources[0].name.as_str(), s.sources[0].named), (DEFAULT_NAME, false));
}

#[test]
fn reports_default_next_to_the_source() {
    let layer = ConfigLayer {
        source: Some("r.example/fleet/edge:prod-ring0".into()),
        target: Some("dir:/tmp/x".into()),
        state_dir: Some("/tmp/s".into()),
        trust_keys: Some(vec!["k.pub".into()]),
        cluster_name: Some("weu-1".into()),
        ..Default::default()
    };
    let e = Settings::validate(layer.clone()).unwrap_err().to_string();
    assert!(e.contains("expectClusterType") && e.contains("--no-report"), "{e}");
    let layer = ConfigLayer { expect_cluster_type: Some("edge".into()), expect_environment: Some("prod".into()), ..layer };
    let r = Settings::validate(layer.clone()).unwrap().sources[0].report.clone().unwrap();
    assert_eq!(r.to.to_string(), "r.example/fleet/drover-reports");
    assert_eq!((r.channel.as_str(), r.interval), ("prod-ring0", Duration::from_secs(300)));
    let off = ConfigLayer { no_report: Some(true), ..layer.clone() };
    assert_eq!(Settings::validate(off).unwrap().sources[0].report, None);
    let tagged = ConfigLayer { report_to: Some("r.example/reports:x".into()), ..layer.clone() };
    assert!(Settings::validate(tagged).unwrap_err().to_string().contains("repository only"));
    let layout = ConfigLayer { source: Some("oci:/srv/l:prod".into()), ..layer };
    assert!(Settings::validate(layout).unwrap_err().to_string().contains("--report-to"));
}

#[test]
fn apply_windows_and_drift_mode() {
    let yaml = "source: r.example/a:prod\ntarget: dir:/tmp/x\nstateDir: /tmp/s\ntrustKeys: [k.pub]\ndriftMode: report\n\
                applyWindows:\n- schedule: \"0 22 * * 1-5\"\n  duration: 6h\n  timeZone: Europe/Berlin\n";
    let file: ConfigLayer = serde_yaml_ng::from_str(yaml).unwrap();
    let s = Settings::merge(ConfigLayer::default(), file.clone()).unwrap();
    assert_eq!(s.sources[0].drift_mode, DriftMode::Report);
    assert!(!s.sources[0].apply_windows.is_empty());
    let flag = ConfigLayer { apply_windows: Some(vec!["0 22 * * 1-5;6h;Europe/Berln".parse().unwrap()]), ..Default::default() };
    let e = Settings::merge(flag, file.clone()).unwrap_err().to_string();
    assert!(e.contains("applyWindows") && e.contains("--apply-window") && e.contains("timeZone \"Europe/Berln\""), "{e}");
    let e = Settings::validate(ConfigLayer { drift_mode: Some("ignore".into()), ..file }).unwrap_err().to_string();
    assert!(e.contains("driftMode") && e.contains("--drift"), "{e}");
    let e = serde_yaml_ng::from_str::<ConfigLayer>("applyWindows:\n- schedule: \"0 1 * * *\"\n  duration: 1h\n  zone: UTC\n").unwrap_err().to_string();
    assert!(e.contains("zone"), "{e}");
}

/// Every `[default: V]` that `drover-agent run --help` shows is the real default: giving
/// `--flag V` changes no setting. And the settings with a plain default show it.
#[test]
fn help_shows_the_real_defaults() {
    use clap::{CommandFactory, Parser};
    let base = [
        "drover-agent", "run", "--source", "r.example/fleet/edge:prod", "--trust-key", "k.pub", "--target", "dir:/tmp/x", "--state-dir", "/tmp/s",
        "--leader-election", "--cluster-name", "c1", "--expect-cluster-type", "edge", "--expect-environment", "prod",
    ];
    let settings = |extra: &[&str]| -> String {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let cli = crate::cli::Cli::try_parse_from(args).unwrap();
        let crate::cli::Command::Run(run) = cli.command else { unreachable!() };
        format!("{:?}", Settings::merge(run.settings, ConfigLayer::default()).unwrap())
    };
    let plain = settings(&[]);
    let cmd = crate::cli::Cli::command();
    let run = cmd.find_subcommand("run").unwrap();
    let mut shown = Vec::new();
    for arg in run.get_arguments() {
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        let Some(value) = help.split("[default: ").nth(1).and_then(|r| r.split(']').next()) else { continue };
        let flag = format!("--{}", arg.get_long().unwrap());
        assert_eq!(settings(&[&flag, value]), plain, "{flag} {value} is not what the agent does without {flag}");
        shown.push(flag);
    }
    for flag in [
        "--threshold", "--interval", "--resync", "--drift", "--field-manager", "--max-prune-ratio", "--log-format", "--health-timeout",
        "--api-timeout", "--apply-concurrency", "--lease-name", "--lease-duration", "--report-interval",
    ] {
        assert!(shown.iter().any(|f| f == flag), "{flag} shows no [default: ...] in run --help ({shown:?})");
    }
}

fn file(yaml: &str) -> Result<ConfigFile, ConfigError> {
    ConfigFile::parse(yaml, std::path::Path::new("/etc/drover/agent.yaml"))
}

const TOP: &str = "target: kube\nstateDir: /var/lib/drover\ntrustKeys: [/keys/platform.pub]\ninterval: 1m\n";

#[test]
fn sources_take_the_top_level_as_defaults() {
    let yaml = format!(
        "{TOP}sources:\n- name: platform\n  source: r.example/platform:prod\n- name: team-a\n  source: r.example/team-a:prod\n  trustKeys: [/keys/team-a.pub]\n  allowedNamespaces: [team-a]\n  serviceAccount: team-a/deployer\n  interval: 20s\n  dependsOn: [platform]\n"
    );
    let s = Settings::merge(ConfigLayer::default(), file(&yaml).unwrap()).unwrap();
    assert!(s.named());
    let (p, a) = (&s.sources[0], &s.sources[1]);
    assert_eq!((p.name.as_str(), a.name.as_str()), ("platform", "team-a"));
    assert_eq!(p.trust_keys, vec![std::path::PathBuf::from("/keys/platform.pub")], "the top level is the default");
    assert_eq!(a.trust_keys, vec![std::path::PathBuf::from("/keys/team-a.pub")], "the entry wins");
    assert_eq!((p.interval, a.interval), (Duration::from_secs(60), Duration::from_secs(20)));
    assert_eq!(a.depends_on, vec!["platform".to_string()]);
    assert_eq!(a.service_account, Some(("team-a".into(), "deployer".into())));
    assert!(p.allowed_namespaces.is_empty());
    // A flag is a default too: it does not override what an entry sets.
    let flags = ConfigLayer { interval: Some("5s".into()), ..Default::default() };
    let s = Settings::merge(flags, file(&yaml).unwrap()).unwrap();
    assert_eq!((s.sources[0].interval, s.sources[1].interval), (Duration::from_secs(5), Duration::from_secs(20)));
}

#[test]
fn health_rules_and_rollback_are_per_source() {
    let yaml = format!(
        "{TOP}onDegraded: rollback\nsources:\n- name: platform\n  source: r.example/platform:prod\n  healthChecks:\n  - apiVersion: example.com/v1\n    kind: Widget\n    current: status.phase == 'Running'\n- name: team-a\n  source: r.example/team-a:prod\n  onDegraded: report\n"
    );
    let s = Settings::merge(ConfigLayer::default(), file(&yaml).unwrap()).unwrap();
    let (p, a) = (&s.sources[0], &s.sources[1]);
    assert_eq!((p.on_degraded, a.on_degraded), (OnDegraded::Rollback, OnDegraded::Report), "the top level is the default, the entry wins");
    assert!(!p.health_checks.is_empty() && a.health_checks.is_empty(), "each source its own rules");
    let bad = format!("{TOP}sources:\n- name: team-a\n  source: r.example/a:prod\n  healthChecks:\n  - apiVersion: v1\n    kind: Pod\n    current: 'status.phase =='\n");
    let e = Settings::merge(ConfigLayer::default(), file(&bad).unwrap()).unwrap_err().to_string();
    assert!(e.contains("sources[0] (team-a)") && e.contains("healthChecks"), "{e}");
}

#[test]
fn bad_sources_are_named_with_file_and_entry() {
    let err = |entries: &str| -> String {
        match file(&format!("{TOP}sources:\n{entries}")) {
            Err(e) => e.to_string(),
            Ok(f) => Settings::merge(ConfigLayer::default(), f).unwrap_err().to_string(),
        }
    };
    let e = err("- name: team-a\n  source: r.example/a:prod\n  trustkeys: [x]\n");
    assert!(e.contains("/etc/drover/agent.yaml") && e.contains("sources[0] (team-a)") && e.contains("trustkeys"), "{e}");
    let e = err("- name: team-a\n  source: r.example/a:prod\n- name: team-a\n  source: r.example/b:prod\n");
    assert!(e.contains("sources[1] (team-a)") && e.contains("already used by sources[0]"), "{e}");
    let e = err("- name: Team_A\n  source: r.example/a:prod\n");
    assert!(e.contains("sources[0] (Team_A)") && e.contains("a-z"), "{e}");
    let e = err("- source: r.example/a:prod\n");
    assert!(e.contains("sources[0]") && e.contains("no `name`"), "{e}");
    let e = err("- name: a\n  source: r.example/a:prod\n  stateDir: /tmp\n");
    assert!(e.contains("sources[0] (a)") && e.contains("stateDir") && e.contains("agent-wide"), "{e}");
    let e = err("- name: a\n  source: r.example/a:prod\n  dependsOn: [nope]\n");
    assert!(e.contains("sources[0] (a)") && e.contains("\"nope\"") && e.contains("no source"), "{e}");
    let e = err("- name: a\n  source: r.example/a:prod\n  dependsOn: [c]\n- name: b\n  source: r.example/b:prod\n  dependsOn: [a]\n- name: c\n  source: r.example/c:prod\n  dependsOn: [b]\n");
    assert!(e.contains("cycle") && e.contains("a -> c -> b -> a"), "{e}");
    let e = err("- name: a\n  source: r.example/a:prod\n  dependsOn: [a]\n");
    assert!(e.contains("cycle") && e.contains("a -> a"), "{e}");
    let e = err("- name: a\n  source: r.example/a:prod\n- name: b\n  source: r.example/a:prod\n");
    assert!(e.contains("sources[1] (b)") && e.contains("like sources[0] (a)"), "{e}");
    let e = err("- name: a\n  source: r.example/a:prod\n  threshold: 2\n");
    assert!(e.contains("sources[0] (a)") && e.contains("threshold"), "{e}");
    let e = err("- name: a\n  source: r.example/fleet/a:prod\n  clusterName: c1\n  expectClusterType: edge\n  expectEnvironment: prod\n- name: b\n  source: r.example/fleet/b:prod\n  clusterName: c1\n  expectClusterType: edge\n  expectEnvironment: prod\n");
    assert!(e.contains("sources[1] (b)") && e.contains("reportTo"), "two sources, one report: {e}");
    let e = file(&format!("{TOP}sources: []\n")).unwrap_err().to_string();
    assert!(e.contains("sources") && e.contains("empty"), "{e}");
    let e = Settings::merge(ConfigLayer { source: Some("r.example/x:prod".into()), ..Default::default() }, file(&format!("{TOP}sources:\n- name: a\n  source: r.example/a:prod\n")).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("`source`") && e.contains("sources:"), "{e}");
}
