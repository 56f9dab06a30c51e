//! The agent protocol: what an agent is given (the rendered prompt, argv placeholders, the prompt
//! file) and what is read back from it (the response, its session id, its tool calls, its usage, the class of its failures).

pub(crate) mod failure;
pub(crate) mod prompt;
pub(crate) mod prompt_file;
pub(crate) mod response;
pub(crate) mod transcript;
pub(crate) mod usage;
