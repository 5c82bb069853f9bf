//! An SVG line chart of a [`Comparison`]: mean best-so-far ratio against evaluations, one
//! line per contender, written by hand (a chart this simple needs no plotting library).

use std::fmt::Write as _;

use kerntune_engine::Comparison;

const WIDTH: f64 = 860.0;
const HEIGHT: f64 = 520.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 56.0;
/// Distinguishable colours (Okabe–Ito, then a few more), reused in order.
const COLOURS: [&str; 12] = [
    "#000000", "#E69F00", "#56B4E9", "#009E73", "#D55E00", "#0072B2", "#CC79A7", "#F0E442", "#7f7f7f", "#8c564b",
    "#17becf", "#bcbd22",
];

/// The chart as an SVG document. The y axis starts at the tenth below the lowest value
/// any line reaches after its first tenth of the evaluations, so the end game is visible.
pub fn svg(comparison: &Comparison) -> String {
    let evaluations = comparison.contenders.iter().map(|c| c.curve.len()).max().unwrap_or(0).max(1);
    let settled = evaluations / 10;
    let lowest =
        comparison.contenders.iter().flat_map(|c| c.curve.iter().skip(settled).copied()).fold(1.0_f64, f64::min);
    let floor = ((lowest * 10.0).floor() / 10.0).clamp(0.0, 0.9);
    let plot_width = WIDTH - LEFT - RIGHT;
    let plot_height = HEIGHT - TOP - BOTTOM;
    let x = |k: f64| LEFT + plot_width * k / evaluations as f64;
    let y = |ratio: f64| TOP + plot_height * (1.0 - (ratio.clamp(floor, 1.0) - floor) / (1.0 - floor));

    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="14">Best found so far (optimum / best, mean over {} landscapes × {} seeds)</text>"#,
        LEFT + plot_width / 2.0,
        comparison.landscapes.len(),
        comparison.seeds.end.saturating_sub(comparison.seeds.start)
    );
    let mut tick = floor;
    while tick <= 1.0 + 1e-9 {
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{tick:.1}</text>"##,
            LEFT + plot_width,
            LEFT - 6.0,
            y(tick) + 4.0,
            y = y(tick)
        );
        tick += 0.1;
    }
    for budget in &comparison.budgets {
        let bx = x(*budget as f64);
        let _ = writeln!(
            out,
            r##"<line x1="{bx:.1}" x2="{bx:.1}" y1="{TOP}" y2="{}" stroke="#bbb" stroke-dasharray="4 3"/><text x="{bx:.1}" y="{}" text-anchor="middle">{budget}</text>"##,
            TOP + plot_height,
            TOP + plot_height + 18.0
        );
    }
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_width}" height="{plot_height}" fill="none" stroke="#333"/><text x="{}" y="{}" text-anchor="middle">evaluations</text>"##,
        LEFT + plot_width / 2.0,
        HEIGHT - 14.0
    );
    for (index, contender) in comparison.contenders.iter().enumerate() {
        let colour = COLOURS[index % COLOURS.len()];
        let width = if index == 0 { 2.5 } else { 1.5 };
        let points: Vec<String> =
            contender.curve.iter().enumerate().map(|(k, r)| format!("{:.1},{:.1}", x(k as f64 + 1.0), y(*r))).collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="{width}" points="{}"/>"#,
            points.join(" ")
        );
        let legend_y = TOP + 8.0 + 20.0 * index as f64;
        let legend_x = LEFT + plot_width + 16.0;
        let _ = writeln!(
            out,
            r#"<line x1="{legend_x}" x2="{}" y1="{legend_y}" y2="{legend_y}" stroke="{colour}" stroke-width="{width}"/><text x="{}" y="{}">{}</text>"#,
            legend_x + 24.0,
            legend_x + 30.0,
            legend_y + 4.0,
            escape(&contender.label)
        );
    }
    out.push_str("</svg>\n");
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use serde_json::Map;

    use super::*;
    use kerntune_engine::compare::ContenderResult;

    #[test]
    fn draws_one_line_and_one_legend_entry_per_contender() {
        let contender = |label: &str, curve: Vec<f64>| ContenderResult {
            label: label.to_string(),
            strategy: label.to_string(),
            options: Map::new(),
            budgets: Vec::new(),
            curve,
            strategy_seconds: 0.0,
        };
        let comparison = Comparison {
            landscapes: vec!["a".into()],
            budgets: vec![2, 4],
            seeds: 0..3,
            batch: 1,
            contenders: vec![contender("x<y", vec![0.5, 0.7, 0.9, 1.0]), contender("z", vec![0.6, 0.6, 0.8, 0.8])],
        };
        let svg = svg(&comparison);
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains(">x&lt;y</text>") && svg.contains(">z</text>"));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    }
}
