//! The charts of kerntune's reports, drawn as SVG by the `plotters` crate: [`lines`]
//! (best-so-far curves, one line per series), [`by_category`] (an objective against the
//! values of one parameter) and [`pareto`] (two objectives and the front of their
//! trade-off). Points carry an SVG `<title>`, which browsers show on hover.

use std::ops::Range;

use plotters::coord::Shift;
use plotters::prelude::*;

/// Distinguishable colours (Okabe–Ito, then a few more), reused in order.
const COLOURS: [RGBColor; 12] = [
    RGBColor(0x00, 0x00, 0x00),
    RGBColor(0xE6, 0x9F, 0x00),
    RGBColor(0x56, 0xB4, 0xE9),
    RGBColor(0x00, 0x9E, 0x73),
    RGBColor(0xD5, 0x5E, 0x00),
    RGBColor(0x00, 0x72, 0xB2),
    RGBColor(0xCC, 0x79, 0xA7),
    RGBColor(0xF0, 0xE4, 0x42),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0x17, 0xbe, 0xcf),
    RGBColor(0xbc, 0xbd, 0x22),
];
const POINT: RGBColor = RGBColor(0x00, 0x72, 0xB2);
const FRONT: RGBColor = RGBColor(0xD5, 0x5E, 0x00);
const GRID: RGBColor = RGBColor(0xE4, 0xE4, 0xE4);
/// Font sizes before plotters' scaling (it draws them at about three quarters).
const TITLE: u32 = 19;
const TEXT: u32 = 16;

/// A chart could not be drawn (the message is the plotting library's).
#[derive(Debug, thiserror::Error)]
#[error("drawing a chart: {0}")]
pub struct ChartError(String);

fn failed(error: impl std::fmt::Display) -> ChartError {
    ChartError(error.to_string())
}

/// One line of a [`LineChart`].
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// Lines over a shared x axis, with a legend when there are several.
#[derive(Debug)]
pub struct LineChart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: &'a [Series],
    /// The y axis; default: the data's range.
    pub y_range: Option<Range<f64>>,
    /// x positions marked with a dashed vertical line (budgets).
    pub x_marks: &'a [f64],
    pub size: (u32, u32),
}

/// A line chart as an SVG element. The first series is drawn thicker.
pub fn lines(chart: &LineChart<'_>) -> Result<String, ChartError> {
    let all = || chart.series.iter().flat_map(|s| s.points.iter());
    let x_range = span(all().map(|p| p.0).chain(chart.x_marks.iter().copied()), 0.0);
    let y_range = chart.y_range.clone().unwrap_or_else(|| span(all().map(|p| p.1), 0.05));
    let mut svg = String::new();
    {
        let root = canvas(&mut svg, chart.size)?;
        let mut plot = ChartBuilder::on(&root)
            .caption(chart.title, ("sans-serif", TITLE))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(x_range.clone(), y_range.clone())
            .map_err(failed)?;
        plot.configure_mesh()
            .x_desc(chart.x_label)
            .y_desc(chart.y_label)
            .label_style(("sans-serif", TEXT))
            .axis_desc_style(("sans-serif", TEXT))
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID)
            .draw()
            .map_err(failed)?;
        for &x in chart.x_marks {
            plot.draw_series(DashedLineSeries::new(
                [(x, y_range.start), (x, y_range.end)],
                4,
                3,
                RGBColor(0xBB, 0xBB, 0xBB).stroke_width(1),
            ))
            .map_err(failed)?;
        }
        for (index, series) in chart.series.iter().enumerate() {
            let colour = COLOURS[index % COLOURS.len()];
            let width = if index == 0 && chart.series.len() > 1 { 3 } else { 2 };
            plot.draw_series(LineSeries::new(series.points.iter().copied(), colour.stroke_width(width)))
                .map_err(failed)?
                .label(series.label.as_str())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 22, y)], colour.stroke_width(width)));
        }
        if chart.series.len() > 1 {
            plot.configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(0x99, 0x99, 0x99))
                .label_font(("sans-serif", TEXT))
                .draw()
                .map_err(failed)?;
        }
        root.present().map_err(failed)?;
    }
    Ok(svg)
}

