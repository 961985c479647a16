//! The data directory's modes: the WAL, the catalog and key material must not be readable
//! beyond the server's user (see [`crate::data_dir`]). `sluice serve` fixes loose modes at
//! start; the doctor reports them: group access is a warning, access for others a failure.

use std::path::Path;

use super::{Check, Verdict};
use crate::data_dir::loose_modes;

/// Name of the row.
const NAME: &str = "data dir modes";
/// What a healthy directory looks like.
const EXPECTED: &str = "dirs 0700, files 0600";

pub(super) fn check(data_dir: &Path) -> Check {
    let loose = match loose_modes(data_dir) {
        Ok(loose) => loose,
        Err(e) => return Check::error(NAME, e),
    };
    let Some(first) = loose.first() else {
        return Check::new(NAME, "owner only".into(), EXPECTED, Verdict::Pass);
    };
    let verdict = if loose.iter().any(|l| l.mode & 0o007 != 0) {
        Verdict::Fail
    } else {
        Verdict::Warn
    };
    let more = match loose.len() {
        1 => String::new(),
        n => format!(" and {} more", n - 1),
    };
    Check::new(NAME, format!("{first}{more}"), EXPECTED, verdict)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn group_access_warns_and_access_for_others_fails() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod dir");
        let file = dir.path().join("catalog.json");
        std::fs::write(&file, b"{}").expect("write");
        let set = |m| std::fs::set_permissions(&file, std::fs::Permissions::from_mode(m));
        set(0o600).expect("chmod");
        assert_eq!(check(dir.path()).verdict, Verdict::Pass);
        set(0o640).expect("chmod");
        assert_eq!(check(dir.path()).verdict, Verdict::Warn);
        set(0o644).expect("chmod");
        let row = check(dir.path());
        assert_eq!(row.verdict, Verdict::Fail);
        assert!(row.measured.contains("catalog.json is 0644"), "{row:?}");
    }
}
