//! Mosaic bus broker.
