//! What a tuning optimises when it is not the kernel time alone: `energy`, `edp` (energy
//! times time), or any arithmetic expression over the time and the observables the
//! benchmark worker measures through NVML (power, energy per launch, clocks,
//! temperature); and the Pareto front of two of them.
//!
//! Every front (the spec's `[objective]`, `--objective`, Python's `objective=`) parses its
//! text with [`Formula::parse`], so the names users may write are declared once, here, in
//! [`OBSERVABLES`]: kerntune's metric keys (`energy_J`...), short names (`energy`) and
//! Kernel Tuner's observer names (`nvml_energy`...).

use kerntune_space::{Expression, Setting, Value};
use kerntune_store::{Landscape, Objective, Status};
use serde_json::{Map, Value as Json};

/// One quantity measured with every evaluation, under the metric key it is stored with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observable {
    /// The key in an evaluation's metrics.
    pub key: &'static str,
    /// Other names an objective may use for it: a short one and Kernel Tuner's.
    pub aliases: &'static [&'static str],
    /// Kernel Tuner's result key for it (its `NVMLObserver` observable), where it has one.
    pub kernel_tuner: Option<&'static str>,
    /// Read from the energy counter, so it is measured only when asked for (it costs an
    /// extra block of launches per configuration; see the benchmark worker's `energy`).
    pub energy: bool,
}

/// The median kernel time in ms: always measured, the objective by default.
pub const TIME: &str = "time";

/// What the benchmark worker can report besides the time, where NVML reads the GPU.
pub const OBSERVABLES: [Observable; 5] = [
    Observable { key: "energy_J", aliases: &["energy"], kernel_tuner: Some("nvml_energy"), energy: true },
    Observable { key: "power_W", aliases: &["power"], kernel_tuner: Some("nvml_power"), energy: true },
    Observable { key: "clock_MHz", aliases: &["clock"], kernel_tuner: Some("core_freq"), energy: false },
    Observable { key: "memory_clock_MHz", aliases: &[], kernel_tuner: Some("mem_freq"), energy: false },
    Observable { key: "temperature_C", aliases: &[], kernel_tuner: Some("temperature"), energy: false },
];

/// Energy-delay product: `energy_J * time` (J·ms), a name of its own.
const EDP: &str = "edp";

/// The observable a name stands for: its key, a short name or Kernel Tuner's name.
pub fn observable(name: &str) -> Option<&'static Observable> {
    OBSERVABLES.iter().find(|o| o.key == name || o.aliases.contains(&name) || o.kernel_tuner == Some(name))
}

/// An observable's value among `metrics`: under its key, or under Kernel Tuner's name
/// (in a recorded Kernel Tuner cache).
fn lookup(metrics: &Map<String, Json>, observable: &Observable) -> Option<f64> {
    metrics.get(observable.key).or_else(|| observable.kernel_tuner.and_then(|k| metrics.get(k))).and_then(Json::as_f64)
}

/// The measured values among an evaluation's `metrics`, under kerntune's keys, in the
/// order of [`OBSERVABLES`].
pub fn observed(metrics: &Map<String, Json>) -> Map<String, Json> {
    OBSERVABLES.iter().filter_map(|o| Some((o.key.to_string(), Json::from(lookup(metrics, o)?)))).collect()
}

/// Gives every measured record of a recorded landscape the value of `requested` in place
/// of the objective it was recorded with, from its time and measured values (Kernel
/// Tuner's `nvml_energy`... included), so that a simulation replays an energy objective.
/// The objective joins the kernel's name, which keeps its results apart in a store.
pub fn rescore(landscape: &mut Landscape, requested: &Requested) -> Result<(), String> {
    let recorded_time = landscape.objective.name == TIME;
    for record in &mut landscape.records {
        let evaluation = &mut record.evaluation;
        let Some(recorded) = evaluation.objective.filter(|_| evaluation.status == Status::Ok) else { continue };
        let time = if recorded_time { Some(recorded) } else { evaluation.metrics.get(TIME).and_then(Json::as_f64) };
        let Some(time) = time else {
            return Err(format!("the recorded landscape has no time for configuration {:?}", record.config));
        };
        if recorded_time {
            evaluation.metrics.insert(TIME.into(), Json::from(time));
        }
        let value = match &requested.formula {
            None => time,
            Some(formula) => formula
                .evaluate(&[], time, &evaluation.metrics)
                .map_err(|e| format!("{e}, in the recorded landscape (configuration {:?})", record.config))?,
        };
        evaluation.objective = Some(value);
    }
    landscape.kernel_name = format!("{} [objective {}]", landscape.kernel_name, requested.objective.name);
    landscape.objective = requested.objective.clone();
    Ok(())
}

