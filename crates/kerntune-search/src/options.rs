//! Strategy options, declared once as data.
//!
//! The [`options!`] macro declares a typed options struct with its defaults and doc lines;
//! the same declaration deserializes options from the CLI, a spec file or Python (unknown
//! names are errors) and lists them for `--help` and the docs. A numeric option may
//! declare the values it accepts with `#[range(min = ..)]` or `#[range(min = .., max = ..)]`;
//! building the strategy refuses a value outside it, and the listing states it.

/// One documented option of a strategy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionInfo {
    pub name: &'static str,
    pub kind: &'static str,
    pub default: String,
    pub help: &'static str,
    /// The values accepted, in words ("at least 1", "in [0, 1]"), where the option limits them.
    pub range: Option<String>,
}

/// Options that check their values after deserializing; the `options!` macro implements it.
pub trait ValidOptions {
    /// The first option outside its declared range, as a message that names it.
    fn validate(&self) -> Result<(), String>;
}

/// A declared range in words: "at least `min`", or "in [`min`, `max`]".
#[doc(hidden)]
pub fn range_text(min: f64, max: Option<f64>) -> String {
    match max {
        Some(max) => format!("in [{min}, {max}]"),
        None => format!("at least {min}"),
    }
}

/// Refuses `value` of option `name` outside [`min`, `max`], saying what the range is.
#[doc(hidden)]
pub fn check_range(name: &str, value: f64, min: f64, max: Option<f64>) -> Result<(), String> {
    if value >= min && max.is_none_or(|max| value <= max) {
        return Ok(());
    }
    Err(format!("{name} must be {}, got {value}", range_text(min, max)))
}

/// Declares an options struct: `name: type = default` fields, each with a `///` doc line
/// and optionally a `#[range(min = .., max = ..)]` of the values it accepts.
#[macro_export]
macro_rules! options {
    (
        $(#[doc = $struct_doc:literal])*
        pub struct $name:ident {
            $(
                $(#[doc = $doc:literal])+
                $(#[range(min = $min:literal $(, max = $max:literal)?)])?
                $field:ident : $ty:ty = $default:expr
            ),* $(,)?
        }
    ) => {
        $(#[doc = $struct_doc])*
        #[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct $name {
            $( $(#[doc = $doc])+ pub $field: $ty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $( $field: $default, )* }
            }
        }

        impl $name {
            /// The options with their types, defaults and help, in declaration order.
            pub fn describe() -> Vec<$crate::OptionInfo> {
                #[allow(unused_variables)]
                let defaults = $name::default();
                vec![$(
                    $crate::OptionInfo {
                        name: stringify!($field),
                        kind: stringify!($ty),
                        default: serde_json::to_string(&defaults.$field).unwrap_or_default(),
                        help: concat!($($doc),+).trim_start(),
                        range: None $(.or(Some($crate::range_text(
                            $min as f64,
                            None $(.or(Some($max as f64)))?,
                        ))))?,
                    },
                )*]
            }
        }

        impl $crate::ValidOptions for $name {
            fn validate(&self) -> Result<(), String> {
                $($(
                    $crate::check_range(
                        stringify!($field),
                        self.$field as f64,
                        $min as f64,
                        None $(.or(Some($max as f64)))?,
                    )?;
                )?)*
                Ok(())
            }
        }
    };
}

/// Which configurations a local move may reach, as strategy options name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Neighbours {
    /// One parameter changes, to any of its values.
    Hamming,
    /// One parameter changes, by one step in its value list.
    StrictlyAdjacent,
    /// Any parameters change, each by at most one step.
    Adjacent,
}

impl From<Neighbours> for kerntune_space::Neighbourhood {
    fn from(neighbours: Neighbours) -> Self {
        match neighbours {
            Neighbours::Hamming => kerntune_space::Neighbourhood::Hamming,
            Neighbours::StrictlyAdjacent => kerntune_space::Neighbourhood::StrictlyAdjacent,
            Neighbours::Adjacent => kerntune_space::Neighbourhood::Adjacent,
        }
    }
}
