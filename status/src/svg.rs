//! One small line chart as inline SVG: a titled box over a time window, the series as a
//! polyline scaled to its largest value (written at the top left) with a dot on the newest
//! point, the window's start ("−15 min", or less while the history is younger) and "now"
//! under the axis. No script; the page embeds it as is.

use std::fmt::Write as _;

use crate::html::escape;

const W: f64 = 300.0;
const H: f64 = 90.0;
const PAD_TOP: f64 = 16.0;
const PAD_BOTTOM: f64 = 14.0;

/// A chart of `points` (`(unix seconds, value)`) over `[from, to]`; `format` writes the
/// scale's top value; `id` becomes the SVG's `id`.
pub fn line_chart(
    id: &str,
    title: &str,
    points: &[(f64, f64)],
    (from, to): (f64, f64),
    format: impl Fn(f64) -> String,
) -> String {
    let mut out = String::new();
    let top = points.iter().map(|p| p.1).fold(0.0_f64, f64::max);
    let scale = if top > 0.0 { top } else { 1.0 };
    let span = (to - from).max(1.0);
    let _ = write!(
        out,
        r##"<svg id="{id}" class="chart" xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" data-points="{n}"><rect x="0" y="0" width="{W}" height="{H}" fill="#fbfcfe" stroke="#cdd5e0"/><text x="4" y="11" font-size="10" fill="#1f2d3d">{title} (max {top})</text>"##,
        id = escape(id),
        n = points.len(),
        title = escape(title),
        top = escape(&format(top)),
    );
    let plot_h = H - PAD_TOP - PAD_BOTTOM;
    let xy = |(t, v): (f64, f64)| {
        let x = ((t - from) / span).clamp(0.0, 1.0) * (W - 8.0) + 4.0;
        let y = PAD_TOP + plot_h - (v / scale).clamp(0.0, 1.0) * plot_h;
        (x, y)
    };
    if points.is_empty() {
        out.push_str(
            r##"<text x="110" y="52" font-size="10" fill="#8a94a6">no samples yet</text>"##,
        );
    } else {
        let coords: Vec<String> = points
            .iter()
            .map(|p| {
                let (x, y) = xy(*p);
                format!("{x:.1},{y:.1}")
            })
            .collect();
        let (first_x, _) = xy(points[0]);
        let (last_x, _) = xy(points[points.len() - 1]);
        let base = PAD_TOP + plot_h;
        let _ = write!(
            out,
            r##"<polygon points="{first_x:.1},{base:.1} {line} {last_x:.1},{base:.1}" fill="#cfe3ff" stroke="none"/><polyline points="{line}" fill="none" stroke="#1b64d4" stroke-width="1.5"/>"##,
            line = coords.join(" "),
        );
    }
    if let Some(last) = points.last() {
        let (x, y) = xy(*last);
        let _ = write!(
            out,
            r##"<circle cx="{x:.1}" cy="{y:.1}" r="2.5" fill="#1b64d4"/>"##
        );
    }
    let axis = H - PAD_BOTTOM;
    let mins = span / 60.0;
    let start = if mins >= 1.0 {
        format!("−{mins:.0} min")
    } else {
        format!("−{span:.0} s")
    };
    let _ = write!(
        out,
        r##"<line x1="4" y1="{axis}" x2="{x2}" y2="{axis}" stroke="#8a94a6"/><text x="4" y="{ty}" font-size="9" fill="#5a6478">{start}</text><text x="{nx}" y="{ty}" font-size="9" fill="#5a6478">now</text></svg>"##,
        x2 = W - 4.0,
        ty = H - 3.0,
        nx = W - 24.0,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_scaled_into_the_box() {
        let svg = line_chart(
            "c",
            "rows/s <x>",
            &[(0.0, 0.0), (50.0, 5.0), (100.0, 10.0)],
            (0.0, 100.0),
            |v| format!("{v}"),
        );
        assert!(svg.starts_with("<svg id=\"c\""), "{svg}");
        assert!(svg.contains("data-points=\"3\""));
        assert!(svg.contains("rows/s &lt;x&gt; (max 10)"), "{svg}");
        // t=0,v=0 at the bottom left; t=100,v=10 at the top right.
        assert!(
            svg.contains("polyline points=\"4.0,76.0 150.0,46.0 296.0,16.0\""),
            "{svg}"
        );
        assert!(svg.ends_with("</svg>"));
    }

    #[test]
    fn an_empty_series_says_so() {
        let svg = line_chart("c", "t", &[], (0.0, 1.0), |v| format!("{v}"));
        assert!(svg.contains("no samples yet"));
        assert!(!svg.contains("polyline"));
    }
}
