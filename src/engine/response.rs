//! Extracting the final response from an agent's output. (Being written.)
