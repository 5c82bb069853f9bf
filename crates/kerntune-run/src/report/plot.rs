//! The chart of a [`Comparison`]: mean best-so-far ratio against evaluations, one line
//! per contender, with the budgets marked (drawn by [`super::charts::lines`]).

use kerntune_engine::Comparison;

use super::charts::{self, ChartError, LineChart, Series};

/// The chart as an SVG document. The y axis starts at the tenth below the lowest value
/// any line reaches after its first tenth of the evaluations, so the end game is visible.
pub fn svg(comparison: &Comparison) -> Result<String, ChartError> {
    let evaluations = comparison.contenders.iter().map(|c| c.curve.len()).max().unwrap_or(0).max(1);
    let settled = evaluations / 10;
    let lowest =
        comparison.contenders.iter().flat_map(|c| c.curve.iter().skip(settled).copied()).fold(1.0_f64, f64::min);
    let floor = ((lowest * 10.0).floor() / 10.0).clamp(0.0, 0.9);
    let series: Vec<Series> = comparison
        .contenders
        .iter()
        .map(|c| Series {
            label: c.label.clone(),
            points: c.curve.iter().enumerate().map(|(k, r)| (k as f64 + 1.0, r.clamp(floor, 1.0))).collect(),
        })
        .collect();
    let budgets: Vec<f64> = comparison.budgets.iter().map(|b| *b as f64).collect();
    let title = format!(
        "Best found so far (optimum / best, mean over {} landscapes × {} seeds)",
        comparison.landscapes.len(),
        comparison.seeds.end.saturating_sub(comparison.seeds.start)
    );
    charts::lines(&LineChart {
        title: &title,
        x_label: "evaluations",
        y_label: "optimum / best so far",
        series: &series,
        y_range: Some(floor..1.0),
        x_marks: &budgets,
        size: (860, 520),
    })
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
        let svg = svg(&comparison).expect("chart");
        assert!(svg.contains(">\nx&lt;y\n</text>") && svg.contains(">\nz\n</text>"), "{svg}");
        assert!(svg.contains(">\noptimum / best so far\n</text>"));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    }
}
