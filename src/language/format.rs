//! Canonical formatting of pipeline files. (Being written.)
