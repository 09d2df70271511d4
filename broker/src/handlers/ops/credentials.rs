//! `credentialStatus {business, role}`: the role's `{service, date, state}`
//! rows (never a token). `role` may be `@sync`, the business's tracker sync
//! identity.

use crate::core::Core;
use crate::error::Code;
use crate::handlers::fields::{Fields, HOST_MAX};
use crate::handlers::handler::host_op;
use serde_json::Value;

pub struct CredentialStatus {
    pub business: String,
    pub role: String,
}

impl CredentialStatus {
    pub fn parse(mut f: Fields) -> Result<Self, Code> {
        let business = f.str("business", HOST_MAX)?;
        let role = f.str("role", HOST_MAX)?;
        f.finish()?;
        Ok(CredentialStatus { business, role })
    }

    pub fn apply(self, core: &mut Core) -> Result<Value, Code> {
        let CredentialStatus { business, role } = self;
        let b = core.config.business(&business)?;
        let known = if role == crate::credentials::SYNC {
            b.sync.is_some()
        } else {
            b.roles.contains_key(&role)
        };
        if !known {
            return Err(Code::UnknownRole);
        }
        let now = crate::store::clock::now_ms();
        Ok(Value::Array(
            core.credentials.status_rows(&business, &role, now),
        ))
    }
}

host_op!(CredentialStatus, "credentialStatus");
