//! Many-shape runs: one kernel tuned at several problem sizes, one tuning per size in the
//! store, each size learning from the size tuned nearest to it (see
//! `kerntune_search::learning_from`). The fronts loop over the sizes, since each size's
//! arguments are theirs to make; what a size learns from, how near two sizes are, which size
//! lists are accepted and how the run is reported per size live here once.

use kerntune_engine::Search;
use kerntune_search::{learning_from, Outcome};
use kerntune_space::Space;
use kerntune_store::formats::dispatch::nearest;
use kerntune_store::Store;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use crate::{RunError, RunSummary};

/// One problem size: the values of the variables that differ between the sizes of a run
/// (`{"M": 64}`).
pub type Shape = Map<String, Json>;

/// A size tuned earlier in the run, and its tuning in the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TunedShape {
    pub shape: Shape,
    pub tuning: i64,
}

/// What one size of a many-shape run is, and which sizes were tuned before it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Transfer {
    pub shape: Shape,
    pub tuned: Vec<TunedShape>,
    /// Tune this size on its own, as a separate run would (to measure what learning saves).
    pub independent: bool,
}

/// A list of sizes that cannot make a many-shape run.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum ShapesError {
    #[error("shapes is empty: list the sizes to tune, each a table of the variables that differ (M = 64)")]
    Empty,
    #[error("shapes lists {0} twice: list each size once")]
    Duplicate(String),
    #[error("shapes: {shape} names {names}, the first size names {first}: give every size the same variables")]
    Variables { shape: String, names: String, first: String },
    #[error("shapes: {0} names no variable: give each size the values that differ (M = 64)")]
    NoVariable(String),
}

/// A size as a user reads it: `M=64, N=4096`.
pub fn shape_label(shape: &Shape) -> String {
    shape.iter().map(|(name, value)| format!("{name}={}", scalar_text(value))).collect::<Vec<_>>().join(", ")
}