/// Every name a formula may use beyond the caller's own, in the order [`Formula`] lays
/// out its values: `time`, then each observable's key, short names and Kernel Tuner's
/// name, then `edp`.
fn measured_names() -> Vec<&'static str> {
    let mut names = vec![TIME];
    for observable in &OBSERVABLES {
        names.push(observable.key);
        names.extend(observable.aliases);
        names.extend(observable.kernel_tuner);
    }
    names.push(EDP);
    names
}

/// An objective as users write it: `time`, `energy`, `edp`, or an expression such as
/// `energy*time**2` over the time, the observables and the caller's own names (problem
/// variables and parameters), whose values come first.
#[derive(Debug, Clone)]
pub struct Formula {
    expression: Expression,
    /// How many of the names are the caller's.
    leading: usize,
}

impl Formula {
    /// Parses `text` over the caller's `leading` names and the measured ones; an unknown
    /// name is an error that lists what is allowed.
    pub fn parse(text: &str, leading: &[&str]) -> Result<Formula, String> {
        let mut names: Vec<&str> = leading.to_vec();
        let measured = measured_names();
        names.extend(&measured);
        let expression = Expression::parse(text, &names).map_err(|e| {
            format!("objective {e} (measured values: time, {}, edp)", OBSERVABLES.map(|o| o.key).join(", "))
        })?;
        Ok(Formula { expression, leading: leading.len() })
    }

    pub fn text(&self) -> &str {
        self.expression.text()
    }

    /// The measured names the formula uses (`time`, `energy`...), as written.
    fn measured_used(&self) -> impl Iterator<Item = &'static str> + '_ {
        let measured = measured_names();
        self.expression.variables().iter().filter_map(move |v| v.checked_sub(self.leading).map(|i| measured[i]))
    }

    /// Whether its value needs the energy counter (energy, power or `edp`).
    pub fn needs_energy(&self) -> bool {
        self.measured_used().any(|name| name == EDP || observable(name).is_some_and(|o| o.energy))
    }

    /// Whether it depends on nothing measured but the time (and on none of the caller's
    /// names in `varying`, such as the parameters): then a configuration clearly slower
    /// in time is clearly worse, and stopping it early is sound.
    pub fn monotone_in_time(&self, varying: std::ops::Range<usize>) -> bool {
        self.measured_used().all(|name| name == TIME)
            && self.expression.variables().iter().all(|v| !varying.contains(v))
    }

    /// Whether it uses any of the caller's names in `range`.
    pub fn uses(&self, range: std::ops::Range<usize>) -> bool {
        self.expression.variables().iter().any(|v| range.contains(v))
    }

    /// The value for the caller's `leading` values, a median time of `time_ms` and the
    /// evaluation's `metrics`; an error names a value the formula needs that was not
    /// measured.
    pub fn evaluate(&self, leading: &[Value], time_ms: f64, metrics: &Map<String, Json>) -> Result<f64, String> {
        let mut values: Vec<Value> = leading.to_vec();
        values.resize(self.leading, Value::Int(0));
        let energy = observable("energy_J").and_then(|o| lookup(metrics, o));
        for name in measured_names() {
            let value = match name {
                TIME => Some(time_ms),
                EDP => energy.map(|e| e * time_ms),
                _ => observable(name).and_then(|o| lookup(metrics, o)),
            };
            values.push(value.map_or(Value::Float(f64::NAN), Value::Float));
        }
        if let Some(missing) = self.measured_used().find(|name| {
            let measured = if *name == EDP { observable("energy_J") } else { observable(name) };
            measured.is_some_and(|o| lookup(metrics, o).is_none())
        }) {
            return Err(format!(
                "objective '{}': {missing} was not measured (NVML reads it on NVIDIA GPUs)",
                self.text()
            ));
        }
        let expression = &self.expression;
        let value = expression.evaluate_with(&values).map_err(|e| format!("objective '{expression}': {e}"))?;
        value.as_number().ok_or_else(|| format!("objective '{expression}' is {value}"))
    }
}

