//! Another user on the host, for tests that run as root: commands run under another uid
//! with `setpriv` (util-linux), and files that user owns (chowned to it). What a neighbour
//! on a shared edge box can do without any privilege. Test support only.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::bins::Out;

/// The neighbour's uid (and gid).
pub const UID: u32 = 4343;

/// `program` to be run as the neighbour (`setpriv --reuid --regid --clear-groups`).
pub fn command(program: impl AsRef<OsStr>) -> Command {
    let id = UID.to_string();
    let mut c = Command::new("setpriv");
    c.args(["--reuid", &id, "--regid", &id, "--clear-groups", "--"]).arg(program).stdin(Stdio::null());
    c
}

/// Runs `program` with `args` as the neighbour and waits for it.
pub fn run(program: impl AsRef<OsStr>, args: &[&str]) -> Out {
    command(program).args(args).output().expect("setpriv (util-linux) must be installed").into()
}

/// Makes `path` (not what a link points to) the neighbour's.
pub fn chown(path: &Path) {
    std::os::unix::fs::lchown(path, Some(UID), Some(UID)).unwrap_or_else(|e| panic!("chown {}: {e} (the tests run as root)", path.display()));
}

/// Sets the mode of `path`.
pub fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}