fn scalar_text(value: &Json) -> String {
    match value {
        Json::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Refuses an empty list, a size listed twice, a size without variables, and sizes that
/// do not name the same variables.
pub fn check_shapes(shapes: &[Shape]) -> Result<(), ShapesError> {
    let first = shapes.first().ok_or(ShapesError::Empty)?;
    let names = |shape: &Shape| shape.keys().cloned().collect::<Vec<_>>().join(", ");
    for (index, shape) in shapes.iter().enumerate() {
        if shape.is_empty() {
            return Err(ShapesError::NoVariable(format!("size {}", index + 1)));
        }
        if names(shape) != names(first) {
            return Err(ShapesError::Variables { shape: shape_label(shape), names: names(shape), first: names(first) });
        }
        if shapes[..index].contains(shape) {
            return Err(ShapesError::Duplicate(shape_label(shape)));
        }
    }
    Ok(())
}

/// A size's values as a dispatch table's key, in the order of `names`; `None` when it lacks
/// one of them. Sizes are near as keys are (see `kerntune_store::formats::dispatch::nearest`):
/// numbers on a log scale, every other value the same.
fn as_key(shape: &Shape, names: &[&String]) -> Option<Json> {
    let values: Option<Vec<Json>> = names.iter().map(|name| shape.get(*name).cloned()).collect();
    values.filter(|_| shape.len() == names.len()).map(Json::Array)
}

impl Transfer {
    /// The size tuned earlier that is nearest this one; of equally near ones, the smaller.
    pub fn nearest(&self) -> Option<&TunedShape> {
        if self.independent {
            return None;
        }
        let names: Vec<&String> = self.shape.keys().collect();
        let key = as_key(&self.shape, &names)?;
        let candidates: Vec<(&TunedShape, Json)> =
            self.tuned.iter().filter_map(|tuned| Some((tuned, as_key(&tuned.shape, &names)?))).collect();
        let keys: Vec<Json> = candidates.iter().map(|(_, key)| key.clone()).collect();
        nearest(&key, &keys).map(|index| candidates[index].0)
    }

    /// `search` made to learn from the nearest size's outcomes in `store` (see
    /// `kerntune_search::learning_from`); as it is when no earlier size is near.
    pub(crate) fn apply(
        &self,
        search: Search,
        options: &Map<String, Json>,
        space: &Space,
        store: &Store,
        higher_is_better: bool,
    ) -> Result<Search, RunError> {
        let Some(nearest) = self.nearest() else { return Ok(search) };
        // A size whose tuning is not in this store (another `db`) teaches nothing.
        let Some(tuning) = store.tuning_numbered(nearest.tuning)? else { return Ok(search) };
        let outcomes: Vec<Outcome> = store
            .evaluations(tuning)?
            .into_iter()
            .filter_map(|row| {
                Some(Outcome { values: space.values_of_json(&row.config)?, objective: row.evaluation.objective })
            })
            .collect();
        let strategy =
            learning_from(space, &search.strategy_name, options, search.strategy, &outcomes, higher_is_better)
                .map_err(kerntune_engine::SearchOptionsError::from)?;
        Ok(Search { strategy, ..search })
    }
}

/// One size's line in a many-shape run's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShapeRow {
    pub shape: Shape,
    /// Configurations evaluated, and of them measured now (the rest the store answered).
    pub evaluations: usize,
    pub measured: usize,
    pub wall_s: f64,
    /// The best objective and its configuration; `None` when nothing worked.
    pub best: Option<f64>,
    pub best_config: Option<Map<String, Json>>,
    /// The evaluation (1-based) at which the search first measured the configuration that
    /// won.
    pub found_at: Option<usize>,
    /// The size it learned from.
    pub started_from: Option<Shape>,
    pub tuning: i64,
}

impl ShapeRow {
    /// The line of a size's run.
    pub fn of(shape: &Shape, run: &RunSummary, started_from: Option<&Shape>) -> ShapeRow {
        let best = run.best.as_ref();
        let found_at = best.and_then(|b| run.trace.iter().find(|p| p.id == b.id)).map(|p| p.feval);
        ShapeRow {
            shape: shape.clone(),
            evaluations: run.evaluations,
            measured: run.evaluations - run.from_store,
            wall_s: run.wall_s,
            best: best.map(|b| b.objective),
            best_config: best.map(|b| b.config.clone()),
            found_at,
            started_from: started_from.cloned(),
            tuning: run.tuning,
        }
    }
}

/// The report of a many-shape run: a line per size, then the totals.
pub fn shapes_table(rows: &[ShapeRow], objective: &str) -> String {
    let mut lines = vec![format!(
        "{:<24} {:>6} {:>8} {:>9} {:>12}  {:<20} best configuration",
        "size", "evals", "measured", "time (s)", objective, "found at (from)"
    )];
    for row in rows {
        let best = row.best.map_or_else(|| "failed".to_string(), |b| format!("{b:.6}"));
        let found = match (&row.found_at, &row.started_from) {
            (Some(at), Some(from)) => format!("{at} ({})", shape_label(from)),
            (Some(at), None) => format!("{at}"),
            (None, _) => "-".to_string(),
        };
        let config = row.best_config.as_ref().map_or_else(String::new, |c| {
            c.iter().map(|(k, v)| format!("{k}={}", scalar_text(v))).collect::<Vec<_>>().join(" ")
        });
        lines.push(format!(
            "{:<24} {:>6} {:>8} {:>9.1} {:>12}  {:<20} {config}",
            shape_label(&row.shape),
            row.evaluations,
            row.measured,
            row.wall_s,
            best,
            found
        ));
    }
    let evaluations: usize = rows.iter().map(|r| r.evaluations).sum();
    let measured: usize = rows.iter().map(|r| r.measured).sum();
    let wall: f64 = rows.iter().map(|r| r.wall_s).sum();
    lines.push(format!("{:<24} {evaluations:>6} {measured:>8} {wall:>9.1}", format!("{} sizes", rows.len())));
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shape(value: Json) -> Shape {
        value.as_object().cloned().expect("an object")
    }

    #[test]
    fn sizes_of_another_dtype_or_other_variables_teach_nothing() {
        let tuned = |value: Json, tuning: i64| TunedShape { shape: shape(value), tuning };
        let transfer = Transfer {
            shape: shape(json!({"M": 32, "dtype": "fp16"})),
            tuned: vec![
                tuned(json!({"M": 32, "dtype": "bf16"}), 1),
                tuned(json!({"M": 32}), 2),
                tuned(json!({"dtype": "fp16", "M": 4096}), 3),
            ],
            independent: false,
        };
        assert_eq!(transfer.nearest().map(|t| t.tuning), Some(3), "the same variables in another order are near");
        assert_eq!(Transfer { tuned: transfer.tuned[..2].to_vec(), ..transfer.clone() }.nearest(), None);
    }

    #[test]
    fn a_size_learns_from_the_nearest_tuned_size_ties_going_to_the_smaller() {
        let tuned = |n: i64, tuning: i64| TunedShape { shape: shape(json!({"M": n})), tuning };
        let transfer = |n: i64| Transfer {
            shape: shape(json!({"M": n})),
            tuned: vec![tuned(256, 1), tuned(16, 2), tuned(64, 3)],
            independent: false,
        };
        assert_eq!(transfer(48).nearest().map(|t| t.tuning), Some(3));
        assert_eq!(transfer(32).nearest().map(|t| t.tuning), Some(2));
        assert_eq!(transfer(4096).nearest().map(|t| t.tuning), Some(1));
        assert_eq!(Transfer { independent: true, ..transfer(48) }.nearest(), None);
    }

    #[test]
    fn size_lists_that_cannot_make_a_run_are_refused_saying_what_to_do() {
        let sizes = |values: Json| -> Vec<Shape> {
            values.as_array().unwrap().iter().map(|v| v.as_object().cloned().unwrap()).collect()
        };
        assert_eq!(check_shapes(&[]), Err(ShapesError::Empty));
        assert_eq!(
            check_shapes(&sizes(json!([{"M": 1}, {"M": 2}, {"M": 1}]))).map_err(|e| e.to_string()),
            Err("shapes lists M=1 twice: list each size once".into())
        );
        let mixed = check_shapes(&sizes(json!([{"M": 1}, {"N": 2}]))).unwrap_err().to_string();
        assert!(mixed.contains("give every size the same variables"), "{mixed}");
        assert!(check_shapes(&sizes(json!([{"M": 1}, {}])))
            .unwrap_err()
            .to_string()
            .contains("size 2 names no variable"));
        assert_eq!(check_shapes(&sizes(json!([{"M": 1, "dtype": "fp8"}, {"M": 1, "dtype": "fp16"}]))), Ok(()));
    }

    #[test]
    fn the_report_has_a_line_per_size_with_where_its_best_was_found_and_the_totals() {
        let row = |m: i64, from: Option<i64>, found_at: usize| ShapeRow {
            shape: shape(json!({"M": m})),
            evaluations: 30,
            measured: 28,
            wall_s: 12.5,
            best: Some(0.25),
            best_config: Some(shape(json!({"BLOCK": 64}))),
            found_at: Some(found_at),
            started_from: from.map(|n| shape(json!({"M": n}))),
            tuning: m,
        };
        let table = shapes_table(&[row(16, None, 12), row(64, Some(16), 1)], "time");
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4, "{table}");
        assert!(lines[2].contains("1 (M=16)") && lines[2].contains("BLOCK=64"), "{table}");
        assert!(lines[3].starts_with("2 sizes") && lines[3].contains("60") && lines[3].contains("25.0"), "{table}");
    }
}
