//! Process supervision. (Being written.)
