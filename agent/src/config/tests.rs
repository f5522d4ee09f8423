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
    assert_eq!(s.interval, Duration::from_secs(5));
    assert_eq!(s.target, TargetSpec::Dir("/tmp/x".into()));
    assert_eq!(s.report, None, "no cluster name: no reports");
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
    let r = Settings::validate(layer.clone()).unwrap().report.unwrap();
    assert_eq!(r.to.to_string(), "r.example/fleet/drover-reports");
    assert_eq!((r.channel.as_str(), r.interval), ("prod-ring0", Duration::from_secs(300)));
    let off = ConfigLayer { no_report: Some(true), ..layer.clone() };
    assert_eq!(Settings::validate(off).unwrap().report, None);
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
    assert_eq!(s.drift_mode, DriftMode::Report);
    assert!(!s.apply_windows.is_empty());
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
