//! The read-only views other programs use (the Console, the WebUI): thin
//! wrappers over [`Client::call`] for the read verbs, nothing else.

use crate::{BusError, Client};
use serde_json::{json, Value};

/// Read-only access through a client.
pub struct Views<'a> {
    client: &'a Client,
}

/// Wraps a client in the read views.
pub fn views(client: &Client) -> Views<'_> {
    Views { client }
}

impl Views<'_> {
    pub fn inbox(&self) -> Result<Value, BusError> {
        self.client.call("inbox", Value::Null)
    }
    pub fn tasks(&self) -> Result<Value, BusError> {
        self.client.call("tasks", Value::Null)
    }
    /// `tasks {task_ref}`: one row.
    pub fn task(&self, task_ref: &str) -> Result<Value, BusError> {
        self.client.call("tasks", json!({"task_ref": task_ref}))
    }
    /// The filtered short form: `filters` is any of `done`, `assignee`,
    /// `label`, `requirement`, `limit`, `after`.
    pub fn tasks_page(&self, filters: Value) -> Result<Value, BusError> {
        self.client.call("tasks", filters)
    }
    pub fn state(&self) -> Result<Value, BusError> {
        self.client.call("state", Value::Null)
    }
    pub fn requirements(&self) -> Result<Value, BusError> {
        self.client.call("requirements", Value::Null)
    }
    pub fn credentials(&self) -> Result<Value, BusError> {
        self.client.call("credentials", Value::Null)
    }
    pub fn agents(&self) -> Result<Value, BusError> {
        self.client.call("agents", Value::Null)
    }
    pub fn trail(&self, subject: &str) -> Result<Value, BusError> {
        self.client.call("trail", json!({"subject": subject}))
    }
    pub fn decisions(&self, list: &str) -> Result<Value, BusError> {
        self.client.call("decisions", json!({"list": list}))
    }
    pub fn replies(&self, id: &str) -> Result<Value, BusError> {
        self.client.call("replies", json!({"id": id}))
    }
    /// `usage`: `{total, byRun, byInstance, byProvider, byModel, byAccount}`;
    /// a count past 2^53 - 1 arrives as a decimal string.
    pub fn usage(&self) -> Result<Value, BusError> {
        self.client.call("usage", Value::Null)
    }
    pub fn messages(&self, limit: Option<u32>, after: Option<&str>) -> Result<Value, BusError> {
        let mut args = json!({});
        if let Some(l) = limit {
            args["limit"] = json!(l);
        }
        if let Some(a) = after {
            args["after"] = json!(a);
        }
        self.client.call("messages", args)
    }
}