/// The objective a front was asked for by name or expression (`--objective`, Python's
/// `objective=`), with its direction: as given, else lower is better for time, energy,
/// power and `edp`, higher for rates ([`Objective::named`]). `None` for the time itself,
/// which needs no formula.
pub fn requested(text: &str, higher_is_better: Option<bool>, leading: &[&str]) -> Result<Requested, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("objective: give a name (time, energy, edp) or an expression such as energy*time**2".into());
    }
    let mut objective = Objective::named(text);
    if let Some(higher) = higher_is_better {
        objective.higher_is_better = higher;
    }
    let formula = if text == TIME { None } else { Some(Formula::parse(text, leading)?) };
    Ok(Requested { objective, formula })
}

/// An objective and, unless it is the time itself, its formula.
#[derive(Debug, Clone)]
pub struct Requested {
    pub objective: Objective,
    pub formula: Option<Formula>,
}

/// Pareto axes that cannot make a front.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParetoError {
    #[error("Pareto axis '{0}': use time or a measured value ({list})", list = OBSERVABLES.map(|o| o.key).join(", "))]
    UnknownAxis(String),
    #[error("{} '{}': give two measured values, such as time,energy", Setting::PARETO, .0)]
    NotTwo(String),
    #[error("{setting} '{text}': the two axes are the same ({axis})", setting = Setting::PARETO)]
    Same { text: String, axis: &'static str },
}

/// The metric key under which a Pareto axis is stored: `time`, or an observable's key.
pub fn axis_key(name: &str) -> Result<&'static str, ParetoError> {
    let name = name.trim();
    if name == TIME {
        return Ok(TIME);
    }
    observable(name).map(|o| o.key).ok_or_else(|| ParetoError::UnknownAxis(name.to_string()))
}

/// Parses the `pareto` setting (`time,energy`): two distinct axes, each lower-is-better.
pub fn pareto_axes(text: &str) -> Result<[&'static str; 2], ParetoError> {
    let axes: Vec<&str> = text.split(',').collect();
    let [a, b] = axes.as_slice() else {
        return Err(ParetoError::NotTwo(text.to_string()));
    };
    let (a, b) = (axis_key(a)?, axis_key(b)?);
    if a == b {
        return Err(ParetoError::Same { text: text.to_string(), axis: a });
    }
    Ok([a, b])
}

