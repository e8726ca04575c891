//! cairn-llm's integration tests: one test binary, one module per area.

#[cfg(unix)]
mod agent_cli;
#[cfg(feature = "remote")]
mod anthropic;
#[cfg(feature = "remote")]
mod fake;
#[cfg(feature = "local")]
mod local;
#[cfg(feature = "remote")]
mod openai;
#[cfg(feature = "local")]
mod worker;
