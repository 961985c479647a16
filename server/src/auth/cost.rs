//! What authentication costs per call, so it never shows in the throughput
//! numbers: issuing a token (the token endpoint's work after the secret
//! check), verifying one (every new stream), and the stream-creation grant
//! check. Run with
//! `cargo test --release -p sluice-server --lib -- --ignored auth_cost --nocapture`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{hash_secret, verify_secret, Authenticator};
use crate::catalog::{Catalog, Grant, PrincipalEntry, Privilege, TableEntry};
use crate::config::AuthMode;

fn per_op(n: u32, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        f();
    }
    start.elapsed().as_secs_f64() * 1e6 / f64::from(n)
}

#[test]
#[ignore = "a measurement; run by hand with --release"]
fn auth_cost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let catalog = Arc::new(Catalog::open(dir.path()).expect("catalog"));
    let (salt, secret_hash) = hash_secret("secret-0123456789");
    catalog
        .add_principal(PrincipalEntry {
            client_id: "p".into(),
            name: "p".into(),
            salt: salt.clone(),
            secret_hash: secret_hash.clone(),
            admin: false,
        })
        .expect("principal");
    catalog
        .create_table(TableEntry::new(
            "a.b.c",
            "id BIGINT",
            "file:///tmp/x",
            "t",
            0,
        ))
        .expect("table");
    catalog
        .grant(Grant {
            client_id: "p".into(),
            table: "a.b.c".into(),
            privilege: Privilege::Modify,
        })
        .expect("grant");
    let kek = super::Kek::generate().expect("kek");
    let auth = Authenticator::new(AuthMode::OAuth, catalog, Duration::from_secs(3600), kek)
        .expect("authenticator");
    let n = 20_000;
    let token = auth
        .signer()
        .issue("p", vec!["a.b.c".into()], false)
        .expect("issue");
    let header = format!("Bearer {token}");
    let secret_us = per_op(n, || {
        assert!(verify_secret(&salt, &secret_hash, "secret-0123456789"));
    });
    let issue_us = per_op(n, || {
        auth.signer()
            .issue("p", vec!["a.b.c".into()], false)
            .expect("issue");
    });
    let verify_us = per_op(n, || {
        auth.verify_bearer(Some(&header)).expect("verify");
    });
    let caller = auth.verify_bearer(Some(&header)).expect("verify");
    let grant_us = per_op(n, || {
        auth.authorize_write(&caller, "a.b.c").expect("authorize");
    });
    println!(
        "auth cost per call: secret check {secret_us:.2} µs, token issue {issue_us:.2} µs, \
         token verify {verify_us:.2} µs, grant check at stream creation {grant_us:.2} µs"
    );
}
