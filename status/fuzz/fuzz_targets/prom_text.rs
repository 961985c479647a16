//! The Prometheus text the router reads from every pod's `/metrics` for the status page
//! (`sluice_status::prom`), then the page rendered from it. Nothing may panic; a text that
//! parses survives a write-and-read round trip; whatever the label values hold, the page
//! carries no markup of theirs (no `<script`, no unescaped `<` from a value).

#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_status::page::{render, PageInput};
use sluice_status::prom::{to_text, Samples};
use sluice_status::snapshot::PodView;
use sluice_status::{ClusterSnapshot, History, PodSnapshot};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(samples) = Samples::parse(&text) else {
        return;
    };
    let again = Samples::parse(&to_text(&samples.0)).expect("written samples parse");
    assert_eq!(again.0.len(), samples.0.len());
    for (a, b) in again.0.iter().zip(&samples.0) {
        assert_eq!((&a.name, &a.labels), (&b.name, &b.labels));
        assert!(a.value == b.value || (a.value.is_nan() && b.value.is_nan()));
    }
    let pod = PodSnapshot::from_samples("p<1>", &samples);
    let current = ClusterSnapshot {
        pods: vec![PodView::Seen(pod)],
    };
    let mut history = History::default();
    history.push(0.0, current.clone());
    let html = render(&PageInput {
        scope: "fuzz".into(),
        current: &current,
        history: &history,
        now: 10.0,
    });
    assert!(!html.contains("<script"), "markup from a label value reached the page");
    assert!(!html.contains("p<1>"), "the pod id was not escaped");
});
