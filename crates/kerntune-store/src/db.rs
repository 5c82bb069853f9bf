//! The SQLite results database.
//!
//! A *tuning* is one kernel (by fingerprint) on one device for one problem; its
//! *evaluations* are keyed by the configuration's canonical JSON. Each evaluation is
//! committed on its own the moment it is recorded, in WAL mode, so a run killed at any
//! point loses nothing already recorded, and a rerun finds every row it needs.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{Map, Value as Json};

use kerntune_space::{params_from_json, Param};

use crate::{Costs, Evaluation, Objective, Status, StoreError};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tunings (
    id INTEGER PRIMARY KEY,
    kernel TEXT NOT NULL,
    kernel_name TEXT NOT NULL,
    device TEXT NOT NULL,
    problem TEXT NOT NULL,
    params TEXT NOT NULL,
    objective TEXT NOT NULL,
    higher_is_better INTEGER NOT NULL,
    created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (kernel, device, problem)
);
CREATE TABLE IF NOT EXISTS evaluations (
    tuning INTEGER NOT NULL REFERENCES tunings(id),
    config TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    objective REAL,
    samples TEXT NOT NULL,
    metrics TEXT NOT NULL,
    compile_s REAL NOT NULL,
    verify_s REAL NOT NULL,
    benchmark_s REAL NOT NULL,
    framework_s REAL NOT NULL,
    strategy_s REAL NOT NULL,
    created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (tuning, config)
);
CREATE TABLE IF NOT EXISTS artifacts (
    tuning INTEGER NOT NULL REFERENCES tunings(id),
    config TEXT NOT NULL,
    kind TEXT NOT NULL,
    data BLOB NOT NULL,
    provenance TEXT NOT NULL,
    created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (tuning, config, kind)
);
";

const SCHEMA_VERSION: i64 = 1;

/// A binary kept for one configuration (a compiled cubin, a tuned schedule).
#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    pub config: Map<String, Json>,
    pub data: Vec<u8>,
    /// Where the binary came from, in words (a search report, the compiler).
    pub provenance: String,
}

/// What identifies a tuning, and what is needed to export it.
#[derive(Debug, Clone, PartialEq)]
pub struct TuningInfo {
    /// Fingerprint of everything that determines the kernel's behaviour and timing.
    pub kernel: String,
    pub kernel_name: String,
    pub device: String,
    /// The problem (sizes), as JSON text.
    pub problem: String,
    pub params: Vec<Param>,
    pub objective: Objective,
}

