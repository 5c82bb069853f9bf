//! The set of valid configurations, stored compactly.
//!
//! A configuration is a vector of value indexes, one per parameter. It is stored as one
//! mixed-radix number (its *key*, with the first declared parameter most significant), and
//! the space is the sorted list of keys: 8 bytes a configuration whatever the number of
//! parameters. A configuration's id is its position in that list, so ids follow the
//! lexicographic order of the declared parameters. A bucket directory over the keys makes
//! config→id lookup constant time on average.

use std::collections::TryReserveError;
use std::fmt;

use serde_json::{Map, Value as Json};

use crate::enumerate::{sample_valid, valid_keys};
use crate::memory::{MemoryCap, SpaceEstimate, BYTES_PER_CONFIG, MEMORY_CAP_VARIABLE};
use crate::{Expression, Param, ParseError, Rng, Value};

/// A configuration's position in its [`Space`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConfigId(pub u32);

impl ConfigId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl From<usize> for ConfigId {
    fn from(index: usize) -> Self {
        ConfigId(u32::try_from(index).expect("configuration ids fit in u32"))
    }
}

impl fmt::Display for ConfigId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpaceError {
    #[error("parameter '{name}': {problem}")]
    Param { name: String, problem: String },
    #[error("parameter '{0}' is declared twice")]
    DuplicateParam(String),
    #[error("restriction {}", .0)]
    Restriction(#[from] ParseError),
    #[error("the space is too large: the product of the parameters' value counts exceeds 2^64")]
    TooLarge,
    #[error("the space has more than 2^32 valid configurations")]
    TooManyConfigs,
    #[error("configuration {index}: {problem}")]
    Config { index: usize, problem: String },
    /// Refused before enumerating: the estimate is over the cap.
    #[error(
        "the space is too large to enumerate: {estimate}, over the {cap} cap; tighten the restrictions, \
         draw configurations by sampling instead (`kerntune space FILE --sample N`), \
         or raise the cap ({MEMORY_CAP_VARIABLE}=4G)"
    )]
    TooMuchMemory { estimate: SpaceEstimate, cap: MemoryCap },
    /// The estimate fell short and the enumeration reached the cap.
    #[error(
        "the space is too large to enumerate: more than {configs} valid configurations, over the {cap} cap; \
         tighten the restrictions, draw configurations by sampling instead (`kerntune space FILE --sample N`), \
         or raise the cap ({MEMORY_CAP_VARIABLE}=4G)"
    )]
    MemoryCapReached { configs: usize, cap: MemoryCap },
    /// The machine refused the memory the configurations need, under the cap (a cap raised
    /// past what the machine, or its `ulimit -v`, can give).
    #[error(
        "the space does not fit in this machine's memory: room for {configs} valid configurations \
         ({BYTES_PER_CONFIG} bytes each) could not be allocated; tighten the restrictions, draw \
         configurations by sampling instead (`kerntune space FILE --sample N`), or lower the cap \
         ({MEMORY_CAP_VARIABLE}) to what the machine has"
    )]
    OutOfMemory { configs: usize },
    /// Rejection sampling gave up: the restrictions keep too small a share of the product.
    #[error(
        "only {found} of {attempts} random configurations satisfy the restrictions, short of the {wanted} asked \
         for: the restrictions keep too small a share of the space to sample it by rejection; loosen them, \
         or enumerate the space if it fits in memory"
    )]
    TooRareToSample { wanted: usize, found: usize, attempts: u64 },
    /// The cap's environment variable does not hold a size.
    #[error("{0}")]
    MemoryCapSetting(String),
}

/// All valid configurations of a parameter set under restrictions.
#[derive(Debug, Clone)]
pub struct Space {
    params: Vec<Param>,
    restrictions: Vec<Expression>,
    /// Mixed-radix place values: `strides[last] == 1`.
    strides: Vec<u64>,
    keys: Vec<u64>,
    directory: Directory,
}

