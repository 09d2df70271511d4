//! The socket verbs, one module per family; each verb is a [`Verb`] or a
//! [`StagedVerb`] (`super::handler`) that `super::table` lists.
//!
//! [`Verb`]: super::handler::Verb
//! [`StagedVerb`]: super::handler::StagedVerb

pub(crate) mod decisions;
pub(crate) mod events;
pub(crate) mod launch;
pub mod messages;
pub(crate) mod names;
pub(crate) mod organization;
pub(crate) mod projects;
pub(crate) mod reads;
pub(crate) mod reviews;
pub(crate) mod roles;
pub(crate) mod threads;
pub(crate) mod usage;
