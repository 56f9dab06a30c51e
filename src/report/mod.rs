//! Reporters: consumers of the event stream. (Being written.)