impl Space {
    /// Enumerates every configuration of `params` that satisfies all `restrictions`.
    /// A restriction that raises for a configuration (divides by zero, compares a string
    /// with a number) excludes that configuration. The configurations may take at most
    /// [`MemoryCap::from_env`] (1 GiB unless `KERNTUNE_SPACE_MEMORY` says otherwise).
    pub fn new<S: AsRef<str>>(params: Vec<Param>, restrictions: &[S]) -> Result<Space, SpaceError> {
        let cap = MemoryCap::from_env().map_err(SpaceError::MemoryCapSetting)?;
        Space::with_memory_cap(params, restrictions, cap)
    }

    /// [`Space::new`] under an explicit cap: a space whose configurations are estimated to
    /// take more is refused with [`SpaceError::TooMuchMemory`] before any large allocation.
    pub fn with_memory_cap<S: AsRef<str>>(
        params: Vec<Param>,
        restrictions: &[S],
        cap: MemoryCap,
    ) -> Result<Space, SpaceError> {
        Space::with_progress(params, restrictions, cap, &mut |_| {})
    }

    /// [`Space::with_memory_cap`], telling `progress` the share of the enumeration done
    /// (0 to 1, in steps of the first two parameters' values), for long builds.
    pub fn with_progress<S: AsRef<str>>(
        params: Vec<Param>,
        restrictions: &[S],
        cap: MemoryCap,
        progress: &mut dyn FnMut(f64),
    ) -> Result<Space, SpaceError> {
        let strides = strides_of(&params)?;
        let restrictions = parse_restrictions(&params, restrictions)?;
        let mut keys = valid_keys(&params, &restrictions, &strides, cap, progress)?;
        let configs = keys.len();
        radix_sort(&mut keys).map_err(|_| SpaceError::OutOfMemory { configs })?;
        Space::from_sorted_keys(params, restrictions, strides, keys)
    }

    /// `count` uniformly random valid configurations of `params` under `restrictions` (value
    /// indexes, drawn with replacement), without enumerating the space: random configurations
    /// are drawn until `count` pass, at most [`Space::MAX_SAMPLE_ATTEMPTS`] of them.
    pub fn sample_without_enumerating<S: AsRef<str>>(
        params: &[Param],
        restrictions: &[S],
        count: usize,
        rng: &mut Rng,
    ) -> Result<Vec<Vec<usize>>, SpaceError> {
        strides_of(params)?;
        let restrictions = parse_restrictions(params, restrictions)?;
        sample_valid(params, &restrictions, count, rng, Space::MAX_SAMPLE_ATTEMPTS)
    }

    /// Random configurations [`Space::sample_without_enumerating`] draws before giving up:
    /// a second or less in a release build, and enough for a share of one in a thousand.
    pub const MAX_SAMPLE_ATTEMPTS: u64 = 1_000_000;

    /// The space of exactly the listed configurations (value indexes, one per parameter),
    /// as a recorded landscape defines it. Repeated configurations count once.
    pub fn from_configs<I>(params: Vec<Param>, configs: I) -> Result<Space, SpaceError>
    where
        I: IntoIterator<Item = Vec<usize>>,
    {
        let strides = strides_of(&params)?;
        let mut keys = Vec::new();
        for (index, config) in configs.into_iter().enumerate() {
            let problem = |problem: String| SpaceError::Config { index, problem };
            if config.len() != params.len() {
                return Err(problem(format!("{} values for {} parameters", config.len(), params.len())));
            }
            if let Some(p) = (0..params.len()).find(|p| config[*p] >= params[*p].len()) {
                return Err(problem(format!("no value #{} for '{}'", config[p], params[p].name())));
            }
            keys.push(config.iter().zip(&strides).map(|(i, s)| *i as u64 * s).sum());
        }
        let configs = keys.len();
        radix_sort(&mut keys).map_err(|_| SpaceError::OutOfMemory { configs })?;
        keys.dedup();
        Space::from_sorted_keys(params, Vec::new(), strides, keys)
    }