/// A tuning as listed by [`Store::tunings`].
#[derive(Debug, Clone)]
pub struct TuningSummary {
    pub id: TuningId,
    pub info: TuningInfo,
    pub evaluations: usize,
    pub failed: usize,
    pub created: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TuningId(i64);

impl TuningId {
    /// The number by which people name the tuning (`kerntune report --tuning N`).
    pub fn get(self) -> i64 {
        self.0
    }
}

/// One stored evaluation with its configuration.
#[derive(Debug, Clone)]
pub struct StoredEvaluation {
    pub config: Map<String, Json>,
    pub evaluation: Evaluation,
    pub created: String,
}

/// The parameters as a JSON object of `name: [values]`, the form the store and the file
/// formats use.
pub fn params_json(params: &[Param]) -> Json {
    Json::Object(
        params
            .iter()
            .map(|p| (p.name().to_string(), Json::Array(p.values().iter().map(|v| v.to_json()).collect())))
            .collect(),
    )
}

/// The canonical text of a configuration, used as its key.
pub fn config_key(config: &Map<String, Json>) -> String {
    Json::Object(config.clone()).to_string()
}

#[derive(Debug)]
pub struct Store {
    connection: Connection,
    path: String,
}

impl Store {
    /// Where results go unless told otherwise: `$KERNTUNE_DB`, else `kerntune/results.db`
    /// in the user's cache folder (`$XDG_CACHE_HOME`, else `~/.cache`).
    pub fn default_path() -> std::path::PathBuf {
        use std::path::PathBuf;
        std::env::var_os("KERNTUNE_DB")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|c| PathBuf::from(c).join("kerntune/results.db")))
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/kerntune/results.db")))
            .unwrap_or_else(|| PathBuf::from("kerntune-results.db"))
    }

    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let name = path.display().to_string();
        if path.is_dir() {
            return Err(StoreError::Open { path: name, reason: "is a directory; name a file in it".into() });
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| StoreError::Io { path: name.clone(), source })?;
        }
        let opened = Connection::open(path)
            .map_err(|source| StoreError::Database { path: name.clone(), source })
            .and_then(|connection| Store::initialise(connection, name.clone(), true));
        match opened {
            Err(StoreError::Database { source: rusqlite::Error::SqliteFailure(code, _), .. })
                if matches!(
                    code.code,
                    rusqlite::ErrorCode::CannotOpen
                        | rusqlite::ErrorCode::ReadOnly
                        | rusqlite::ErrorCode::PermissionDenied
                ) =>
            {
                Err(StoreError::Open { path: name, reason: why_not_writable(path) })
            }
            other => other,
        }
    }

    /// A database that lives only as long as this value.
    pub fn in_memory() -> Result<Store, StoreError> {
        let connection =
            Connection::open_in_memory().map_err(|source| StoreError::Database { path: ":memory:".into(), source })?;
        Store::initialise(connection, ":memory:".into(), false)
    }

    fn initialise(connection: Connection, path: String, on_disk: bool) -> Result<Store, StoreError> {
        let store = Store { connection, path };
        if on_disk {
            // WAL keeps every committed row through a crash; NORMAL sync is safe in WAL
            // against process death (only a power cut can lose the last commits).
            store.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")?;
        }
        store.connection.busy_timeout(std::time::Duration::from_secs(10)).map_err(|e| store.error(e))?;
        let version: i64 =
            store.connection.query_row("PRAGMA user_version", [], |row| row.get(0)).map_err(|e| store.error(e))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::format(
                &store.path,
                format!("written by a newer kerntune (schema {version}; this one reads up to {SCHEMA_VERSION})"),
            ));
        }
        store.exec(SCHEMA)?;
        store.exec(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))?;
        Ok(store)
    }

    fn exec(&self, sql: &str) -> Result<(), StoreError> {
        self.connection.execute_batch(sql).map_err(|e| self.error(e))
    }

    fn error(&self, source: rusqlite::Error) -> StoreError {
        let source = match source {
            rusqlite::Error::SqliteFailure(code, _) if code.code == rusqlite::ErrorCode::NotADatabase => {
                return StoreError::format(&self.path, "not a kerntune results database (not SQLite)");
            }
            other => other,
        };
        StoreError::Database { path: self.path.clone(), source }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// The tuning with this identity, created if new.
    pub fn tuning(&self, info: &TuningInfo) -> Result<TuningId, StoreError> {
        self.connection
            .execute(
                "INSERT OR IGNORE INTO tunings (kernel, kernel_name, device, problem, params, objective, higher_is_better)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    info.kernel,
                    info.kernel_name,
                    info.device,
                    info.problem,
                    params_json(&info.params).to_string(),
                    info.objective.name,
                    info.objective.higher_is_better
                ],
            )
            .map_err(|e| self.error(e))?;
        self.connection
            .query_row(
                "SELECT id FROM tunings WHERE kernel = ?1 AND device = ?2 AND problem = ?3",
                params![info.kernel, info.device, info.problem],
                |row| row.get(0).map(TuningId),
            )
            .map_err(|e| self.error(e))
    }

    /// The tuning with this identity, if it exists.
    pub fn find_tuning(&self, info: &TuningInfo) -> Result<Option<TuningId>, StoreError> {
        self.connection
            .query_row(
                "SELECT id FROM tunings WHERE kernel = ?1 AND device = ?2 AND problem = ?3",
                params![info.kernel, info.device, info.problem],
                |row| row.get(0).map(TuningId),
            )
            .optional()
            .map_err(|e| self.error(e))
    }

    /// The tuning numbered `number` (as [`TuningId::get`] gives it), if the store holds it.
    pub fn tuning_numbered(&self, number: i64) -> Result<Option<TuningId>, StoreError> {
        self.connection
            .query_row("SELECT id FROM tunings WHERE id = ?1", params![number], |row| row.get(0).map(TuningId))
            .optional()
            .map_err(|e| self.error(e))
    }

    /// Records one evaluation, committed before this returns. A later evaluation of the
    /// same configuration replaces the earlier one.
    pub fn record(
        &self,
        tuning: TuningId,
        config: &Map<String, Json>,
        evaluation: &Evaluation,
    ) -> Result<(), StoreError> {
        let costs = &evaluation.costs;
        self.connection
            .execute(
                "INSERT OR REPLACE INTO evaluations
                 (tuning, config, status, reason, objective, samples, metrics, compile_s, verify_s, benchmark_s, framework_s, strategy_s)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    tuning.0,
                    config_key(config),
                    evaluation.status.as_str(),
                    evaluation.reason,
                    evaluation.objective.filter(|o| o.is_finite()),
                    Json::from(evaluation.samples.clone()).to_string(),
                    Json::Object(evaluation.metrics.clone()).to_string(),
                    costs.compile_s,
                    costs.verify_s,
                    costs.benchmark_s,
                    costs.framework_s,
                    costs.strategy_s,
                ],
            )
            .map_err(|e| self.error(e))?;
        Ok(())
    }

    /// Every evaluation of a tuning, oldest first.
    pub fn evaluations(&self, tuning: TuningId) -> Result<Vec<StoredEvaluation>, StoreError> {
        let mut statement = self
            .connection
            .prepare(
                "SELECT config, status, reason, objective, samples, metrics, compile_s, verify_s, benchmark_s,
                        framework_s, strategy_s, created
                 FROM evaluations WHERE tuning = ?1 ORDER BY rowid",
            )
            .map_err(|e| self.error(e))?;
        let rows = statement
            .query_map([tuning.0], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, Option<String>>(2)?,
                    row.get::<_, Option<f64>>(3)?,
                    row.get::<_, String>(4)?,
                    row.get::<_, String>(5)?,
                    Costs {
                        compile_s: row.get(6)?,
                        verify_s: row.get(7)?,
                        benchmark_s: row.get(8)?,
                        framework_s: row.get(9)?,
                        strategy_s: row.get(10)?,
                    },
                    row.get::<_, String>(11)?,
                ))
            })
            .map_err(|e| self.error(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (config, status, reason, objective, samples, metrics, costs, created) =
                row.map_err(|e| self.error(e))?;
            let corrupt = |what: &str| StoreError::format(&self.path, format!("corrupt {what} in a stored evaluation"));
            let Ok(Json::Object(config)) = serde_json::from_str(&config) else { return Err(corrupt("configuration")) };
            let status: Status = status.parse().map_err(|_| corrupt("status"))?;
            let samples: Vec<f64> = serde_json::from_str(&samples).map_err(|_| corrupt("samples"))?;
            let Ok(Json::Object(metrics)) = serde_json::from_str(&metrics) else { return Err(corrupt("metrics")) };
            out.push(StoredEvaluation {
                config,
                evaluation: Evaluation { status, reason, objective, samples, costs, metrics },
                created,
            });
        }
        Ok(out)
    }

    /// The tunings of kernel `kernel` (every tuning when `None`), newest first.
    pub fn tunings_of(&self, kernel: Option<&str>) -> Result<Vec<TuningSummary>, StoreError> {
        let mut tunings = self.tunings()?;
        tunings.retain(|t| kernel.is_none_or(|k| t.info.kernel_name == k));
        Ok(tunings)
    }

    /// The one tuning of kernel `kernel` (the only one when `None`): what `kerntune export`
    /// and `kerntune.export` write. None, or several, is an error that names the kernels.
    pub fn one_tuning(&self, kernel: Option<&str>) -> Result<TuningSummary, StoreError> {
        let mut tunings = self.tunings_of(kernel)?;
        match tunings.len() {
            1 => Ok(tunings.remove(0)),
            0 => Err(StoreError::NoTuning { path: self.path.clone(), kernel: kernel.map(str::to_string) }),
            _ => Err(StoreError::SeveralTunings {
                path: self.path.clone(),
                kernels: tunings.iter().map(|t| t.info.kernel_name.clone()).collect::<Vec<_>>().join(", "),
                count: tunings.len(),
            }),
        }
    }

    /// Every tuning in the database, newest first.
    pub fn tunings(&self) -> Result<Vec<TuningSummary>, StoreError> {
        let mut statement = self
            .connection
            .prepare(
                "SELECT t.id, t.kernel, t.kernel_name, t.device, t.problem, t.params, t.objective, t.higher_is_better,
                        t.created, COUNT(e.config), COALESCE(SUM(e.status NOT IN ('ok', 'early_stopped')), 0)
                 FROM tunings t LEFT JOIN evaluations e ON e.tuning = t.id
                 GROUP BY t.id ORDER BY t.id DESC",
            )
            .map_err(|e| self.error(e))?;
        let rows = statement
            .query_map([], |row| {
                Ok((
                    TuningId(row.get(0)?),
                    [row.get::<_, String>(1)?, row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?, row.get(6)?],
                    row.get::<_, bool>(7)?,
                    row.get::<_, String>(8)?,
                    row.get::<_, i64>(9)?,
                    row.get::<_, i64>(10)?,
                ))
            })
            .map_err(|e| self.error(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (
                id,
                [kernel, kernel_name, device, problem, params, objective],
                higher_is_better,
                created,
                count,
                failed,
            ) = row.map_err(|e| self.error(e))?;
            let Ok(Json::Object(params)) = serde_json::from_str(&params) else {
                return Err(StoreError::format(&self.path, "corrupt parameters of a tuning"));
            };
            let params =
                params_from_json(&params).map_err(|source| StoreError::Space { path: self.path.clone(), source })?;
            out.push(TuningSummary {
                id,
                info: TuningInfo {
                    kernel,
                    kernel_name,
                    device,
                    problem,
                    params,
                    objective: Objective { name: objective, higher_is_better },
                },
                evaluations: usize::try_from(count).unwrap_or(0),
                failed: usize::try_from(failed).unwrap_or(0),
                created,
            });
        }
        Ok(out)
    }

    /// Stores a binary (a cubin, a rewritten schedule) for a configuration, with a note
    /// of where it came from.
    pub fn save_artifact(
        &self,
        tuning: TuningId,
        config: &Map<String, Json>,
        kind: &str,
        data: &[u8],
        provenance: &str,
    ) -> Result<(), StoreError> {
        self.connection
            .execute(
                "INSERT OR REPLACE INTO artifacts (tuning, config, kind, data, provenance) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![tuning.0, config_key(config), kind, data, provenance],
            )
            .map_err(|e| self.error(e))?;
        Ok(())
    }

    /// Every stored binary of one kind for a tuning, oldest first.
    pub fn artifacts(&self, tuning: TuningId, kind: &str) -> Result<Vec<Artifact>, StoreError> {
        let found = self.artifacts_where("tuning = ?1 AND kind = ?2", params![tuning.0, kind])?;
        Ok(found.into_iter().map(|(_, artifact)| artifact).collect())
    }

    /// Every stored artifact of one kind, of every tuning, oldest first.
    pub fn artifacts_of_kind(&self, kind: &str) -> Result<Vec<(TuningId, Artifact)>, StoreError> {
        self.artifacts_where("kind = ?1", params![kind])
    }

    /// The stored artifacts that `condition` (SQL over the table's columns, with `values`
    /// for its parameters) selects, oldest first, each with its tuning.
    fn artifacts_where(
        &self,
        condition: &str,
        values: &[&dyn rusqlite::ToSql],
    ) -> Result<Vec<(TuningId, Artifact)>, StoreError> {
        let sql = format!("SELECT tuning, config, data, provenance FROM artifacts WHERE {condition} ORDER BY rowid");
        let mut statement = self.connection.prepare(&sql).map_err(|e| self.error(e))?;
        let rows = statement
            .query_map(values, |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, Vec<u8>>(2)?,
                    row.get::<_, String>(3)?,
                ))
            })
            .map_err(|e| self.error(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (tuning, config, data, provenance) = row.map_err(|e| self.error(e))?;
            let Ok(Json::Object(config)) = serde_json::from_str(&config) else {
                return Err(StoreError::format(&self.path, "corrupt configuration of a stored binary"));
            };
            out.push((TuningId(tuning), Artifact { config, data, provenance }));
        }
        Ok(out)
    }

    /// A stored binary and its provenance.
    pub fn artifact(
        &self,
        tuning: TuningId,
        config: &Map<String, Json>,
        kind: &str,
    ) -> Result<Option<(Vec<u8>, String)>, StoreError> {
        self.connection
            .query_row(
                "SELECT data, provenance FROM artifacts WHERE tuning = ?1 AND config = ?2 AND kind = ?3",
                params![tuning.0, config_key(config), kind],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()
            .map_err(|e| self.error(e))
    }
}

/// Why SQLite could not open `path` for writing, in the system's words ("permission
/// denied"), found by opening it as SQLite would.
fn why_not_writable(path: &Path) -> String {
    match std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path) {
        Err(error) => {
            let text = error.to_string();
            let text = text.split(" (os error").next().unwrap_or(&text).to_lowercase();
            format!("cannot be opened for writing: {text}")
        }
        Ok(_) => "cannot be opened for writing (SQLite refused it; is its folder writable?)".into(),
    }
}
