//! A certificate authority for tests, made with `openssl` (which
//! `scripts/setup` installs) in a folder of the test's: `ca.crt` and
//! `ca.key`, and certificates it signs as `<name>.crt` and `<name>.key`
//! (the key readable by its owner only, as libpq and PostgreSQL demand).
//! Shared by path with other crates' tests.

use std::path::Path;
use std::process::Command;

/// Runs `openssl` with `args` in `dir`; fails the test with its error.
pub fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl runs (scripts/setup installs it)");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Makes the authority `CN=<common_name>` in `dir` (P-256, two days).
pub fn authority(dir: &Path, common_name: &str) {
    let subject = format!("/CN={common_name}");
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-subj",
            &subject,
            "-days",
            "2",
        ],
    );
}

/// A certificate `name` for `common_name` with the subject alternative
/// names `sans` (`DNS:orders-rw,IP:127.0.0.1`), signed by the authority in
/// `dir`.
pub fn issue(dir: &Path, name: &str, common_name: &str, sans: &str) {
    let (key, csr, crt, ext) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.crt"),
        format!("{name}.ext"),
    );
    let subject = format!("/CN={common_name}");
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            &subject,
        ],
    );
    std::fs::write(dir.join(&ext), format!("subjectAltName={sans}\n")).expect("ext file");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &crt,
            "-days",
            "2",
            "-extfile",
            &ext,
        ],
    );
    set_private(&dir.join(&key));
}

/// Makes `path` readable by its owner only.
pub fn set_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}
