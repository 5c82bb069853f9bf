//! Strategy options, declared once as data.
//!
//! The [`options!`] macro declares a typed options struct with its defaults and doc lines;
//! the same declaration deserializes options from the CLI, a spec file or Python (unknown
//! names are errors) and lists them for `--help` and the docs.

/// One documented option of a strategy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionInfo {
    pub name: &'static str,
    pub kind: &'static str,
    pub default: String,
    pub help: &'static str,
}

/// Declares an options struct: `name: type = default` fields, each with a `///` doc line.
#[macro_export]
macro_rules! options {
    (
        $(#[doc = $struct_doc:literal])*
        pub struct $name:ident {
            $( $(#[doc = $doc:literal])+ $field:ident : $ty:ty = $default:expr ),* $(,)?
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
                    },
                )*]
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
