//! Shared helpers for the workspace cross-process tests.