/// The values of one category (a parameter's value) with a hover text per point.
#[derive(Debug, Clone)]
pub struct Category {
    pub label: String,
    pub points: Vec<(f64, String)>,
}

/// Points per category, one column each: the objective against one parameter's values.
pub fn by_category(
    title: &str,
    y_label: &str,
    categories: &[Category],
    size: (u32, u32),
) -> Result<String, ChartError> {
    // A segmented range holds its last value too: `0..last` has one segment per category.
    let last = i32::try_from(categories.len().max(1) - 1).map_err(failed)?;
    let y_range = span(categories.iter().flat_map(|c| c.points.iter().map(|p| p.0)), 0.05);
    let mut svg = String::new();
    {
        let root = canvas(&mut svg, size)?;
        let mut plot = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", TITLE))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(CATEGORY_Y_AREA)
            .build_cartesian_2d((0..last).into_segmented(), y_range)
            .map_err(failed)?;
        let step = label_step(categories, size.0);
        let label = |value: &SegmentValue<i32>| match value {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => usize::try_from(*i)
                .ok()
                .filter(|i| i % step == 0)
                .and_then(|i| categories.get(i))
                .map(|c| c.label.clone())
                .unwrap_or_default(),
            SegmentValue::Last => String::new(),
        };
        plot.configure_mesh()
            .y_desc(y_label)
            .x_labels(categories.len())
            .x_label_formatter(&label)
            .label_style(("sans-serif", TEXT))
            .axis_desc_style(("sans-serif", TEXT))
            .y_label_formatter(&tick)
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID)
            .draw()
            .map_err(failed)?;
        let points = categories.iter().enumerate().flat_map(|(i, c)| {
            let x = SegmentValue::CenterOf(i32::try_from(i).unwrap_or(i32::MAX));
            c.points.iter().map(move |p| (x.clone(), p.0))
        });
        plot.draw_series(points.map(|p| Circle::new(p, 3, POINT.mix(0.45).filled()))).map_err(failed)?;
        root.present().map_err(failed)?;
    }
    let titles: Vec<&str> = categories.iter().flat_map(|c| c.points.iter().map(|p| p.1.as_str())).collect();
    Ok(with_titles(svg, &titles))
}

/// Width of the y axis' label area of a [`by_category`] chart, in pixels.
const CATEGORY_Y_AREA: u32 = 58;

/// Label every `step`-th category of a [`by_category`] chart `width` pixels wide, so that
/// no two labels overlap however many values a parameter has: a label takes about 0.6 of
/// the font size per character, plus a gap of half the font size.
fn label_step(categories: &[Category], width: u32) -> usize {
    let widest = categories.iter().map(|c| c.label.chars().count()).max().unwrap_or(1).max(1);
    let needed = (widest as f64 * 0.6 + 0.5) * f64::from(TEXT);
    let plot = f64::from(width.saturating_sub(CATEGORY_Y_AREA + 16)).max(1.0);
    let room = plot / categories.len().max(1) as f64;
    (needed / room).ceil().max(1.0) as usize
}

/// A point of a [`pareto`] chart.
#[derive(Debug, Clone)]
pub struct ParetoPoint {
    pub x: f64,
    pub y: f64,
    pub on_front: bool,
    pub hover: String,
}