/// The indexes of the points no other point dominates (at most as large on both axes and
/// smaller on one), both axes lower-is-better, sorted by the first axis. Points with a
/// value that is not finite take no part; of equal points the first is kept.
pub fn pareto_front(points: &[[f64; 2]]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len()).filter(|&i| points[i].iter().all(|v| v.is_finite())).collect();
    order.sort_by(|&a, &b| points[a][0].total_cmp(&points[b][0]).then(points[a][1].total_cmp(&points[b][1])));
    let mut front = Vec::new();
    let mut best_second = f64::INFINITY;
    for i in order {
        // In order of the first axis, a point is on the front when it improves the second.
        if points[i][1] < best_second {
            best_second = points[i][1];
            front.push(i);
        }
    }
    front
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn metrics(energy: f64, power: f64) -> Map<String, Json> {
        let Json::Object(map) = json!({"energy_J": energy, "power_W": power, "clock_MHz": 1980}) else {
            unreachable!("a literal object")
        };
        map
    }

    #[test]
    fn energy_edp_and_an_expression_evaluate_over_the_measured_values() {
        let m = metrics(0.5, 250.0);
        let value = |text: &str| Formula::parse(text, &[]).and_then(|f| f.evaluate(&[], 2.0, &m));
        assert_eq!(value("energy"), Ok(0.5));
        assert_eq!(value("edp"), Ok(1.0));
        assert_eq!(value("energy*time**2"), Ok(2.0));
        assert_eq!(value("nvml_energy / energy_J"), Ok(1.0));
        assert_eq!(value("power_W / clock_MHz"), Ok(250.0 / 1980.0));
        assert_eq!(value("time"), Ok(2.0));
    }

    #[test]
    fn the_callers_names_come_first() {
        let formula = Formula::parse("n / time / power", &["n", "block"]).expect("parses");
        let value = formula.evaluate(&[Value::Int(1000), Value::Int(128)], 2.0, &metrics(0.5, 250.0));
        assert_eq!(value, Ok(2.0));
        assert!(formula.uses(0..1) && !formula.uses(1..2));
    }

    #[test]
    fn an_unknown_name_is_an_error_that_lists_what_is_measured() {
        let error = Formula::parse("enrgy * time", &["n"]).expect_err("unknown name");
        assert!(error.contains("enrgy") && error.contains("energy_J, power_W"), "{error}");
        assert!(requested("  ", None, &[]).is_err());
        assert!(Formula::parse("energy *", &[]).is_err());
    }

    #[test]
    fn a_value_that_was_not_measured_is_named() {
        let formula = Formula::parse("edp", &[]).expect("parses");
        let error = formula.evaluate(&[], 1.0, &Map::new()).expect_err("no energy");
        assert_eq!(error, "objective 'edp': edp was not measured (NVML reads it on NVIDIA GPUs)");
        let time = Formula::parse("time * 2", &[]).expect("parses");
        assert_eq!(time.evaluate(&[], 1.5, &Map::new()), Ok(3.0));
    }

    #[test]
    fn only_energy_and_power_need_the_energy_counter() {
        let needs = |text: &str| Formula::parse(text, &[]).expect("parses").needs_energy();
        assert!(needs("energy") && needs("edp") && needs("nvml_power * 2") && needs("energy_J*time**2"));
        assert!(!needs("time") && !needs("clock_MHz") && !needs("core_freq + temperature"));
    }

    #[test]
    fn early_stop_is_sound_only_for_functions_of_time() {
        let formula = |text: &str| Formula::parse(text, &["n", "block"]).expect("parses");
        assert!(formula("n / time").monotone_in_time(1..2));
        assert!(!formula("block * time").monotone_in_time(1..2));
        assert!(!formula("energy").monotone_in_time(1..2));
        assert!(!formula("time * clock").monotone_in_time(1..2));
    }

    #[test]
    fn a_request_takes_the_direction_given_or_the_names_default() {
        let energy = requested("energy", None, &[]).expect("parses");
        assert!(!energy.objective.higher_is_better && energy.formula.is_some());
        let rate = requested("1 / edp", Some(true), &[]).expect("parses");
        assert!(rate.objective.higher_is_better);
        let time = requested("time", None, &[]).expect("parses");
        assert!(time.formula.is_none() && time.objective == Objective::time());
    }

    #[test]
    fn pareto_axes_name_two_different_measured_values() {
        assert_eq!(pareto_axes("time,energy"), Ok(["time", "energy_J"]));
        assert_eq!(pareto_axes("nvml_power, time"), Ok(["power_W", "time"]));
        assert!(pareto_axes("time").is_err());
        assert_eq!(
            pareto_axes("energy,energy_J"),
            Err(ParetoError::Same { text: "energy,energy_J".into(), axis: "energy_J" })
        );
        assert_eq!(pareto_axes("time,volts"), Err(ParetoError::UnknownAxis("volts".into())));
    }

    #[test]
    fn the_front_keeps_the_points_nothing_dominates() {
        // (time, energy): 0 fast and hungry, 1 slow and frugal, 2 dominated by 0, 3 in
        // between, 4 a copy of 1, 5 not measured.
        let points = [[1.0, 5.0], [4.0, 1.0], [2.0, 6.0], [2.0, 3.0], [4.0, 1.0], [f64::NAN, 0.1]];
        assert_eq!(pareto_front(&points), [0, 3, 1]);
        assert!(pareto_front(&[]).is_empty());
        assert_eq!(pareto_front(&[[1.0, 1.0]]), [0]);
    }

    #[test]
    fn the_front_agrees_with_the_definition_on_a_grid() {
        // Every point of a small grid against the definition, by brute force.
        let points: Vec<[f64; 2]> =
            (0..40).map(|i| [f64::from((i * 7) % 11), f64::from((i * 5) % 13 + (i * 3) % 4)]).collect();
        let dominated = |i: usize| {
            points
                .iter()
                .any(|q| q[0] <= points[i][0] && q[1] <= points[i][1] && (q[0] < points[i][0] || q[1] < points[i][1]))
        };
        let front = pareto_front(&points);
        for i in 0..points.len() {
            let duplicate_of_earlier = points[..i].contains(&points[i]);
            assert_eq!(front.contains(&i), !dominated(i) && !duplicate_of_earlier, "point {i} {:?}", points[i]);
        }
    }
}
