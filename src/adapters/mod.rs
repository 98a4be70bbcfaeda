//! Session adapters: protocols that keep state across requests. Each builds pipelines from
//! outside and owns its state; the pipeline and the translating body know nothing of them.

pub mod aap_client;
pub mod aap_server;