/// Two objectives (both lower is better), every point, and the front of the trade-off
/// joined by a line.
pub fn pareto(
    title: &str,
    x_label: &str,
    y_label: &str,
    points: &[ParetoPoint],
    size: (u32, u32),
) -> Result<String, ChartError> {
    let x_range = span(points.iter().map(|p| p.x), 0.05);
    let y_range = span(points.iter().map(|p| p.y), 0.05);
    let mut front: Vec<(f64, f64)> = points.iter().filter(|p| p.on_front).map(|p| (p.x, p.y)).collect();
    front.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut svg = String::new();
    {
        let root = canvas(&mut svg, size)?;
        let mut plot = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", TITLE))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(x_range, y_range)
            .map_err(failed)?;
        plot.configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .label_style(("sans-serif", TEXT))
            .axis_desc_style(("sans-serif", TEXT))
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID)
            .draw()
            .map_err(failed)?;
        plot.draw_series(LineSeries::new(front, FRONT.stroke_width(2)))
            .map_err(failed)?
            .label("Pareto front")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 22, y)], FRONT.stroke_width(2)));
        plot.draw_series(points.iter().map(|p| {
            let colour = if p.on_front { FRONT.filled() } else { POINT.mix(0.45).filled() };
            Circle::new((p.x, p.y), if p.on_front { 4 } else { 3 }, colour)
        }))
        .map_err(failed)?;
        plot.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(0x99, 0x99, 0x99))
            .label_font(("sans-serif", TEXT))
            .draw()
            .map_err(failed)?;
        root.present().map_err(failed)?;
    }
    let titles: Vec<&str> = points.iter().map(|p| p.hover.as_str()).collect();
    Ok(with_titles(svg, &titles))
}

/// The points of `values` (lower is better on both) that no other point beats on both.
pub fn front(values: &[(f64, f64)]) -> Vec<bool> {
    values.iter().map(|a| !values.iter().any(|b| b.0 <= a.0 && b.1 <= a.1 && (b.0 < a.0 || b.1 < a.1))).collect()
}

/// A tick's label: whole numbers without decimals, others with up to four significant
/// digits, never floating-point noise (`0.30000000000000004`).
fn tick(value: &f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        return format!("{value:.0}");
    }
    let digits = (3 - value.abs().log10().floor() as i32).clamp(0, 12) as usize;
    let text = format!("{value:.digits$}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn canvas(svg: &mut String, size: (u32, u32)) -> Result<DrawingArea<SVGBackend<'_>, Shift>, ChartError> {
    let root = SVGBackend::with_string(svg, size).into_drawing_area();
    root.fill(&WHITE).map_err(failed)?;
    Ok(root)
}

/// The values' range, widened by `pad` of its width on each side (and to a unit range
/// around a single value).
fn span(values: impl Iterator<Item = f64>, pad: f64) -> Range<f64> {
    let (low, high) =
        values.filter(|v| v.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| (l.min(v), h.max(v)));
    if low > high {
        return 0.0..1.0;
    }
    if high - low <= f64::EPSILON * high.abs().max(1.0) {
        let half = (low.abs() * 0.1).max(0.5);
        return low - half..high + half;
    }
    let margin = (high - low) * pad;
    low - margin..high + margin
}

