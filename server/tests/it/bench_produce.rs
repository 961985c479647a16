//! `sluice bench produce` against a real `sluice serve`: it runs for the time asked, at
//! about the rate asked, prints its table, and the table holds exactly the records it
//! reports acked (each once).

use std::time::Duration;

use crate::harness::{read_delta, wait_for_rows, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_produce_reports_what_the_table_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), "200ms").await;
    let t = "main.bench.produce";
    let location = server
        .create_table_at(t, "id BIGINT NOT NULL, payload STRING")
        .await;
    let out = server.cli(&[
        "bench",
        "produce",
        t,
        "--streams",
        "2",
        "--rate",
        "1000",
        "--record-bytes",
        "120",
        "--seconds",
        "2",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row = stdout
        .lines()
        .find(|l| l.starts_with("| 2 |"))
        .unwrap_or_else(|| panic!("no result row:\n{stdout}"));
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    let acked: usize = cells[2].parse().expect("records acked");
    // 1000 records/s for 2 s, give or take the start-up.
    assert!((1_500..=2_100).contains(&acked), "{acked} acked:\n{stdout}");
    let p50: f64 = cells[5].parse().expect("p50");
    assert!(p50 > 0.0, "{stdout}");
    wait_for_rows(&location, acked, Duration::from_secs(30)).await;
    let mut ids: Vec<i64> = read_delta(&location)
        .await
        .iter()
        .flat_map(|b| {
            b.column_by_name("id")
                .and_then(|c| c.as_any().downcast_ref::<arrow_array::Int64Array>())
                .expect("id")
                .values()
                .to_vec()
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), acked, "each reported record once");
}
