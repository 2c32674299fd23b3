//! Webhooks other systems call: global management's role grants
//! (`global_management`), signed with a shared HMAC key rather than a caller's token.

pub mod global_management;