/// Gives the chart's circles, in drawing order, one hover text each. The points are the
/// only circles a chart draws; should the counts differ, the chart is left as it is.
fn with_titles(svg: String, titles: &[&str]) -> String {
    if svg.matches("<circle ").count() != titles.len() {
        return svg;
    }
    let mut out = String::with_capacity(svg.len() + titles.iter().map(|t| t.len() + 24).sum::<usize>());
    let mut rest = svg.as_str();
    for title in titles {
        let Some(start) = rest.find("<circle ") else { break };
        let Some(end) = rest[start..].find("/>").map(|e| start + e) else { break };
        out.push_str(&rest[..end]);
        out.push_str("><title>");
        out.push_str(&super::html::escape(title));
        out.push_str("</title></circle>");
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_chart_draws_each_series_and_a_legend_when_there_are_several() {
        let series = [
            Series { label: "first".into(), points: vec![(1.0, 3.0), (2.0, 2.0), (3.0, 1.0)] },
            Series { label: "second".into(), points: vec![(1.0, 2.5), (3.0, 2.5)] },
        ];
        let chart = LineChart {
            title: "t",
            x_label: "evaluations",
            y_label: "best",
            series: &series,
            y_range: None,
            x_marks: &[2.0],
            size: (400, 300),
        };
        let svg = lines(&chart).expect("chart");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains(">\nfirst\n</text>") && svg.contains(">\nsecond\n</text>"), "{svg}");
        assert!(svg.contains(">\nevaluations\n</text>"));
    }

    #[test]
    fn every_point_of_a_category_chart_has_its_hover_text() {
        let categories = [
            Category { label: "16".into(), points: vec![(1.0, "a <1>".into()), (2.0, "b".into())] },
            Category { label: "32".into(), points: vec![(1.5, "c".into())] },
        ];
        let svg = by_category("BLOCK", "time", &categories, (300, 200)).expect("chart");
        assert_eq!(svg.matches("<title>").count(), 3);
        assert!(svg.contains("<title>a &lt;1&gt;</title></circle>"));
        assert!(svg.contains(">\n16\n</text>") && svg.contains(">\n32\n</text>"), "{svg}");
        // One segment per value: the points sit in the middle of the first and second half.
        assert!(svg.contains("<circle cx=\"122\"") && svg.contains("<circle cx=\"234\""), "{svg}");
    }

    #[test]
    fn category_labels_are_thinned_so_that_none_overlap_at_32_values_and_more() {
        for (count, width) in [(32, 660), (64, 660), (200, 660), (12, 320)] {
            let categories: Vec<Category> = (0..count)
                .map(|i| Category { label: format!("{}", 1000 + i), points: vec![(i as f64, "p".into())] })
                .collect();
            let svg = by_category("BLOCK", "time", &categories, (width, 240)).expect("chart");
            // The x of each drawn label, in the order drawn (left to right).
            let xs: Vec<f64> = categories
                .iter()
                .filter_map(|c| {
                    let end = svg.find(&format!(">\n{}\n</text>", c.label))?;
                    let start = svg[..end].rfind("<text x=\"")? + "<text x=\"".len();
                    svg[start..].split('"').next()?.parse().ok()
                })
                .collect();
            assert!(xs.len() > 1 && xs.len() < count.min(32), "{count} values: {} labels drawn", xs.len());
            assert!(svg.contains(">\n1000\n</text>"), "the first value is labelled");
            // A 4-digit label at 16 px is about 38 px wide: each starts past the last's end.
            let widest = 4.0 * 0.6 * f64::from(TEXT);
            for pair in xs.windows(2) {
                assert!(pair[1] - pair[0] >= widest, "{count} values: labels at {pair:?} overlap");
            }
        }
        let few = [Category { label: "16".into(), points: vec![] }, Category { label: "32".into(), points: vec![] }];
        assert_eq!(label_step(&few, 320), 1, "a few values are all labelled");
    }

    #[test]
    fn the_front_keeps_the_points_nothing_beats_on_both_objectives() {
        let values = [(1.0, 5.0), (2.0, 2.0), (3.0, 3.0), (4.0, 1.0), (1.0, 6.0)];
        assert_eq!(front(&values), [true, true, false, true, false]);
    }

    #[test]
    fn ticks_read_as_people_write_numbers() {
        assert_eq!(tick(&10.0), "10");
        assert_eq!(tick(&(0.1 + 0.2)), "0.3");
        assert_eq!(tick(&0.785), "0.785");
        assert_eq!(tick(&12.5), "12.5");
    }

    #[test]
    fn a_single_value_still_gets_a_range() {
        let range = span([2.0, 2.0].into_iter(), 0.05);
        assert!(range.start < 2.0 && range.end > 2.0);
        assert_eq!(span(std::iter::empty(), 0.05), 0.0..1.0);
    }
}
