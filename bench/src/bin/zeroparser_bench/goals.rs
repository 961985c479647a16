//! The goals of issue 17 checked against one run's figures: into Arrow at least prost's plain
//! decode on every workload, list-bearing workloads into Arrow at least half of Sluice's own
//! parse-and-touch rate, the NEOWISE-like row at least 1 GB/s into Arrow (the median of the
//! run's trials), and `append_json` at least 1.5× arrow-json on every JSON workload. Ratios
//! are medians of per-round ratios (`sluice_bench::contest`). Each
//! goal reports its worst workload; a decoder left out of the run (`--only`) is not counted.

use sluice_bench::table::Table;

/// One goal: the smallest figure seen and where.
struct Goal {
    name: &'static str,
    /// The figure must be at least this.
    target: f64,
    unit: &'static str,
    worst: Option<(String, f64)>,
}

impl Goal {
    fn new(name: &'static str, target: f64, unit: &'static str) -> Goal {
        Goal {
            name,
            target,
            unit,
            worst: None,
        }
    }

    fn observe(&mut self, workload: &str, figure: f64) {
        if !figure.is_finite() || figure <= 0.0 {
            return;
        }
        if self.worst.as_ref().is_none_or(|(_, worst)| figure < *worst) {
            self.worst = Some((workload.to_owned(), figure));
        }
    }

    fn row(&self) -> Vec<String> {
        let shown = |x: f64| match self.unit {
            "%" => format!("{:.0} %", 100.0 * x),
            "MB/s" => format!("{x:.0} MB/s"),
            _ => format!("{x:.2}×"),
        };
        let (workload, measured, verdict) = match &self.worst {
            Some((workload, figure)) => (
                workload.clone(),
                shown(*figure),
                if *figure >= self.target {
                    "reached"
                } else {
                    "not reached"
                },
            ),
            None => ("-".into(), "-".into(), "not measured"),
        };
        vec![
            self.name.into(),
            format!(">= {}", shown(self.target)),
            workload,
            measured,
            verdict.into(),
        ]
    }
}

/// The four goals.
pub struct Goals {
    arrow_vs_prost: Goal,
    list_vs_touch: Goal,
    neowise: Goal,
    json_vs_arrow_json: Goal,
}

impl Goals {
    pub fn new() -> Goals {
        Goals {
            arrow_vs_prost: Goal::new("into Arrow / prost plain decode", 1.0, "×"),
            list_vs_touch: Goal::new("list-bearing into Arrow / parse-and-touch", 0.5, "%"),
            neowise: Goal::new("NEOWISE-like into Arrow", 1000.0, "MB/s"),
            json_vs_arrow_json: Goal::new("append_json / arrow-json", 1.5, "×"),
        }
    }

    /// The protobuf figures of one workload: into Arrow over prost's plain decode and over
    /// Sluice's parse-and-touch (each the median of the rounds' ratios), into Arrow in MB/s.
    pub fn proto(
        &mut self,
        workload: &str,
        lists: bool,
        vs_prost: f64,
        vs_touch: f64,
        into_arrow: f64,
    ) {
        self.arrow_vs_prost.observe(workload, vs_prost);
        if lists {
            self.list_vs_touch.observe(workload, vs_touch);
        }
        if workload.starts_with("NEOWISE") {
            self.neowise.observe(workload, into_arrow);
        }
    }

    /// The JSON figure of one workload: `append_json` over arrow-json (the median of the
    /// rounds' ratios).
    pub fn json(&mut self, workload: &str, vs_arrow_json: f64) {
        self.json_vs_arrow_json.observe(workload, vs_arrow_json);
    }

    pub fn render(&self) -> String {
        let mut table = Table::new(&["goal", "target", "worst workload", "measured", "verdict"]);
        for goal in [
            &self.arrow_vs_prost,
            &self.list_vs_touch,
            &self.neowise,
            &self.json_vs_arrow_json,
        ] {
            table.row(goal.row());
        }
        table.render()
    }
}