    fn from_sorted_keys(
        params: Vec<Param>,
        restrictions: Vec<Expression>,
        strides: Vec<u64>,
        keys: Vec<u64>,
    ) -> Result<Space, SpaceError> {
        if keys.len() > u32::MAX as usize {
            return Err(SpaceError::TooManyConfigs);
        }
        let directory = Directory::build(&keys).map_err(|_| SpaceError::OutOfMemory { configs: keys.len() })?;
        Ok(Space { params, restrictions, strides, keys, directory })
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn params(&self) -> &[Param] {
        &self.params
    }

    pub fn restrictions(&self) -> &[Expression] {
        &self.restrictions
    }

    pub fn param_index(&self, name: &str) -> Option<usize> {
        self.params.iter().position(|p| p.name() == name)
    }

    /// Every id, in order.
    pub fn ids(&self) -> impl ExactSizeIterator<Item = ConfigId> {
        (0..self.keys.len()).map(ConfigId::from)
    }

    /// The value index of parameter `param` in configuration `id`.
    pub fn index(&self, id: ConfigId, param: usize) -> usize {
        let key = self.keys[id.index()];
        ((key / self.strides[param]) % self.params[param].len() as u64) as usize
    }

    /// All value indexes of configuration `id`.
    pub fn indexes(&self, id: ConfigId) -> Vec<usize> {
        (0..self.params.len()).map(|p| self.index(id, p)).collect()
    }

    pub fn value(&self, id: ConfigId, param: usize) -> &Value {
        &self.params[param].values()[self.index(id, param)]
    }

    pub fn values(&self, id: ConfigId) -> Vec<&Value> {
        (0..self.params.len()).map(|p| self.value(id, p)).collect()
    }

    /// The values of a configuration given as a JSON object (as [`Space::config_json`]
    /// writes it), in parameter order; `None` when it lacks a parameter or a value is not
    /// one. The values need not make a configuration of this space.
    pub fn values_of_json(&self, config: &Map<String, Json>) -> Option<Vec<Value>> {
        self.params.iter().map(|p| config.get(p.name()).and_then(Value::from_json)).collect()
    }

    /// The configuration as a JSON object, parameters in declared order.
    pub fn config_json(&self, id: ConfigId) -> Map<String, Json> {
        self.params
            .iter()
            .enumerate()
            .map(|(p, param)| (param.name().to_string(), self.value(id, p).to_json()))
            .collect()
    }

    /// `name=value` pairs, for people.
    pub fn describe(&self, id: ConfigId) -> String {
        let pairs: Vec<String> = self
            .params
            .iter()
            .enumerate()
            .map(|(p, param)| format!("{}={}", param.name(), self.value(id, p)))
            .collect();
        pairs.join(" ")
    }

    /// The id of the configuration with these value indexes, if it is valid.
    pub fn id_of(&self, indexes: &[usize]) -> Option<ConfigId> {
        if indexes.len() != self.params.len() || indexes.iter().zip(&self.params).any(|(i, p)| *i >= p.len()) {
            return None;
        }
        self.id_of_key(indexes.iter().zip(&self.strides).map(|(i, s)| *i as u64 * s).sum())
    }

    /// The id of the configuration with these values (Python equality), if it is valid.
    pub fn id_of_values(&self, values: &[Value]) -> Option<ConfigId> {
        if values.len() != self.params.len() {
            return None;
        }
        let indexes: Option<Vec<usize>> = self.params.iter().zip(values).map(|(p, v)| p.index_of(v)).collect();
        self.id_of(&indexes?)
    }

    /// A uniformly random valid configuration; `None` for an empty space.
    pub fn sample(&self, rng: &mut Rng) -> Option<ConfigId> {
        (!self.is_empty()).then(|| ConfigId::from(rng.below(self.len())))
    }

    /// Coordinates in `[0, 1]^d`: each value index divided by the last index of its
    /// parameter (0.5 for a parameter with a single value).
    pub fn to_unit(&self, id: ConfigId) -> Vec<f64> {
        (0..self.params.len())
            .map(|p| {
                let last = self.params[p].len() - 1;
                if last == 0 {
                    0.5
                } else {
                    self.index(id, p) as f64 / last as f64
                }
            })
            .collect()
    }

    pub(crate) fn strides(&self) -> &[u64] {
        &self.strides
    }

    pub(crate) fn key(&self, id: ConfigId) -> u64 {
        self.keys[id.index()]
    }

    pub(crate) fn id_of_key(&self, key: u64) -> Option<ConfigId> {
        self.directory.find(&self.keys, key).map(ConfigId::from)
    }

    /// Whether any valid configuration has the given values for the first `bound`
    /// parameters, whose contribution to the key is `prefix`.
    pub(crate) fn prefix_exists(&self, prefix: u64, bound: usize) -> bool {
        let span = if bound == 0 { u64::MAX } else { self.strides[bound - 1] };
        let first = self.keys.partition_point(|k| *k < prefix);
        first < self.keys.len() && self.keys[first] - prefix < span
    }
}

fn parse_restrictions<S: AsRef<str>>(params: &[Param], restrictions: &[S]) -> Result<Vec<Expression>, SpaceError> {
    let names: Vec<&str> = params.iter().map(Param::name).collect();
    Ok(restrictions.iter().map(|r| Expression::parse(r.as_ref(), &names)).collect::<Result<Vec<_>, _>>()?)
}

fn strides_of(params: &[Param]) -> Result<Vec<u64>, SpaceError> {
    for (i, p) in params.iter().enumerate() {
        if params[..i].iter().any(|q| q.name() == p.name()) {
            return Err(SpaceError::DuplicateParam(p.name().to_string()));
        }
    }
    let mut strides = vec![1u64; params.len()];
    let mut place = 1u64;
    for (stride, param) in strides.iter_mut().zip(params).rev() {
        *stride = place;
        place = place.checked_mul(param.len() as u64).ok_or(SpaceError::TooLarge)?;
    }
    Ok(strides)
}

/// LSD radix sort on the bits the keys actually use: a few linear passes, much cheaper than
/// a comparison sort for the millions of keys a large space has.
/// Its second buffer is reserved fallibly: the keys' count comes from the user's space.
fn radix_sort(keys: &mut Vec<u64>) -> Result<(), TryReserveError> {
    let Some(max) = keys.iter().copied().max() else { return Ok(()) };
    if keys.windows(2).all(|w| w[0] <= w[1]) {
        return Ok(());
    }
    const BITS: u32 = 11;
    let mut buffer = Vec::new();
    buffer.try_reserve_exact(keys.len())?;
    buffer.resize(keys.len(), 0u64);
    let used_bits = 64 - max.leading_zeros();
    let mut shift = 0;
    while shift < used_bits {
        let mut counts = vec![0usize; (1 << BITS) + 1];
        for key in keys.iter() {
            counts[((key >> shift) & ((1 << BITS) - 1)) as usize + 1] += 1;
        }
        for i in 1..counts.len() {
            counts[i] += counts[i - 1];
        }
        for key in keys.iter() {
            let digit = ((key >> shift) & ((1 << BITS) - 1)) as usize;
            buffer[counts[digit]] = *key;
            counts[digit] += 1;
        }
        std::mem::swap(keys, &mut buffer);
        shift += BITS;
    }
    Ok(())
}

/// Buckets of equal key range over the sorted keys; a lookup scans one bucket.
#[derive(Debug, Clone)]
struct Directory {
    min: u64,
    shift: u32,
    /// `starts[b]` is the position of the first key in bucket `b` or later.
    starts: Vec<u32>,
}

impl Directory {
    fn build(keys: &[u64]) -> Result<Directory, TryReserveError> {
        let (Some(&min), Some(&max)) = (keys.first(), keys.last()) else {
            return Ok(Directory { min: 0, shift: 0, starts: vec![0] });
        };
        let range = max - min;
        let mut shift = 0;
        while (range >> shift) >= keys.len() as u64 {
            shift += 1;
        }
        let buckets = (range >> shift) as usize + 1;
        let mut starts = Vec::new();
        starts.try_reserve_exact(buckets + 1)?;
        let mut position = 0usize;
        for bucket in 0..buckets as u64 {
            while position < keys.len() && (keys[position] - min) >> shift < bucket {
                position += 1;
            }
            starts.push(position as u32);
        }
        starts.push(keys.len() as u32);
        Ok(Directory { min, shift, starts })
    }

