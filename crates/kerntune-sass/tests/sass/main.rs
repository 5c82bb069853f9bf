//! Integration tests of kerntune-sass on real sm_90 cubins, compiled from
//! small Triton kernels (and two PTX kernels) by `support/compile_kernels.py`
//! with no GPU, and checked with the nvdisasm that Triton's wheel ships.
//! They need `python3` with `triton` importable; without it they fail with a
//! message saying so.

mod corpus;

mod control_bits;
mod refusals;
mod rewrite;
mod search;
mod show;
mod shuffle;
