//! How long a long exhaustive search will take, said once near its start.
//!
//! Brute force over a large space (Kernel Tuner's default strategy: its convolution
//! example has 1.87 million valid configurations) runs for days without a word. A [`Forecast`]
//! watches the search's first evaluations and gives one [`Pace`]: the configurations left
//! and the time each took so far, measured, not guessed, since a configuration costs
//! anything from milliseconds to seconds depending on the kernel and the machine. Fronts
//! turn it into one line naming their own options that bound the search; nothing stops.

use kerntune_engine::{Event, Search};

/// A brute force with more configurations to evaluate than this, and no time limit, is
/// forecast.
pub const LONG_SEARCH: usize = 10_000;
/// Measured evaluations the pace is taken over, after the first: the first one also
/// paid for starting the workers.
const PACED: usize = 32;

/// Watches a search's progress for its [`Pace`]; see the module's documentation.
#[derive(Debug)]
pub struct Forecast {
    /// Configurations the search will evaluate.
    planned: usize,
    /// Backend clock at the first measured evaluation.
    first_s: Option<f64>,
    measured: usize,
    said: bool,
}

/// The pace of a long search: what is left, and what each configuration took so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Pace {
    /// Configurations not yet evaluated.
    pub remaining: usize,
    /// Configurations in the whole search.
    pub planned: usize,
    /// Wall time per configuration over the evaluations after the first.
    pub seconds_each: f64,
    /// Evaluations the pace was measured over.
    pub over: usize,
}

impl Forecast {
    /// A forecast for `search` over `space_size` configurations, where it is a brute force
    /// of more than [`LONG_SEARCH`] of them with no time limit; `None` otherwise.
    pub fn of(search: &Search, space_size: usize) -> Option<Forecast> {
        let budget = &search.budget;
        let planned = budget.max_fevals.unwrap_or(space_size).min(space_size);
        (search.strategy_name == "brute_force" && budget.time_limit.is_none() && planned > LONG_SEARCH)
            .then_some(Forecast { planned, first_s: None, measured: 0, said: false })
    }

    /// Follows one progress event; returns the pace once, when it is known.
    pub fn on_event(&mut self, event: &Event<'_>) -> Option<Pace> {
        match event {
            Event::Started { from_store, .. } => {
                self.started(*from_store);
                None
            }
            Event::Evaluated { point, .. } => self.evaluated(point.elapsed_s, point.from_store),
        }
    }

    /// The store already answers `from_store` of the configurations.
    pub fn started(&mut self, from_store: usize) {
        self.planned = self.planned.saturating_sub(from_store);
        self.said |= self.planned <= LONG_SEARCH;
    }

    /// One evaluation arrived at `elapsed_s` on the backend's clock; those the store
    /// answered cost nothing and say nothing of the pace.
    pub fn evaluated(&mut self, elapsed_s: f64, from_store: bool) -> Option<Pace> {
        if self.said || from_store {
            return None;
        }
        self.measured += 1;
        let first_s = *self.first_s.get_or_insert(elapsed_s);
        if self.measured <= PACED {
            return None;
        }
        self.said = true;
        Some(Pace {
            remaining: self.planned.saturating_sub(self.measured),
            planned: self.planned,
            seconds_each: (elapsed_s - first_s).max(0.0) / PACED as f64,
            over: PACED,
        })
    }
}

impl Pace {
    /// The time the rest of the search takes at this pace.
    pub fn remaining_seconds(&self) -> f64 {
        self.seconds_each * self.remaining as f64
    }

    /// The line a front prints: the size, the pace, the time left, and `bounds`, the
    /// front's own words for what bounds a search.
    pub fn line(&self, bounds: &str) -> String {
        format!(
            "brute force over {} configurations: {:.3} s each (measured over the first {}), so about {} more; {bounds}",
            self.planned,
            self.seconds_each,
            self.over,
            duration_words(self.remaining_seconds())
        )
    }
}

/// A duration in the largest unit that keeps it readable: `40 s`, `12 min`, `3.5 h`, `9.1 days`.
pub fn duration_words(seconds: f64) -> String {
    match seconds {
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s if s < 172_800.0 => format!("{:.1} h", s / 3600.0),
        s => format!("{:.1} days", s / 86_400.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forecast(planned: usize) -> Forecast {
        Forecast { planned, first_s: None, measured: 0, said: false }
    }

    #[test]
    fn only_an_unbounded_brute_force_over_a_large_space_is_forecast() {
        use kerntune_engine::SearchOptions;
        let search = |options: SearchOptions| options.resolve("brute_force").expect("a search");
        let large = LONG_SEARCH + 1;
        assert!(Forecast::of(&search(SearchOptions::default()), large).is_some());
        assert!(Forecast::of(&search(SearchOptions::default()), LONG_SEARCH).is_none());
        let bounded = SearchOptions { max_fevals: Some(500), ..SearchOptions::default() };
        assert!(Forecast::of(&search(bounded), large).is_none());
        let timed = SearchOptions { time_limit: Some("10m".parse().expect("a duration")), ..SearchOptions::default() };
        assert!(Forecast::of(&search(timed), large).is_none());
        let other = SearchOptions { strategy: Some("default".into()), ..SearchOptions::default() };
        assert!(Forecast::of(&search(other), large).is_none());
    }

    #[test]
    fn the_pace_comes_once_from_the_evaluations_after_the_first() {
        let mut watch = forecast(1_000_000);
        watch.started(0);
        // Workers start for 5 s, then each configuration takes 0.5 s.
        let mut paces = Vec::new();
        for i in 0..100 {
            paces.extend(watch.evaluated(5.0 + 0.5 * i as f64, false));
        }
        assert_eq!(paces.len(), 1, "said once");
        let pace = &paces[0];
        assert!((pace.seconds_each - 0.5).abs() < 1e-9, "{pace:?}");
        assert_eq!(pace.remaining, 1_000_000 - (PACED + 1));
        assert!((pace.remaining_seconds() - 0.5 * pace.remaining as f64).abs() < 1e-6);
    }

    #[test]
    fn answers_from_the_store_neither_count_nor_pace() {
        let mut watch = forecast(50_000);
        watch.started(20_000);
        for _ in 0..1000 {
            assert_eq!(watch.evaluated(0.0, true), None);
        }
        let pace = (0..=PACED).find_map(|i| watch.evaluated(i as f64, false)).expect("a pace");
        assert_eq!((pace.planned, pace.seconds_each), (30_000, 1.0));
    }

    #[test]
    fn a_search_the_store_mostly_answers_is_not_forecast() {
        let mut watch = forecast(LONG_SEARCH + 10);
        watch.started(20);
        assert!((0..100).all(|i| watch.evaluated(i as f64, false).is_none()));
    }

    #[test]
    fn the_line_names_the_size_the_time_left_and_the_fronts_bounds() {
        let pace = Pace { remaining: 2_750_000, planned: 2_752_512, seconds_each: 0.25, over: PACED };
        let line = pace.line("bound it with max_fevals");
        assert!(
            line.starts_with("brute force over 2752512 configurations: 0.250 s each (measured over the first 32)"),
            "{line}"
        );
        assert!(line.contains("about 8.0 days more; bound it with max_fevals"), "{line}");
        assert!(!line.contains('\n'));
    }

    #[test]
    fn durations_read_in_a_sensible_unit() {
        assert_eq!(duration_words(42.0), "42 s");
        assert_eq!(duration_words(720.0), "12 min");
        assert_eq!(duration_words(3.5 * 3600.0), "3.5 h");
        assert_eq!(duration_words(9.1 * 86_400.0), "9.1 days");
    }
}