    fn find(&self, keys: &[u64], key: u64) -> Option<usize> {
        let bucket = (key.checked_sub(self.min)? >> self.shift) as usize;
        if bucket + 1 >= self.starts.len() {
            return None;
        }
        let (start, end) = (self.starts[bucket] as usize, self.starts[bucket + 1] as usize);
        keys[start..end].binary_search(&key).ok().map(|offset| start + offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(name: &str, values: &[i64]) -> Param {
        Param::new(name, values.iter().map(|v| Value::Int(*v)).collect()).expect("valid")
    }

    fn brute_force(params: &[Param], holds: impl Fn(&[i64]) -> bool) -> Vec<Vec<i64>> {
        let mut out = Vec::new();
        let mut digits = vec![0usize; params.len()];
        loop {
            let values: Vec<i64> =
                digits.iter().zip(params).map(|(d, p)| p.values()[*d].as_int().expect("int")).collect();
            if holds(&values) {
                out.push(values);
            }
            let mut p = params.len();
            loop {
                if p == 0 {
                    return out;
                }
                p -= 1;
                digits[p] += 1;
                if digits[p] < params[p].len() {
                    break;
                }
                digits[p] = 0;
            }
        }
    }

    #[test]
    fn enumeration_matches_brute_force_in_declared_order() {
        let params =
            vec![param("x", &[1, 2, 4, 8]), param("y", &[1, 2, 4, 8, 16]), param("z", &[0, 1, 2]), param("w", &[3, 5])];
        let space =
            Space::new(params.clone(), &["x * y <= 16", "z < 2 or x == 1", "(x + w) % 3 != 0"]).expect("builds");
        let expected = brute_force(&params, |v| v[0] * v[1] <= 16 && (v[2] < 2 || v[0] == 1) && (v[0] + v[3]) % 3 != 0);
        let got: Vec<Vec<i64>> =
            space.ids().map(|id| space.values(id).iter().map(|v| v.as_int().expect("int")).collect()).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn lookup_finds_every_valid_config_and_no_invalid_one() {
        let params = vec![param("a", &[1, 2, 3, 4, 5, 6]), param("b", &[1, 2, 3, 4, 5, 6, 7])];
        let space = Space::new(params, &["a * b % 4 == 0"]).expect("builds");
        for a in 0..6 {
            for b in 0..7 {
                let valid = (a + 1) * (b + 1) % 4 == 0;
                let id = space.id_of(&[a, b]);
                assert_eq!(id.is_some(), valid, "a={a} b={b}");
                if let Some(id) = id {
                    assert_eq!(space.indexes(id), vec![a, b]);
                }
            }
        }
        assert_eq!(space.id_of(&[6, 0]), None);
    }

    #[test]
    fn division_by_zero_excludes_the_config_instead_of_failing() {
        let space = Space::new(vec![param("a", &[0, 1, 2]), param("b", &[4])], &["b // a >= 2"]).expect("builds");
        assert_eq!(space.len(), 2);
    }

    #[test]
    fn constant_false_restriction_gives_an_empty_space() {
        let space = Space::new(vec![param("a", &[1, 2])], &["1 > 2"]).expect("builds");
        assert!(space.is_empty());
        assert_eq!(space.sample(&mut Rng::seeded(0)), None);
    }

    #[test]
    fn malformed_restriction_is_an_error_naming_it() {
        let error = Space::new(vec![param("a", &[1])], &["a >> "]).unwrap_err();
        assert!(error.to_string().starts_with("restriction in 'a >> ' at column 6"), "{error}");
    }

    #[test]
    fn from_configs_keeps_only_listed_configs() {
        let space = Space::from_configs(
            vec![param("a", &[1, 2, 3]), param("b", &[1, 2])],
            vec![vec![2, 1], vec![0, 0], vec![2, 1]],
        )
        .expect("builds");
        assert_eq!(space.len(), 2);
        assert_eq!(space.indexes(ConfigId(0)), vec![0, 0]);
        assert!(space.id_of(&[1, 1]).is_none());
        assert!(Space::from_configs(vec![param("a", &[1])], vec![vec![3]]).is_err());
    }

    #[test]
    fn radix_sort_sorts() {
        let mut rng = Rng::seeded(3);
        let mut keys: Vec<u64> = (0..10_000).map(|_| rng.next_u64() >> rng.below(60)).collect();
        let mut expected = keys.clone();
        expected.sort_unstable();
        radix_sort(&mut keys).expect("memory for the test keys");
        assert_eq!(keys, expected);
    }
}
